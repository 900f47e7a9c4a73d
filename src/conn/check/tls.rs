//! The TLS leg of an active health check of a TLS group (issue 23,
//! "health checks use the group's TLS"; ARCHITECTURE.md §13): the check
//! speaks through a rustls client session made with the group's client
//! configuration and server name, the same as its requests' connections,
//! so a check fails where a request would (a certificate that does not
//! verify, a name that does not match, a failed handshake). Driven
//! sans-IO over the probe's non-blocking socket: `write_tls` / `read_tls`
//! / `process_new_packets` / `reader`, until `WouldBlock`.
//!
//! What it must not know: the schedule, health state, HTTP beyond the
//! request bytes it is handed.

use std::io::{self, Read, Write};

use mio::net::TcpStream;

use crate::tls::identity::TlsIdentity;

/// Most bytes of plaintext taken out of rustls per read call.
const READ_STEP: usize = 4096;

/// What one [`CheckTls::pump`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pumped {
    /// The socket has nothing more now: wait for the next event.
    Blocked,
    /// Records moved but no plaintext came: pump again.
    Progress,
    /// Plaintext of the answer came (appended to it): look at it, then
    /// pump again.
    Data,
    /// The server closed (`close_notify` or a FIN) after the handshake.
    Ended,
}

/// A check's client session.
pub(super) struct CheckTls {
    conn: rustls::ClientConnection,
}

impl std::fmt::Debug for CheckTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckTls")
            .field("handshaking", &self.conn.is_handshaking())
            .finish()
    }
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS {what}: {e}"))
}

impl CheckTls {
    /// A session for the group's identity.
    ///
    /// Errors: rustls refused the configuration (`InvalidInput`).
    pub(super) fn new(id: &TlsIdentity) -> io::Result<Self> {
        let conn = rustls::ClientConnection::new(id.config.clone(), id.server_name.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(CheckTls { conn })
    }

    /// One step: once the handshake is done, the rest of `request` (from
    /// `*written`) goes into the session; what the session holds is
    /// written to the socket; one socket read is decrypted and its
    /// plaintext appended to `answer`.
    ///
    /// Errors: the socket's; the handshake failed (`InvalidData`, the
    /// words say why: `TLS handshake: invalid peer certificate: …`); the
    /// server closed during the handshake.
    pub(super) fn pump(
        &mut self,
        stream: &mut TcpStream,
        request: &[u8],
        written: &mut usize,
        answer: &mut Vec<u8>,
    ) -> io::Result<Pumped> {
        let c = &mut self.conn;
        if !c.is_handshaking() && *written < request.len() {
            *written += c.writer().write(request.get(*written..).unwrap_or(&[]))?;
        }
        // Bounded: each turn writes something or stops.
        for _ in 0..64 {
            if !c.wants_write() {
                break;
            }
            match c.write_tls(stream) {
                Ok(_) => {}
                // WRITABLE comes back with an event.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let n = match c.read_tls(stream) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Pumped::Blocked),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Pumped::Progress),
            Err(e) => return Err(e),
        };
        let handshaking = c.is_handshaking();
        if let Err(e) = c.process_new_packets() {
            // rustls queued the alert that says why: one try to send it.
            let _ = c.write_tls(stream);
            let what = if handshaking { "handshake" } else { "session" };
            return Err(tls_error(what, e));
        }
        if n == 0 && c.is_handshaking() {
            return Err(tls_error("handshake", "the server closed the connection"));
        }
        let before = answer.len();
        let mut chunk = [0u8; READ_STEP];
        let ended = loop {
            match c.reader().read(&mut chunk) {
                Ok(0) => break true,
                Ok(k) => answer.extend_from_slice(chunk.get(..k).unwrap_or(&[])),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break n == 0,
                // A FIN without `close_notify`: the answer ends there too.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break true,
                Err(e) => return Err(e),
            }
            if answer.len() - before >= 4 * READ_STEP {
                break false;
            }
        };
        Ok(if answer.len() > before {
            Pumped::Data
        } else if ended {
            Pumped::Ended
        } else {
            Pumped::Progress
        })
    }
}

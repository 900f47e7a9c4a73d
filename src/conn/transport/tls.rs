//! A rustls session over the transport's socket, driven sans-IO in the one
//! loop (DESIGN §10): `read_tls` → `process_new_packets` → `reader`, and
//! `writer` → `write_tls`. No threads, no blocking calls.
//!
//! The four points of the layout review (SEAMS.md §3.1), settled here:
//! - **Short reads.** A socket read that was short clears `readable` as on
//!   a plain socket, but rustls may still hold decrypted bytes (or more
//!   whole records) that no readiness event will announce: `plain` says
//!   so, and [`Tls::may_read`] keeps the machine reading until rustls says
//!   `WouldBlock`.
//! - **Write interest.** While rustls holds TLS bytes not yet on the
//!   socket (a handshake flight, an alert, `close_notify`), the transport
//!   wants WRITABLE whatever the machine's buffers say, and a close waits
//!   for them ([`Tls::wants_write`]).
//! - **Bounded memory.** New plaintext is encrypted only once the previous
//!   ciphertext is on the socket, so rustls holds at most one write's worth
//!   beside the machine's own buffer.
//! - **Plain HTTP on a TLS port.** The first byte of a server session is
//!   looked at before rustls sees it: a TLS handshake record (22) goes on;
//!   an ASCII letter (a request line) turns the transport plain, so that
//!   the machine can answer a plaintext 400 naming HTTPS (nginx's 497);
//!   anything else is an error (the connection closes).
//!
//! rustls reads at most 4 KiB of ciphertext per `read_tls` (its deframer's
//! step), so a large upload through TLS takes a socket read per 4 KiB;
//! a request head or a small body takes one.
//!
//! What it must not know: HTTP, the watermarks' meaning.

use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;

use super::super::io::{Io, Read1};
use super::sni_check::{SniCheck, Verdict};
use crate::buffer::WatermarkBuffer;
use crate::stats::Stats;
use crate::tls::sni::{CertStore, UNRECOGNIZED_NAME_ALERT};

/// The first byte of a TLS handshake record (RFC 8446 §5.1, `handshake`).
const HANDSHAKE_RECORD: u8 = 22;

/// Most rounds of one read call (decrypt, refill from the socket): bounds
/// the work before the machine sees what came.
const MAX_READ_ROUNDS: usize = 8;

/// What the first bytes of a server session were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sniff {
    /// Nothing read yet.
    Unknown,
    /// A TLS record: the session goes on.
    Tls,
    /// A plaintext request line: the transport turned plain.
    PlainHttp,
}

/// One rustls session (server or client side) and what the socket's
/// readiness does not say about it.
pub(crate) struct Tls {
    conn: rustls::Connection,
    /// Decrypted bytes (or the peer's close) wait in rustls.
    plain: bool,
    /// rustls saw the peer's `close_notify` (or the socket's EOF): once
    /// the plaintext before it is read, the reader says so.
    peer_closed: bool,
    /// What the first bytes were (server sessions; client ones start at
    /// `Tls`).
    pub(super) sniff: Sniff,
    /// The SNI look still to decide (`sni_check.rs`; a server session of
    /// a listener with `tls_unknown_sni = "reject"`, until its ClientHello
    /// is whole).
    sni_check: Option<Box<SniCheck>>,
    /// The `X-Forwarded-Client-Cert` value of the client's verified
    /// certificate, made once when the handshake ends (a server session
    /// under `tls_client_auth`).
    client_cert: Option<Box<str>>,
}

/// A client connection's TLS facts, for its access records (issue 23,
/// "Observability").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TlsFacts<'a> {
    /// `"TLSv1.3"` or `"TLSv1.2"`.
    pub version: &'static str,
    /// The cipher suite's IANA name (`"TLS13_AES_128_GCM_SHA256"`).
    pub cipher: &'static str,
    /// The name the ClientHello asked for (a server session), if any.
    pub sni: Option<&'a str>,
    /// The session was resumed (a ticket or a cached session).
    pub resumed: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("handshaking", &self.conn.is_handshaking())
            .field("plain", &self.plain)
            .field("sniff", &self.sniff)
            .finish()
    }
}

/// A reader over the socket that counts its calls and records whether the
/// one read was short (the socket drained).
struct SocketReader<'a> {
    stream: &'a mut TcpStream,
    stats: &'a Stats,
    short: bool,
    eof: bool,
}

impl Read for SocketReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Stats::add(&self.stats.socket_reads, 1);
        let n = self.stream.read(buf)?;
        self.short = n < buf.len();
        self.eof = n == 0;
        Ok(n)
    }
}

/// A writer over the socket that counts its calls and sends with
/// `MSG_MORE` when a FIN follows (the records and the FIN in one segment).
struct SocketWriter<'a> {
    stream: &'a TcpStream,
    stats: &'a Stats,
    more: bool,
}

impl SocketWriter<'_> {
    fn flags(&self) -> libc::c_int {
        libc::MSG_NOSIGNAL | if self.more { libc::MSG_MORE } else { 0 }
    }
}

impl Write for SocketWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Stats::add(&self.stats.socket_writes, 1);
        socket2::SockRef::from(self.stream).send_with_flags(buf, self.flags())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Stats::add(&self.stats.socket_writes, 1);
        socket2::SockRef::from(self.stream).send_vectored_with_flags(bufs, self.flags())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl Tls {
    /// A server session (a TLS listener's accepted connection): its first
    /// bytes are sniffed.
    /// With `sni_check`, the ClientHello's name is looked at against that
    /// store before rustls answers it (`sni_check.rs`).
    pub(crate) fn server(
        conn: rustls::ServerConnection,
        sni_check: Option<Arc<CertStore>>,
    ) -> Self {
        Tls {
            conn: conn.into(),
            plain: false,
            peer_closed: false,
            sniff: Sniff::Unknown,
            sni_check: sni_check.map(|s| Box::new(SniCheck::new(s))),
            client_cert: None,
        }
    }

    /// A client session (an upstream TLS connection).
    pub(crate) fn client(conn: rustls::ClientConnection) -> Self {
        Tls {
            conn: conn.into(),
            plain: false,
            peer_closed: false,
            sniff: Sniff::Tls,
            sni_check: None,
            client_cert: None,
        }
    }

    /// A read may give something: the socket is readable, or rustls holds
    /// decrypted bytes or the peer's close.
    pub(crate) fn may_read(&self, io: &Io) -> bool {
        io.readable || self.plain
    }

    /// The handshake chose HTTP/2 by ALPN (`h2`, RFC 9113 §3.2).
    pub(crate) fn alpn_h2(&self) -> bool {
        !self.conn.is_handshaking()
            && self.conn.alpn_protocol() == Some(crate::tls::server::ALPN_H2)
    }

    /// rustls holds decrypted bytes (or the peer's close) not yet read.
    pub(crate) fn holds_plaintext(&self) -> bool {
        self.plain
    }

    /// rustls holds TLS bytes not yet written to the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// The handshake is still going on.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Queues `close_notify` (RFC 8446 §6.1) once; it goes with the next
    /// flush.
    pub(crate) fn close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    /// One read of plaintext into `buf` (at most `max` bytes, never past
    /// its room): what rustls holds first, else one socket read, decrypted
    /// (a handshake step's answer is flushed at once). `Read1::Eof` at the
    /// peer's `close_notify` or the socket's EOF. On the first bytes of a
    /// server session that are a plaintext request line, they are put in
    /// `buf` and `sniff` becomes `PlainHttp` (the caller turns plain).
    ///
    /// Errors: the socket's; invalid TLS (`InvalidData`, rustls' alert
    /// queued and flushed once); bytes that are neither TLS nor HTTP.
    pub(crate) fn read_into(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        max: usize,
        stats: &Stats,
    ) -> io::Result<Read1> {
        if max == 0 || buf.room() == 0 {
            return Ok(Read1::Idle);
        }
        for _ in 0..MAX_READ_ROUNDS {
            if self.plain {
                let conn = &mut self.conn;
                let mut offered = 0;
                let r = buf.fill_with(max, |space| {
                    offered = space.len();
                    match conn.reader().read(space) {
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                        other => other,
                    }
                });
                match r {
                    Ok((0, _)) => {
                        self.plain = false;
                        return Ok(Read1::Eof);
                    }
                    Ok((n, _)) => {
                        // A read that did not fill what was offered
                        // emptied rustls' plaintext; a close behind it
                        // (a request and `close_notify` in one read) is
                        // still to be read, and no event will say so.
                        self.plain = n >= offered || self.peer_closed;
                        return Ok(Read1::Data(n));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.plain = false,
                    Err(e) => return Err(e),
                }
            }
            if !io.readable {
                return Ok(Read1::Idle);
            }
            if self.sniff == Sniff::Unknown || self.sni_check.is_some() {
                match self.sniff_first(stream, io, buf, max, stats)? {
                    // The bytes went to rustls (a ClientHello longer than
                    // `buf`'s room: a browser's with post-quantum key
                    // shares is 1.8 KB): read on, no event will say more
                    // is there.
                    Read1::Idle if self.sniff == Sniff::Tls => continue,
                    r => return Ok(r),
                }
            }
            let Some(eof) = self.read_socket(stream, io, stats)? else {
                return Ok(Read1::Idle);
            };
            self.process(stream, io, stats)?;
            if eof {
                // rustls now reports the close (clean or not) through its
                // reader once the plaintext before it is read.
                io.readable = false;
                self.plain = true;
                self.peer_closed = true;
            }
        }
        Ok(Read1::Idle)
    }

    /// The first read of a server session (and, while the SNI look lasts,
    /// the next ones): the socket's bytes land in `buf` and are looked at.
    /// A TLS record is handed to the SNI look if any, then to rustls (and
    /// taken back out of `buf`); a request line stays in `buf`.
    ///
    /// Errors: as [`Self::read_into`]; a name no certificate covers
    /// (`unrecognized_name` written, counted as a failed handshake).
    fn sniff_first(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        max: usize,
        stats: &Stats,
    ) -> io::Result<Read1> {
        let before = buf.pending();
        let r = super::super::io::read_into(stream, io, buf, max, stats)?;
        let Read1::Data(n) = r else {
            return Ok(r);
        };
        let fresh = buf.as_slice().get(before..).unwrap_or(&[]);
        if self.sniff == Sniff::Unknown {
            match fresh.first() {
                Some(&HANDSHAKE_RECORD) => self.sniff = Sniff::Tls,
                Some(b) if b.is_ascii_alphabetic() => {
                    self.sniff = Sniff::PlainHttp;
                    return Ok(Read1::Data(n));
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "neither TLS nor HTTP on a TLS port",
                    ));
                }
            }
        }
        if let Some(check) = self.sni_check.as_mut() {
            match check.feed(fresh) {
                Verdict::Undecided => {}
                Verdict::Served => self.sni_check = None,
                Verdict::Refused(name) => {
                    self.sni_check = None;
                    buf.unfill(n);
                    return Err(refuse(stream, stats, name));
                }
            }
        }
        let mut bytes = fresh;
        while !bytes.is_empty() {
            match self.conn.read_tls(&mut bytes) {
                Ok(0) => break,
                Ok(_) => self.process(stream, io, stats)?,
                Err(e) => return Err(e),
            }
        }
        buf.unfill(n);
        Ok(Read1::Idle)
    }

    /// One `read_tls` from the socket (`Interrupted` retried). Returns
    /// `None` at `WouldBlock` (`readable` cleared), else whether the socket
    /// said EOF; a short read clears `readable` as on a plain socket (not
    /// once an event reported the FIN).
    ///
    /// Errors: the socket's; rustls' buffer full (`InvalidData`).
    fn read_socket(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> io::Result<Option<bool>> {
        loop {
            let mut rd = SocketReader {
                stream,
                stats,
                short: false,
                eof: false,
            };
            match self.conn.read_tls(&mut rd) {
                Ok(_) => {
                    if rd.short && !rd.eof && !io.read_closed {
                        io.readable = false;
                    }
                    return Ok(Some(rd.eof));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    io.readable = false;
                    return Ok(None);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Decrypts what rustls read; a handshake's answer (or an alert) is
    /// flushed at once, so it never waits for a WRITABLE event.
    fn process(&mut self, stream: &TcpStream, io: &mut Io, stats: &Stats) -> io::Result<()> {
        let handshaking = self.conn.is_handshaking();
        let server = matches!(self.conn, rustls::Connection::Server(_));
        match self.conn.process_new_packets() {
            Ok(state) => {
                if handshaking && server && !self.conn.is_handshaking() {
                    let resumed =
                        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                    let counter = if resumed {
                        &stats.tls_handshakes_resumed
                    } else {
                        &stats.tls_handshakes
                    };
                    Stats::add(counter, 1);
                    self.client_cert = self
                        .peer_leaf()
                        .and_then(crate::tls::client_cert::forwarded_value)
                        .map(String::into_boxed_str);
                }
                self.peer_closed |= state.peer_has_closed();
                self.plain = state.plaintext_bytes_to_read() > 0 || self.peer_closed;
                if self.conn.wants_write() {
                    self.flush(stream, io, false, stats)?;
                }
                Ok(())
            }
            Err(e) => {
                if handshaking && server {
                    Stats::add(&stats.tls_handshakes_failed, 1);
                    log::debug!("TLS handshake with a client failed: {e}");
                }
                // rustls queued the alert that says why: one try to send it.
                let _ = self.flush(stream, io, false, stats);
                Err(tls_error(e))
            }
        }
    }

    /// One write of `buf`'s plaintext: encrypted only if rustls holds no
    /// earlier ciphertext (so it holds at most one write's worth), then
    /// flushed. `fin_follows`: `close_notify` goes behind the last bytes
    /// and everything with `MSG_MORE`. Returns the plaintext bytes taken.
    ///
    /// Errors: the socket's write error.
    pub(crate) fn write_from(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        fin_follows: bool,
        stats: &Stats,
    ) -> io::Result<usize> {
        if !io.writable {
            return Ok(0);
        }
        let mut n = 0;
        if !self.conn.wants_write() && !buf.is_empty() && !self.conn.is_handshaking() {
            n = self.conn.writer().write(buf.as_slice())?;
            buf.consume(n);
            if fin_follows && buf.is_empty() {
                self.conn.send_close_notify();
            }
        }
        self.flush(stream, io, fin_follows, stats)?;
        Ok(n)
    }

    /// Writes what rustls holds until it holds nothing or the socket says
    /// `WouldBlock`. Returns true if something was written.
    ///
    /// Errors: the socket's write error.
    pub(crate) fn flush(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        more: bool,
        stats: &Stats,
    ) -> io::Result<bool> {
        let mut wrote = false;
        // Bounded: each turn writes something or stops.
        for _ in 0..64 {
            if !self.conn.wants_write() || !io.writable {
                break;
            }
            let mut wr = SocketWriter {
                stream,
                stats,
                more,
            };
            match self.conn.write_tls(&mut wr) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => wrote = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => io.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(wrote)
    }

    /// One step of a client handshake (an upstream connection): writes
    /// what rustls holds (the ClientHello first), reads and processes what
    /// the server sent. Returns true once the handshake is done.
    ///
    /// Errors: the socket's; the handshake failed (`InvalidData`: a bad
    /// certificate, a name that does not match, no common version).
    pub(crate) fn handshake(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> io::Result<bool> {
        for _ in 0..MAX_READ_ROUNDS {
            self.flush(stream, io, false, stats)?;
            if !self.conn.is_handshaking() {
                return Ok(true);
            }
            if !io.readable {
                return Ok(false);
            }
            match self.read_socket(stream, io, stats)? {
                None => return Ok(false),
                Some(true) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Some(false) => {}
            }
            self.process(stream, io, stats)?;
        }
        Ok(!self.conn.is_handshaking())
    }

    /// A look at an idle session (a pooled upstream connection that got an
    /// event, or is checked before reuse): what the socket holds is read
    /// and processed, so records that are not data — a TLS 1.3
    /// `NewSessionTicket`, a `KeyUpdate` — are absorbed and leave it
    /// usable; data, `close_notify`, EOF or an error do not.
    pub(crate) fn idle_look(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> super::Peeked {
        use super::Peeked;
        for _ in 0..MAX_READ_ROUNDS {
            if self.peer_closed {
                return Peeked::Eof;
            }
            if self.plain {
                return Peeked::Data;
            }
            match self.read_socket(stream, io, stats) {
                Ok(None) => return Peeked::Quiet,
                Ok(Some(true)) => return Peeked::Eof,
                Ok(Some(false)) => {}
                Err(e) => return Peeked::Failed(e.kind()),
            }
            if let Err(e) = self.process(stream, io, stats) {
                return Peeked::Failed(e.kind());
            }
        }
        Peeked::Quiet
    }

    /// TLS bytes rustls holds for the socket.
    pub(crate) fn unsent(&self) -> usize {
        if self.conn.wants_write() { 1 } else { 0 }
    }

    /// The negotiated version, cipher suite, SNI and resumption, once the
    /// handshake settled them, for the access record.
    pub(crate) fn facts(&self) -> Option<TlsFacts<'_>> {
        let version = match self.conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
            _ => "TLS",
        };
        let cipher = self.conn.negotiated_cipher_suite()?.suite().as_str()?;
        let sni = match &self.conn {
            rustls::Connection::Server(s) => s.server_name(),
            rustls::Connection::Client(_) => None,
        };
        Some(TlsFacts {
            version,
            cipher,
            sni,
            resumed: self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        })
    }

    /// The `X-Forwarded-Client-Cert` value of the client's verified
    /// certificate, if it presented one.
    pub(crate) fn client_cert_field(&self) -> Option<&str> {
        self.client_cert.as_deref()
    }

    /// The DER of the certificate the peer presented and rustls verified
    /// (the leaf, first of the chain), if any: a client's under
    /// `tls_client_auth`.
    fn peer_leaf(&self) -> Option<&[u8]> {
        self.conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref())
    }
}

/// Refuses a ClientHello whose name no certificate covers: one write of
/// the fatal `unrecognized_name` alert (7 bytes on a fresh socket: the
/// send buffer is empty), counted as a failed handshake; the error the
/// machine closes on.
fn refuse(stream: &TcpStream, stats: &Stats, name: Option<String>) -> io::Error {
    Stats::add(&stats.socket_writes, 1);
    Stats::add(&stats.tls_handshakes_failed, 1);
    let _ = socket2::SockRef::from(stream)
        .send_with_flags(&UNRECOGNIZED_NAME_ALERT, libc::MSG_NOSIGNAL);
    let why = match name {
        Some(n) => format!("no certificate for the SNI name {n:?}"),
        None => "a ClientHello without SNI".to_string(),
    };
    log::debug!("TLS: {why} (tls_unknown_sni = \"reject\"): alert unrecognized_name");
    io::Error::new(io::ErrorKind::InvalidData, why)
}

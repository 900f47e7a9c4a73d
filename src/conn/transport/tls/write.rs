//! Writing plaintext through a TLS session ([`Tls::write_from`]): new
//! plaintext is encrypted only once the previous ciphertext is on the
//! socket (how much at a time: `records::encrypt_take`), then flushed;
//! `close_notify` goes behind the last bytes when a FIN follows, or on its
//! own ([`Tls::close_notify`]).
//!
//! Why one write's worth at a time: the bounded-memory point of `tls.rs`;
//! a session holds at most one write's ciphertext beside the machine's own
//! buffer, in a storage of the size that write needs.
//!
//! What it must not know: HTTP, the watermarks' meaning.

use std::io;

use mio::net::TcpStream;

use super::Tls;
use crate::buffer::WatermarkBuffer;
use crate::conn::io::Io;
use crate::conn::transport::records::{encrypt_take, sealed_len};
use crate::stats::Stats;

impl Tls {
    /// Encrypts `close_notify` (RFC 8446 §6.1) once, behind anything
    /// queued; it goes with the next flush. Nothing while the handshake
    /// runs (the connection then closes silently), nor once the session
    /// is [`Tls::cut`].
    pub(crate) fn close_notify(&mut self) {
        if self.session.is_handshaking() || self.cut {
            return;
        }
        let _ = self.pass(None, &[], true);
    }

    /// One write of `buf`'s plaintext: encrypted (all of it up to 33 KiB,
    /// else two 16 KiB records: `records::encrypt_take`) only if no earlier
    /// ciphertext waits, so a session holds at
    /// most one write's worth, then flushed. `fin_follows`: once `buf` is
    /// empty, `close_notify` goes behind the last bytes, and everything
    /// with `MSG_MORE`. Returns the plaintext bytes taken.
    ///
    /// Errors: the socket's write error; rustls' (an alert read while
    /// getting to write).
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
        if self.tx.is_empty() && !buf.is_empty() && !self.session.is_handshaking() {
            let take = encrypt_take(buf.pending());
            // A storage of the size this write needs (a slow reader's
            // 16 KiB buffer takes a small one).
            self.tx.space_for(sealed_len(take));
            let plain = buf.as_slice().get(..take).unwrap_or_default();
            let close = fin_follows && take == buf.pending();
            n = self.pass(None, plain, close)?.encrypted;
            buf.consume(n);
        }
        self.flush(stream, io, fin_follows, stats)?;
        Ok(n)
    }

    /// Writes what the storage holds until it is empty or the socket says
    /// `WouldBlock` (one `send` when it takes all). Returns true if
    /// something was written.
    ///
    /// Errors: the socket's write error.
    pub(crate) fn flush(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        more: bool,
        stats: &Stats,
    ) -> io::Result<bool> {
        let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
        let mut wrote = false;
        // Bounded: each turn writes something or stops.
        for _ in 0..64 {
            if self.tx.is_empty() || !io.writable {
                break;
            }
            Stats::add(&stats.socket_writes, 1);
            match socket2::SockRef::from(stream).send_with_flags(self.tx.pending(), flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => {
                    self.tx.consume(k);
                    wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => io.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Nothing in flight: no storage kept (a write that encrypted
        // nothing took one too).
        self.tx.consume(0);
        Ok(wrote)
    }
}

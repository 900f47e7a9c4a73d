//! A TLS session between requests: the look at an idle one (a pooled
//! upstream connection that got an event, or is checked before reuse),
//! and the fit of a connection that goes idle (parked, or pooled).
//!
//! Why: a pooled session must stay usable after records that are not data
//! (a TLS 1.3 `NewSessionTicket`, a `KeyUpdate`), and a connection waiting
//! between requests should cost its session and at most the bytes of a
//! record not yet whole, not a 17 KiB record storage.
//!
//! What it must not know: HTTP, the pool, when a connection goes idle.

use mio::net::TcpStream;

use super::{MAX_READ_ROUNDS, Tls};
use crate::conn::io::Io;
use crate::conn::transport::Peeked;
use crate::stats::Stats;

impl Tls {
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
    ) -> Peeked {
        for _ in 0..MAX_READ_ROUNDS {
            if !self.rest.is_empty() {
                return Peeked::Data;
            }
            if self.peer_closed {
                return Peeked::Eof;
            }
            match self.read_socket(stream, io, stats) {
                Ok(None) => return Peeked::Quiet,
                Ok(Some(0)) => return Peeked::Eof,
                // The start of a PROXY header: the machine reads the rest.
                Ok(Some(_)) if self.awaits_proxy() => return Peeked::Data,
                Ok(Some(_)) => {}
                Err(e) => return Peeked::Failed(e.kind()),
            }
            if let Err(e) = self.process(stream, io, None, stats) {
                return Peeked::Failed(e.kind());
            }
        }
        Peeked::Quiet
    }

    /// The connection goes idle (parked, or pooled): the ciphertext of a
    /// record not yet whole, if any, moves out of its storage into one of
    /// its own size, and the storage goes back to the free list.
    pub(crate) fn fit_idle(&mut self) {
        self.rx.fit();
    }
}

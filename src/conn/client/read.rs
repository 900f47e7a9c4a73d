//! Reading from the client, by state: a request head (with a TLS
//! handshake's end and a PROXY header's source taken as they come), a
//! request body, a look at a client whose request waits for its answer,
//! or bytes dropped while closing.
//!
//! What it must not know: how bytes move (the relay, the transport).

use super::{ClientConn, Result, State};
use crate::conn::Shared;
use crate::conn::io::Read1;
use crate::conn::relay;
use crate::conn::transport::Peeked;
use crate::error::{ErrorKind, ProxyError};
use crate::stats::Stats;

impl ClientConn {
    /// Reads what the state wants from the client: a head, a request body,
    /// a look at a waiting client, or bytes to discard while closing.
    pub(super) fn read_client(&mut self, sh: &mut Shared) -> Result<bool> {
        let waiting =
            self.state == State::Busy && self.exchange.as_ref().is_none_or(|ex| ex.request_taken());
        if waiting {
            return if self.exchange.is_some() {
                self.probe_client(&sh.stats)
            } else {
                Ok(false)
            };
        }
        if self.side.read_eof || !self.side.stream.may_read(&self.side.io) {
            return Ok(false);
        }
        let (mut env, _, _) = sh.split();
        match self.state {
            State::Closed | State::ToH2 => Ok(false),
            State::Closing { .. } => self.discard_client(),
            State::Head => {
                let handshaking = self.side.stream.is_handshaking();
                let read = relay::read_client_head(&mut self.side, &mut env);
                // A server handshake ends on a read (the client's
                // Finished): counted once, with its time since the accept.
                if handshaking && !self.side.stream.is_handshaking() {
                    let took = sh.now.saturating_duration_since(self.accepted_at);
                    self.side.stream.count_handshake(took, &sh.stats);
                    // The wait for the first request (its head timeout; in
                    // a drain, the idle grace) runs from here (`deadline`).
                    self.idle_since = sh.now;
                }
                // A PROXY header before the ClientHello gives the client's
                // address as soon as the transport has read it, before the
                // session answers: a client over its connection limit gets
                // no handshake.
                match self.take_tls_proxy_source(sh) {
                    None => self.head_read(read?, sh),
                    Some(false) => Ok(true),
                    Some(true) => {
                        self.head_read(read?, sh)?;
                        // Round again: the session reads what followed it.
                        Ok(true)
                    }
                }
            }
            State::Busy => match self.exchange.as_deref_mut() {
                Some(ex) => relay::read_request(&mut self.side, ex, &mut env),
                None => Ok(false),
            },
        }
    }

    /// What a read of a request head gave: the head's start is noted, and
    /// the connection is no longer idle.
    fn head_read(&mut self, read: Read1, sh: &Shared) -> Result<bool> {
        match read {
            Read1::Idle => Ok(false),
            Read1::Eof => Ok(true),
            Read1::Data(_) => {
                if self.head_started.is_none() {
                    self.head_started = Some(if self.requests == 0 {
                        self.accepted_at
                    } else {
                        sh.now
                    });
                }
                self.set_idle(false, &sh.stats);
                Ok(true)
            }
        }
    }

    /// The client's socket reported something while its request waits for
    /// (or receives) its response and nothing is to be read: look without
    /// consuming. A reset or error means the client is gone: the exchange
    /// ends at once (its upstream is closed), as nginx does with a 499. A
    /// FIN is a half-close: the response is still delivered (HAProxy's
    /// default, no `abortonclose`). Pipelined bytes wait for their turn.
    fn probe_client(&mut self, stats: &Stats) -> Result<bool> {
        let side = &mut self.side;
        // Only when an event came since the last look: no syscall per round.
        if !std::mem::take(&mut side.io.fresh) {
            return Ok(false);
        }
        // A reset or error is pending whatever came before it (a FIN, or
        // pipelined bytes that a peek would show first).
        if let Some(e) = side.stream.pending_error(stats) {
            return Err(ProxyError::downstream(ErrorKind::Io(e.kind())));
        }
        if self.pipelined || side.read_eof {
            return Ok(false);
        }
        match side.stream.peek(stats) {
            Peeked::Eof => {
                side.io.readable = false;
                side.read_eof = true;
                Ok(true)
            }
            Peeked::Data => {
                // The next request is there: `readable` stays set so it is
                // read once this exchange ends; no more peeks until then.
                self.pipelined = true;
                Ok(false)
            }
            Peeked::Quiet => {
                side.io.readable = false;
                Ok(false)
            }
            Peeked::Failed(kind) => Err(ProxyError::downstream(ErrorKind::Io(kind))),
        }
    }

    /// Reads and drops client bytes while closing (lingering close).
    fn discard_client(&mut self) -> Result<bool> {
        let side = &mut self.side;
        match side.stream.discard() {
            Ok(0) => {
                side.read_eof = true;
                Ok(true)
            }
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                side.io.readable = false;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(true),
            Err(_) => {
                side.read_eof = true;
                Ok(true)
            }
        }
    }
}

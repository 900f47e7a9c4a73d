//! One upstream connection's machine (ARCHITECTURE.md §7): its states
//! (connecting, active for one exchange, idle in the pool), the connect's
//! completion, and reads and writes through the relay's buffers. The set
//! of all of them and the pool over them is the parent module.
//!
//! What it must not know: HTTP, the pool's rules.

use std::io;
use std::time::{Duration, Instant};

use log::{debug, trace};
use mio::{Registry, Token};

use super::super::io::{Io, Read1, connect_finished};
use super::super::transport::Transport;
use crate::buffer::WatermarkBuffer;
use crate::error::Timeout;
use crate::event_loop::token::ConnId;
use crate::filter::Peer;
use crate::stats::Stats;

/// Where one upstream connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpState {
    /// The non-blocking connect started at `since` has not completed.
    Connecting {
        /// When the connect began (the connect timeout runs from here).
        since: Instant,
    },
    /// Carrying an exchange for the client connection `owner`.
    Active {
        /// The client connection whose exchange uses this socket: its
        /// events are routed there.
        owner: ConnId,
    },
    /// Parked in the idle pool.
    Idle,
}

/// One upstream TCP connection.
#[derive(Debug)]
pub(crate) struct UpstreamConn {
    pub(super) stream: Transport,
    pub(super) token: Token,
    pub(super) peer: Peer,
    /// Readiness and registered interest.
    pub(crate) io: Io,
    pub(super) state: UpState,
    /// The client connection that asked for this socket (it stays the
    /// owner through `Connecting` and `Active`).
    pub(super) owner: ConnId,
    /// Local port of the socket (for the access log), 0 until connected.
    pub(super) local_port: u16,
    /// Requests sent on it before the current one.
    pub(super) uses: u64,
    /// When it was last taken from the pool, how long it had been idle
    /// then, and whether it was checked for a FIN (`None`: new).
    pub(super) taken: Option<Taken>,
    /// The sending side was shut (a tunnel whose client sent EOF).
    pub(super) write_shut: bool,
    /// The TCP connect completed (a TLS handshake may still run: the
    /// connection stays `Connecting`, under the connect timeout, until it
    /// is done).
    pub(super) tcp_connected: bool,
    /// Bytes to write before anything else once the TCP connect completes
    /// (a PROXY header); emptied when written.
    pub(super) preface: Vec<u8>,
    /// It carries one client's PROXY header: never parked in the pool.
    pub(super) private: bool,
    /// Why its TLS handshake failed (rustls' words: the name that did not
    /// match, the alert), for the failed try's warning
    /// (`failed_try::note_failed_try`, rate-limited there).
    pub(super) handshake_error: Option<Box<str>>,
}

/// How a connect attempt stands after [`UpstreamConn::finish_connect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connect {
    /// Connected before this call.
    Ready,
    /// The connect completed in this call.
    JustConnected,
    /// Still in progress: wait for WRITABLE.
    Pending,
}

impl UpstreamConn {
    /// Local port, 0 until connected.
    pub(crate) fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The connect has not completed yet.
    pub(crate) fn is_connecting(&self) -> bool {
        matches!(self.state, UpState::Connecting { .. })
    }

    /// The connect deadline while connecting.
    pub(crate) fn deadline(&self, connect_timeout: Duration) -> Option<(Instant, Timeout)> {
        match self.state {
            UpState::Connecting { since } => Some((since + connect_timeout, Timeout::Connect)),
            _ => None,
        }
    }

    pub(super) fn set_state(&mut self, new: UpState) {
        trace!(
            "upstream {} port {}: {:?} -> {new:?}",
            self.peer.addr, self.local_port, self.state
        );
        self.state = new;
    }

    /// Completes a non-blocking connect once WRITABLE was reported, and
    /// then, for a TLS peer, the handshake: a connection is connected once
    /// it can carry the request (a handshake failure is a connect failure:
    /// the retry rules of a refused connect apply).
    ///
    /// Errors: the connect failed (refused, unreachable): `SO_ERROR`'s
    /// error or `peer_addr`'s; the TLS handshake failed (the reason, e.g.
    /// the name that did not match, is logged).
    pub(crate) fn finish_connect(&mut self, stats: &Stats) -> io::Result<Connect> {
        if !self.is_connecting() {
            return Ok(Connect::Ready);
        }
        if !self.tcp_connected {
            if !self.io.writable {
                return Ok(Connect::Pending);
            }
            if let Some(e) = self.stream.connect_error() {
                return Err(e);
            }
            match connect_finished(self.stream.peer_addr(), || self.stream.local_addr())? {
                Some(local) => {
                    self.tcp_connected = true;
                    self.local_port = local.port();
                }
                None => {
                    self.io.writable = false;
                    return Ok(Connect::Pending);
                }
            }
        }
        if !self.preface.is_empty() {
            // Before the TLS ClientHello, if any: the header is below TLS.
            let preface = std::mem::take(&mut self.preface);
            self.stream.write_preface(&preface, stats)?;
        }
        match self.stream.handshake(&mut self.io, stats) {
            Ok(false) => return Ok(Connect::Pending),
            Ok(true) => {}
            Err(e) => {
                debug!("upstream {}: TLS handshake failed: {e}", self.peer.addr);
                self.handshake_error = Some(e.to_string().into_boxed_str());
                return Err(e);
            }
        }
        self.set_state(UpState::Active { owner: self.owner });
        debug!(
            "upstream {} connected, port {}{}",
            self.peer.addr,
            self.local_port,
            if self.stream.is_tls() { ", TLS" } else { "" }
        );
        Ok(Connect::JustConnected)
    }

    /// Why the TLS handshake failed, once (see `handshake_error`).
    pub(crate) fn take_handshake_error(&mut self) -> Option<Box<str>> {
        self.handshake_error.take()
    }

    /// A read may give something now (see `Transport::may_read`).
    pub(crate) fn may_read(&self) -> bool {
        self.stream.may_read(&self.io)
    }

    /// One read into `buf` (see [`read_into`]); nothing while connecting.
    pub(crate) fn read(
        &mut self,
        buf: &mut WatermarkBuffer,
        max: usize,
        stats: &Stats,
    ) -> io::Result<Read1> {
        if self.is_connecting() {
            return Ok(Read1::Idle);
        }
        self.stream.read_into(&mut self.io, buf, max, stats)
    }

    /// The upstream closed its TLS session with a bare EOF, no
    /// `close_notify`: a response delimited by the close is then cut, not
    /// complete (RFC 9112 §9.8). False on a plain connection.
    pub(crate) fn closed_without_notify(&self) -> bool {
        self.stream.closed_without_notify()
    }

    /// One write of `buf`'s pending bytes (see [`write_from`]); nothing
    /// while connecting.
    pub(crate) fn write(&mut self, buf: &mut WatermarkBuffer, stats: &Stats) -> io::Result<usize> {
        if self.is_connecting() {
            return Ok(0);
        }
        self.stream.write_from(&mut self.io, buf, false, stats)
    }

    /// The connection is about to be closed: a TLS session whose
    /// handshake completed sends `close_notify` (one try to write it),
    /// unless the sending side was already shut (it went then).
    pub(crate) fn goodbye(&mut self, stats: &Stats) {
        if !self.write_shut {
            self.stream.goodbye(&mut self.io, stats);
        }
    }

    /// Shuts the sending side once (a tunnel whose client sent EOF).
    /// Returns true the first time.
    pub(crate) fn shutdown_write(&mut self, stats: &Stats) -> bool {
        if self.write_shut {
            return false;
        }
        self.write_shut = true;
        self.stream.shutdown_write(&mut self.io, stats);
        true
    }

    /// Watches the socket for `read`/`write`; while connecting, for both
    /// (WRITABLE ends the connect, READABLE/ERROR a failure).
    pub(crate) fn set_interest(
        &mut self,
        registry: &Registry,
        read: bool,
        write: bool,
    ) -> io::Result<()> {
        let (read, write) = if self.is_connecting() {
            (true, true)
        } else {
            (read, write)
        };
        self.stream
            .set_interest(&mut self.io, registry, self.token, read, write)
    }
}

/// How a pooled connection was last taken (what a failure then teaches the
/// pool's choice rule).
#[derive(Debug, Clone, Copy)]
pub(super) struct Taken {
    /// When it left the pool.
    pub(super) at: Instant,
    /// How long it had been idle then.
    pub(super) idle: Duration,
    /// Whether it was checked for a FIN (`MSG_PEEK`) then.
    pub(super) checked: bool,
}

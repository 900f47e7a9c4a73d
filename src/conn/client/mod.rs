//! The client connection machine: one downstream socket, the request heads
//! read from it, and the exchange (or the proxy's own answer) it runs now
//! (ARCHITECTURE.md §1, §4).
//!
//! States ([`State`]):
//! - `Head`: waiting for (the rest of) a request head. With no byte yet the
//!   connection is idle: it holds no buffer, and the keep-alive timeout
//!   runs (the request head timeout once a byte came, and for the first
//!   request from accept).
//! - `Busy`: a request is being served, by an upstream exchange or by an
//!   answer the proxy writes itself.
//! - `Closing`: writing the last pending bytes, then (if the client may
//!   still be sending) half-closing and discarding input until EOF or the
//!   linger deadline, so the client reads the answer instead of a reset.
//! - `Closed`: terminal; the loop frees the slot.
//!
//! Keep-alive goes only from true to false ([`KeepAlive::clear`]). The
//! relay policy is in `relay`; what a head means is in `http::request` and
//! `http::response`; the upstream socket is the upstream machine's.
//!
//! What it must not know: the loop's bookkeeping (slab key, generation,
//! queue, armed timer) beyond its opaque [`ConnId`].
//!
//! Parts: this file holds the machine and its round; `read` reads what
//! the state wants from the client, `request` starts a request, `outcome`
//! ends one, `deadline` says which timeout applies and what firing does.

mod deadline;
mod outcome;
mod park;
mod proxy_header;
mod read;
mod request;

pub(crate) use park::Client;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::{debug, trace};

use super::access::{Downstream, Termination};
use super::exchange::Exchange;
use super::io::Io;
use super::own_reply::OwnReply;
use super::relay;
use super::transport::Transport;
use super::{KeepAlive, Shared};
use crate::buffer::WatermarkBuffer;
use crate::error::ProxyError;
use crate::event_loop::token::{ConnId, Kind};
use crate::http::HeadScanner;
use crate::stats::Stats;

/// How long a closing connection may take to send EOF after the proxy
/// half-closed it (nginx `lingering_timeout` is 5 s).
const LINGER: Duration = Duration::from_secs(2);

/// During a graceful drain, how long a keep-alive connection must have been
/// idle before it is closed: a client that uses it sends its next request
/// within this time and gets it answered with `Connection: close`; one that
/// sent nothing for this long is unlikely to be sending at the instant of
/// the close (ARCHITECTURE.md §12).
const DRAIN_IDLE_GRACE: Duration = Duration::from_secs(1);

/// Rounds of one `drive` call before the connection yields to others (it
/// is driven again in the next loop turn without waiting for an event).
const MAX_ROUNDS: usize = 32;

type Result<T> = std::result::Result<T, ProxyError>;

/// Where the client connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a request head.
    Head,
    /// Serving a request.
    Busy,
    /// Flushing, then half-closed until EOF or `linger_until`.
    Closing { linger_until: Option<Instant> },
    /// The connection speaks HTTP/2 (the preface came with
    /// `http2_cleartext`, or TLS chose `h2`): the slab entry hands it over
    /// to the HTTP/2 machine ([`ClientConn::into_h2`]).
    ToH2,
    /// Terminal.
    Closed,
}

/// The client's socket and the bytes in flight on it: what the relay's
/// pumps move bytes through.
pub(crate) struct ClientSide {
    /// The connection's transport (a non-blocking socket).
    pub stream: Transport,
    /// Readiness and registered interest.
    pub io: Io,
    /// The client's address.
    pub addr: SocketAddr,
    /// Bytes read from the client not yet consumed: heads, and body bytes
    /// that arrived with a head.
    pub inbuf: Option<WatermarkBuffer>,
    /// Bytes for the client not yet written: response heads and bodies.
    pub out: Option<WatermarkBuffer>,
    /// The client sent EOF.
    pub read_eof: bool,
    /// Our sending side was shut while the client may still send (a
    /// tunnel whose upstream sent EOF first).
    pub write_shut: bool,
    /// Last time a byte was written to the client (or pending bytes
    /// appeared): the send timeout runs from here.
    pub write_at: Instant,
}

/// A connection from `addr` must start with a PROXY header
/// (`accept_proxy_protocol`). On a plain listener the machine takes it
/// from the head buffer (`proxy_header.rs`); on a TLS listener it comes
/// before the ClientHello and the transport takes it
/// (`transport/tls/proxy.rs`).
pub(crate) fn sends_proxy_header(cfg: &crate::config::Config, addr: SocketAddr) -> bool {
    crate::cidr::any_contains(&cfg.accept_proxy_protocol, addr.ip())
}

/// Counts a connection of client `addr` in `max_connections_per_client`
/// (0: nothing counted, true). False: the address holds that many
/// already; the refusal is counted and logged, and the caller closes the
/// connection (it was not counted).
pub(crate) fn admit_client(sh: &mut Shared, addr: SocketAddr) -> bool {
    let max = sh.cfg.max_connections_per_client;
    if sh.conns.admit(addr.ip(), max) {
        return true;
    }
    Stats::add(&sh.stats.downstream_refused_per_client, 1);
    debug!("client {addr}: over max_connections_per_client ({max}): closed");
    false
}

/// One client connection.
pub(crate) struct ClientConn {
    id: ConnId,
    side: ClientSide,
    state: State,
    keep_alive: KeepAlive,
    scanner: HeadScanner,
    exchange: Option<Box<Exchange>>,
    own_reply: Option<OwnReply>,
    requests: u64,
    accepted_at: Instant,
    idle_since: Instant,
    head_started: Option<Instant>,
    idle_counted: bool,
    /// A graceful drain is under way (one-way).
    draining: bool,
    /// Closing must linger (half-close, read and drop until EOF) because
    /// the client may still be sending: an error reply, an unread request
    /// body, pipelined bytes. Otherwise the socket closes once flushed, as
    /// nginx's `lingering_close on` does.
    linger: bool,
    /// Bytes the kernel still held for the client at the last linger
    /// deadline (`usize::MAX` before the first): the linger goes on only
    /// while this shrinks.
    linger_queued: usize,
    /// Bytes of a next request were seen while this one is served.
    pipelined: bool,
    /// The connection came from a source in `accept_proxy_protocol` and
    /// its PROXY header has not been read yet (`proxy_header`).
    await_proxy: bool,
    /// A PROXY header was taken (by the machine, or by the TLS transport
    /// before the ClientHello): bytes that look like another are a
    /// malformed request, not an untrusted header.
    proxied: bool,
    /// The current request's client address when `X-Forwarded-For` from a
    /// trusted proxy gave one (port 0: the field carries none); `None`:
    /// the peer's (`side.addr`, after any PROXY header).
    client: Option<SocketAddr>,
    /// `side.addr` is counted in `Shared::conns` (given back at close).
    conn_counted: bool,
}

impl ClientConn {
    /// A connection for an accepted client, registered for READABLE.
    ///
    /// Errors: the registration failed.
    pub(crate) fn new(
        id: ConnId,
        stream: Transport,
        addr: SocketAddr,
        sh: &mut Shared,
    ) -> std::io::Result<Self> {
        // TCP_NODELAY comes from the listener (`event_loop::listen`).
        // A fresh socket is writable; the flag drops at the first WouldBlock.
        // With TCP_DEFER_ACCEPT the request is most likely there already:
        // the loop reads it at once instead of waiting for the event.
        let stream_is_tls = stream.is_tls();
        let io = Io {
            writable: true,
            readable: sh.cfg.defer_accept,
            ..Io::default()
        };
        let mut c = ClientConn {
            id,
            side: ClientSide {
                stream,
                io,
                addr,
                inbuf: None,
                out: None,
                read_eof: false,
                write_shut: false,
                write_at: sh.now,
            },
            state: State::Head,
            keep_alive: KeepAlive::new(),
            scanner: HeadScanner::new(),
            exchange: None,
            own_reply: None,
            requests: 0,
            accepted_at: sh.now,
            idle_since: sh.now,
            head_started: None,
            idle_counted: false,
            draining: false,
            linger: false,
            linger_queued: usize::MAX,
            pipelined: false,
            await_proxy: !stream_is_tls && sends_proxy_header(&sh.cfg, addr),
            proxied: false,
            client: None,
            conn_counted: false,
        };
        c.side.stream.set_interest(
            &mut c.side.io,
            &sh.registry,
            id.token(Kind::Client),
            true,
            false,
        )?;
        c.set_idle(true, &sh.stats);
        Ok(c)
    }

    /// The connection ended; the loop frees it with `close`.
    pub(crate) fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Counts this connection for its client address in
    /// `max_connections_per_client` once a PROXY header gave the address
    /// (the loop counts the others at accept, [`admit_client`]). Returns
    /// false, and closes the connection, when the address already holds
    /// that many.
    fn count_client(&mut self, sh: &mut Shared) -> bool {
        if self.conn_counted {
            return true;
        }
        if admit_client(sh, self.side.addr) {
            self.conn_counted = sh.cfg.max_connections_per_client > 0;
            return true;
        }
        self.set_state(State::Closed);
        false
    }

    /// The connection is to speak HTTP/2 from now on.
    pub(crate) fn wants_h2(&self) -> bool {
        self.state == State::ToH2
    }

    /// What the HTTP/2 machine takes over: the transport and the bytes
    /// read (the preface and what followed).
    pub(crate) fn into_h2(self) -> super::h2::Handover {
        super::h2::Handover {
            id: self.id,
            stream: self.side.stream,
            io: self.side.io,
            addr: self.side.addr,
            inbuf: self.side.inbuf,
            accepted_at: self.accepted_at,
            conn_counted: self.conn_counted,
            idle_counted: self.idle_counted,
            draining: self.draining,
        }
    }

    /// The loop counted this connection at accept ([`admit_client`]).
    pub(crate) fn set_counted(&mut self) {
        self.conn_counted = true;
    }

    fn set_state(&mut self, new: State) {
        if self.state != new {
            trace!("client {}: {:?} -> {new:?}", self.side.addr, self.state);
            self.state = new;
        }
    }

    /// Moves everything that can move now. Returns true if it stopped only
    /// because of its round limit (drive it again soon).
    pub(crate) fn drive(&mut self, sh: &mut Shared) -> bool {
        let mut more = false;
        for round in 0..MAX_ROUNDS {
            if matches!(self.state, State::Closed | State::ToH2) {
                break;
            }
            let progress = match self.step(sh) {
                Ok(p) => p,
                Err(e) => {
                    self.fail(e, sh);
                    true
                }
            };
            if !progress {
                break;
            }
            more = round + 1 == MAX_ROUNDS;
        }
        if !matches!(self.state, State::Closed | State::ToH2)
            && let Err(e) = self.update_interest(sh)
        {
            debug!("client {}: interest update failed: {e}", self.side.addr);
            self.set_state(State::Closed);
        }
        more
    }

    /// A graceful drain began (ARCHITECTURE.md §12). No request is
    /// refused and no connection is closed under a client that may be
    /// sending: a busy connection whose response head has not gone out yet
    /// gets `Connection: close` on it; one whose head already went out
    /// (promising keep-alive) serves one more request, answered with
    /// `Connection: close`. A keep-alive connection between requests is
    /// read once more (a request already sent is served, with `Connection:
    /// close`) and closed once it has been idle for `DRAIN_IDLE_GRACE`. A
    /// new connection still waiting for its first request gets it served,
    /// bounded by the request head timeout: it came from the accept queue.
    pub(crate) fn begin_drain(&mut self) {
        let head_out = self.exchange.as_ref().is_some_and(|ex| ex.resp_head_sent);
        if self.state != State::Busy || !head_out {
            self.keep_alive.clear("drain");
        }
        self.draining = true;
        self.side.io.readable = true;
    }

    /// Frees everything the connection holds (the loop removed it). An
    /// exchange still running (or an answer of the proxy's not yet
    /// flushed) is ended and logged: `cut` says the loop stopped (drain
    /// deadline or shutdown), else the client went away.
    pub(crate) fn close(mut self, sh: &mut Shared, cut: bool) {
        let how = if cut {
            Termination::DrainCut
        } else {
            Termination::ClientAborted
        };
        if let Some(ex) = self.exchange.take() {
            let status = (!ex.resp_head_sent).then_some(499);
            if ex.resp_head_sent && !ex.response_done() {
                // A response cut here ends without `close_notify`
                // (`Transport::cut`, RFC 9112 §9.8).
                self.side.stream.cut();
            }
            ex.end(self.downstream(), status, 0, how, sh);
        } else if let Some(mut r) = self.own_reply.take() {
            r.termination = how;
            r.log(self.downstream(), sh);
        }
        self.release(sh, true);
        if self.conn_counted {
            sh.conns.release(self.side.addr.ip());
        }
        self.set_idle(false, &sh.stats);
        self.side.stream.goodbye(&mut self.side.io, &sh.stats);
        // Dropping the socket closes it, and closing removes it from the
        // epoll set: no `epoll_ctl` per connection (stale events of this
        // batch are dropped by the token's generation).
        Stats::sub(&sh.stats.downstream_active, 1);
    }

    // ---- one round ----

    /// One round of the relay policy (see `relay`): sinks first, then
    /// sources, then what the state makes of the bytes that moved.
    fn step(&mut self, sh: &mut Shared) -> Result<bool> {
        let (mut env, ups, _) = sh.split();
        let fin_follows = self.fin_follows_flush();
        let side = &mut self.side;
        let mut progress = relay::write_client(side, &mut env, fin_follows)?;
        if let Some(ex) = self.exchange.as_deref_mut()
            && let Some(up) = ex.upstream.and_then(|k| ups.get_mut(k))
        {
            progress |= relay::write_request(ex, up, &mut env)?;
            progress |= relay::read_response(&mut side.out, ex, up, &mut env)?;
            if ex.request_abandoned() {
                self.keep_alive.clear("request abandoned");
            }
        }
        progress |= self.read_client(sh)?;
        progress |= match self.state {
            State::Head => self.try_start_request(sh)?,
            State::Busy => self.advance_exchange(sh)?,
            State::Closing { .. } => self.advance_closing(sh),
            State::Closed | State::ToH2 => false,
        };
        Ok(progress)
    }

    // ---- helpers ----

    /// The current request's client address: the one `trusted_proxies`
    /// found in `X-Forwarded-For`, else the peer's.
    fn client_addr(&self) -> SocketAddr {
        self.client.unwrap_or(self.side.addr)
    }

    /// Whom an access record is about: the client's address and its
    /// connection's TLS facts.
    fn downstream(&self) -> Downstream<'_> {
        Downstream {
            addr: self.client_addr(),
            tls: self.side.stream.tls_facts(),
            stream: None,
        }
    }

    fn head_bytes_seen(&self) -> bool {
        self.state == State::Head && self.side.inbuf.as_ref().is_some_and(|b| !b.is_empty())
    }

    /// Returns empty buffers to the free list (all if `all`: the pending
    /// bytes of a closing connection no longer matter).
    fn release(&mut self, sh: &mut Shared, all: bool) {
        for slot in [&mut self.side.inbuf, &mut self.side.out] {
            if slot.as_ref().is_some_and(|b| all || b.is_empty())
                && let Some(b) = slot.take()
            {
                sh.bufs.put_buffer(b);
            }
        }
    }

    fn set_idle(&mut self, idle: bool, stats: &Stats) {
        crate::conn::count_downstream_idle(&mut self.idle_counted, idle, stats);
    }

    /// Registers what each socket should be watched for now.
    fn update_interest(&mut self, sh: &mut Shared) -> std::io::Result<()> {
        let side = &mut self.side;
        let want_write = side.out.as_ref().is_some_and(|b| !b.is_empty());
        let want_read = match self.state {
            State::Head => !side.read_eof && side.inbuf.as_ref().is_none_or(|b| b.room() > 0),
            // READABLE stays registered (no epoll_ctl per request), even
            // after the client's FIN (a later reset must still be seen); it
            // goes only while the request body's sink is above its high
            // watermark (ARCHITECTURE.md §4).
            State::Busy => !self.exchange.as_ref().is_some_and(|ex| {
                !ex.request_taken() && ex.to_upstream.as_ref().is_some_and(|b| b.is_paused())
            }),
            State::Closing { .. } => !side.read_eof,
            State::Closed | State::ToH2 => false,
        };
        side.stream.set_interest(
            &mut side.io,
            &sh.registry,
            self.id.token(Kind::Client),
            want_read,
            want_write,
        )?;
        let Some(ex) = self.exchange.as_deref() else {
            return Ok(());
        };
        let Some(up) = ex.upstream.and_then(|k| sh.ups.get_mut(k)) else {
            return Ok(());
        };
        let out_room = side.out.as_ref().is_none_or(|b| b.room() > 0);
        let (r, w) = ex.upstream_interest(out_room);
        up.set_interest(&sh.registry, r, w)
            .map_err(|_| std::io::ErrorKind::Other.into())
    }
}

//! `Session`: one downstream (client) connection and the exchange it runs.
//!
//! States (`Phase`):
//! - `Head`: waiting for (the rest of) a request head. With no byte yet the
//!   connection is idle: it holds no buffer, and the keep-alive timeout runs.
//! - `Busy`: a request is being served, by an upstream exchange or by a
//!   reply the proxy writes itself.
//! - `Closing`: writing the last pending bytes, then half-closing and
//!   discarding input until EOF or the linger deadline, so the client reads
//!   the answer instead of a reset.
//! - `Closed`: terminal; the loop frees the slot.
//!
//! Relay policy, both directions at once, in every `drive` round: write
//! before read (drain the sinks first); read a source only while its sink's
//! buffer is below the high watermark (`WatermarkBuffer::room`); request
//! body bytes go client → `to_upstream` → upstream while response bytes go
//! upstream → `out` → client, whichever side is ready. Rounds repeat until
//! nothing moves, so an edge-triggered readiness is never left unused.
//! Keep-alive goes only from true to false.

use std::io::Read;
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use log::{debug, info};
use mio::Interest;
use mio::net::TcpStream;

use super::Shared;
use super::exchange::{Exchange, Resp};
use super::io::{Io, Read1, read_into, write_from};
use super::token;
use crate::buffer::{BufferPool, Crossing, WatermarkBuffer};
use crate::config::Config;
use crate::error::{Answer, ErrorKind, ProxyError, Side, Timeout};
use crate::http::target::normalize_absolute_form;
use crate::http::{
    BodyDecoder, BodyKind, HeadScanner, Headers, ParseError, RequestHead, ResponseHead,
    add_forwarding_fields, is_upgrade_request, remove_hop_by_hop, request_keep_alive,
    response_keep_alive,
};
use crate::stats::Stats;

/// How long a closing connection may take to send EOF after the proxy
/// half-closed it (nginx `lingering_timeout` is 5 s).
const LINGER: Duration = Duration::from_secs(2);

/// Most 1xx interim responses forwarded before the final one; more is an
/// upstream error (502): a flood of them would only cost the client.
const MAX_INTERIM: u32 = 16;

/// Rounds of one `drive` call before the session yields to others (it is
/// driven again in the next loop turn without waiting for an event).
const MAX_ROUNDS: usize = 32;

/// Most bytes one read takes from a socket.
const READ_CHUNK: usize = 64 * 1024;

type Result<T> = std::result::Result<T, ProxyError>;

/// Where the downstream connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request head.
    Head,
    /// Serving a request.
    Busy,
    /// Flushing, then half-closed until EOF or `linger_until`.
    Closing { linger_until: Option<Instant> },
    /// Terminal.
    Closed,
}

/// A request answered by the proxy itself (filter reply), for the log.
struct OwnReply {
    line: String,
    status: u16,
    bytes: u64,
    started: Instant,
}

/// One client connection.
pub(crate) struct Session {
    /// Slab key of this session.
    pub key: usize,
    /// Generation in this session's token.
    pub generation: u32,
    /// Queued for a drive in this loop turn.
    pub dirty: bool,
    /// Deadline last armed in the loop's timer heap.
    pub armed: Option<Instant>,
    stream: TcpStream,
    client: SocketAddr,
    io: Io,
    phase: Phase,
    keep_alive: bool,
    read_eof: bool,
    /// Bytes read from the client not yet consumed: heads, and body bytes
    /// that arrived with a head.
    inbuf: Option<WatermarkBuffer>,
    scanner: HeadScanner,
    /// Bytes for the client not yet written: response heads and bodies.
    out: Option<WatermarkBuffer>,
    exchange: Option<Box<Exchange>>,
    own_reply: Option<OwnReply>,
    requests: u64,
    accepted_at: Instant,
    idle_since: Instant,
    head_started: Option<Instant>,
    down_write_at: Instant,
    idle_counted: bool,
    /// A graceful drain is under way (one-way).
    draining: bool,
    /// Closing must linger (half-close, read and drop until EOF) because
    /// the client may still be sending: an error reply, an unread request
    /// body, pipelined bytes. Otherwise the socket closes once flushed, as
    /// nginx's `lingering_close on` does.
    linger: bool,
    /// Bytes of a next request were seen while this one is served.
    pipelined: bool,
}

impl Session {
    /// A session for an accepted client, registered for READABLE.
    pub(crate) fn new(
        key: usize,
        generation: u32,
        mut stream: TcpStream,
        client: SocketAddr,
        sh: &mut Shared,
    ) -> std::io::Result<Self> {
        let _ = stream.set_nodelay(true);
        // A fresh socket is writable; the flag drops at the first WouldBlock.
        let mut io = Io {
            writable: true,
            ..Io::default()
        };
        io.set_interest(
            &mut stream,
            &sh.registry,
            token::session(key, generation),
            Some(Interest::READABLE),
        )?;
        let mut s = Session {
            key,
            generation,
            dirty: false,
            armed: None,
            stream,
            client,
            io,
            phase: Phase::Head,
            keep_alive: true,
            read_eof: false,
            inbuf: None,
            scanner: HeadScanner::new(),
            out: None,
            exchange: None,
            own_reply: None,
            requests: 0,
            accepted_at: sh.now,
            idle_since: sh.now,
            head_started: None,
            down_write_at: sh.now,
            idle_counted: false,
            draining: false,
            linger: false,
            pipelined: false,
        };
        s.set_idle(true, &sh.stats);
        Ok(s)
    }

    /// The client socket's readiness (the loop records events here).
    pub(crate) fn io_mut(&mut self) -> &mut Io {
        &mut self.io
    }

    /// The session ended; the loop frees it with `close`.
    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Moves everything that can move now. Returns true if the session
    /// stopped only because of its round limit (drive it again soon).
    pub(crate) fn drive(&mut self, sh: &mut Shared) -> bool {
        let mut more = false;
        for round in 0..MAX_ROUNDS {
            if self.phase == Phase::Closed {
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
        if self.phase != Phase::Closed
            && let Err(e) = self.update_interest(sh)
        {
            debug!("client {}: interest update failed: {e}", self.client);
            self.phase = Phase::Closed;
        }
        more
    }

    /// A graceful drain began: no further request on this connection. A
    /// busy one closes after its response (which says `Connection: close`
    /// if its head has not gone out yet). An idle keep-alive one is read
    /// once more (a request already sent is served) and then closed. A new
    /// connection still waiting for its first request gets it served,
    /// bounded by the request head timeout: it came from the accept queue.
    pub(crate) fn begin_drain(&mut self) {
        self.keep_alive = false;
        self.draining = true;
        self.io.readable = true;
    }

    /// The loop's timer for this session fired at `sh.now`.
    pub(crate) fn on_timer(&mut self, sh: &mut Shared) {
        let Some((at, which)) = self.deadline(sh) else {
            return;
        };
        if at > sh.now {
            return;
        }
        let stats = sh.stats.clone();
        match which {
            Timeout::KeepAlive => {
                Stats::add(&stats.timeouts_keepalive, 1);
                debug!("client {}: keep-alive timeout", self.client);
                self.phase = Phase::Closed;
            }
            Timeout::Linger => self.phase = Phase::Closed,
            Timeout::Head => {
                Stats::add(&stats.timeouts_head, 1);
                if self.head_bytes_seen() {
                    self.fail(
                        ProxyError::downstream(ErrorKind::Timeout(Timeout::Head)),
                        sh,
                    );
                } else {
                    debug!("client {}: no request head in time", self.client);
                    self.phase = Phase::Closed;
                }
            }
            Timeout::Connect => {
                Stats::add(&stats.timeouts_connect, 1);
                self.fail(ProxyError::upstream(ErrorKind::Timeout(which)), sh);
            }
            Timeout::UpstreamRead | Timeout::UpstreamWrite => {
                Stats::add(&stats.timeouts_gap, 1);
                self.fail(ProxyError::upstream(ErrorKind::Timeout(which)), sh);
            }
            Timeout::ClientBody | Timeout::ClientSend => {
                Stats::add(&stats.timeouts_gap, 1);
                self.fail(ProxyError::downstream(ErrorKind::Timeout(which)), sh);
            }
        }
        self.drive(sh);
    }

    /// The earliest deadline that applies now and what it guards.
    pub(crate) fn deadline(&self, sh: &Shared) -> Option<(Instant, Timeout)> {
        let cfg = &sh.cfg;
        match self.phase {
            Phase::Closed => None,
            Phase::Closing { linger_until } => {
                let flush = self.out.as_ref().filter(|b| !b.is_empty()).map(|_| {
                    (
                        self.down_write_at + cfg.client_send_timeout,
                        Timeout::ClientSend,
                    )
                });
                flush.or(linger_until.map(|at| (at, Timeout::Linger)))
            }
            Phase::Head => {
                if self.head_bytes_seen() {
                    let start = self.head_started.unwrap_or(self.idle_since);
                    Some((start + cfg.request_head_timeout, Timeout::Head))
                } else if self.requests == 0 {
                    if cfg.request_head_timeout <= cfg.keepalive_timeout {
                        Some((self.accepted_at + cfg.request_head_timeout, Timeout::Head))
                    } else {
                        Some((self.accepted_at + cfg.keepalive_timeout, Timeout::KeepAlive))
                    }
                } else {
                    Some((self.idle_since + cfg.keepalive_timeout, Timeout::KeepAlive))
                }
            }
            Phase::Busy => {
                let mut best: Option<(Instant, Timeout)> = None;
                let mut consider = |at: Instant, t: Timeout| {
                    if best.is_none_or(|(b, _)| at < b) {
                        best = Some((at, t));
                    }
                };
                if self.out.as_ref().is_some_and(|b| !b.is_empty()) {
                    consider(
                        self.down_write_at + cfg.client_send_timeout,
                        Timeout::ClientSend,
                    );
                }
                let Some(ex) = self.exchange.as_ref() else {
                    return best;
                };
                let up = ex.upstream.and_then(|k| sh.ups_get(k));
                if let Some((connecting, started)) = up {
                    if connecting {
                        consider(started + cfg.upstream_connect_timeout, Timeout::Connect);
                        return best;
                    }
                    let out_full = self.out.as_ref().is_some_and(|b| b.is_paused());
                    if !ex.response_done() && !out_full {
                        consider(
                            ex.up_read_at + cfg.upstream_read_timeout,
                            Timeout::UpstreamRead,
                        );
                    }
                    if ex.to_upstream.as_ref().is_some_and(|b| !b.is_empty()) {
                        consider(
                            ex.up_write_at + cfg.upstream_write_timeout,
                            Timeout::UpstreamWrite,
                        );
                    }
                }
                let wants_body =
                    !ex.request_taken() && ex.to_upstream.as_ref().is_none_or(|b| !b.is_paused());
                if wants_body && !ex.tunnel {
                    consider(
                        ex.down_read_at + cfg.client_body_timeout,
                        Timeout::ClientBody,
                    );
                }
                best
            }
        }
    }

    /// Frees everything the session holds (the loop removed it).
    pub(crate) fn close(mut self, sh: &mut Shared) {
        if let Some(mut ex) = self.exchange.take() {
            if let Some(k) = ex.upstream.take() {
                sh.ups.close(k, &sh.registry);
            }
            self.release_exchange_buffers(&mut ex, sh);
        }
        self.release(sh, true);
        self.set_idle(false, &sh.stats);
        // Dropping the socket closes it, and closing removes it from the
        // epoll set: no `epoll_ctl` per connection (stale events of this
        // batch are dropped by the token's generation).
        Stats::sub(&sh.stats.downstream_active, 1);
    }

    // ---- one round ----

    fn step(&mut self, sh: &mut Shared) -> Result<bool> {
        let mut progress = self.write_client(sh)?;
        progress |= self.write_upstream(sh)?;
        progress |= self.read_upstream(sh)?;
        progress |= self.read_client(sh)?;
        progress |= match self.phase {
            Phase::Head => self.try_start_request(sh)?,
            Phase::Busy => self.advance_exchange(sh)?,
            Phase::Closing { .. } => self.advance_closing(sh),
            Phase::Closed => false,
        };
        Ok(progress)
    }

    fn write_client(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(out) = self.out.as_mut() else {
            return Ok(false);
        };
        let before = out.is_paused();
        let n = write_from(&mut self.stream, &mut self.io, out)
            .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
        if n == 0 {
            return Ok(false);
        }
        if before && !out.is_paused() {
            Stats::add(&sh.stats.read_resumes, 1);
        }
        Stats::add(&sh.stats.bytes_to_downstream, n as u64);
        Stats::sub(&sh.stats.buffered_bytes, n as u64);
        self.down_write_at = sh.now;
        Ok(true)
    }

    fn write_upstream(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(false);
        };
        let Some(key) = ex.upstream else {
            return Ok(false);
        };
        let Some(up) = sh.ups.get_mut(key) else {
            return Ok(false);
        };
        if up.connecting {
            if !up.io.writable {
                return Ok(false);
            }
            if let Ok(Some(e)) | Err(e) = up.stream.take_error() {
                return Err(ProxyError::upstream(ErrorKind::ConnectFailed(e.kind())));
            }
            match up.stream.peer_addr() {
                Ok(_) => {
                    up.connecting = false;
                    up.local_port = up.stream.local_addr().map(|a| a.port()).unwrap_or(0);
                    ex.up_port = up.local_port;
                    ex.up_read_at = sh.now;
                    ex.up_write_at = sh.now;
                    debug!(
                        "upstream {} connected, port {}",
                        ex.peer.addr, up.local_port
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
                    up.io.writable = false;
                    return Ok(false);
                }
                Err(e) => return Err(ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))),
            }
        }
        let Some(buf) = ex
            .to_upstream
            .as_mut()
            .filter(|_| ex.write_failed.is_none())
        else {
            return Ok(false);
        };
        let before = buf.is_paused();
        let n = match write_from(&mut up.stream, &mut up.io, buf) {
            Ok(n) => n,
            Err(e) => {
                if ex.resp_head_sent {
                    // The upstream stopped reading after it began to
                    // answer: finish the response, drop the rest.
                    ex.req_abandoned = true;
                    self.keep_alive = false;
                    let pending = buf.pending() as u64;
                    buf.clear();
                    Stats::sub(&sh.stats.buffered_bytes, pending);
                    return Ok(true);
                }
                // The upstream may have answered before it reset the
                // connection (an early 413): its answer is still in the
                // socket's receive queue. Stop writing and read it; the
                // error stands only if nothing is there.
                if ex.write_failed.is_none() {
                    ex.write_failed = Some(e.kind());
                    up.io.readable = true;
                    return Ok(true);
                }
                return Err(ProxyError::upstream(ErrorKind::Io(e.kind())));
            }
        };
        if n == 0 {
            if ex.tunnel && ex.req_body.is_done() && buf.is_empty() && !ex.up_write_shut {
                ex.up_write_shut = true;
                let _ = up.stream.shutdown(Shutdown::Write);
                return Ok(true);
            }
            return Ok(false);
        }
        if before && !buf.is_paused() {
            Stats::add(&sh.stats.read_resumes, 1);
        }
        ex.up_written += n as u64;
        ex.up_write_at = sh.now;
        Stats::add(&sh.stats.bytes_to_upstream, n as u64);
        Stats::sub(&sh.stats.buffered_bytes, n as u64);
        Ok(true)
    }

    fn read_upstream(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(false);
        };
        let Some(key) = ex.upstream else {
            return Ok(false);
        };
        let Some(up) = sh.ups.get_mut(key) else {
            return Ok(false);
        };
        if up.connecting || !up.io.readable {
            return Ok(false);
        }
        match &mut ex.resp {
            Resp::AwaitHead => {
                let buf = ex
                    .upin
                    .get_or_insert_with(|| head_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
                if buf.room() == 0 {
                    return Err(ProxyError::upstream(ErrorKind::Parse(
                        ParseError::HeadTooLarge,
                    )));
                }
                let r = read_into(&mut up.stream, &mut up.io, buf, READ_CHUNK)
                    .map_err(|e| ProxyError::upstream(ErrorKind::Io(e.kind())))?;
                match (r, ex.write_failed) {
                    (Read1::Idle | Read1::Eof, Some(kind)) => {
                        Err(ProxyError::upstream(ErrorKind::Io(kind)))
                    }
                    (Read1::Idle, None) => Ok(false),
                    (Read1::Eof, None) => Err(ProxyError::upstream(ErrorKind::Closed)),
                    (Read1::Data(n), _) => {
                        Stats::add(&sh.stats.bytes_from_upstream, n as u64);
                        ex.up_read_at = sh.now;
                        Ok(true)
                    }
                }
            }
            Resp::Body(decoder) => {
                let out = self
                    .out
                    .get_or_insert_with(|| body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
                let max = clamp(decoder.remaining_hint());
                let was_paused = out.is_paused();
                let r = read_into(&mut up.stream, &mut up.io, out, max)
                    .map_err(|e| ProxyError::upstream(ErrorKind::Io(e.kind())))?;
                match r {
                    Read1::Idle => {
                        if !was_paused && out.is_paused() {
                            Stats::add(&sh.stats.read_pauses, 1);
                        }
                        Ok(false)
                    }
                    Read1::Eof => {
                        decoder
                            .finish_on_eof()
                            .map_err(|_| ProxyError::upstream(ErrorKind::Closed))?;
                        ex.resp = Resp::Done;
                        ex.resp_keep_alive = false;
                        Ok(true)
                    }
                    Read1::Data(n) => {
                        Stats::add(&sh.stats.bytes_from_upstream, n as u64);
                        ex.up_read_at = sh.now;
                        let start = out.pending().saturating_sub(n);
                        let fresh = out.as_slice().get(start..).unwrap_or(&[]);
                        let ranges = &mut ex.ranges;
                        ranges.clear();
                        let body = if ex.dechunk {
                            decoder.scan_data(fresh, |r| ranges.push(r))
                        } else {
                            decoder.scan(fresh)
                        }
                        .map_err(|e| ProxyError::upstream(ErrorKind::Parse(e)))?;
                        if body < n {
                            ex.extra_bytes = true;
                        }
                        let kept = if ex.dechunk {
                            // Keep only chunk data: move it to the front of
                            // the bytes just read, drop the rest.
                            let tail = out.tail_mut(n);
                            let mut w = 0;
                            for r in ranges.iter() {
                                let len = r.len();
                                if r.end <= tail.len() {
                                    tail.copy_within(r.clone(), w);
                                    w += len;
                                }
                            }
                            w
                        } else {
                            body
                        };
                        out.unfill(n - kept);
                        ex.resp_bytes += kept as u64;
                        sh.stats.buffered_add(kept as u64);
                        if out.is_paused() {
                            Stats::add(&sh.stats.read_pauses, 1);
                        }
                        if decoder.is_done() {
                            ex.resp = Resp::Done;
                        }
                        Ok(true)
                    }
                }
            }
            // The upstream is released in the same round its response
            // ends (`release_upstream`): nothing is read after that.
            Resp::Done => Ok(false),
        }
    }

    fn read_client(&mut self, sh: &mut Shared) -> Result<bool> {
        let waiting = self.phase == Phase::Busy
            && self.exchange.as_ref().is_some_and(|ex| ex.request_taken());
        if waiting {
            return self.probe_client();
        }
        if self.read_eof || !self.io.readable {
            return Ok(false);
        }
        match self.phase {
            Phase::Closed => Ok(false),
            Phase::Closing { .. } => self.discard_client(),
            Phase::Head => {
                let buf = self
                    .inbuf
                    .get_or_insert_with(|| head_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
                let r = read_into(&mut self.stream, &mut self.io, buf, READ_CHUNK)
                    .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
                match r {
                    Read1::Idle => Ok(false),
                    Read1::Eof => {
                        self.read_eof = true;
                        Ok(true)
                    }
                    Read1::Data(n) => {
                        Stats::add(&sh.stats.bytes_from_downstream, n as u64);
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
            Phase::Busy => {
                let Some(ex) = self.exchange.as_deref_mut() else {
                    return Ok(false);
                };
                if ex.request_taken() {
                    return self.probe_client();
                }
                if self.inbuf.as_ref().is_some_and(|b| !b.is_empty()) {
                    return Ok(false);
                }
                let Some(buf) = ex.to_upstream.as_mut() else {
                    return Ok(false);
                };
                let max = clamp(ex.req_body.remaining_hint());
                let was_paused = buf.is_paused();
                let r = read_into(&mut self.stream, &mut self.io, buf, max)
                    .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
                match r {
                    Read1::Idle => {
                        if !was_paused && buf.is_paused() {
                            Stats::add(&sh.stats.read_pauses, 1);
                        }
                        Ok(false)
                    }
                    Read1::Eof => {
                        self.read_eof = true;
                        ex.req_body
                            .finish_on_eof()
                            .map_err(|_| ProxyError::downstream(ErrorKind::Closed))?;
                        Ok(true)
                    }
                    Read1::Data(n) => {
                        Stats::add(&sh.stats.bytes_from_downstream, n as u64);
                        ex.down_read_at = sh.now;
                        if buf.pending() == n {
                            ex.up_write_at = sh.now;
                        }
                        let start = buf.pending().saturating_sub(n);
                        let fresh = buf.as_slice().get(start..).unwrap_or(&[]);
                        let body = ex
                            .req_body
                            .scan(fresh)
                            .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
                        if body < n {
                            // Bytes past the body: the next request (pipelining).
                            let extra = fresh.get(body..).unwrap_or(&[]).to_vec();
                            buf.unfill(n - body);
                            let inbuf = self.inbuf.get_or_insert_with(|| {
                                head_buffer(&mut sh.bufs, &sh.cfg, &sh.stats)
                            });
                            inbuf.extend_from_slice(&extra);
                        }
                        ex.req_body_bytes += body as u64;
                        sh.stats.buffered_add(body as u64);
                        if buf.is_paused() {
                            Stats::add(&sh.stats.read_pauses, 1);
                        }
                        Ok(true)
                    }
                }
            }
        }
    }

    /// The client's socket reported something while its request waits for
    /// (or receives) its response and nothing is to be read: look without
    /// consuming. A reset or error means the client is gone: the exchange
    /// ends at once (its upstream is closed), as nginx does with a 499. A
    /// FIN is a half-close: the response is still delivered (HAProxy's
    /// default, no `abortonclose`). Pipelined bytes wait for their turn.
    fn probe_client(&mut self) -> Result<bool> {
        // Only when an event came since the last look: no syscall per round.
        if !std::mem::take(&mut self.io.fresh) {
            return Ok(false);
        }
        // A reset or error is pending whatever came before it (a FIN, or
        // pipelined bytes that a peek would show first).
        match self.stream.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => return Err(ProxyError::downstream(ErrorKind::Io(e.kind()))),
        }
        if self.pipelined || self.read_eof {
            return Ok(false);
        }
        let mut byte = [0u8; 1];
        match self.stream.peek(&mut byte) {
            Ok(0) => {
                self.io.readable = false;
                self.read_eof = true;
                Ok(true)
            }
            Ok(_) => {
                // The next request is there: `readable` stays set so it is
                // read once this exchange ends; no more peeks until then.
                self.pipelined = true;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.io.readable = false;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(ProxyError::downstream(ErrorKind::Io(e.kind()))),
        }
    }

    /// Reads and drops client bytes while closing (lingering close).
    fn discard_client(&mut self) -> Result<bool> {
        let mut scratch = [0u8; 4096];
        match self.stream.read(&mut scratch) {
            Ok(0) => {
                self.read_eof = true;
                Ok(true)
            }
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.io.readable = false;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(true),
            Err(_) => {
                self.read_eof = true;
                Ok(true)
            }
        }
    }

    // ---- request start ----

    fn try_start_request(&mut self, sh: &mut Shared) -> Result<bool> {
        if self.out.as_ref().is_some_and(|b| !b.is_empty()) {
            return Ok(false);
        }
        let Some(buf) = self.inbuf.as_ref().filter(|b| !b.is_empty()) else {
            if self.read_eof || (self.draining && self.requests > 0) {
                self.phase = Phase::Closed;
                return Ok(true);
            }
            return Ok(false);
        };
        let Some(len) = self.scanner.find_end(buf.as_slice()) else {
            if buf.room() == 0 {
                let no_line_end = !buf.as_slice().contains(&b'\n');
                return Err(ProxyError::downstream(ErrorKind::Parse(if no_line_end {
                    ParseError::RequestLineTooLong
                } else {
                    ParseError::HeadTooLarge
                })));
            }
            if self.read_eof {
                debug!("client {}: closed inside a request head", self.client);
                self.phase = Phase::Closed;
                return Ok(true);
            }
            return Ok(false);
        };
        let mut ex = sh.take_exchange();
        let parsed = ex
            .req
            .parse_into(
                buf.as_slice().get(..len).unwrap_or(&[]),
                sh.cfg.max_header_count,
            )
            .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
        let Some(used) = parsed else {
            return Err(ProxyError::downstream(ErrorKind::Parse(
                ParseError::Malformed("incomplete request head"),
            )));
        };
        if let Some(b) = self.inbuf.as_mut() {
            b.consume(used);
        }
        self.scanner.reset();
        self.requests += 1;
        self.head_started = None;
        // The event that brought this head is used up: only a later one
        // makes a waiting client worth a look (`probe_client`).
        self.io.fresh = false;
        Stats::add(&sh.stats.requests, 1);
        self.phase = Phase::Busy;
        self.start_request(ex, sh)?;
        self.release(sh, false);
        Ok(true)
    }

    /// Runs the hooks on the request head parsed into `ex.req` and starts
    /// its exchange (or the proxy's own reply).
    fn start_request(&mut self, mut ex: Box<Exchange>, sh: &mut Shared) -> Result<()> {
        let req = &mut ex.req;
        let framing = req
            .body_kind()
            .and_then(|k| check_host(req).map(|()| k))
            .and_then(|k| normalize_absolute_form(req).map(|()| k));
        let framing = match framing {
            Ok(f) => f,
            Err(e) => {
                self.own_reply = Some(OwnReply::new(req, 0, sh.now));
                sh.recycle_exchange(ex);
                return Err(ProxyError::downstream(ErrorKind::Parse(e)));
            }
        };
        if req.is_method("CONNECT") {
            // A reverse proxy opens no tunnels to arbitrary hosts.
            self.own_reply = Some(OwnReply::new(req, 0, sh.now));
            sh.recycle_exchange(ex);
            return Err(ProxyError::downstream(ErrorKind::NotImplemented));
        }
        if !request_keep_alive(req.version, &req.headers) {
            self.keep_alive = false;
        }
        let upgrade = is_upgrade_request(&req.headers);
        remove_hop_by_hop(&mut req.headers, upgrade);
        add_forwarding_fields(
            &mut req.headers,
            self.client.ip(),
            sh.cfg.add_via,
            sh.cfg.add_x_forwarded_for,
            sh.cfg.add_x_forwarded_proto,
        );
        if let Some(reply) = sh.filter.request_filter(req) {
            Stats::add(&sh.stats.filter_replies, 1);
            if !matches!(framing, BodyKind::Empty | BodyKind::Length(0)) {
                // Its body is never read: it must not be parsed as a request.
                self.keep_alive = false;
                self.linger = true;
            }
            let mut own = OwnReply::new(req, reply.status, sh.now);
            let head_only = req.is_method("HEAD");
            sh.recycle_exchange(ex);
            own.bytes =
                self.queue_reply(sh, reply.status, &reply.headers, &reply.body, head_only) as u64;
            self.own_reply = Some(own);
            return Ok(());
        }
        let peer = sh.filter.upstream_peer(req);
        if !req.headers.contains("host") {
            // HTTP/1.0 without Host: HTTP/1.1 upstream needs one (RFC 9112 §3.2).
            req.headers.append("Host", peer.addr.to_string().as_bytes());
        }
        ex.start(peer, BodyDecoder::new(framing), upgrade, sh.now);
        let mut to_up = body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats);
        if to_up.extend_from_slice(&ex.head_bytes) == Crossing::High {
            Stats::add(&sh.stats.read_pauses, 1);
        }
        sh.stats.buffered_add(ex.head_bytes.len() as u64);
        ex.to_upstream = Some(to_up);
        self.exchange = Some(ex);
        self.attach_upstream(sh, false)
    }

    /// Gives the exchange an upstream connection: pooled or new, or
    /// always new if `fresh` (a retry goes on a new connection, DESIGN §7).
    fn attach_upstream(&mut self, sh: &mut Shared, fresh: bool) -> Result<()> {
        let owner = (self.key, self.generation);
        let generation = sh.next_gen();
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(());
        };
        let (key, reused) = sh
            .ups
            .acquire(
                ex.peer,
                owner,
                generation,
                fresh,
                &sh.registry,
                &sh.stats,
                sh.now,
            )
            .map_err(|e| {
                // The OS's words (e.g. "Too many open files"), not the kind.
                info!("upstream {}: connect failed: {e}", ex.peer.addr);
                ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))
            })?;
        ex.upstream = Some(key);
        ex.reused = reused;
        ex.up_read_at = sh.now;
        ex.up_write_at = sh.now;
        if let Some(up) = sh.ups.get_mut(key) {
            ex.up_port = up.local_port;
            // A reused socket is writable now; a new one reports it.
            if reused {
                up.io.writable = true;
            }
        }
        Ok(())
    }

    // ---- exchange progress ----

    fn advance_exchange(&mut self, sh: &mut Shared) -> Result<bool> {
        if self.exchange.is_none() {
            // A reply the proxy wrote itself: done when flushed.
            if self.out.as_ref().is_none_or(|b| b.is_empty()) {
                self.finish_request(sh);
                return Ok(true);
            }
            return Ok(false);
        }
        let mut progress = self.feed_request_body(sh)?;
        progress |= self.parse_response_head(sh)?;
        progress |= self.release_upstream(sh);
        let finished = self
            .exchange
            .as_ref()
            .is_some_and(|ex| ex.upstream.is_none() && ex.response_done())
            && self.out.as_ref().is_none_or(|b| b.is_empty());
        if finished {
            self.finish_request(sh);
            progress = true;
        }
        Ok(progress)
    }

    /// Moves request body bytes that arrived with the head (in `inbuf`)
    /// to `to_upstream`, as far as the body goes and the watermark allows.
    fn feed_request_body(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(false);
        };
        let Some(inbuf) = self.inbuf.as_mut().filter(|b| !b.is_empty()) else {
            return Ok(false);
        };
        if ex.request_taken() {
            return Ok(false);
        }
        let Some(to_up) = ex.to_upstream.as_mut() else {
            return Ok(false);
        };
        let room = to_up.room().min(clamp(ex.req_body.remaining_hint()));
        let avail = inbuf
            .as_slice()
            .get(..room.min(inbuf.pending()))
            .unwrap_or(&[]);
        if avail.is_empty() {
            return Ok(false);
        }
        let body = ex
            .req_body
            .scan(avail)
            .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
        let bytes = avail.get(..body).unwrap_or(&[]);
        if to_up.is_empty() {
            ex.up_write_at = sh.now;
        }
        if to_up.extend_from_slice(bytes) == Crossing::High {
            Stats::add(&sh.stats.read_pauses, 1);
        }
        sh.stats.buffered_add(body as u64);
        ex.req_body_bytes += body as u64;
        inbuf.consume(body);
        Ok(body > 0 || ex.req_body.is_done())
    }

    fn parse_response_head(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(false);
        };
        if !matches!(ex.resp, Resp::AwaitHead) {
            return Ok(false);
        }
        let Some(upin) = ex.upin.as_mut().filter(|b| !b.is_empty()) else {
            return Ok(false);
        };
        let Some(len) = ex.resp_scanner.find_end(upin.as_slice()) else {
            return Ok(false);
        };
        // Parsed into the exchange's own head and encoded into its scratch:
        // both keep their storage from one exchange to the next.
        let mut head = std::mem::take(&mut ex.resp_head);
        let parsed = head
            .parse_into(
                upin.as_slice().get(..len).unwrap_or(&[]),
                sh.cfg.max_header_count,
            )
            .map_err(|e| ProxyError::upstream(ErrorKind::Parse(e)))?;
        let Some(used) = parsed else {
            return Err(ProxyError::upstream(ErrorKind::Parse(
                ParseError::Malformed("incomplete response head"),
            )));
        };
        upin.consume(used);
        ex.resp_scanner.reset();
        let out = self
            .out
            .get_or_insert_with(|| body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
        let mut encoded = std::mem::take(&mut ex.scratch);
        encoded.clear();
        if (100..200).contains(&head.status) && head.status != 101 {
            ex.interim_count += 1;
            if ex.interim_count > MAX_INTERIM {
                return Err(ProxyError::upstream(ErrorKind::Parse(
                    ParseError::Malformed("too many 1xx responses"),
                )));
            }
            // Interim response: forward it (not to HTTP/1.0 clients,
            // RFC 9110 §15.2) and keep waiting for the final one.
            remove_hop_by_hop(&mut head.headers, false);
            sh.filter.response_filter(&ex.req, &mut head);
            if ex.req.version >= 1 {
                head.encode(&mut encoded);
                ex.interim_sent = true;
            }
        } else {
            let framing = if head.status == 101 {
                if !ex.upgrade || !ex.req_body.is_done() {
                    return Err(ProxyError::upstream(ErrorKind::UnexpectedUpgrade));
                }
                ex.tunnel = true;
                ex.req_body = BodyDecoder::new(BodyKind::UntilClose);
                if ex.to_upstream.is_none() {
                    ex.to_upstream = Some(body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
                }
                self.keep_alive = false;
                BodyKind::UntilClose
            } else {
                head.body_kind(&ex.req.method)
                    .map_err(|e| ProxyError::upstream(ErrorKind::Parse(e)))?
            };
            ex.resp_keep_alive =
                response_keep_alive(head.version, &head.headers) && framing != BodyKind::UntilClose;
            if framing == BodyKind::UntilClose && !ex.tunnel {
                self.keep_alive = false;
            }
            if ex.write_failed.is_some() {
                // It answered, then stopped reading: the rest of the request
                // is dropped and the client connection closes after this.
                ex.req_abandoned = true;
                self.keep_alive = false;
            }
            if ex.req.version == 0 && framing == BodyKind::Chunked && !only_chunked(&head.headers) {
                // A coding besides chunked (gzip, chunked) cannot be undone
                // here and cannot be announced to HTTP/1.0 (as nginx: 502).
                return Err(ProxyError::upstream(ErrorKind::Parse(ParseError::Framing(
                    "transfer coding besides chunked for an HTTP/1.0 client",
                ))));
            }
            if ex.req.version == 0 || head.status == 204 {
                // RFC 9112 §6.1: no Transfer-Encoding to an HTTP/1.0
                // request, nor in a 204 (RFC 9110 §... as for 1xx); the
                // body (if any) is de-chunked below.
                if framing != BodyKind::Chunked {
                    head.headers.remove_all("transfer-encoding");
                    if ex.req.version == 0 {
                        head.headers.remove_all("trailer");
                    }
                }
            }
            if !(ex.req_abandoned || ex.req_body.is_done() || ex.resp_keep_alive) {
                // An early answer from an upstream that will close: the
                // rest of the request body cannot follow, so this client
                // connection closes after it too, and says so.
                self.keep_alive = false;
            }
            if framing == BodyKind::Chunked && ex.req.version == 0 {
                // An HTTP/1.0 client knows no chunked coding (RFC 9112
                // §7.1): it gets the chunk data, delimited by the close.
                ex.dechunk = true;
                self.keep_alive = false;
                head.headers.remove_all("transfer-encoding");
                head.headers.remove_all("trailer");
            }
            remove_hop_by_hop(&mut head.headers, ex.tunnel);
            sh.filter.response_filter(&ex.req, &mut head);
            if !ex.tunnel {
                if !self.keep_alive {
                    head.headers.append("Connection", b"close");
                } else if ex.req.version == 0 {
                    head.headers.append("Connection", b"keep-alive");
                }
            }
            head.encode(&mut encoded);
            ex.status = head.status;
            ex.resp_head_sent = true;
            let decoder = BodyDecoder::new(framing);
            ex.resp = if decoder.is_done() {
                Resp::Done
            } else {
                Resp::Body(decoder)
            };
        }
        if out.extend_from_slice(&encoded) == Crossing::High {
            Stats::add(&sh.stats.read_pauses, 1);
        }
        if out.pending() == encoded.len() {
            self.down_write_at = sh.now;
        }
        ex.resp_bytes += encoded.len() as u64;
        sh.stats.buffered_add(encoded.len() as u64);
        ex.resp_head = head;
        ex.scratch = encoded;
        // Bytes after the head are body bytes (or the next head).
        if let Resp::Body(decoder) = &mut ex.resp {
            // All of it moves, past the watermark if need be: it is at
            // most one head's worth, and `upin` is released below.
            let avail = upin.as_slice();
            let ranges = &mut ex.ranges;
            ranges.clear();
            let body = if ex.dechunk {
                decoder.scan_data(avail, |r| ranges.push(r))
            } else {
                decoder.scan(avail)
            }
            .map_err(|e| ProxyError::upstream(ErrorKind::Parse(e)))?;
            let mut moved = 0;
            let mut crossed = false;
            if ex.dechunk {
                for r in ranges.iter() {
                    let part = avail.get(r.clone()).unwrap_or(&[]);
                    crossed |= out.extend_from_slice(part) == Crossing::High;
                    moved += part.len();
                }
            } else {
                let part = avail.get(..body).unwrap_or(&[]);
                crossed = out.extend_from_slice(part) == Crossing::High;
                moved = part.len();
            }
            if crossed {
                Stats::add(&sh.stats.read_pauses, 1);
            }
            ex.resp_bytes += moved as u64;
            sh.stats.buffered_add(moved as u64);
            upin.consume(body);
            if decoder.is_done() {
                ex.resp = Resp::Done;
            }
        }
        if !matches!(ex.resp, Resp::AwaitHead) {
            if !upin.is_empty() {
                ex.extra_bytes = true;
            }
            if let Some(b) = ex.upin.take() {
                give_back(&mut sh.bufs, &sh.stats, b);
            }
        }
        Ok(true)
    }

    /// Parks or closes the upstream once its part is over: the response
    /// read whole and the request sent whole (or abandoned).
    fn release_upstream(&mut self, sh: &mut Shared) -> bool {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return false;
        };
        // The request buffer is not needed once everything went up.
        if ex.req_body.is_done()
            && ex.to_upstream.as_ref().is_some_and(|b| b.is_empty())
            && !ex.tunnel
            && let Some(b) = ex.to_upstream.take()
        {
            give_back(&mut sh.bufs, &sh.stats, b);
        }
        let Some(key) = ex.upstream else {
            return false;
        };
        if !ex.response_done() {
            return false;
        }
        ex.upstream = None;
        if ex.reusable() {
            sh.ups.park(key, &sh.registry, &sh.stats, sh.now);
        } else {
            // Request bytes not yet written are not needed any more: the
            // answer is complete. If the client has not sent its whole
            // body, the rest is never read, so its connection cannot carry
            // another request.
            if !ex.request_taken() {
                ex.req_abandoned = true;
                self.keep_alive = false;
            }
            if let Some(b) = ex.to_upstream.as_mut() {
                Stats::sub(&sh.stats.buffered_bytes, b.pending() as u64);
                b.clear();
            }
            sh.ups.close(key, &sh.registry);
        }
        true
    }

    fn finish_request(&mut self, sh: &mut Shared) {
        self.pipelined = false;
        if self.exchange.as_ref().is_some_and(|e| e.req_abandoned)
            || self.inbuf.as_ref().is_some_and(|b| !b.is_empty())
        {
            self.linger = true;
        }
        if let Some(mut ex) = self.exchange.take() {
            self.log_exchange(&ex, sh.now, None);
            if let Some(k) = ex.upstream.take() {
                sh.ups.close(k, &sh.registry);
            }
            self.release_exchange_buffers(&mut ex, sh);
            sh.recycle_exchange(ex);
        } else if let Some(r) = self.own_reply.take() {
            r.log(self.client, sh.now);
        }
        // After the client's FIN, requests it already sent (pipelined, in
        // `inbuf`) are still served; the connection closes once they are.
        let more = !self.read_eof || self.inbuf.as_ref().is_some_and(|b| !b.is_empty());
        if self.keep_alive && more {
            self.phase = Phase::Head;
            self.idle_since = sh.now;
            self.release(sh, false);
            if self.inbuf.is_none() {
                self.set_idle(true, &sh.stats);
            }
        } else {
            self.phase = Phase::Closing { linger_until: None };
        }
    }

    fn advance_closing(&mut self, sh: &mut Shared) -> bool {
        let Phase::Closing { linger_until } = self.phase else {
            return false;
        };
        if self.out.as_ref().is_some_and(|b| !b.is_empty()) {
            return false;
        }
        if self.read_eof || !self.linger {
            self.phase = Phase::Closed;
            return true;
        }
        if linger_until.is_none() {
            let _ = self.stream.shutdown(Shutdown::Write);
            self.phase = Phase::Closing {
                linger_until: Some(sh.now + LINGER),
            };
            self.release(sh, true);
            return true;
        }
        false
    }

    // ---- errors ----

    fn fail(&mut self, err: ProxyError, sh: &mut Shared) {
        if err.side == Side::Upstream && self.try_retry(&err, sh) {
            return;
        }
        let started = self.exchange.as_ref().is_some_and(|e| e.resp_head_sent);
        let answer = err.answer(started, self.head_bytes_seen());
        match (&err.side, &err.kind) {
            (Side::Downstream, ErrorKind::Io(_) | ErrorKind::Closed) => {
                debug!("client {}: {err}", self.client)
            }
            _ => info!("client {}: {err}", self.client),
        }
        self.keep_alive = false;
        self.linger = true;
        let client_gone = err.side == Side::Downstream
            && matches!(
                err.kind,
                ErrorKind::Io(_) | ErrorKind::Timeout(Timeout::ClientSend)
            )
            || self.phase == Phase::Closed;
        // The proxy's own answer, if any, is queued first so the access
        // line can count its bytes.
        let mut status = None;
        let mut reply_len = 0;
        match answer {
            _ if client_gone => {
                self.phase = Phase::Closed;
                if !started {
                    // The access log says the client left (nginx's 499).
                    status = Some(499);
                }
            }
            Answer::Status(code) => {
                count_status(&sh.stats, code);
                if let Some(out) = self.out.as_mut() {
                    Stats::sub(&sh.stats.buffered_bytes, out.pending() as u64);
                    out.clear();
                }
                let body = reason_body(code);
                reply_len = self.queue_reply(sh, code, &Headers::new(), body.as_bytes(), false);
                status = Some(code);
                self.phase = Phase::Closing { linger_until: None };
            }
            Answer::Close => {
                // Pending bytes are whole parts of the response; flush them,
                // then close: a chunked body never gets its last chunk.
                self.phase = Phase::Closing { linger_until: None };
            }
        }
        if let Some(mut ex) = self.exchange.take() {
            if let Some(k) = ex.upstream.take() {
                sh.ups.close(k, &sh.registry);
            }
            ex.resp_bytes += reply_len as u64;
            self.log_exchange(&ex, sh.now, status);
            self.release_exchange_buffers(&mut ex, sh);
            sh.recycle_exchange(ex);
        } else if let Some(mut r) = self.own_reply.take() {
            if let Some(code) = status {
                r.status = code;
                r.bytes = reply_len as u64;
            }
            r.log(self.client, sh.now);
        }
    }

    fn try_retry(&mut self, err: &ProxyError, sh: &mut Shared) -> bool {
        if matches!(err.kind, ErrorKind::Timeout(_)) {
            return false;
        }
        let Some(ex) = self.exchange.as_deref_mut() else {
            return false;
        };
        if !ex.may_retry(sh.cfg.max_retries) {
            return false;
        }
        if let Some(k) = ex.upstream.take() {
            sh.ups.close(k, &sh.registry);
        }
        ex.retries += 1;
        Stats::add(&sh.stats.retries, 1);
        info!(
            "retry {}: {} {} after {err} (reused={})",
            ex.retries, ex.req.method, ex.req.target, ex.reused
        );
        ex.peer = sh.filter.upstream_peer(&ex.req);
        if ex.to_upstream.is_none() {
            ex.to_upstream = Some(body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
        }
        let before = ex.to_upstream.as_ref().map_or(0, |b| b.pending());
        ex.rewind();
        let after = ex.to_upstream.as_ref().map_or(0, |b| b.pending());
        sh.stats.buffered_add(after.saturating_sub(before) as u64);
        match self.attach_upstream(sh, true) {
            Ok(()) => true,
            Err(e) => {
                debug!("retry connect failed: {e}");
                false
            }
        }
    }

    // ---- helpers ----

    /// Queues a response the proxy makes: status line, `fields`,
    /// `Content-Length`, `Connection: close` unless keep-alive, and `body`
    /// (left out for a HEAD request).
    fn queue_reply(
        &mut self,
        sh: &mut Shared,
        status: u16,
        fields: &Headers,
        body: &[u8],
        head_only: bool,
    ) -> usize {
        let mut head = ResponseHead::new(status);
        for (name, value) in fields.iter() {
            if !name.eq_ignore_ascii_case("content-length")
                && !name.eq_ignore_ascii_case("connection")
            {
                head.headers.append(name, value);
            }
        }
        head.headers
            .append("Content-Length", body.len().to_string().as_bytes());
        if !self.keep_alive {
            head.headers.append("Connection", b"close");
        }
        let mut bytes = Vec::with_capacity(128 + body.len());
        head.encode(&mut bytes);
        if !head_only {
            bytes.extend_from_slice(body);
        }
        let out = self
            .out
            .get_or_insert_with(|| body_buffer(&mut sh.bufs, &sh.cfg, &sh.stats));
        if out.is_empty() {
            self.down_write_at = sh.now;
        }
        if out.extend_from_slice(&bytes) == Crossing::High {
            Stats::add(&sh.stats.read_pauses, 1);
        }
        sh.stats.buffered_add(bytes.len() as u64);
        // Try at once: the socket is usually writable.
        self.io.writable = true;
        bytes.len()
    }

    fn head_bytes_seen(&self) -> bool {
        self.phase == Phase::Head && self.inbuf.as_ref().is_some_and(|b| !b.is_empty())
    }

    /// Returns empty buffers to the free list (all if `all`: the pending
    /// bytes of a closing connection no longer matter).
    fn release(&mut self, sh: &mut Shared, all: bool) {
        if all && let Some(out) = self.out.as_ref() {
            Stats::sub(&sh.stats.buffered_bytes, out.pending() as u64);
        }
        for slot in [&mut self.inbuf, &mut self.out] {
            if slot.as_ref().is_some_and(|b| all || b.is_empty())
                && let Some(b) = slot.take()
            {
                give_back(&mut sh.bufs, &sh.stats, b);
            }
        }
    }

    fn release_exchange_buffers(&mut self, ex: &mut Exchange, sh: &mut Shared) {
        if let Some(b) = ex.to_upstream.as_ref() {
            Stats::sub(&sh.stats.buffered_bytes, b.pending() as u64);
        }
        for b in [ex.to_upstream.take(), ex.upin.take()]
            .into_iter()
            .flatten()
        {
            give_back(&mut sh.bufs, &sh.stats, b);
        }
        if let Some(out) = self.out.as_ref() {
            Stats::sub(&sh.stats.buffered_bytes, out.pending() as u64);
        }
    }

    fn set_idle(&mut self, idle: bool, stats: &Stats) {
        if idle != self.idle_counted {
            self.idle_counted = idle;
            if idle {
                Stats::add(&stats.downstream_idle, 1);
            } else {
                Stats::sub(&stats.downstream_idle, 1);
            }
        }
    }

    /// Registers what each socket should be watched for now.
    fn update_interest(&mut self, sh: &mut Shared) -> std::io::Result<()> {
        let want_write = self.out.as_ref().is_some_and(|b| !b.is_empty());
        let want_read = match self.phase {
            Phase::Head => !self.read_eof && self.inbuf.as_ref().is_none_or(|b| b.room() > 0),
            // READABLE stays registered (no epoll_ctl per request), even
            // after the client's FIN (a later reset must still be seen); it
            // goes only while the request body's sink is above its high
            // watermark (DESIGN.md §4).
            Phase::Busy => !self.exchange.as_ref().is_some_and(|ex| {
                !ex.request_taken() && ex.to_upstream.as_ref().is_some_and(|b| b.is_paused())
            }),
            Phase::Closing { .. } => !self.read_eof,
            Phase::Closed => false,
        };
        let want = interest(want_read, want_write);
        let tok = token::session(self.key, self.generation);
        self.io
            .set_interest(&mut self.stream, &sh.registry, tok, want)?;

        let Some(ex) = self.exchange.as_deref() else {
            return Ok(());
        };
        let Some(key) = ex.upstream else {
            return Ok(());
        };
        let Some(up) = sh.ups.get_mut(key) else {
            return Ok(());
        };
        let (r, w) = if up.connecting {
            (true, true)
        } else {
            let r = match &ex.resp {
                Resp::AwaitHead => ex.upin.as_ref().is_none_or(|b| b.room() > 0),
                Resp::Body(_) => self.out.as_ref().is_none_or(|b| b.room() > 0),
                Resp::Done => true,
            };
            (r, ex.to_upstream.as_ref().is_some_and(|b| !b.is_empty()))
        };
        let tok = token::upstream(key, up.generation);
        if up
            .io
            .set_interest(&mut up.stream, &sh.registry, tok, interest(r, w))
            .is_err()
        {
            return Err(std::io::ErrorKind::Other.into());
        }
        Ok(())
    }

    fn log_exchange(&self, ex: &Exchange, now: Instant, status: Option<u16>) {
        if !log::log_enabled!(log::Level::Info) {
            // Nothing is formatted (nor allocated) when nobody reads it.
            return;
        }
        let status = status.unwrap_or(ex.status);
        let upconn = if ex.up_port == 0 && ex.status == 0 {
            "none".to_string()
        } else {
            format!(
                "{}:{}",
                if ex.reused { "reused" } else { "new" },
                ex.up_port
            )
        };
        info!(
            "access client={} \"{} {} HTTP/1.{}\" status={} upstream={} upconn={} req_body={} resp_bytes={} ms={:.2}",
            self.client,
            ex.req.method,
            ex.req.target,
            ex.req.version,
            status,
            ex.peer.addr,
            upconn,
            ex.req_body_bytes,
            ex.resp_bytes,
            now.saturating_duration_since(ex.started).as_secs_f64() * 1000.0
        );
    }
}

impl OwnReply {
    fn new(req: &RequestHead, status: u16, now: Instant) -> Self {
        OwnReply {
            line: format!("{} {} HTTP/1.{}", req.method, req.target, req.version),
            status,
            bytes: 0,
            started: now,
        }
    }

    fn log(&self, client: SocketAddr, now: Instant) {
        info!(
            "access client={} \"{}\" status={} upstream=- upconn=none req_body=0 resp_bytes={} ms={:.2}",
            client,
            self.line,
            self.status,
            self.bytes,
            now.saturating_duration_since(self.started).as_secs_f64() * 1000.0
        );
    }
}

impl Shared {
    /// `(connecting, connect_started)` of upstream `key`.
    fn ups_get(&self, key: usize) -> Option<(bool, Instant)> {
        self.ups
            .peek(key)
            .map(|u| (u.connecting, u.connect_started))
    }
}

/// RFC 9112 §3.2: an HTTP/1.1 request must carry exactly one `Host`; no
/// request may carry several; its value must be a URI authority (host and
/// optional port, RFC 3986 §3.2), or empty. The request-target must have a
/// form the method allows (RFC 9112 §3.2.1-§3.2.4): origin form (`/...`),
/// absolute form (`http://` or `https://`), `*` only for OPTIONS, and the
/// authority form only for CONNECT (which then gets its 501).
fn check_host(req: &RequestHead) -> std::result::Result<(), ParseError> {
    let mut hosts = req.headers.get_all("host");
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(ParseError::Malformed("several Host fields"));
    }
    match first {
        None if req.version >= 1 => {
            return Err(ParseError::Malformed("HTTP/1.1 request without Host"));
        }
        Some(v) if !v.iter().all(|&b| is_authority_byte(b)) => {
            return Err(ParseError::Malformed("invalid Host"));
        }
        _ => {}
    }
    let t = req.target.as_bytes();
    let lower = |n: usize| t.get(..n).map(|p| p.to_ascii_lowercase());
    let ok = match t.first() {
        Some(b'/') => true,
        Some(b'*') => t.len() == 1 && req.is_method("OPTIONS"),
        Some(_) if req.is_method("CONNECT") => true,
        Some(_) => {
            lower(7).as_deref() == Some(b"http://") || lower(8).as_deref() == Some(b"https://")
        }
        None => false,
    };
    if !ok {
        return Err(ParseError::Malformed(
            "request-target form not allowed here",
        ));
    }
    Ok(())
}

/// A byte that may appear in a URI authority (RFC 3986 §3.2: unreserved,
/// pct-encoded, sub-delims, `:`, and `[` `]` for IP literals).
fn is_authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b)
}

/// A body buffer from the free list, with the configured watermarks
/// (counted in `buffers_in_use` until [`give_back`]).
fn body_buffer(bufs: &mut BufferPool, cfg: &Config, stats: &Stats) -> WatermarkBuffer {
    Stats::add(&stats.buffers_in_use, 1);
    WatermarkBuffer::new(bufs.get(), cfg.high_watermark, cfg.low_watermark)
}

/// A buffer for heads: reading stops at `max_head_size` bytes, and any
/// consumed byte makes room again.
fn head_buffer(bufs: &mut BufferPool, cfg: &Config, stats: &Stats) -> WatermarkBuffer {
    Stats::add(&stats.buffers_in_use, 1);
    let max = cfg.max_head_size;
    WatermarkBuffer::new(bufs.get(), max, max.saturating_sub(1))
}

/// Returns a buffer's storage to the free list.
fn give_back(bufs: &mut BufferPool, stats: &Stats, buf: WatermarkBuffer) {
    bufs.put(buf.into_storage());
    Stats::sub(&stats.buffers_in_use, 1);
}

/// The response's transfer codings are exactly `chunked` (one field, one
/// element, RFC 9112 §6.1).
fn only_chunked(headers: &Headers) -> bool {
    let mut codings = headers
        .get_all("transfer-encoding")
        .flat_map(|v| v.split(|&b| b == b','));
    let first = codings.next().map(|c| c.trim_ascii());
    first.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"))
        && codings.all(|c| c.trim_ascii().is_empty())
}

fn interest(read: bool, write: bool) -> Option<Interest> {
    match (read, write) {
        (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
        (true, false) => Some(Interest::READABLE),
        (false, true) => Some(Interest::WRITABLE),
        (false, false) => None,
    }
}

/// Read size for a body with `remaining` bytes left (never past its end).
fn clamp(remaining: Option<u64>) -> usize {
    match remaining {
        Some(r) => usize::try_from(r).unwrap_or(usize::MAX).min(READ_CHUNK),
        None => READ_CHUNK,
    }
}

fn count_status(stats: &Stats, code: u16) {
    let field = match code {
        400 => &stats.status_400,
        408 => &stats.status_408,
        431 => &stats.status_431,
        501 => &stats.status_501,
        502 => &stats.status_502,
        504 => &stats.status_504,
        _ => return,
    };
    Stats::add(field, 1);
}

fn reason_body(code: u16) -> String {
    format!("{} {}\n", code, crate::http::head::reason_phrase(code))
}

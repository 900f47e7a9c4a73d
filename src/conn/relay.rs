//! The relay: one pump per direction, moving bytes between the client
//! connection, the exchange's buffers and the upstream connection
//! (ARCHITECTURE.md §4).
//!
//! Relay policy, both directions at once, in every round of a client
//! connection's `drive`:
//! 1. **Write before read**: drain the sinks first — pending response bytes
//!    to the client ([`write_client`]), pending request bytes to the
//!    upstream ([`write_request`]) — so buffers empty before they fill.
//! 2. **Read a source only while its sink has room** below the high
//!    watermark ([`WatermarkBuffer::room`]): response bytes from the
//!    upstream ([`read_response`]) go to the client's buffer; request bytes
//!    from the client ([`read_request`], [`read_client_head`]) go to the
//!    exchange's buffer toward the upstream (or the head buffer). A full
//!    sink leaves the source's readiness flag set, and the read happens as
//!    soon as the sink drains below the low watermark.
//! 3. Neither direction waits for the other: an upstream may answer before
//!    the request body is complete, a client may send the rest only after
//!    it saw the start of the answer.
//! 4. Rounds repeat until nothing moves, so an edge-triggered readiness is
//!    never left unused (mio reports an edge once).
//!
//! Each pump reads and writes through the connection's transport
//! (`transport::Transport::read_into`, `write_from`) whether it carries a
//! head or a body, and never touches a socket itself; the body
//! decoder only measures bytes, and what a response body read keeps for
//! the client (de-chunked, chunk-encoded) is `response_body.rs`'s.
//!
//! What it must not know: how heads are planned (`response_head`,
//! `client`), the pool, the loop.

use std::time::Instant;

use super::client::ClientSide;
use super::exchange::{Exchange, Resp};
use super::io::Read1;
use super::response_body::{BodyScratch, hold_last_chunk, keep_body};
use super::upstream::{Connect, UpstreamConn};
use crate::buffer::{BufferPool, RESPONSE_READ, WatermarkBuffer};
use crate::config::Config;
use crate::error::{ErrorKind, ProxyError};
use crate::http::ParseError;
use crate::http::chunk_encode::LAST_CHUNK;
use crate::http::chunked::{kept_parts, remove_runs};
use crate::http::date::HttpDate;
use crate::stats::Stats;

/// Most bytes one read takes from a socket.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

pub(crate) type Result<T> = std::result::Result<T, ProxyError>;

/// What the pumps use besides the two sides and the exchange.
pub(crate) struct Env<'a> {
    /// The process's settings.
    pub cfg: &'a Config,
    /// The free list of buffers.
    pub bufs: &'a mut BufferPool,
    /// Counters.
    pub stats: &'a Stats,
    /// The time the current batch of events is handled at.
    pub now: Instant,
    /// The `Date` value of this loop turn.
    pub date: &'a HttpDate,
}

impl Env<'_> {
    /// A body buffer with the configured watermarks.
    pub(crate) fn body_buffer(&mut self) -> WatermarkBuffer {
        self.bufs
            .body(self.cfg.high_watermark, self.cfg.low_watermark)
    }

    /// The marks a new body buffer starts with: `(high, low)` bytes
    /// (the adaptive sizing's start, `buffer::sizing`).
    pub(crate) fn body_marks(&self) -> (usize, usize) {
        crate::buffer::sizing::Sizing::new(self.cfg.high_watermark, self.cfg.low_watermark).marks()
    }

    /// A head buffer bounded by the request head size limit.
    pub(crate) fn head_buffer(&mut self) -> WatermarkBuffer {
        self.bufs.head(self.cfg.max_head_size)
    }

    /// A response-start buffer: the head and the first body bytes in one
    /// read, the body then going on to the client in the same storage
    /// (`BufferPool::response_head`).
    pub(crate) fn response_head_buffer(&mut self) -> WatermarkBuffer {
        self.bufs.response_head(self.cfg.max_response_head_size)
    }
}

// ---- upstream → client ----

/// Response sink: writes pending bytes to the client; `fin_follows` when
/// the connection closes (or shuts down its sending side) once they are
/// out, so the last segment can carry the FIN (`io::write_before_fin`).
///
/// Errors: the client's socket failed (downstream I/O).
pub(crate) fn write_client(
    side: &mut ClientSide,
    env: &mut Env<'_>,
    fin_follows: bool,
) -> Result<bool> {
    // The transport's own bytes first (TLS: a handshake flight, an alert).
    let flushed = side.stream.wants_write()
        && side
            .stream
            .flush(&mut side.io, env.stats)
            .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
    let Some(out) = side.out.as_mut() else {
        return Ok(flushed);
    };
    // A full buffer whose client took nothing for a while: the adaptive
    // sizing's stall (buffer.rs), measured from the last write that moved.
    out.sink_waited(env.now.saturating_duration_since(side.write_at));
    let n = side
        .stream
        .write_from(&mut side.io, out, fin_follows, env.stats)
        .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
    if n == 0 {
        return Ok(flushed);
    }
    Stats::add(&env.stats.bytes_to_downstream, n as u64);
    side.write_at = env.now;
    // A response-start buffer goes back once the client took it all: the
    // rest of the body is read into an ordinary (adaptive) body buffer.
    if side
        .out
        .as_ref()
        .is_some_and(|b| b.is_lent() && b.is_empty())
        && let Some(b) = side.out.take()
    {
        env.bufs.put_buffer(b);
    }
    Ok(true)
}

/// Response source: reads from the upstream into the head buffer (while
/// the head is awaited) or into `sink` (body: the HTTP/1 client's
/// buffer, or an HTTP/2 stream's), as far as the body goes; with
/// `ex.dechunk` a chunked body keeps only chunk data.
///
/// Errors (upstream side): I/O, EOF before the response was complete, an
/// oversized head, invalid chunked framing; a write failure recorded
/// earlier stands if the upstream then sends nothing.
pub(crate) fn read_response(
    sink: &mut Option<WatermarkBuffer>,
    ex: &mut Exchange,
    up: &mut UpstreamConn,
    env: &mut Env<'_>,
) -> Result<bool> {
    if up.is_connecting() || !up.may_read() {
        return Ok(false);
    }
    let upstream_io = |e: std::io::Error| ProxyError::upstream(ErrorKind::Io(e.kind()));
    let recode = ex.recode();
    match &mut ex.resp {
        Resp::AwaitHead => {
            let buf = ex.upin.get_or_insert_with(|| env.response_head_buffer());
            // Every complete head was taken after the last read: what is
            // left is one incomplete head (1xx heads share the budget).
            if buf.pending() >= env.cfg.max_response_head_size {
                return Err(ProxyError::upstream(ErrorKind::Parse(
                    ParseError::HeadTooLarge,
                )));
            }
            let r = up
                .read(buf, RESPONSE_READ, env.stats)
                .map_err(upstream_io)?;
            if !matches!(r, Read1::Data(_))
                && buf.is_empty()
                && let Some(b) = ex.upin.take()
            {
                // Nothing came: no buffer while the upstream thinks.
                env.bufs.put_buffer(b);
            }
            match (r, ex.write_failed) {
                (Read1::Idle | Read1::Eof, Some(kind)) => {
                    Err(ProxyError::upstream(ErrorKind::Io(kind)))
                }
                (Read1::Idle, None) => Ok(false),
                (Read1::Eof, None) => Err(ProxyError::upstream(ErrorKind::Closed)),
                (Read1::Data(n), _) => {
                    Stats::add(&env.stats.bytes_from_upstream, n as u64);
                    ex.up_read_at = env.now;
                    if ex.first_byte.is_none() {
                        // The clock, not the batch's time: a fast upstream
                        // answers within the batch that sent the request.
                        ex.first_byte = Some(Instant::now().saturating_duration_since(ex.started));
                    }
                    Ok(true)
                }
            }
        }
        Resp::Body(decoder) => {
            let out = sink.get_or_insert_with(|| env.body_buffer());
            // Not clamped to the body's length: a response ends where its
            // framing says, and bytes behind it (there should be none: the
            // proxy never pipelines upstream) are dropped and keep the
            // connection out of the pool. A read that is short clears
            // `readable`, so a finished response leaves no read (or
            // liveness peek) for later (issue 22).
            let r = up.read(out, READ_CHUNK, env.stats).map_err(upstream_io)?;
            match r {
                Read1::Idle => Ok(false),
                Read1::Eof => {
                    let framed_done = decoder.is_done();
                    decoder
                        .finish_on_eof()
                        .map_err(|_| ProxyError::upstream(ErrorKind::Closed))?;
                    if !framed_done && up.closed_without_notify() {
                        // Over TLS a close-delimited body is whole only if
                        // the close came with `close_notify` (RFC 9112
                        // §9.8): a bare EOF may be a truncation.
                        return Err(ProxyError::upstream(ErrorKind::Closed));
                    }
                    if ex.enchunk {
                        // The close ended the body: the client's last chunk.
                        out.extend_from_slice(LAST_CHUNK);
                    }
                    ex.resp = Resp::Done;
                    ex.resp_keep_alive = false;
                    Ok(true)
                }
                Read1::Data(n) => {
                    Stats::add(&env.stats.bytes_from_upstream, n as u64);
                    ex.up_read_at = env.now;
                    let before = decoder.data_bytes();
                    let scratch = BodyScratch {
                        ranges: &mut ex.ranges,
                        pieces: &mut ex.pieces,
                        trailers: ex.keep_trailers.then_some(&mut ex.trailers),
                        held: &mut ex.held,
                    };
                    let body = keep_body(out, n, decoder, recode, scratch)?;
                    if body < n {
                        ex.extra_bytes = true;
                    }
                    ex.resp_body_bytes += decoder.data_bytes().saturating_sub(before);
                    if decoder.is_done() {
                        ex.resp = Resp::Done;
                    }
                    Ok(true)
                }
            }
        }
        // The upstream is released in the same round its response ends:
        // nothing is read after that.
        Resp::Done => Ok(false),
    }
}

// ---- client → upstream ----

/// Request sink: completes the upstream's connect, then writes pending
/// request bytes to it. A tunnel whose client sent EOF gets the upstream's
/// sending side shut once everything went.
///
/// Errors (upstream side): the connect failed; a write failed before the
/// response began and nothing was recorded yet is turned into a recorded
/// `write_failed` first (the upstream may have answered before its reset:
/// that answer is read before the error stands). A write failure after the
/// response head went downstream abandons the rest of the request instead.
pub(crate) fn write_request(
    ex: &mut Exchange,
    up: &mut UpstreamConn,
    env: &mut Env<'_>,
) -> Result<bool> {
    match up.finish_connect(env.stats) {
        Ok(Connect::Pending) => return Ok(false),
        Ok(Connect::JustConnected) => {
            ex.up_port = up.local_port();
            ex.connect_time = ex
                .connect_began
                .map(|t| Instant::now().saturating_duration_since(t));
            ex.up_read_at = env.now;
            ex.up_write_at = env.now;
        }
        Ok(Connect::Ready) => {}
        Err(e) => return Err(ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))),
    }
    if ex.write_failed.is_some() {
        return Ok(false);
    }
    let tunnel_done = ex.tunnel && ex.request_body_done();
    let Some(buf) = ex.to_upstream.as_mut() else {
        return Ok(false);
    };
    buf.sink_waited(env.now.saturating_duration_since(ex.up_write_at));
    let n = match up.write(buf, env.stats) {
        Ok(n) => n,
        Err(e) => {
            if ex.resp_head_sent {
                // The upstream stopped reading after it began to answer:
                // finish the response, drop the rest.
                buf.clear();
                ex.abandon_request();
                return Ok(true);
            }
            ex.write_failed = Some(e.kind());
            up.io.readable = true;
            return Ok(true);
        }
    };
    if n == 0 {
        if tunnel_done && buf.is_empty() && up.shutdown_write(env.stats) {
            return Ok(true);
        }
        return Ok(false);
    }
    ex.up_written += n as u64;
    ex.up_write_at = env.now;
    if matches!(ex.resp, Resp::AwaitHead) && ex.request_sent() {
        // The wait for the response head starts now (docs/configuration.md, "Timeouts").
        ex.up_read_at = env.now;
    }
    Stats::add(&env.stats.bytes_to_upstream, n as u64);
    Ok(true)
}

/// Request source (body): reads from the client into the buffer toward the
/// upstream, as far as the body goes; bytes past its end are the next
/// request (pipelining) and go to the client's head buffer.
///
/// Errors (downstream side): I/O, EOF inside a delimited body, invalid
/// chunked framing.
pub(crate) fn read_request(
    side: &mut ClientSide,
    ex: &mut Exchange,
    env: &mut Env<'_>,
) -> Result<bool> {
    if side.inbuf.as_ref().is_some_and(|b| !b.is_empty()) {
        return Ok(false);
    }
    let max = clamp(ex.request_remaining());
    let Some(buf) = ex.to_upstream.as_mut() else {
        return Ok(false);
    };
    let r = side
        .stream
        .read_into(&mut side.io, buf, max, env.stats)
        .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
    match r {
        Read1::Idle => Ok(false),
        Read1::Eof => {
            side.read_eof = true;
            ex.request_eof()
                .map_err(|_| ProxyError::downstream(ErrorKind::Closed))?;
            Ok(true)
        }
        Read1::Data(n) => {
            Stats::add(&env.stats.bytes_from_downstream, n as u64);
            ex.down_read_at = env.now;
            // Body bytes: the client no longer waits for a 100.
            ex.expect_continue = false;
            let Some(buf) = ex.to_upstream.as_mut() else {
                return Ok(true);
            };
            if buf.pending() == n {
                ex.up_write_at = env.now;
            }
            // The new bytes are scanned where they lie.
            let start = buf.pending().saturating_sub(n);
            let fresh = buf.as_slice().get(start..).unwrap_or(&[]);
            let body = ex
                .req_half
                .scan(fresh, &mut ex.req_body_bytes, &mut ex.ranges)
                .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
            if body < n {
                // Bytes past the body: the next request (pipelining).
                let inbuf = side.inbuf.get_or_insert_with(|| env.head_buffer());
                inbuf.extend_from_slice(fresh.get(body..).unwrap_or(&[]));
            }
            // A chunk size's leading zeros do not go upstream.
            let removed = match ex.ranges.is_empty() {
                true => 0,
                false => remove_runs(
                    buf.tail_mut(n).get_mut(..body).unwrap_or_default(),
                    &ex.ranges,
                ),
            };
            if body < n || removed > 0 {
                buf.unfill(n - body + removed);
            }
            // The start of a last chunk waits for the body's end.
            let tail = ex.req_half.last_chunk_bytes();
            hold_last_chunk(buf, body.saturating_sub(removed), tail, &mut ex.req_held);
            // Over `max_body_size`: the bytes just read never go upstream.
            ex.check_body_limit()
                .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
            Ok(true)
        }
    }
}

/// Moves request body bytes that arrived with the head (in the client's
/// head buffer) to the buffer toward the upstream, as far as the body goes
/// and the watermark allows.
///
/// Errors: invalid chunked framing (downstream side).
pub(crate) fn feed_request(
    side: &mut ClientSide,
    ex: &mut Exchange,
    env: &mut Env<'_>,
) -> Result<bool> {
    let Some(inbuf) = side.inbuf.as_mut().filter(|b| !b.is_empty()) else {
        return Ok(false);
    };
    if ex.request_taken() {
        return Ok(false);
    }
    let hint = clamp(ex.request_remaining());
    let Some(to_up) = ex.to_upstream.as_ref() else {
        return Ok(false);
    };
    let room = to_up.room().min(hint);
    let was_empty = to_up.is_empty();
    let avail = inbuf
        .as_slice()
        .get(..room.min(inbuf.pending()))
        .unwrap_or(&[]);
    if avail.is_empty() {
        return Ok(false);
    }
    let body = ex
        .scan_request(avail)
        .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
    let bytes = avail.get(..body).unwrap_or(&[]);
    if was_empty {
        ex.up_write_at = env.now;
    }
    if let Some(to_up) = ex.to_upstream.as_mut() {
        // Without a chunk size's leading zeros (`scan_request`'s ranges).
        let start = to_up.pending();
        for part in kept_parts(bytes, &ex.ranges) {
            to_up.extend_from_slice(part);
        }
        // The start of a last chunk waits for the body's end.
        let kept = to_up.pending().saturating_sub(start);
        let tail = ex.req_half.last_chunk_bytes();
        hold_last_chunk(to_up, kept, tail, &mut ex.req_held);
    }
    inbuf.consume(body);
    Ok(body > 0 || ex.request_taken())
}

/// Request source (head): reads from the client into its head buffer.
/// Returns `Read1` so the client machine can note the first byte and EOF.
///
/// Errors: the client's socket failed (downstream I/O).
pub(crate) fn read_client_head(side: &mut ClientSide, env: &mut Env<'_>) -> Result<Read1> {
    let buf = side.inbuf.get_or_insert_with(|| env.head_buffer());
    let r = side
        .stream
        .read_into(&mut side.io, buf, READ_CHUNK, env.stats)
        .map_err(|e| ProxyError::downstream(ErrorKind::Io(e.kind())))?;
    match r {
        Read1::Eof => side.read_eof = true,
        Read1::Data(n) => Stats::add(&env.stats.bytes_from_downstream, n as u64),
        Read1::Idle => {}
    }
    // A read that found nothing (a new connection read at once, before its
    // first byte) leaves no buffer on the idle connection.
    if !matches!(r, Read1::Data(_))
        && side.inbuf.as_ref().is_some_and(|b| b.is_empty())
        && let Some(b) = side.inbuf.take()
    {
        env.bufs.put_buffer(b);
    }
    Ok(r)
}

/// Read size for a body with `remaining` bytes left (never past its end).
fn clamp(remaining: Option<u64>) -> usize {
    match remaining {
        Some(r) => usize::try_from(r).unwrap_or(usize::MAX).min(READ_CHUNK),
        None => READ_CHUNK,
    }
}

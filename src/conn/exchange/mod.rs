//! `Exchange`: one request with its response, between a client connection
//! and an upstream connection (ARCHITECTURE.md §1).
//!
//! The request half ([`ReqHalf`]: head + body, client → upstream) and the
//! response half ([`Resp`]: head + body, upstream → client) advance apart,
//! at the same time, and meet in two verdicts kept here: may the upstream
//! connection be parked ([`Exchange::reusable`], ARCHITECTURE.md §6), and
//! may a failed request be sent again ([`Exchange::may_retry`],
//! ARCHITECTURE.md §7). An exchange ends in one place, [`Exchange::end`] (`end.rs`),
//! which closes what is left of its upstream, returns its buffers and
//! writes its one access-log record.
//!
//! What it must not know: the client socket, how the loop schedules, how
//! the pool chooses.

use std::net::SocketAddr;
use std::time::Instant;

use super::upstream::{UpKey, UpstreamConn};
use crate::buffer::WatermarkBuffer;
use crate::config::Config;
use crate::error::Timeout;
use crate::filter::Peer;
use crate::http::{BodyDecoder, BodyKind, HeadScanner, ParseError, RequestHead, ResponseHead};

mod end;

/// Where the request half stands.
#[derive(Debug)]
pub(crate) enum ReqHalf {
    /// Body bytes are still to come from the client (in a tunnel: until
    /// the client's EOF).
    Body(BodyDecoder),
    /// The whole request was taken from the client.
    Taken,
    /// The rest of the request is dropped: the upstream answered first, or
    /// stopped reading after its answer began. The client connection closes
    /// after the response.
    Abandoned,
}

impl ReqHalf {
    /// Finds where the body ends in `bytes`: returns how many of them are
    /// body; becomes `Taken` at the body's end. Nothing is taken unless
    /// the half is `Body`. `redundant` gets the ranges of those bytes the
    /// forwarded body leaves out (`BodyDecoder::scan_forward`).
    ///
    /// Errors: the body's framing is invalid (chunked syntax).
    /// Body data bytes found (chunk framing excluded) are added to `data`.
    pub(crate) fn scan(
        &mut self,
        bytes: &[u8],
        data: &mut u64,
        redundant: &mut Vec<std::ops::Range<usize>>,
    ) -> Result<usize, ParseError> {
        redundant.clear();
        let ReqHalf::Body(decoder) = self else {
            return Ok(0);
        };
        let before = decoder.data_bytes();
        let n = decoder.scan_forward(bytes, redundant)?;
        *data += decoder.data_bytes().saturating_sub(before);
        if decoder.is_done() {
            *self = ReqHalf::Taken;
        }
        Ok(n)
    }
}

/// Where the response half stands.
#[derive(Debug)]
pub(crate) enum Resp {
    /// Waiting for (the rest of) a response head; 1xx heads may pass.
    AwaitHead,
    /// The final head went downstream; the body is being relayed.
    Body(BodyDecoder),
    /// The whole response was read from the upstream.
    Done,
}

/// The timeouts an exchange runs under: the top level's, or its route's
/// own `upstream_connect_timeout`, `upstream_read_timeout` and
/// `client_body_timeout` where it gives them (docs/edge.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// Upstream connect.
    pub connect: std::time::Duration,
    /// Upstream read gap (and the response-head wait).
    pub read: std::time::Duration,
    /// Client request body gap.
    pub client_body: std::time::Duration,
}

impl Timeouts {
    /// The timeouts of `route` (an index into `cfg.route`): `None` when
    /// it overrides none (the exchange then reads the top level's).
    pub(crate) fn of_route(cfg: &Config, route: Option<usize>) -> Option<Self> {
        let r = cfg.route.get(route?)?;
        if r.upstream_connect_timeout.is_none()
            && r.upstream_read_timeout.is_none()
            && r.client_body_timeout.is_none()
        {
            return None;
        }
        Some(Timeouts {
            connect: r
                .upstream_connect_timeout
                .unwrap_or(cfg.upstream_connect_timeout),
            read: r.upstream_read_timeout.unwrap_or(cfg.upstream_read_timeout),
            client_body: r.client_body_timeout.unwrap_or(cfg.client_body_timeout),
        })
    }

    /// The top level's.
    fn top(cfg: &Config) -> Self {
        Timeouts {
            connect: cfg.upstream_connect_timeout,
            read: cfg.upstream_read_timeout,
            client_body: cfg.client_body_timeout,
        }
    }
}

/// One request and its response.
pub(crate) struct Exchange {
    /// The request head as sent upstream (after hooks).
    pub req: RequestHead,
    /// The upstream server of the current try (the one that answered,
    /// once the response came; the access log names it).
    pub peer: Peer,
    /// The group `peer` belongs to (`None`: a concrete peer from
    /// `upstream_peer`).
    pub group: Option<usize>,
    /// Servers of the group this request already tried (a retry goes to
    /// another one, ARCHITECTURE.md §13).
    pub tried: Vec<SocketAddr>,
    /// Request bytes went out on a new connection that then failed: a
    /// retry goes only to a server not tried yet, never back to one that
    /// may have read the request (ARCHITECTURE.md §7).
    pub sent_fresh: bool,
    /// `peer` is counted in flight in its group until released.
    pub in_flight: bool,
    /// Panic mode's tries end here: one connect timeout from the first
    /// panic-mode pick, for all of them (ARCHITECTURE.md §13).
    pub panic_until: Option<Instant>,
    /// Every try's outcome so far, for the access record (one per entry
    /// of `tried` once that try ended).
    pub attempts: Vec<crate::conn::access::Attempt>,
    /// The whole group was out when the first server was chosen (panic
    /// mode: each server may be tried once).
    pub panic: bool,
    /// The request's hash key (`balance = "hash"`).
    pub hash: u64,
    /// When the request head was complete.
    pub started: Instant,
    /// Request half (a field of its own, so a pump can scan bytes of
    /// `to_upstream` in place while it advances).
    pub req_half: ReqHalf,
    /// The request method is idempotent (RFC 9110 §9.2.2): its retry class.
    pub idempotent: bool,
    /// Request body data bytes taken from the client (chunk framing
    /// excluded).
    pub req_body_bytes: u64,
    /// Most request body data bytes allowed (`max_body_size`; 0: no limit).
    pub max_body: u64,
    /// Its route's own timeouts; `None`: the top level's.
    pub timeouts: Option<Timeouts>,
    /// The route whose response header rules apply, with the request's
    /// TLS flag and client address (their variables); `None`: no rules.
    pub resp_rules: Option<(usize, bool, std::net::IpAddr)>,
    /// The encoded request head, kept for a retry.
    pub head_bytes: Vec<u8>,
    /// Bytes read from the client, not yet written upstream.
    pub to_upstream: Option<WatermarkBuffer>,
    /// Bytes written to the current upstream connection (head and body).
    pub up_written: u64,
    /// The upstream connection while attached.
    pub upstream: Option<UpKey>,
    /// The current upstream connection came from the pool.
    pub reused: bool,
    /// Local port of the upstream connection (access log).
    pub up_port: u16,
    /// Response head bytes read, not yet parsed.
    pub upin: Option<WatermarkBuffer>,
    /// End-of-head finder over `upin`.
    pub resp_scanner: HeadScanner,
    /// Response half.
    pub resp: Resp,
    /// Storage the response head is parsed into (reused).
    pub resp_head: ResponseHead,
    /// Storage heads are encoded into before they are queued (reused).
    pub scratch: Vec<u8>,
    /// A 1xx head was forwarded downstream.
    pub interim_sent: bool,
    /// Bytes of the 1xx heads received so far.
    pub interim_bytes: usize,
    /// The final response head went downstream.
    pub resp_head_sent: bool,
    /// Status of the final response.
    pub status: u16,
    /// The upstream may be parked afterwards, as far as its head said.
    pub resp_keep_alive: bool,
    /// Bytes arrived after the response body: the upstream is not reused.
    pub extra_bytes: bool,
    /// Response body data bytes queued downstream (chunk framing
    /// excluded).
    pub resp_body_bytes: u64,
    /// When the connect of the current new upstream connection began.
    pub connect_began: Option<Instant>,
    /// How long that connect took.
    pub connect_time: Option<std::time::Duration>,
    /// From `started` to the first response byte from the upstream.
    pub first_byte: Option<std::time::Duration>,
    /// The response announced the server's idle limit (`Keep-Alive:
    /// timeout=N`, in seconds): the pool learns it at park.
    pub idle_hint: Option<u64>,
    /// Retries made.
    pub retries: u32,
    /// A write to the upstream failed before its response head came; what
    /// it already sent is read before the error is answered.
    pub write_failed: Option<std::io::ErrorKind>,
    /// The request asked `Expect: 100-continue` and no body byte came yet:
    /// the client may be waiting for a `100 Continue` (RFC 9110 §10.1.1).
    pub expect_continue: bool,
    /// The request asked for a protocol upgrade.
    pub upgrade: bool,
    /// A 101 switched both directions to a raw tunnel.
    pub tunnel: bool,
    /// The client speaks HTTP/1.0 and the response is chunked: only chunk
    /// data goes downstream, delimited by closing (RFC 9112 §7.1).
    pub dechunk: bool,
    /// Scratch for the ranges of one read: the bytes the forwarded body
    /// leaves out (a chunk size's leading zeros, `BodyDecoder::scan_forward`).
    pub ranges: Vec<std::ops::Range<usize>>,
    /// Scratch for the pieces of one read when de-chunking (`dechunk`):
    /// chunk data, or (`true`) a trailer field line.
    pub pieces: Vec<(std::ops::Range<usize>, bool)>,
    /// De-chunking keeps the trailer section's field lines in `trailers`
    /// (an HTTP/2 client gets them as a HEADERS frame).
    pub keep_trailers: bool,
    /// The trailer section's field lines, each with its CRLF
    /// (`keep_trailers`; at most `http::chunked::MAX_TRAILER_SECTION`).
    pub trailers: Vec<u8>,
    /// Last read from the upstream, or when the whole request was written
    /// (the wait for the response head starts there).
    pub up_read_at: Instant,
    /// Last write to the upstream (or when bytes for it appeared).
    pub up_write_at: Instant,
    /// Last read of request body bytes from the client.
    pub down_read_at: Instant,
}

impl Exchange {
    /// An exchange with nothing in it yet (a request head is parsed into
    /// its `req`, then [`Exchange::start`] fills the rest).
    pub(crate) fn blank(now: Instant) -> Self {
        Exchange {
            req: RequestHead::default(),
            peer: Peer::new(SocketAddr::from(([0, 0, 0, 0], 0))),
            group: None,
            tried: Vec::new(),
            sent_fresh: false,
            in_flight: false,
            panic_until: None,
            attempts: Vec::new(),
            panic: false,
            hash: 0,
            started: now,
            req_half: ReqHalf::Taken,
            idempotent: false,
            req_body_bytes: 0,
            max_body: 0,
            timeouts: None,
            resp_rules: None,
            head_bytes: Vec::new(),
            to_upstream: None,
            up_written: 0,
            upstream: None,
            reused: false,
            up_port: 0,
            upin: None,
            resp_scanner: HeadScanner::new(),
            resp: Resp::AwaitHead,
            resp_head: ResponseHead::default(),
            scratch: Vec::new(),
            interim_sent: false,
            interim_bytes: 0,
            resp_head_sent: false,
            status: 0,
            resp_keep_alive: false,
            extra_bytes: false,
            resp_body_bytes: 0,
            connect_began: None,
            connect_time: None,
            first_byte: None,
            idle_hint: None,
            retries: 0,
            write_failed: None,
            expect_continue: false,
            upgrade: false,
            tunnel: false,
            dechunk: false,
            ranges: Vec::new(),
            pieces: Vec::new(),
            keep_trailers: false,
            trailers: Vec::new(),
            up_read_at: now,
            up_write_at: now,
            down_read_at: now,
        }
    }

    /// The connect timeout of this exchange (its route's, or the top
    /// level's).
    pub(crate) fn connect_timeout(&self, cfg: &Config) -> std::time::Duration {
        self.timeouts
            .map_or(cfg.upstream_connect_timeout, |t| t.connect)
    }

    /// Starts the exchange of the request in `req` (hooks already ran):
    /// every other field is reset, the storage of `req`, `head_bytes`,
    /// `resp_head`, `scratch` and `ranges` is kept for reuse, and the head
    /// going upstream is encoded into `head_bytes`.
    pub(crate) fn start(
        &mut self,
        peer: Peer,
        framing: BodyKind,
        upgrade: bool,
        idempotent: bool,
        now: Instant,
    ) {
        let fresh = Exchange {
            req: std::mem::take(&mut self.req),
            head_bytes: std::mem::take(&mut self.head_bytes),
            resp_head: std::mem::take(&mut self.resp_head),
            scratch: std::mem::take(&mut self.scratch),
            ranges: std::mem::take(&mut self.ranges),
            pieces: std::mem::take(&mut self.pieces),
            trailers: std::mem::take(&mut self.trailers),
            tried: std::mem::take(&mut self.tried),
            attempts: std::mem::take(&mut self.attempts),
            peer,
            upgrade,
            idempotent,
            ..Exchange::blank(now)
        };
        *self = fresh;
        self.set_request_body(BodyDecoder::new(framing));
        self.ranges.clear();
        self.pieces.clear();
        self.trailers.clear();
        self.tried.clear();
        self.attempts.clear();
        self.head_bytes.clear();
        self.req.encode_upstream(&mut self.head_bytes);
    }

    // ---- the request half ----

    /// Body bytes from the client are framed by `decoder` from now on (a
    /// tunnel's until-close after a 101).
    pub(crate) fn set_request_body(&mut self, decoder: BodyDecoder) {
        self.req_half = if decoder.is_done() {
            ReqHalf::Taken
        } else {
            ReqHalf::Body(decoder)
        };
    }

    /// Finds where the request body ends in `bytes` (read from the client
    /// after what was scanned before): returns how many of them are body.
    /// The half becomes `Taken` at the body's end. `ranges` then holds
    /// the ranges of those bytes the forwarded body leaves out.
    ///
    /// Errors: the body's framing is invalid (chunked syntax).
    pub(crate) fn scan_request(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        let n = self
            .req_half
            .scan(bytes, &mut self.req_body_bytes, &mut self.ranges)?;
        self.check_body_limit()?;
        if n > 0 {
            // The client no longer waits for a 100.
            self.expect_continue = false;
        }
        Ok(n)
    }

    /// Errors: the body scanned so far is over `max_body`.
    pub(crate) fn check_body_limit(&self) -> Result<(), ParseError> {
        if self.max_body > 0 && self.req_body_bytes > self.max_body {
            return Err(ParseError::BodyTooLarge);
        }
        Ok(())
    }

    /// The client sent EOF while the request half was open.
    ///
    /// Errors: `Truncated` unless the body is delimited by close.
    pub(crate) fn request_eof(&mut self) -> Result<(), ParseError> {
        if let ReqHalf::Body(decoder) = &mut self.req_half {
            decoder.finish_on_eof()?;
            self.req_half = ReqHalf::Taken;
        }
        Ok(())
    }

    /// Request body bytes left, if known (for clamping reads).
    pub(crate) fn request_remaining(&self) -> Option<u64> {
        match &self.req_half {
            ReqHalf::Body(d) => d.remaining_hint(),
            _ => Some(0),
        }
    }

    /// The rest of the request is dropped (see [`ReqHalf::Abandoned`]).
    pub(crate) fn abandon_request(&mut self) {
        self.req_half = ReqHalf::Abandoned;
    }

    /// The request was dropped before it was all taken or sent.
    pub(crate) fn request_abandoned(&self) -> bool {
        matches!(self.req_half, ReqHalf::Abandoned)
    }

    /// The whole request body was taken from the client.
    pub(crate) fn request_body_done(&self) -> bool {
        matches!(self.req_half, ReqHalf::Taken)
    }

    /// The request half is over: its body fully taken, or abandoned.
    pub(crate) fn request_taken(&self) -> bool {
        !matches!(self.req_half, ReqHalf::Body(_))
    }

    /// Every request byte reached the upstream's socket.
    pub(crate) fn request_sent(&self) -> bool {
        self.request_body_done() && self.to_upstream.as_ref().is_none_or(|b| b.is_empty())
    }

    // ---- the response half and the verdicts ----

    /// The whole response was read from the upstream.
    pub(crate) fn response_done(&self) -> bool {
        matches!(self.resp, Resp::Done)
    }

    /// May the upstream connection go back to the pool (ARCHITECTURE.md
    /// §6)? Only after a complete, delimited HTTP/1.1 response without
    /// `Connection: close`, to a request sent whole, with nothing extra.
    pub(crate) fn reusable(&self) -> bool {
        self.response_done()
            && self.request_sent()
            && self.resp_keep_alive
            && !self.extra_bytes
            && !self.tunnel
    }

    /// May the request be sent again on a new connection after its
    /// upstream failed (ARCHITECTURE.md §7)? No response byte may have
    /// arrived; then either no request byte was written, or the method is
    /// idempotent (RFC 9110 §9.2.2), no body byte was written, and the
    /// connection was reused or `other_server` (the group has a server
    /// this request has not tried: nginx's `proxy_next_upstream error`).
    pub(crate) fn may_retry(&self, max_retries: u32, other_server: bool) -> bool {
        let no_response_byte = self.no_response_byte();
        let head_len = self.head_bytes.len() as u64;
        let nothing_written = self.nothing_written();
        let body_streamed = self.up_written > head_len;
        self.retries < max_retries
            && no_response_byte
            && !self.request_abandoned()
            && (nothing_written
                || (self.idempotent && !body_streamed && (self.reused || other_server)))
    }

    /// No byte of the request was written to the current upstream
    /// connection.
    pub(crate) fn nothing_written(&self) -> bool {
        self.up_written == 0
    }

    /// No byte of a response (not even a 1xx) came from the current
    /// upstream connection.
    pub(crate) fn no_response_byte(&self) -> bool {
        matches!(self.resp, Resp::AwaitHead)
            && !self.interim_sent
            && self.upin.as_ref().is_none_or(|b| b.is_empty())
    }

    /// Records the current try (to `peer`) as ended with `outcome`: its
    /// upstream status (else `fallback`, what the failure would answer:
    /// nginx's `$upstream_status` shows 502 or 504 for a failed try), its
    /// connect time (or the time spent connecting, for a connect that
    /// failed).
    pub(crate) fn note_attempt(&mut self, outcome: &'static str, fallback: u16) {
        let connect = self
            .connect_time
            .or_else(|| self.connect_began.map(|b| b.elapsed()));
        self.attempts.push(crate::conn::access::Attempt {
            addr: self.peer.addr,
            status: if self.status != 0 {
                self.status
            } else {
                fallback
            },
            connect,
            outcome,
        });
    }

    /// Upstream connections this request was sent on (1 + retries): the
    /// access log's tries.
    pub(crate) fn tries(&self) -> u32 {
        self.retries + 1
    }

    /// Puts the head back in front of the request bytes not yet written, for
    /// a retry on a new connection.
    pub(crate) fn rewind(&mut self) {
        let head_len = self.head_bytes.len() as u64;
        let head_left = head_len.saturating_sub(self.up_written) as usize;
        if let Some(buf) = self.to_upstream.as_mut() {
            let body: Vec<u8> = buf.as_slice().get(head_left..).unwrap_or(&[]).to_vec();
            buf.clear();
            buf.extend_from_slice(&self.head_bytes);
            buf.extend_from_slice(&body);
        }
        self.up_written = 0;
    }

    /// The earliest deadline the exchange's own timers set (the client's
    /// send timeout is the client connection's); docs/configuration.md's
    /// timer table lists them. `client_out_paused`: the response buffer toward
    /// the client is above its high watermark (the upstream is then not
    /// expected to send); `client_write_at`: the last write to the client.
    ///
    /// Each timer measures only time in which the side it blames could
    /// have moved bytes and none moved:
    /// - connect: from the connect's start (alone while connecting);
    /// - upstream read: the wait for the response head starts when the
    ///   whole request was written (a body still flowing is guarded by the
    ///   gap timers below, never by this one); in the response body, the
    ///   gap since the last read from the upstream or the last write to a
    ///   client whose buffer was full;
    /// - upstream write: the gap since the upstream last accepted a byte,
    ///   while bytes for it are pending;
    /// - client body: the gap since the client last sent a body byte or the
    ///   upstream last made room for one, while the body's buffer has room;
    /// - a client that asked `Expect: 100-continue` and sent no body byte
    ///   may wait for the `100` (RFC 9110 §10.1.1): until a response byte
    ///   comes, the upstream, which has the head, is the side that must
    ///   move (upstream read, from the head's write: 504), and the client
    ///   body gap starts again at the last response byte.
    pub(crate) fn deadline(
        &self,
        cfg: &Config,
        up: Option<&UpstreamConn>,
        client_out_paused: bool,
        client_write_at: Instant,
    ) -> Option<(Instant, Timeout)> {
        let limits = self.timeouts.unwrap_or_else(|| Timeouts::top(cfg));
        let mut best: Option<(Instant, Timeout)> = None;
        let mut consider = |at: Instant, t: Timeout| {
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, t));
            }
        };
        let bytes_for_upstream = self.to_upstream.as_ref().is_some_and(|b| !b.is_empty());
        let awaiting_continue = self.expect_continue && self.first_byte.is_none();
        if let Some(up) = up {
            if let Some((at, t)) = up.deadline(limits.connect) {
                // Panic-mode connects share one connect timeout.
                return Some((self.panic_until.map_or(at, |p| at.min(p)), t));
            }
            let request_unsent = !self.request_taken() || bytes_for_upstream;
            let head_wait_before_sent = matches!(self.resp, Resp::AwaitHead)
                && request_unsent
                && self.write_failed.is_none();
            if !self.response_done() && !client_out_paused && !head_wait_before_sent {
                let since = if matches!(self.resp, Resp::Body(_)) {
                    self.up_read_at.max(client_write_at)
                } else {
                    self.up_read_at
                };
                consider(since + limits.read, Timeout::UpstreamRead);
            }
            if bytes_for_upstream {
                consider(
                    self.up_write_at + cfg.upstream_write_timeout,
                    Timeout::UpstreamWrite,
                );
            }
            if awaiting_continue && self.up_written >= self.head_bytes.len() as u64 {
                consider(self.up_write_at + limits.read, Timeout::UpstreamRead);
            }
        }
        let wants_body =
            !self.request_taken() && self.to_upstream.as_ref().is_none_or(|b| !b.is_paused());
        if wants_body && !self.tunnel && !awaiting_continue {
            let mut since = self.down_read_at.max(self.up_write_at);
            if self.expect_continue {
                // The 100 (or an early final head) the client waited for.
                since = since.max(self.up_read_at);
            }
            consider(since + limits.client_body, Timeout::ClientBody);
        }
        best
    }

    /// The last read or write on either side of the exchange (a tunnel's
    /// idle time runs from here; the client connection adds its writes).
    pub(crate) fn last_progress(&self) -> Instant {
        self.up_read_at.max(self.up_write_at).max(self.down_read_at)
    }

    /// What the upstream socket should be watched for now:
    /// `(readable, writable)`. Reading follows the sink's room (the head
    /// buffer, or the client's response buffer `client_out_room`).
    pub(crate) fn upstream_interest(&self, client_out_room: bool) -> (bool, bool) {
        let read = match &self.resp {
            Resp::AwaitHead => self.upin.as_ref().is_none_or(|b| b.room() > 0),
            Resp::Body(_) => client_out_room,
            Resp::Done => true,
        };
        let write = self.to_upstream.as_ref().is_some_and(|b| !b.is_empty());
        (read, write)
    }
}

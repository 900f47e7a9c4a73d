//! `Exchange`: one request with its response, between a client connection
//! and an upstream connection (ARCHITECTURE.md §1): its fields, and how it
//! is started.
//!
//! The request half ([`ReqHalf`]: head + body, client → upstream,
//! `request.rs`) and the response half ([`Resp`]: head + body, upstream →
//! client, `response.rs`) advance apart, at the same time, under the
//! exchange's timers (`timers.rs`), and meet in two verdicts
//! (`verdicts.rs`): may the upstream connection be parked
//! ([`Exchange::reusable`], ARCHITECTURE.md §6), and may a failed request
//! be sent again ([`Exchange::may_retry`], ARCHITECTURE.md §7). An
//! exchange ends in one place, [`Exchange::end`] (`end.rs`), which closes
//! what is left of its upstream, returns its buffers and writes its one
//! access-log record.
//!
//! What it must not know: the client socket, how the loop schedules, how
//! the pool chooses.

use std::net::SocketAddr;
use std::time::Instant;

use super::upstream::UpKey;
use crate::buffer::WatermarkBuffer;
use crate::filter::Peer;
use crate::http::{BodyDecoder, BodyKind, HeadScanner, RequestHead, ResponseHead};

mod end;
mod request;
mod response;
mod timers;
mod verdicts;

pub(crate) use request::ReqHalf;
pub(crate) use response::Resp;
pub(crate) use timers::Timeouts;

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
    /// The request came without `Host` (HTTP/1.0) and goes upstream with
    /// the server's address in one (`ensure_host`): `$host` is still
    /// empty for the response rules, not the server's address.
    pub host_added: bool,
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
    /// The response is delimited by the upstream's close and the HTTP/1.1
    /// client gets it chunk-encoded (`FinalPlan::enchunk`).
    pub enchunk: bool,
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
    /// The start of a chunked body's last chunk, held back from an
    /// HTTP/1 client until the body is whole
    /// (`response_body::hold_last_chunk`; at most one chunk-size line and
    /// the trailer section).
    pub held: Vec<u8>,
    /// The same for a chunked request body on its way to the upstream: a
    /// client cut inside its last chunk gives the upstream no `0` line.
    pub req_held: Vec<u8>,
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
            host_added: false,
            upgrade: false,
            tunnel: false,
            dechunk: false,
            enchunk: false,
            ranges: Vec::new(),
            pieces: Vec::new(),
            keep_trailers: false,
            trailers: Vec::new(),
            held: Vec::new(),
            req_held: Vec::new(),
            up_read_at: now,
            up_write_at: now,
            down_read_at: now,
        }
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
            held: std::mem::take(&mut self.held),
            req_held: std::mem::take(&mut self.req_held),
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
        self.held.clear();
        self.req_held.clear();
        self.tried.clear();
        self.attempts.clear();
        self.head_bytes.clear();
        self.req.encode_upstream(&mut self.head_bytes);
    }
}

impl Exchange {
    /// What the response body's framing becomes on the way to the client
    /// (`dechunk`, `enchunk`, else as it came).
    pub(crate) fn recode(&self) -> crate::conn::response_body::Recode {
        use crate::conn::response_body::Recode;
        if self.dechunk {
            Recode::Dechunk
        } else if self.enchunk {
            Recode::Enchunk
        } else {
            Recode::Keep
        }
    }
}

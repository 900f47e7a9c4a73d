//! `Exchange`: one request with its response, between a downstream session
//! and an upstream connection.
//!
//! The request half (head + body, client → upstream) and the response half
//! (head + body, upstream → client) advance apart, at the same time, and
//! meet in two verdicts kept here: may the upstream connection be parked
//! (`reusable`, DESIGN.md §6), and may a failed request be sent again
//! (`may_retry`, DESIGN.md §7).

use std::time::Instant;

use crate::buffer::WatermarkBuffer;
use crate::filter::Peer;
use crate::http::{BodyDecoder, HeadScanner, RequestHead, ResponseHead};

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

/// One request and its response.
pub(crate) struct Exchange {
    /// The request head as sent upstream (after hooks).
    pub req: RequestHead,
    /// The upstream peer chosen by `upstream_peer`.
    pub peer: Peer,
    /// When the request head was complete.
    pub started: Instant,
    /// Where the request body ends (client → upstream).
    pub req_body: BodyDecoder,
    /// The request stopped being relayed (the upstream answered first, or
    /// a write failed after its answer began); the client connection closes
    /// after the response.
    pub req_abandoned: bool,
    /// Request body bytes taken from the client.
    pub req_body_bytes: u64,
    /// The encoded request head, kept for a retry.
    pub head_bytes: Vec<u8>,
    /// Bytes read from the client, not yet written upstream.
    pub to_upstream: Option<WatermarkBuffer>,
    /// Bytes written to the current upstream connection (head and body).
    pub up_written: u64,
    /// The upstream connection (slab key) while attached.
    pub upstream: Option<usize>,
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
    /// 1xx heads received so far.
    pub interim_count: u32,
    /// The final response head went downstream.
    pub resp_head_sent: bool,
    /// Status of the final response.
    pub status: u16,
    /// The upstream may be parked afterwards, as far as its head said
    /// (HTTP/1.1, no `Connection: close`, not until-close).
    pub resp_keep_alive: bool,
    /// Bytes arrived after the response body: the upstream is not reused.
    pub extra_bytes: bool,
    /// Response bytes queued downstream (head and body).
    pub resp_bytes: u64,
    /// Retries made.
    pub retries: u32,
    /// A write to the upstream failed before its response head came; what
    /// it already sent is read before the error is answered.
    pub write_failed: Option<std::io::ErrorKind>,
    /// The request asked for a protocol upgrade.
    pub upgrade: bool,
    /// A 101 switched both directions to a raw tunnel.
    pub tunnel: bool,
    /// The client speaks HTTP/1.0 and the response is chunked: only chunk
    /// data goes downstream, delimited by closing (RFC 9112 §7.1).
    pub dechunk: bool,
    /// Scratch for the chunk-data ranges of one read (`dechunk` only).
    pub ranges: Vec<std::ops::Range<usize>>,
    /// The upstream's sending side was shut after the client's EOF (tunnel).
    pub up_write_shut: bool,
    /// Last read from the upstream (or when waiting for it began).
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
            peer: Peer::new(std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            started: now,
            req_body: BodyDecoder::new(crate::http::BodyKind::Empty),
            req_abandoned: false,
            req_body_bytes: 0,
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
            interim_count: 0,
            resp_head_sent: false,
            status: 0,
            resp_keep_alive: false,
            extra_bytes: false,
            resp_bytes: 0,
            retries: 0,
            write_failed: None,
            upgrade: false,
            tunnel: false,
            dechunk: false,
            ranges: Vec::new(),
            up_write_shut: false,
            up_read_at: now,
            up_write_at: now,
            down_read_at: now,
        }
    }

    /// Starts the exchange of the request in `req` (hooks already ran):
    /// every other field is reset, the storage of `req`, `head_bytes`,
    /// `resp_head`, `scratch` and `ranges` is kept for reuse, and the head
    /// going upstream is encoded into `head_bytes`.
    pub(crate) fn start(&mut self, peer: Peer, req_body: BodyDecoder, upgrade: bool, now: Instant) {
        let fresh = Exchange {
            req: std::mem::take(&mut self.req),
            head_bytes: std::mem::take(&mut self.head_bytes),
            resp_head: std::mem::take(&mut self.resp_head),
            scratch: std::mem::take(&mut self.scratch),
            ranges: std::mem::take(&mut self.ranges),
            peer,
            req_body,
            upgrade,
            ..Exchange::blank(now)
        };
        *self = fresh;
        self.ranges.clear();
        self.head_bytes.clear();
        self.req.encode_upstream(&mut self.head_bytes);
    }

    /// The request half is over: its body fully taken from the client, or
    /// abandoned.
    pub(crate) fn request_taken(&self) -> bool {
        self.req_abandoned || self.req_body.is_done()
    }

    /// Every request byte reached the upstream's socket.
    pub(crate) fn request_sent(&self) -> bool {
        self.req_body.is_done()
            && !self.req_abandoned
            && self.to_upstream.as_ref().is_none_or(|b| b.is_empty())
    }

    /// The whole response was read from the upstream.
    pub(crate) fn response_done(&self) -> bool {
        matches!(self.resp, Resp::Done)
    }

    /// May the upstream connection go back to the pool (DESIGN.md §6)?
    /// Only after a complete, delimited HTTP/1.1 response without
    /// `Connection: close`, to a request sent whole, with nothing extra.
    pub(crate) fn reusable(&self) -> bool {
        self.response_done()
            && self.request_sent()
            && self.resp_keep_alive
            && !self.extra_bytes
            && !self.tunnel
    }

    /// May the request be sent again on a new connection after its
    /// upstream failed (DESIGN.md §7)? No response byte may have arrived;
    /// then either no request byte was written, or the connection was
    /// reused, the method is idempotent (RFC 9110 §9.2.2) and no body byte
    /// was written.
    pub(crate) fn may_retry(&self, max_retries: u32) -> bool {
        let no_response_byte = matches!(self.resp, Resp::AwaitHead)
            && !self.interim_sent
            && self.upin.as_ref().is_none_or(|b| b.is_empty());
        let head_len = self.head_bytes.len() as u64;
        let nothing_written = self.up_written == 0;
        let body_streamed = self.up_written > head_len;
        self.retries < max_retries
            && no_response_byte
            && !self.req_abandoned
            && (nothing_written || (self.reused && idempotent(&self.req.method) && !body_streamed))
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
}

/// Methods that may be repeated with the same effect (RFC 9110 §9.2.2).
pub(crate) fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

//! Starting a request on a client connection: the head found and parsed,
//! its plan ([`plan_request`]), the user's `request_filter` and
//! `upstream_peer` hooks, then an upstream connection attached — or the
//! proxy's own answer queued instead.
//!
//! What it must not know: how bytes move (the relay), the pool's choice.

use std::net::SocketAddr;
use std::time::Instant;

use super::{ClientConn, OwnReply, Result, State};
use crate::conn::Shared;
use crate::conn::access::Access;
use crate::conn::exchange::Exchange;
use crate::error::{ErrorKind, ProxyError};
use crate::http::{
    Forwarding, Headers, ParseError, ParseHead, Refusal, RequestHead, ResponseHead, ensure_host,
    plan_request,
};
use crate::stats::Stats;
use log::{debug, info};

impl ClientConn {
    pub(super) fn try_start_request(&mut self, sh: &mut Shared) -> Result<bool> {
        if self.side.out.as_ref().is_some_and(|b| !b.is_empty()) {
            return Ok(false);
        }
        let Some(buf) = self.side.inbuf.as_ref().filter(|b| !b.is_empty()) else {
            if self.side.read_eof || (self.draining && self.requests > 0) {
                self.set_state(State::Closed);
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
            if self.side.read_eof {
                debug!("client {}: closed inside a request head", self.side.addr);
                self.set_state(State::Closed);
                return Ok(true);
            }
            return Ok(false);
        };
        let mut ex = sh.take_exchange();
        let used = ex
            .req
            .parse_into(
                buf.as_slice().get(..len).unwrap_or(&[]),
                sh.cfg.max_header_count,
            )
            .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?
            .ok_or(ProxyError::downstream(ErrorKind::Parse(
                ParseError::Malformed("incomplete request head"),
            )))?;
        if let Some(b) = self.side.inbuf.as_mut() {
            b.consume(used);
        }
        self.scanner.reset();
        self.requests += 1;
        self.head_started = None;
        // The event that brought this head is used up: only a later one
        // makes a waiting client worth a look (`probe_client`).
        self.side.io.fresh = false;
        Stats::add(&sh.stats.requests, 1);
        self.set_state(State::Busy);
        self.start_request(ex, sh)?;
        self.release(sh, false);
        Ok(true)
    }

    /// Plans the request head parsed into `ex.req`, runs the hooks, and
    /// starts its exchange (or the proxy's own reply).
    pub(super) fn start_request(&mut self, mut ex: Box<Exchange>, sh: &mut Shared) -> Result<()> {
        let fwd = Forwarding {
            via: sh.cfg.add_via,
            x_forwarded_for: sh.cfg.add_x_forwarded_for,
            x_forwarded_proto: sh.cfg.add_x_forwarded_proto,
        };
        let req = &mut ex.req;
        let plan = match plan_request(req, self.side.addr.ip(), fwd) {
            Ok(plan) => plan,
            Err(refusal) => {
                self.own_reply = Some(OwnReply::new(req, 0, sh.now));
                sh.recycle_exchange(ex);
                return Err(ProxyError::downstream(match refusal {
                    Refusal::Invalid(e) => ErrorKind::Parse(e),
                    Refusal::NotImplemented => ErrorKind::NotImplemented,
                }));
            }
        };
        if !plan.keep_alive {
            self.keep_alive.clear("request");
        }
        if let Some(reply) = sh.filter.request_filter(req) {
            Stats::add(&sh.stats.filter_replies, 1);
            if plan.has_body() {
                // Its body is never read: it must not be parsed as a request.
                self.keep_alive.clear("reply to a request with a body");
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
        ensure_host(req, &peer.addr.to_string());
        ex.start(peer, plan.framing, plan.upgrade, plan.idempotent, sh.now);
        let mut to_up = sh.bufs.body(sh.cfg.high_watermark, sh.cfg.low_watermark);
        to_up.extend_from_slice(&ex.head_bytes);
        ex.to_upstream = Some(to_up);
        self.exchange = Some(ex);
        self.attach_upstream(sh, false)
    }

    /// Gives the exchange an upstream connection: pooled or new, or always
    /// new if `fresh` (a retry goes on a new connection, ARCHITECTURE.md §7).
    pub(super) fn attach_upstream(&mut self, sh: &mut Shared, fresh: bool) -> Result<()> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(());
        };
        let (key, reused) = sh
            .ups
            .acquire(
                ex.peer,
                self.id,
                fresh,
                ex.idempotent,
                &sh.registry,
                &sh.stats,
                sh.now,
            )
            .map_err(|e| {
                // The OS's words (e.g. "Too many open files"), not the kind.
                info!("upstream {}: connect failed: {e}", ex.peer.addr);
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    ProxyError::upstream(ErrorKind::NoDescriptor)
                } else {
                    ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))
                }
            })?;
        ex.upstream = Some(key);
        ex.reused = reused;
        ex.up_read_at = sh.now;
        ex.up_write_at = sh.now;
        ex.up_port = sh.ups.get(key).map_or(0, |u| u.local_port());
        Ok(())
    }

    /// Queues a response the proxy makes: status line, `fields`,
    /// `Content-Length`, `Connection: close` unless keep-alive, and `body`
    /// (left out for a HEAD request). Returns the bytes queued.
    pub(super) fn queue_reply(
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
        if !self.keep_alive.get() {
            head.headers.append("Connection", b"close");
        }
        let mut bytes = Vec::with_capacity(128 + body.len());
        head.encode(&mut bytes);
        if !head_only {
            bytes.extend_from_slice(body);
        }
        let out = self
            .side
            .out
            .get_or_insert_with(|| sh.bufs.body(sh.cfg.high_watermark, sh.cfg.low_watermark));
        if out.is_empty() {
            self.side.write_at = sh.now;
        }
        out.extend_from_slice(&bytes);
        // Try at once: the socket is usually writable.
        self.side.io.writable = true;
        bytes.len()
    }
}

impl OwnReply {
    pub(super) fn new(req: &RequestHead, status: u16, now: Instant) -> Self {
        OwnReply {
            method: req.method.clone(),
            target: req.target.clone(),
            version: req.version,
            status,
            bytes: 0,
            started: now,
        }
    }

    pub(super) fn log(&self, client: SocketAddr, now: Instant) {
        Access {
            client,
            method: &self.method,
            target: &self.target,
            version: self.version,
            status: self.status,
            upstream: None,
            upconn: None,
            req_body: 0,
            resp_bytes: self.bytes,
            started: self.started,
        }
        .log(now);
    }
}

//! Starting a request on a client connection: the head found and parsed,
//! its plan ([`plan_request`]), the user's `request_filter` and
//! `upstream_peer` hooks, then an upstream connection attached — or the
//! proxy's own answer queued instead.
//!
//! What it must not know: how bytes move (the relay), the pool's choice.

use crate::http::known::Known;
use std::net::SocketAddr;
use std::time::Instant;

use super::choose::{self, Dest};
use super::{ClientConn, OwnReply, Result, State};
use crate::cidr::{self, Cidr};
use crate::conn::Shared;
use crate::conn::access::{Access, Downstream, Termination, sniff_request_line};
use crate::conn::exchange::Exchange;
use crate::error::{ErrorKind, ProxyError};
use crate::filter::Reply;
use crate::http::forwarded::client_address;
use crate::http::request::ALLOW;
use crate::http::sniff::check_request_start;
use crate::http::{
    BodyKind, Forwarding, Headers, ParseError, ParseHead, Refusal, RequestHead, ResponseHead,
    ensure_host, finish_response_head, plan_request,
};
use crate::request_id::{self, RequestIds};
use crate::stats::Stats;
use crate::upstreams::spec::ProxyVersion;
use log::{debug, warn};

impl ClientConn {
    pub(super) fn try_start_request(&mut self, sh: &mut Shared) -> Result<bool> {
        if self.side.out.as_ref().is_some_and(|b| !b.is_empty()) {
            return Ok(false);
        }
        if !self.take_proxy_header(sh)? {
            if self.side.read_eof || self.state == State::Closed {
                self.set_state(State::Closed);
                return Ok(true);
            }
            return Ok(false);
        }
        let Some(buf) = self.side.inbuf.as_ref().filter(|b| !b.is_empty()) else {
            if self.side.read_eof {
                self.set_state(State::Closed);
                return Ok(true);
            }
            return Ok(false);
        };
        // Bytes that are not HTTP/1.x at all (TLS, the HTTP/2 preface) are
        // answered at once, not after the head timeout.
        check_request_start(buf.as_slice())
            .map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?;
        if self.side.stream.http_on_tls() {
            return Err(ProxyError::downstream(ErrorKind::Parse(
                ParseError::PlainHttpOnTlsPort,
            )));
        }
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
            via_name: &sh.via_name,
            x_forwarded_for: sh.cfg.add_x_forwarded_for,
            x_forwarded_proto: sh.cfg.add_x_forwarded_proto,
            tls: self.side.stream.is_tls(),
            client_cert: self.side.stream.client_cert_field(),
        };
        self.client = trusted_client(&ex.req, self.side.addr, &sh.cfg.trusted_proxies);
        if sh.cfg.request_id {
            let trusted = cidr::any_contains(&sh.cfg.trusted_proxies, self.side.addr.ip());
            stamp_request_id(&mut ex.req.headers, trusted, &mut sh.ids);
        }
        let req = &mut ex.req;
        let plan = match plan_request(req, self.side.addr.ip(), fwd) {
            Ok(plan) => plan,
            Err(Refusal::MaxForwards { status, keep_alive }) => {
                // RFC 9110 §7.6.2: the proxy is the final recipient.
                if !keep_alive {
                    self.keep_alive.clear("request");
                }
                if self.draining {
                    self.keep_alive.clear("drain");
                }
                let has_body = req.body_kind().map_or(true, |k| {
                    !matches!(k, BodyKind::Empty | BodyKind::Length(0))
                });
                let mut reply = Reply::new(status, "");
                reply.headers.append("Allow", ALLOW.as_bytes());
                self.answer_own(sh, ex, has_body, reply, Termination::ProxyReply);
                return Ok(());
            }
            Err(refusal) => {
                self.own_reply = Some(OwnReply::new(req, 0, sh.now, Termination::ProxyError));
                sh.recycle_exchange(ex);
                return Err(ProxyError::downstream(match refusal {
                    Refusal::Invalid(e) => ErrorKind::Parse(e),
                    Refusal::LoopDetected => ErrorKind::LoopDetected,
                    Refusal::NotImplemented | Refusal::MaxForwards { .. } => {
                        ErrorKind::NotImplemented
                    }
                }));
            }
        };
        if !plan.keep_alive {
            self.keep_alive.clear("request");
        }
        if self.draining {
            // The last request of this connection (ARCHITECTURE.md §12).
            self.keep_alive.clear("drain");
        }
        if let Some(reply) = sh.filter.request_filter(req) {
            Stats::add(&sh.stats.filter_replies, 1);
            self.answer_own(sh, ex, plan.has_body(), reply, Termination::ProxyReply);
            return Ok(());
        }
        let dest = choose::aim(sh, &ex.req, self.side.stream.is_tls());
        let route = match dest {
            Dest::Group { route, .. } => route,
            _ => None,
        };
        let verdict = self.edge_verdict(sh, &ex.req, route, plan.framing);
        if let Some((reply, how)) = verdict.answer {
            if !matches!(how, Termination::Redirect | Termination::FixedAnswer) {
                // A refusal (403, 413): the proxy's own error answers.
                super::outcome::count_status(&sh.stats, reply.status);
            }
            self.answer_own(sh, ex, plan.has_body(), reply, how);
            return Ok(());
        }
        let client_ip = self.client_addr().ip();
        let (group, peer, panic, hash) = match choose::pick_first(sh, dest, client_ip, &ex.req) {
            Dest::Server {
                group,
                peer,
                panic,
                hash,
            } => (group, peer, panic, hash),
            Dest::NoRoute => {
                // The proxy refuses it (no upstream to ask): counted and
                // logged as its own error answer, not as a filter's reply.
                let body = "404 Not Found: no route for this host and path\n";
                super::outcome::count_status(&sh.stats, 404);
                let reply = Reply::new(404, body);
                self.answer_own(sh, ex, plan.has_body(), reply, Termination::ProxyError);
                return Ok(());
            }
            Dest::Unavailable { group, retry_after } => {
                let secs = retry_after.as_secs().min(u64::from(u32::MAX)) as u32;
                if let Some(more) = sh.warn_limit.allow(sh.now) {
                    let name = sh.groups.get(group).map_or("-", |g| g.spec.name.get_ref());
                    warn!(
                        "upstream group {name}: no server available, answered 503 \
                         (Retry-After: {secs}) to {} {}: {}{more}",
                        ex.req.method,
                        crate::text::cut(&ex.req.target, 200),
                        sh.groups.why_out(group, sh.now)
                    );
                }
                self.own_reply = Some(OwnReply::new(&ex.req, 0, sh.now, Termination::ProxyError));
                sh.recycle_exchange(ex);
                return Err(ProxyError::upstream(ErrorKind::Unavailable {
                    retry_after: secs,
                }));
            }
            Dest::Group { .. } => {
                // Not returned by `pick_first`; answered as no server.
                self.own_reply = Some(OwnReply::new(&ex.req, 0, sh.now, Termination::ProxyError));
                sh.recycle_exchange(ex);
                return Err(ProxyError::upstream(ErrorKind::NoServer));
            }
            Dest::NoServer(why) => {
                warn!("client {}: {why}", self.side.addr);
                self.own_reply = Some(OwnReply::new(&ex.req, 0, sh.now, Termination::ProxyError));
                sh.recycle_exchange(ex);
                return Err(ProxyError::upstream(ErrorKind::NoServer));
            }
        };
        let req = &mut ex.req;
        // An HTTP/1.0 request without Host gets the first server's
        // address; a retry on another server keeps it (ARCHITECTURE.md §6).
        ensure_host(req, peer.addr);
        let tls = self.side.stream.is_tls();
        let spec = route.and_then(|i| sh.cfg.route.get(i).map(|r| (i, r)));
        if let Some((_, r)) = spec {
            r.request_rules()
                .apply_to_request(&mut ex.req, tls, client_ip);
        }
        ex.start(peer, plan.framing, plan.upgrade, plan.idempotent, sh.now);
        ex.max_body = verdict.max_body;
        ex.timeouts = crate::conn::exchange::Timeouts::of_route(&sh.cfg, route);
        ex.resp_rules = spec
            .filter(|(_, r)| !r.response_rules().is_empty())
            .map(|(i, _)| (i, tls, client_ip));
        ex.expect_continue = plan.expect_continue;
        ex.group = group;
        ex.in_flight = group.is_some();
        ex.panic = panic;
        // Panic mode's tries share one connect timeout (ARCHITECTURE.md §13).
        ex.panic_until = panic.then(|| sh.now + ex.connect_timeout(&sh.cfg));
        ex.hash = hash;
        ex.tried.push(peer.addr);
        let mut to_up = sh.bufs.body(sh.cfg.high_watermark, sh.cfg.low_watermark);
        to_up.extend_from_slice(&ex.head_bytes);
        ex.to_upstream = Some(to_up);
        self.exchange = Some(ex);
        self.attach_upstream(sh, false)
    }

    /// Answers the request in `ex` with `reply`, the proxy's own, instead
    /// of forwarding it (from `request_filter`, a 404 when no route
    /// matches, `Max-Forwards: 0`). A request with a body closes the
    /// connection afterwards: its body is never read, so it must not be
    /// parsed as a request. `how` is its termination state (`ProxyReply`,
    /// or `ProxyError` for the no-route 404).
    fn answer_own(
        &mut self,
        sh: &mut Shared,
        ex: Box<Exchange>,
        has_body: bool,
        reply: Reply,
        how: Termination,
    ) {
        if has_body {
            // Its body is never read: it must not be parsed as a request.
            self.keep_alive.clear("reply to a request with a body");
            self.linger = true;
        }
        let mut own = OwnReply::new(&ex.req, reply.status, sh.now, how);
        let head_only = ex.req.is_method("HEAD");
        let version = ex.req.version;
        sh.recycle_exchange(ex);
        self.queue_reply(
            sh,
            reply.status,
            &reply.headers,
            &reply.body,
            head_only,
            version,
        );
        own.bytes = if head_only {
            0
        } else {
            reply.body.len() as u64
        };
        self.own_reply = Some(own);
    }

    /// Gives the exchange an upstream connection: pooled or new, or always
    /// new if `fresh` (a retry goes on a new connection, ARCHITECTURE.md §7).
    pub(super) fn attach_upstream(&mut self, sh: &mut Shared, fresh: bool) -> Result<()> {
        let group = self.exchange.as_deref().and_then(|ex| ex.group);
        let preface = self.proxy_preface(sh, group);
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(());
        };
        let tls = ex.peer.tls.and_then(|id| sh.tls_ids.get(id));
        let (key, reused) = sh
            .ups
            .acquire(
                ex.peer,
                tls,
                self.id,
                fresh,
                ex.idempotent,
                preface,
                &sh.registry,
                &sh.stats,
                sh.now,
            )
            .map_err(|e| {
                // The OS's words (e.g. "Too many open files"), not the kind.
                if let Some(more) = sh.warn_limit.allow(sh.now) {
                    warn!("upstream {}: connect failed: {e}{more}", ex.peer.addr);
                }
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    ProxyError::upstream(ErrorKind::NoDescriptor)
                } else {
                    ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))
                }
            })?;
        ex.upstream = Some(key);
        ex.reused = reused;
        ex.connect_time = None;
        ex.connect_began = (!reused).then(Instant::now);
        ex.up_read_at = sh.now;
        ex.up_write_at = sh.now;
        ex.up_port = sh.ups.get(key).map_or(0, |u| u.local_port());
        Ok(())
    }

    /// The PROXY header a new connection to a server of `group` starts
    /// with (its `send_proxy_protocol`; empty: none): from the client's
    /// address (after the PROXY header in and `trusted_proxies`) to the
    /// address it connected to.
    fn proxy_preface(&self, sh: &Shared, group: Option<usize>) -> Vec<u8> {
        let mut out = Vec::new();
        let Some(version) = group
            .and_then(|g| sh.groups.get(g))
            .and_then(|g| g.spec.send_proxy_protocol)
        else {
            return out;
        };
        let src = self.client_addr();
        let dst = self
            .side
            .stream
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::new(src.ip(), 0));
        match version {
            ProxyVersion::V1 => crate::proxy_protocol::write::v1(src, dst, &mut out),
            ProxyVersion::V2 => crate::proxy_protocol::write::v2(src, dst, &mut out),
        }
        out
    }

    /// Queues a response the proxy makes: status line, `fields`, `Date`
    /// (unless `fields` has one), `Content-Length`, `Connection: close`
    /// unless keep-alive (`keep-alive` to an HTTP/1.0 client, whose
    /// `request_version` is 0), and `body` (left out for a HEAD request).
    /// Returns the bytes queued.
    pub(super) fn queue_reply(
        &mut self,
        sh: &mut Shared,
        status: u16,
        fields: &Headers,
        body: &[u8],
        head_only: bool,
        request_version: u8,
    ) -> usize {
        let mut head = ResponseHead::new(status);
        for (name, value) in fields.iter() {
            if !name.eq_ignore_ascii_case("content-length")
                && !name.eq_ignore_ascii_case("connection")
            {
                head.headers.append(name, value);
            }
        }
        if !head.headers.has_known(Known::Date) {
            // RFC 9110 §6.6.1; a filter's own Date stays.
            head.headers.append_known(Known::Date, sh.date.value());
        }
        head.headers
            .append_known(Known::ContentLength, body.len().to_string().as_bytes());
        // RFC 9112 §9.3: `close`, or `keep-alive` for an HTTP/1.0 client.
        finish_response_head(&mut head, false, request_version, self.keep_alive.get());
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

/// Gives `headers` their `X-Request-Id`: the one that came, when the peer
/// is `trusted` and it is one keepable field, else a new one from `ids`
/// in place of any that came (docs/edge.md "Request ids").
fn stamp_request_id(headers: &mut Headers, trusted: bool, ids: &mut RequestIds) {
    if trusted {
        let mut came = headers.get_all(request_id::FIELD);
        if let (Some(v), None) = (came.next(), came.next())
            && request_id::keepable(v)
        {
            return;
        }
    }
    headers.remove_all(request_id::FIELD);
    headers.append(request_id::FIELD, &ids.next_id());
}

/// The client address `X-Forwarded-For` gives for a request from `peer`
/// when `peer` is one of `trusted` (ARCHITECTURE.md §6, docs/configuration.md,
/// "Edge rules"); `None` when it is the peer's own.
fn trusted_client(req: &RequestHead, peer: SocketAddr, trusted: &[Cidr]) -> Option<SocketAddr> {
    if trusted.is_empty() {
        return None;
    }
    let ip = client_address(&req.headers, peer.ip(), |a| cidr::any_contains(trusted, a));
    (ip != peer.ip().to_canonical() && ip != peer.ip()).then(|| SocketAddr::new(ip, 0))
}

impl OwnReply {
    pub(super) fn new(req: &RequestHead, status: u16, now: Instant, how: Termination) -> Self {
        OwnReply {
            method: req.method.clone(),
            target: req.target.clone().into_bytes(),
            version: Some(req.version),
            host: req.headers.get_known(Known::Host).map(<[u8]>::to_vec),
            request_id: req.headers.get(request_id::FIELD).map(<[u8]>::to_vec),
            status,
            bytes: 0,
            started: now,
            termination: how,
        }
    }

    /// The answer to a head that could not be read: what its first line
    /// looks like, from the bytes that came.
    pub(super) fn unreadable(head: &[u8], status: u16, started: Instant) -> Self {
        let (method, target) = sniff_request_line(head);
        OwnReply {
            method,
            target,
            version: None,
            host: None,
            request_id: None,
            status,
            bytes: 0,
            started,
            termination: Termination::ProxyError,
        }
    }

    pub(super) fn log(&self, client: Downstream<'_>, sh: &mut Shared) {
        Access {
            client: client.addr,
            tls: client.tls,
            method: &self.method,
            target: &self.target,
            version: self.version,
            host: self.host.as_deref(),
            request_id: self.request_id.as_deref(),
            status: self.status,
            bytes_in: 0,
            bytes_out: self.bytes,
            started: self.started,
            upstream: None,
            connect: None,
            first_byte: None,
            reused: None,
            retries: 0,
            attempts: &[],
            termination: self.termination,
        }
        .record(&sh.stats, &mut sh.access);
    }
}

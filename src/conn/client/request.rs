//! Starting a request on an HTTP/1 client connection: the head found and
//! parsed, then started by `begin` (plan, hooks, edge rules, upstream) —
//! or the proxy's own answer encoded as an HTTP/1 response and queued.
//!
//! What it must not know: how bytes move (the relay), the pool's choice.

use crate::http::known::Known;

use super::{ClientConn, OwnReply, Result, State};
use crate::conn::Shared;
use crate::conn::access::Termination;
use crate::conn::begin::{self, Begin, Origin};
use crate::conn::exchange::Exchange;
use crate::error::{ErrorKind, ProxyError};
use crate::filter::Reply;
use crate::http::sniff::check_request_start;
use crate::http::{Headers, ParseError, ParseHead, ResponseHead, finish_response_head};
use crate::stats::Stats;
use log::debug;

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
        if self.requests == 0 && self.side.stream.alpn_h2() {
            // TLS chose HTTP/2 (RFC 9113 §3.2).
            self.set_state(State::ToH2);
            return Ok(true);
        }
        let Some(buf) = self.side.inbuf.as_ref().filter(|b| !b.is_empty()) else {
            if self.side.read_eof {
                self.set_state(State::Closed);
                return Ok(true);
            }
            return Ok(false);
        };
        // Plaintext on a TLS port (an HTTP/1 request line or the HTTP/2
        // preface: the transport dropped its session when it saw them) is
        // answered 400 before anything else looks at it, so neither
        // `http2_cleartext` nor a request can get past the handshake and
        // its client-certificate check (DESIGN.md §8).
        if self.side.stream.http_on_tls() {
            return Err(ProxyError::downstream(ErrorKind::Parse(
                ParseError::PlainHttpOnTlsPort,
            )));
        }
        // Bytes that are not HTTP/1.x at all (TLS, the HTTP/2 preface) are
        // answered at once, not after the head timeout; the preface on a
        // plain connection with `http2_cleartext` starts HTTP/2 (RFC 9113
        // §3.3).
        match check_request_start(buf.as_slice()) {
            Err(ParseError::Http2Preface)
                if sh.cfg.http2_cleartext && self.requests == 0 && !self.side.stream.is_tls() =>
            {
                self.set_state(State::ToH2);
                return Ok(true);
            }
            r => r.map_err(|e| ProxyError::downstream(ErrorKind::Parse(e)))?,
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
        Stats::add(&sh.stats.h1_requests, 1);
        if self.requests == 1 {
            Stats::add(&sh.stats.h1_connections, 1);
        }
        self.set_state(State::Busy);
        self.start_request(ex, sh)?;
        self.release(sh, false);
        Ok(true)
    }

    /// What starting a request needs to know of this connection.
    pub(super) fn origin(&self) -> Origin<'_> {
        Origin {
            id: self.id,
            peer: self.side.addr,
            tls: self.side.stream.is_tls(),
            h2: false,
            client_cert: self.side.stream.client_cert_field(),
            stream: &self.side.stream,
        }
    }

    /// Plans the request head parsed into `ex.req`, runs the hooks, and
    /// starts its exchange (or the proxy's own reply): `begin::begin`.
    pub(super) fn start_request(&mut self, ex: Box<Exchange>, sh: &mut Shared) -> Result<()> {
        let begun = {
            let origin = self.origin();
            begin::begin(sh, ex, &origin)
        };
        self.client = begun.client;
        if !begun.keep_alive {
            self.keep_alive.clear("request");
        }
        if self.draining {
            // The last request of this connection (ARCHITECTURE.md §12).
            self.keep_alive.clear("drain");
        }
        // `requests` counts this one (at least 1), so a cap of 0 never
        // matches; it grows by one per request and a loop's configuration
        // never changes (a reload is a new loop): one compare per request.
        if self.requests == u64::from(sh.cfg.max_requests_per_connection) {
            debug!(
                "client {}: request {} reached max_requests_per_connection: closes after its response",
                self.side.addr, self.requests
            );
            self.keep_alive.clear("max_requests_per_connection");
        }
        match begun.begin {
            Begin::Forward { ex, attached } => {
                self.exchange = Some(ex);
                attached
            }
            Begin::Own {
                ex,
                reply,
                has_body,
                how,
            } => {
                self.answer_own(sh, ex, has_body, reply, how);
                Ok(())
            }
            Begin::Refused { own, err } => {
                self.own_reply = Some(own);
                Err(err)
            }
        }
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

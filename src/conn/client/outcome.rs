//! How a client connection's request ends: the exchange advanced to its
//! end (upstream parked or closed, client kept or closed), a failure
//! answered per the error table or retried (ARCHITECTURE.md §7, §8), and
//! the lingering close.
//!
//! What it must not know: how bytes move (the relay), head syntax.

use std::time::Instant;

use super::{ClientConn, LINGER, OwnReply, Result, State};
use crate::conn::access::Termination;
use crate::conn::response_head::take_response_head;
use crate::conn::{Shared, relay};
use crate::conn::{begin, failed_try};
use crate::error::{Answer, ErrorKind, ProxyError, Side, Timeout};
use crate::http::{Headers, ParseError, reason_phrase};
use crate::stats::Stats;
use log::debug;

impl ClientConn {
    pub(super) fn advance_exchange(&mut self, sh: &mut Shared) -> Result<bool> {
        let Some(ex) = self.exchange.as_deref_mut() else {
            // A reply the proxy wrote itself: done when flushed.
            if self.side.out.as_ref().is_none_or(|b| b.is_empty()) {
                self.finish_request(sh);
                return Ok(true);
            }
            return Ok(false);
        };
        let (mut env, _, filter) = sh.split();
        let mut progress = relay::feed_request(&mut self.side, ex, &mut env)?;
        // Every complete head buffered: interim (1xx) heads and the final
        // one may come in one read with the upstream's FIN behind them, and
        // the next read would see only that FIN. Bounded: each turn takes
        // one head out of the buffer, and the final head ends the loop.
        while take_response_head(&mut self.side, ex, &mut env, filter, &mut self.keep_alive)? {
            progress = true;
        }
        progress |= self.release_upstream(sh);
        progress |= self.half_close_tunnel(sh);
        let finished = self
            .exchange
            .as_ref()
            .is_some_and(|ex| ex.upstream.is_none() && ex.response_done())
            && self.side.out.as_ref().is_none_or(|b| b.is_empty());
        if finished {
            self.finish_request(sh);
            progress = true;
        }
        Ok(progress)
    }

    /// A tunnel whose upstream sent EOF first: once every byte of it went
    /// to the client, the client gets the EOF too (our sending side shut),
    /// and its bytes go on to the upstream until its own EOF (a half-close
    /// passed on, as one from the client is).
    fn half_close_tunnel(&mut self, sh: &mut Shared) -> bool {
        let upstream_done = self
            .exchange
            .as_ref()
            .is_some_and(|ex| ex.tunnel && ex.response_done() && ex.upstream.is_some());
        if !upstream_done
            || self.side.write_shut
            || self.side.out.as_ref().is_some_and(|b| !b.is_empty())
            || self.side.stream.wants_write()
        {
            return false;
        }
        self.side
            .stream
            .shutdown_write(&mut self.side.io, &sh.stats);
        self.side.write_shut = true;
        true
    }

    /// Parks or closes the upstream once its part is over
    /// (`begin::release_upstream`); a request body left unread ends
    /// keep-alive.
    pub(super) fn release_upstream(&mut self, sh: &mut Shared) -> bool {
        let Some(ex) = self.exchange.as_deref_mut() else {
            return false;
        };
        let (progress, unread) = begin::release_upstream(ex, sh);
        if unread {
            self.keep_alive.clear("request body not read");
        }
        progress
    }

    pub(super) fn finish_request(&mut self, sh: &mut Shared) {
        // Bytes the client sent after this request (buffered, or seen
        // waiting in the socket by the probe) make a close linger: closing
        // over unread bytes sends a reset, which can destroy the response
        // still on its way (RFC 9112 §9.6).
        if self
            .exchange
            .as_ref()
            .is_some_and(|e| e.request_abandoned())
            || self.side.inbuf.as_ref().is_some_and(|b| !b.is_empty())
            || self.pipelined
        {
            self.linger = true;
        }
        self.pipelined = false;
        if let Some(ex) = self.exchange.take() {
            ex.end(self.downstream(), None, 0, Termination::Complete, sh);
        } else if let Some(r) = self.own_reply.take() {
            r.log(self.downstream(), sh);
        }
        self.client = None;
        if !self.closes_after_response() {
            self.set_state(State::Head);
            self.idle_since = sh.now;
            self.release(sh, false);
            if self.side.inbuf.is_none() {
                self.set_idle(true, &sh.stats);
            }
        } else {
            self.set_state(State::Closing { linger_until: None });
        }
    }

    /// The connection closes (or shuts down its sending side) once the
    /// current response is out: no keep-alive, or the client's FIN came
    /// with no pipelined request behind it. Once true, it stays true for
    /// this response (keep-alive is only ever cleared, a FIN only comes).
    pub(super) fn closes_after_response(&self) -> bool {
        // After the client's FIN, requests it already sent (pipelined, in
        // `inbuf`) are still served; the connection closes once they are.
        let more = !self.side.read_eof || self.side.inbuf.as_ref().is_some_and(|b| !b.is_empty());
        !(self.keep_alive.get() && more)
    }

    /// The bytes pending for the client are the last before a FIN: the
    /// connection is closing, or its response is whole in the buffer and
    /// the connection closes after it.
    pub(super) fn fin_follows_flush(&self) -> bool {
        match self.state {
            State::Closing { .. } => true,
            State::Busy => {
                self.exchange.as_ref().is_none_or(|ex| ex.response_done())
                    && self.closes_after_response()
            }
            State::Head | State::Closed | State::ToH2 => false,
        }
    }

    /// Since when the connection waits in keep-alive between requests with
    /// no byte of the next one; `None` otherwise (a fresh connection's
    /// first request may be on its way). The loop closes the longest-idle
    /// one to make room at the connection cap.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        let idle = self.state == State::Head
            && self.requests > 0
            && self.side.inbuf.is_none()
            && !self.draining;
        idle.then_some(self.idle_since)
    }

    /// Closes an idle connection to make room for a new client (nginx
    /// closes keep-alive connections when it runs out of connections).
    pub(crate) fn close_for_room(&mut self, stats: &Stats) {
        Stats::add(&stats.downstream_closed_for_room, 1);
        debug!("client {}: closed to make room", self.side.addr);
        self.set_state(State::Closed);
    }

    pub(super) fn advance_closing(&mut self, sh: &mut Shared) -> bool {
        let State::Closing { linger_until } = self.state else {
            return false;
        };
        // TLS records the transport holds (the last ones, `close_notify`)
        // go before the FIN and the close.
        if self.side.out.as_ref().is_some_and(|b| !b.is_empty()) || self.side.stream.wants_write() {
            return false;
        }
        if self.side.read_eof || !self.linger {
            if !self.side.read_eof {
                // The last bytes went with MSG_MORE (`write_before_fin`):
                // the FIN sends them before the close can turn into a
                // reset (bytes the client sent since would make it one,
                // and a reset drops what is still held).
                self.side
                    .stream
                    .shutdown_write(&mut self.side.io, &sh.stats);
            }
            self.set_state(State::Closed);
            return true;
        }
        if linger_until.is_none() {
            self.side
                .stream
                .shutdown_write(&mut self.side.io, &sh.stats);
            self.set_state(State::Closing {
                linger_until: Some(sh.now + LINGER),
            });
            self.release(sh, true);
            return true;
        }
        false
    }

    // ---- errors ----

    /// Ends the exchange after `err` (or retries it, ARCHITECTURE.md §7):
    /// the client gets what the error table says (ARCHITECTURE.md §8).
    pub(super) fn fail(&mut self, mut err: ProxyError, sh: &mut Shared) {
        if err.side == Side::Upstream {
            if let Some(ex) = self.exchange.as_deref_mut() {
                failed_try::note_failed_try(ex, &err, sh);
            }
            match self.try_retry(&err, sh) {
                Ok(true) => return,
                Ok(false) => {}
                // The retry found no descriptor: that is the answer (503).
                Err(e) => err = e,
            }
        }
        let started = self.exchange.as_ref().is_some_and(|e| e.resp_head_sent);
        let answer = err.answer(started, self.head_bytes_seen());
        if err.side == Side::Downstream {
            debug!("client {}: {err}", self.side.addr);
        } else {
            // Errors a user acts on: warn, at most once a second.
            failed_try::warn_upstream_failure(sh, self.exchange.as_deref(), &err, answer);
        }
        self.keep_alive.clear("error");
        self.linger = true;
        let client_gone = err.side == Side::Downstream
            && matches!(
                err.kind,
                ErrorKind::Io(_) | ErrorKind::Timeout(Timeout::ClientSend)
            )
            || self.state == State::Closed;
        // The proxy's own answer, if any, is queued first so the access
        // line can count its bytes.
        let mut status = None;
        let mut reply_len = 0;
        match answer {
            _ if client_gone => {
                self.set_state(State::Closed);
                if !started {
                    // The access log says the client left (nginx's 499).
                    status = Some(499);
                }
            }
            Answer::Status(code) => {
                begin::count_status(&sh.stats, code);
                if let Some(out) = self.side.out.as_mut() {
                    out.clear();
                }
                let body = if err.kind == ErrorKind::Parse(ParseError::PlainHttpOnTlsPort) {
                    format!(
                        "{} {}: this port speaks HTTPS; use an https:// URL\n",
                        code,
                        reason_phrase(code)
                    )
                } else if err.kind == ErrorKind::Parse(ParseError::BodyTooLarge) {
                    // The words of the 413 a `Content-Length` gets at once
                    // (`edge.rs`), for a chunked body found too large later.
                    format!(
                        "{} {}: the body is over max_body_size\n",
                        code,
                        reason_phrase(code)
                    )
                } else {
                    format!("{} {}\n", code, reason_phrase(code))
                };
                let mut fields = Headers::new();
                fields.append("Content-Type", b"text/plain");
                if code == 503 {
                    fields.append("Retry-After", err.retry_after().to_string().as_bytes());
                }
                // A HEAD request's answer has no body (RFC 9110 §9.3.2).
                let head_only = match (&self.exchange, &self.own_reply) {
                    (Some(ex), _) => ex.req.is_method("HEAD"),
                    (None, Some(r)) => r.method == "HEAD",
                    (None, None) => false,
                };
                // Keep-alive is off here: `Connection: close` whatever the version.
                self.queue_reply(sh, code, &fields, body.as_bytes(), head_only, 1);
                reply_len = if head_only { 0 } else { body.len() as u64 };
                status = Some(code);
                self.set_state(State::Closing { linger_until: None });
            }
            Answer::Close => {
                // Pending bytes are whole parts of the response; flush them,
                // then close: a chunked body never gets its last chunk.
                self.set_state(State::Closing { linger_until: None });
                if started {
                    // The response was cut: over TLS the session ends
                    // without `close_notify`, so a client can tell even a
                    // close-delimited body was not whole (RFC 9112 §9.8).
                    self.side.stream.cut();
                }
                if !started && err.side == Side::Downstream {
                    // The client closed before any answer (mid-body, say):
                    // logged as 499, as a reset is.
                    status = Some(499);
                }
            }
        }
        let how = Termination::of_error(&err);
        if let Some(ex) = self.exchange.take() {
            ex.end(self.downstream(), status, reply_len, how, sh);
        } else if let Some(mut r) = self.own_reply.take() {
            if let Some(code) = status {
                r.status = code;
                r.bytes = reply_len;
            }
            if r.termination != Termination::ProxyError {
                r.termination = how;
            }
            r.log(self.downstream(), sh);
        } else if let (Some(code @ (400..=498 | 500..=599)), Some(head)) =
            (status, self.side.inbuf.as_ref().filter(|b| !b.is_empty()))
        {
            // A head that could not be read (400/414/431, 505 for an
            // HTTP/2 preface, or 408 for part of one): its answer gets a
            // record too.
            let started = self.head_started.unwrap_or(sh.now);
            let mut r = OwnReply::unreadable(head.as_slice(), code, started);
            r.termination = how;
            r.bytes = reply_len;
            r.log(self.downstream(), sh);
        }
    }

    /// Sends the request again on a new upstream connection if the retry
    /// rules allow it (`failed_try::retry`).
    ///
    /// Errors: the retry's connect found no descriptor (`NoDescriptor`).
    pub(super) fn try_retry(&mut self, err: &ProxyError, sh: &mut Shared) -> Result<bool> {
        let client = self.client_addr();
        let Some(ex) = self.exchange.as_deref_mut() else {
            return Ok(false);
        };
        failed_try::retry(ex, err, sh, self.id, client, &self.side.stream)
    }
}

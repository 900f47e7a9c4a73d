//! The exchanges of an HTTP/2 connection's streams: started by `begin`
//! like any request, relayed by the same pumps (`relay`), their response
//! heads taken by `response_head::take_head` and sent as HEADERS frames;
//! failures answered by the error table (ARCHITECTURE.md §8) on the
//! stream alone, or retried by the same rules — an upstream that closes
//! mid-body lets its stream send the bytes it holds before the reset;
//! one record per stream.
//!
//! What it must not know: frame syntax beyond the codec's encoders,
//! sockets.

use log::debug;

use super::H2Conn;
use super::stream::Sent;
use crate::conn::Shared;
use crate::conn::access::{Downstream, Termination};
use crate::conn::begin::{self, Begin, Origin};
use crate::conn::failed_try;
use crate::conn::own_reply::OwnReply;
use crate::conn::relay;
use crate::conn::response_head::{self, Taken};
use crate::error::{Answer, ErrorKind, ProxyError, Side};
use crate::filter::Reply;
use crate::h2::hpack::Encoder;
use crate::h2::map::{encode_response_head, has_content};
use crate::h2::stream_state::{Closure, Send, StreamState, on_send};
use crate::h2::{ErrorCode, frame};
use crate::http::known::Known;
use crate::http::{ResponseHead, reason_phrase};

impl H2Conn {
    /// Whom stream `i`'s record is about.
    fn downstream_of(&self, i: usize) -> Downstream<'_> {
        let s = self.streams.get(i);
        Downstream {
            addr: s.and_then(|s| s.client).unwrap_or(self.addr),
            tls: self.tx.tls_facts(),
            stream: s.map(|s| s.id),
        }
    }

    /// Starts the streams whose heads came in the last read and were not
    /// reset by it (`begin::begin`).
    pub(super) fn start_streams(&mut self, sh: &mut Shared) -> bool {
        let mut progress = false;
        for i in 0..self.streams.len() {
            let Some(ex) = self.streams.get_mut(i).and_then(|s| s.pending.take()) else {
                continue;
            };
            progress = true;
            let begun = {
                let origin = Origin {
                    id: self.id,
                    peer: self.addr,
                    tls: self.tx.is_tls(),
                    h2: true,
                    client_cert: self.tx.client_cert_field(),
                    stream: &self.tx,
                };
                begin::begin(sh, ex, &origin)
            };
            let Some(s) = self.streams.get_mut(i) else {
                continue;
            };
            s.client = begun.client;
            match begun.begin {
                Begin::Forward { mut ex, attached } => {
                    // Chunked responses are de-chunked into DATA, and
                    // their trailers kept for a HEADERS frame.
                    ex.keep_trailers = true;
                    s.ex = Some(ex);
                    if let Err(e) = s.feed_early() {
                        self.fail_stream(i, ProxyError::downstream(ErrorKind::Parse(e)), sh);
                        continue;
                    }
                    if let Err(e) = attached {
                        self.fail_stream(i, e, sh);
                    }
                }
                Begin::Own {
                    ex,
                    reply,
                    has_body: _,
                    how,
                } => {
                    s.early.clear();
                    s.early_trailers = None;
                    let own = OwnReply::new(&ex.req, reply.status, sh.now, how);
                    let head_only = ex.req.is_method("HEAD");
                    sh.recycle_exchange(ex);
                    s.own = Some(own);
                    self.send_answer(i, &reply, head_only, sh);
                }
                Begin::Refused { own, err } => {
                    s.early.clear();
                    s.early_trailers = None;
                    s.own = Some(own);
                    self.fail_stream(i, err, sh);
                }
            }
        }
        progress
    }

    /// Moves each stream's exchange: the request toward its upstream, the
    /// response into the stream's body buffer, response heads out as
    /// HEADERS frames; a finished upstream is parked or closed.
    pub(super) fn step_streams(&mut self, sh: &mut Shared) -> bool {
        let mut progress = false;
        for i in 0..self.streams.len() {
            match self.step_stream(i, sh) {
                Ok(p) => progress |= p,
                Err(e) => {
                    self.fail_stream(i, e, sh);
                    progress = true;
                }
            }
        }
        progress
    }

    fn step_stream(&mut self, i: usize, sh: &mut Shared) -> Result<bool, ProxyError> {
        let mut progress = false;
        let (mut env, ups, filter) = sh.split();
        let Some(s) = self.streams.get_mut(i) else {
            return Ok(false);
        };
        let Some(ex) = s.ex.as_deref_mut() else {
            return Ok(false);
        };
        if let Some(up) = ex.upstream.and_then(|k| ups.get_mut(k)) {
            progress |= relay::write_request(ex, up, &mut env)?;
            progress |= relay::read_response(&mut s.out, ex, up, &mut env)?;
        }
        // Every complete head buffered (1xx heads, then the final one).
        // Bounded: each turn takes one head out of the buffer, and the
        // final head ends the loop.
        while let Some((used, taken)) = response_head::take_head(ex, &mut env, filter)? {
            progress = true;
            if let Some(upin) = ex.upin.as_mut() {
                upin.consume(used);
            }
            let head_only = !has_content(&ex.req.method, ex.resp_head.status);
            match taken {
                Taken::Interim { forward } => {
                    if forward {
                        let (hpack, block) = (&mut self.hpack_out, &mut self.block);
                        let max_frame = self.peer.max_frame_size;
                        head_frames(
                            hpack,
                            block,
                            &mut self.scratch,
                            s.id,
                            &ex.resp_head,
                            false,
                            max_frame,
                        );
                        let q = &self.scratch;
                        queue_into(&mut self.out, &mut self.write_at, env.bufs, env.now, q);
                    }
                }
                Taken::Final { .. } => {
                    let out = s.out.get_or_insert_with(|| env.body_buffer());
                    response_head::move_body_after_taken_head(ex, out, &mut env)?;
                    if head_only {
                        // RFC 9110 §6.4.1: no content, whatever came.
                        out.clear();
                    }
                    let ends = ex.response_done() && out.is_empty() && ex.trailers.is_empty();
                    let (hpack, block) = (&mut self.hpack_out, &mut self.block);
                    let max_frame = self.peer.max_frame_size;
                    head_frames(
                        hpack,
                        block,
                        &mut self.scratch,
                        s.id,
                        &ex.resp_head,
                        ends,
                        max_frame,
                    );
                    let q = &self.scratch;
                    queue_into(&mut self.out, &mut self.write_at, env.bufs, env.now, q);
                    s.state = on_send(s.state, Send::Headers { end_stream: ends });
                    s.sent = if ends { Sent::End } else { Sent::Head };
                    s.write_at = env.now;
                    break;
                }
            }
        }
        // A drained buffer goes back to the pool once the response is all
        // read; until then the stream keeps it, so an adaptive buffer
        // keeps its streak and grows for a sink that keeps up (a fresh one
        // per read would stay at 16 KiB: one record per write).
        if ex.response_done()
            && s.out.as_ref().is_some_and(|b| b.is_empty())
            && let Some(b) = s.out.take()
        {
            env.bufs.put_buffer(b);
        }
        let (released, _) = begin::release_upstream(ex, sh);
        Ok(progress | released)
    }

    /// Answers stream `i` with the proxy's own `reply` (HEADERS, then the
    /// body as DATA; `head_only` for HEAD: no body).
    pub(super) fn send_answer(
        &mut self,
        i: usize,
        reply: &Reply,
        head_only: bool,
        sh: &mut Shared,
    ) {
        let mut head = ResponseHead::new(reply.status);
        for (name, value) in reply.headers.iter() {
            if !name.eq_ignore_ascii_case("content-length") {
                head.headers.append(name, value);
            }
        }
        if !head.headers.has_known(Known::Date) {
            head.headers.append_known(Known::Date, sh.date.value());
        }
        let no_content = !has_content(if head_only { "HEAD" } else { "GET" }, reply.status);
        if reply.status != 204 && reply.status != 304 {
            head.headers.append_known(
                Known::ContentLength,
                reply.body.len().to_string().as_bytes(),
            );
        }
        let body: &[u8] = if no_content { &[] } else { &reply.body };
        let Some(s) = self.streams.get_mut(i) else {
            return;
        };
        let ends = body.is_empty();
        let mut bytes = Vec::new();
        let max_frame = self.peer.max_frame_size;
        head_frames(
            &mut self.hpack_out,
            &mut self.block,
            &mut bytes,
            s.id,
            &head,
            ends,
            max_frame,
        );
        s.state = on_send(s.state, Send::Headers { end_stream: ends });
        s.sent = if ends { Sent::End } else { Sent::Head };
        s.own_body = body.to_vec();
        s.own_status = Some(reply.status);
        if let Some(own) = s.own.as_mut() {
            own.status = reply.status;
            own.bytes = body.len() as u64;
        }
        s.write_at = sh.now;
        self.queue(sh, &bytes);
    }

    /// Answers stream `i` with `status` and a short text body (an error
    /// answer of the proxy's; `retry_after` seconds for a 503).
    pub(super) fn answer_status(
        &mut self,
        i: usize,
        status: u16,
        retry_after: Option<u32>,
        sh: &mut Shared,
    ) {
        begin::count_status(&sh.stats, status);
        let mut reply = Reply::new(status, format!("{status} {}\n", reason_phrase(status)));
        reply.headers.append("Content-Type", b"text/plain");
        if let Some(secs) = retry_after {
            reply
                .headers
                .append("Retry-After", secs.to_string().as_bytes());
        }
        let head_only = self.streams.get(i).is_some_and(|s| {
            s.pending
                .as_ref()
                .is_some_and(|ex| ex.req.is_method("HEAD"))
                || s.own.as_ref().is_some_and(|o| o.method == "HEAD")
        });
        if let Some(s) = self.streams.get_mut(i)
            && s.own.is_none()
            && s.ex.is_none()
        {
            let started = sh.now;
            let mut own = match s.pending.take() {
                Some(ex) => {
                    let own = OwnReply::new(&ex.req, status, started, Termination::ProxyError);
                    sh.recycle_exchange(ex);
                    own
                }
                None => OwnReply::new(
                    &crate::http::RequestHead::default(),
                    status,
                    started,
                    Termination::ProxyError,
                ),
            };
            own.version = Some(1);
            s.own = Some(own);
        }
        self.send_answer(i, &reply, head_only, sh);
    }

    /// Ends stream `i`'s exchange after `err` (or retries it,
    /// ARCHITECTURE.md §7): the stream gets what the error table says
    /// (ARCHITECTURE.md §8) — an answer if its response has not begun,
    /// else RST_STREAM — and the connection goes on.
    pub(super) fn fail_stream(&mut self, i: usize, mut err: ProxyError, sh: &mut Shared) {
        let client = self.downstream_of(i).addr;
        let Some(s) = self.streams.get_mut(i) else {
            return;
        };
        if s.truncated {
            // Its upstream is gone already: what ends it now (the send
            // timeout) only drops the rest of what it holds.
            debug!("h2 client {} stream {}: truncated: {err}", self.addr, s.id);
            let id = s.id;
            self.reset_stream(id, ErrorCode::InternalError, sh);
            return;
        }
        if err.side == Side::Upstream
            && let Some(ex) = s.ex.as_deref_mut()
        {
            failed_try::note_failed_try(ex, &err, sh);
            match failed_try::retry(ex, &err, sh, self.id, client, &self.tx) {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => err = e,
            }
        }
        let started = s.sent != Sent::Nothing;
        let answer = err.answer(started, true);
        let id = s.id;
        if err.side == Side::Downstream {
            debug!("h2 client {} stream {id}: {err}", self.addr);
        } else {
            failed_try::warn_upstream_failure(sh, s.ex.as_deref(), &err, answer);
        }
        let how = Termination::of_error(&err);
        match answer {
            Answer::Status(code) if !started => {
                if let Some(own) = s.own.as_mut() {
                    own.termination = how;
                }
                let retry = (code == 503).then(|| err.retry_after());
                if let Some(ex) = s.ex.take() {
                    // The record is the exchange's, with the answer's
                    // status; the answer itself goes out without one.
                    let head_only = ex.req.is_method("HEAD");
                    let body_len = if head_only {
                        0
                    } else {
                        format!("{code} {}\n", reason_phrase(code)).len() as u64
                    };
                    let downstream = Downstream {
                        addr: client,
                        tls: self.tx.tls_facts(),
                        stream: Some(id),
                    };
                    ex.end(downstream, Some(code), body_len, how, sh);
                    self.answer_status_bare(i, code, retry, head_only, sh);
                } else {
                    self.answer_status(i, code, retry, sh);
                    if let Some(own) = self.streams.get_mut(i).and_then(|s| s.own.as_mut()) {
                        own.termination = how;
                    }
                }
            }
            _ if how == Termination::UpstreamClosedEarly && holds_body(s) => {
                self.keep_truncated(i, sh);
            }
            _ => {
                let code = match err.side {
                    Side::Upstream => ErrorCode::InternalError,
                    Side::Downstream => ErrorCode::Cancel,
                };
                let status = (!started).then_some(499);
                if let Some(mut ex) = s.ex.take() {
                    // `bytes_out`: what went as DATA, not what it held.
                    let how = s.settle_record(&mut ex, how);
                    let downstream = Downstream {
                        addr: client,
                        tls: self.tx.tls_facts(),
                        stream: Some(id),
                    };
                    ex.end(downstream, status, 0, how, sh);
                }
                if let Some(own) = s.own.as_mut() {
                    own.termination = how;
                }
                self.reset_stream(id, code, sh);
            }
        }
    }

    /// Stream `i`'s upstream closed in the middle of the body while bytes
    /// of it waited for the client's window: the upstream side goes at
    /// once (its connection closed, the try reported, the rest of the
    /// request dropped) and the stream keeps only its body buffer, framed
    /// as the windows allow (`fill_out`, never with END_STREAM), then
    /// reset with INTERNAL_ERROR once empty (`finish_streams`). The send
    /// timeout of a stream the client's window holds bounds it
    /// (`timers.rs`). An HTTP/1.1 client gets every byte before the close;
    /// so does this one.
    fn keep_truncated(&mut self, i: usize, sh: &mut Shared) {
        let Some(s) = self.streams.get_mut(i) else {
            return;
        };
        let Some(ex) = s.ex.as_deref_mut() else {
            return;
        };
        ex.let_go_upstream(None, sh);
        if !ex.request_taken() {
            ex.abandon_request();
        }
        s.truncated = true;
        debug!(
            "h2 client {} stream {}: upstream closed mid-body; {} bytes to send before the reset",
            self.addr,
            s.id,
            s.out_pending()
        );
    }

    /// [`H2Conn::answer_status`] for a stream whose record was written
    /// already: the answer goes out, no second record.
    fn answer_status_bare(
        &mut self,
        i: usize,
        status: u16,
        retry: Option<u32>,
        head_only: bool,
        sh: &mut Shared,
    ) {
        begin::count_status(&sh.stats, status);
        let mut reply = Reply::new(status, format!("{status} {}\n", reason_phrase(status)));
        reply.headers.append("Content-Type", b"text/plain");
        if let Some(secs) = retry {
            reply
                .headers
                .append("Retry-After", secs.to_string().as_bytes());
        }
        self.send_answer(i, &reply, head_only, sh);
    }

    /// The client reset stream `i` (RFC 9113 §6.4): its exchange ends; an
    /// upstream whose response is complete goes back to the pool, any
    /// other is closed (`Exchange::end`). Recorded as `client_aborted`.
    pub(super) fn client_reset(&mut self, i: usize, sh: &mut Shared) {
        if let Some(s) = self.streams.get_mut(i) {
            s.state = StreamState::Closed(Closure::ResetByPeer);
            s.sent = Sent::End;
            if let Some(ex) = s.ex.as_deref_mut() {
                // A complete response read whole: park the upstream.
                let _ = begin::release_upstream(ex, sh);
            }
        }
        self.end_stream(i, Termination::ClientAborted, sh);
    }

    /// Ends what stream `i` holds (its exchange's record, or its own
    /// answer's) and removes it.
    pub(super) fn end_stream(&mut self, i: usize, how: Termination, sh: &mut Shared) {
        let down = self.downstream_of(i);
        let (addr, stream) = (down.addr, down.stream);
        if i >= self.streams.len() {
            return;
        }
        let mut s = self.streams.remove(i);
        let downstream = Downstream {
            addr,
            tls: self.tx.tls_facts(),
            stream,
        };
        if let Some(mut ex) = s.ex.take() {
            let how = s.settle_record(&mut ex, how);
            let status = (!ex.resp_head_sent).then_some(499);
            let status = if how == Termination::Complete {
                None
            } else {
                status
            };
            ex.end(downstream, status, 0, how, sh);
        } else if let Some(mut own) = s.own.take() {
            if how != Termination::Complete && own.termination == Termination::Complete {
                own.termination = how;
            }
            own.log(downstream, sh);
        }
        if let Some(ex) = s.pending.take() {
            // Reset before it started (in the read that opened it): a
            // request all the same, recorded as the client left it.
            let mut own = OwnReply::new(&ex.req, 499, sh.now, how);
            own.version = Some(1);
            sh.recycle_exchange(ex);
            own.log(downstream, sh);
        }
        if let Some(b) = s.out.take() {
            sh.bufs.put_buffer(b);
        }
        if self.next_send > i {
            self.next_send -= 1;
        }
        if self.streams.is_empty() {
            self.idle_since = sh.now;
        }
    }

    /// Ends every stream (the connection is going): exchanges not
    /// finished are recorded with `how`.
    pub(super) fn end_all_streams(&mut self, sh: &mut Shared, how: Termination) {
        while !self.streams.is_empty() {
            self.end_stream(0, how, sh);
        }
    }

    /// Removes the streams that are done both ways: END_STREAM sent (or a
    /// reset) and the exchange's upstream released. One still receiving a
    /// body it will not use has the rest dropped, or is told to stop
    /// (RST_STREAM NO_ERROR, RFC 9113 §8.1; `answered.rs`).
    pub(super) fn finish_streams(&mut self, sh: &mut Shared) -> bool {
        let mut progress = false;
        let mut i = 0;
        while i < self.streams.len() {
            let Some(s) = self.streams.get(i) else {
                break;
            };
            if s.truncated && s.out_pending() == 0 {
                // Every byte the upstream sent went: the client learns the
                // response is incomplete (the stream leaves `streams`).
                let id = s.id;
                self.reset_stream(id, ErrorCode::InternalError, sh);
                progress = true;
                continue;
            }
            let done = s.sent == Sent::End
                && s.out_pending() == 0
                && s.ex.as_ref().is_none_or(|ex| ex.upstream.is_none());
            if !done {
                i += 1;
                continue;
            }
            progress = true;
            if !s.request_ended && !matches!(s.state, StreamState::Closed(_)) {
                // Our answer is complete; the client still sends.
                let (id, window, left) = (s.id, s.recv_window.size(), s.body_len.left());
                self.answered_early(id, window, left, sh);
            }
            self.end_stream(i, Termination::Complete, sh);
        }
        progress
    }
}

/// Stream `s` has an exchange whose response head went and body bytes of
/// it wait to be framed: a cut now would drop them.
fn holds_body(s: &super::stream::Stream) -> bool {
    s.sent == Sent::Head && s.ex.is_some() && s.out_pending() > 0
}

/// Encodes `head` (HPACK into `block`) as the HEADERS frame, and
/// CONTINUATION frames past `max_frame` bytes, of stream `id` into `out`
/// (both cleared first); `end_stream` sets END_STREAM (RFC 9113 §6.2).
fn head_frames(
    hpack: &mut Encoder,
    block: &mut Vec<u8>,
    out: &mut Vec<u8>,
    id: u32,
    head: &ResponseHead,
    end_stream: bool,
    max_frame: u32,
) {
    block.clear();
    encode_response_head(head, hpack, block);
    out.clear();
    frame::encode_headers(out, id, block, end_stream, max_frame);
}

/// Appends `bytes` to the connection's queue `out` (a buffer from `bufs`
/// if none), restarting the send clock `write_at` when it was empty.
pub(super) fn queue_into(
    out: &mut Option<crate::buffer::WatermarkBuffer>,
    write_at: &mut std::time::Instant,
    bufs: &mut crate::buffer::BufferPool,
    now: std::time::Instant,
    bytes: &[u8],
) {
    let out = out.get_or_insert_with(|| bufs.head(usize::MAX / 2));
    if out.is_empty() {
        *write_at = now;
    }
    out.extend_from_slice(bytes);
}

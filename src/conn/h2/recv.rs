//! Reading an HTTP/2 client: one socket read into the connection's input
//! buffer, then each frame the codec finds there, handled in order
//! (RFC 9113 §5–§6). Connection errors end the connection with GOAWAY;
//! stream errors reset the stream and the connection goes on.
//!
//! A request head only makes a stream *pending*: its exchange starts
//! after the whole read was handled (`serve::start_streams`), so a
//! stream the same read resets never opens an upstream connection
//! (rapid reset, CVE-2023-44487).
//!
//! What it must not know: how exchanges move bytes, the pool.

use log::debug;

use super::limits::count_reset_sent;
use super::stream::{Sent, Stream};
use super::{Goaway, H2Conn, IN_MAX, MAX_FRAMES_PER_ROUND, OUT_LIMIT, State};
use crate::conn::Shared;
use crate::conn::io::Read1;
use crate::conn::relay::READ_CHUNK;
use crate::h2::decode::{Frame, HeaderBlock};
use crate::h2::hpack::HpackError;
use crate::h2::map::{BodyLength, Refusal, map_request_into, map_trailers};
use crate::h2::stream_state::{self, Closure, Recv, StreamState, Verdict};
use crate::h2::{ErrorCode, H2Error, frame};
use crate::stats::Stats;

/// Decoded bytes (names and values) of a header list up to which its
/// storage is kept for the next block (a usual request head is well
/// under 1 KiB; a large cookie stays within this).
const KEEP_FIELD_BYTES: usize = 4096;

impl H2Conn {
    /// Reads once from the client (while its input buffer has room) and
    /// handles the frames buffered, up to `MAX_FRAMES_PER_ROUND`.
    pub(super) fn read_frames(&mut self, sh: &mut Shared) -> bool {
        let mut progress = false;
        if !self.read_eof && self.tx.may_read(&self.io) {
            let buf = self.inbuf.get_or_insert_with(|| sh.bufs.head(IN_MAX));
            match self.tx.read_into(&mut self.io, buf, READ_CHUNK, &sh.stats) {
                Ok(Read1::Data(n)) => {
                    Stats::add(&sh.stats.bytes_from_downstream, n as u64);
                    progress = true;
                }
                Ok(Read1::Eof) => {
                    // The client closed: its streams' answers have no one
                    // to go to (an HTTP/2 client never half-closes), so
                    // they end now, as nginx and HAProxy end them, and no
                    // stream can hold the connection in CLOSE-WAIT.
                    self.read_eof = true;
                    self.end_all_streams(sh, crate::conn::access::Termination::ClientAborted);
                    progress = true;
                }
                Ok(Read1::Idle) => {}
                Err(e) => {
                    debug!("h2 client {}: read failed: {e}", self.addr);
                    self.end_all_streams(sh, crate::conn::access::Termination::ClientAborted);
                    self.state = State::Closed;
                    return true;
                }
            }
        }
        let Some(mut buf) = self.inbuf.take() else {
            return progress;
        };
        let Some(mut decoder) = self.decoder.take() else {
            self.inbuf = Some(buf);
            return progress;
        };
        let mut used = 0;
        for _ in 0..MAX_FRAMES_PER_ROUND {
            if self.state != State::Open {
                break;
            }
            let input = buf.as_slice().get(used..).unwrap_or_default();
            match decoder.next(input) {
                Ok(None) => break,
                Ok(Some((frame, n))) => {
                    used += n;
                    progress = true;
                    if let Err(e) = self.on_frame(frame, sh) {
                        self.on_error(e, sh);
                    }
                }
                Err(e) => {
                    self.on_error(e, sh);
                    break;
                }
            }
        }
        buf.consume(used);
        if decoder.in_header_block() {
            self.block_since.get_or_insert(sh.now);
        } else {
            self.block_since = None;
        }
        self.decoder = Some(decoder);
        if buf.is_empty() {
            sh.bufs.put_buffer(buf);
        } else {
            self.inbuf = Some(buf);
        }
        if self.read_eof && self.state == State::Open && self.streams.is_empty() {
            self.state = State::Closing { linger_until: None };
        }
        progress
    }

    /// A broken rule: a connection error ends the connection, a stream
    /// error resets the stream.
    pub(super) fn on_error(&mut self, e: H2Error, sh: &mut Shared) {
        match e {
            H2Error::Connection(code, why) => self.connection_error(code, why, sh),
            H2Error::Stream(id, code, why) => {
                debug!(
                    "h2 client {}: stream {id}: {}: {why}",
                    self.addr,
                    code.name()
                );
                self.reset_stream(id, code, sh);
                // Every stream error here comes from the client's frames
                // (a refused stream, a window overflow, DATA on a closed
                // stream): each costs what its own RST_STREAM would.
                self.count_reset(sh);
            }
        }
    }

    /// A reset the client caused (its own, or one its frames made us
    /// send): rapid reset past the limit ends the connection.
    fn count_reset(&mut self, sh: &mut Shared) {
        if !self.limits.reset(sh.now) {
            self.connection_error(
                ErrorCode::EnhanceYourCalm,
                "too many stream resets per second (CVE-2023-44487)",
                sh,
            );
        }
    }

    /// A new stream's receive window (bytes): `h2_initial_window_size`,
    /// but at least the protocol's 65,535 until the client acknowledged
    /// our SETTINGS — a client may send DATA before it read them (nghttp
    /// does), and a receiver "MUST be prepared" for it (RFC 9113 §6.9.3).
    pub(super) fn recv_initial(&self) -> u32 {
        if self.settings_acked {
            self.local.initial_window_size
        } else {
            self.local
                .initial_window_size
                .max(crate::h2::settings::DEFAULT_WINDOW)
        }
    }

    /// Our SETTINGS took effect (the first ACK: we send them once): the
    /// streams opened before, on the 65,535 default, shrink their
    /// receive windows to `h2_initial_window_size` by the difference
    /// (RFC 9113 §6.9.2; a window may go negative, and is reopened by our
    /// grants as the body is taken).
    fn on_settings_ack(&mut self) {
        if self.settings_acked {
            return;
        }
        let before = self.recv_initial();
        self.settings_acked = true;
        let after = self.recv_initial();
        if before == after {
            return;
        }
        let delta = i64::from(after) - i64::from(before);
        for s in &mut self.streams {
            // Shrinking only: never over 2^31-1, so never an error.
            let _ = s.recv_window.adjust(delta);
            s.initial_window = after;
        }
    }

    /// The state of stream `id`: its own if held, else idle or closed by
    /// its identifier, or reset by us if it was recently.
    fn state_of(&self, id: u32) -> StreamState {
        if let Some(i) = self.find(id) {
            return self.streams.get(i).map_or(StreamState::Idle, |s| s.state);
        }
        if self.is_answered(id) {
            return StreamState::HalfClosedLocal;
        }
        if self.reset_by_us.contains(&id) {
            return StreamState::Closed(Closure::ResetByUs);
        }
        stream_state::unknown_stream(id, self.highest)
    }

    fn on_frame(&mut self, frame: Frame<'_>, sh: &mut Shared) -> Result<(), H2Error> {
        if frame.is_empty_work() && !self.limits.empty(sh.now) {
            return Err(H2Error::Connection(
                ErrorCode::EnhanceYourCalm,
                "too many frames that carry nothing (CVE-2019-9518)",
            ));
        }
        match frame {
            Frame::Preface | Frame::HeaderFragment { .. } | Frame::Unknown { .. } => Ok(()),
            Frame::Settings { ack: true, .. } => {
                self.on_settings_ack();
                Ok(())
            }
            Frame::Settings { ack: false, params } => {
                self.control_budget(sh)?;
                let applied = self.peer.apply(params)?;
                if applied.window_delta != 0 {
                    for s in &mut self.streams {
                        s.send_window.adjust(applied.window_delta)?;
                    }
                }
                if let Some(size) = applied.header_table_size {
                    self.hpack_out
                        .set_peer_table_size(usize::try_from(size).unwrap_or(usize::MAX));
                }
                let mut ack = Vec::with_capacity(9);
                frame::encode_settings_ack(&mut ack);
                self.queue(sh, &ack);
                Ok(())
            }
            Frame::Ping { ack: false, data } => {
                self.control_budget(sh)?;
                let mut pong = Vec::with_capacity(17);
                frame::encode_ping(&mut pong, data, true);
                self.queue(sh, &pong);
                Ok(())
            }
            Frame::Ping { ack: true, data } => {
                if data == super::DRAIN_PING && matches!(self.goaway, Goaway::Announced { .. }) {
                    self.final_goaway(sh);
                }
                Ok(())
            }
            Frame::GoAway { code, .. } => {
                debug!("h2 client {}: GOAWAY code {code:#x}", self.addr);
                self.peer_goaway = true;
                Ok(())
            }
            Frame::WindowUpdate {
                stream_id: 0,
                increment,
            } => self.send_window.grant(increment, 0),
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => {
                let st = self.state_of(stream_id);
                if let Verdict::Go(next) = stream_state::on_recv(st, stream_id, Recv::WindowUpdate)?
                    && let Some(s) = self.find(stream_id).and_then(|i| self.streams.get_mut(i))
                {
                    s.state = next;
                    s.send_window.grant(increment, stream_id)?;
                }
                Ok(())
            }
            Frame::Priority { stream_id, .. } => {
                stream_state::on_recv(self.state_of(stream_id), stream_id, Recv::Priority)?;
                Ok(())
            }
            Frame::RstStream { stream_id, code } => {
                let st = self.state_of(stream_id);
                if let Verdict::Go(_) = stream_state::on_recv(st, stream_id, Recv::RstStream)?
                    && let Some(i) = self.find(stream_id)
                {
                    Stats::add(&sh.stats.h2_resets_received, 1);
                    debug!(
                        "h2 client {}: stream {stream_id} reset by the client ({code:#x})",
                        self.addr
                    );
                    self.client_reset(i, sh);
                    self.count_reset(sh);
                } else {
                    self.answered_gone(stream_id);
                }
                Ok(())
            }
            Frame::Invalid { kind, error } => {
                let id = error.stream_id().unwrap_or(0);
                if self.state_of(id) == StreamState::Idle
                    && kind == crate::h2::frame::kind::WINDOW_UPDATE
                {
                    return Err(H2Error::Connection(
                        ErrorCode::ProtocolError,
                        "WINDOW_UPDATE on an idle stream (RFC 9113 §5.1)",
                    ));
                }
                Err(error)
            }
            Frame::Headers(block) => self.on_headers(block, sh),
            Frame::Data {
                stream_id,
                data,
                flow_len,
                end_stream,
            } => self.on_data(stream_id, data, flow_len, end_stream, sh),
        }
    }

    /// A PING or SETTINGS that needs a reply: within the rate, and only
    /// while the client reads what was queued for it.
    fn control_budget(&mut self, sh: &mut Shared) -> Result<(), H2Error> {
        if !self.limits.control(sh.now) || self.queued() > OUT_LIMIT {
            return Err(H2Error::Connection(
                ErrorCode::EnhanceYourCalm,
                "too many PING or SETTINGS frames (CVE-2019-9512)",
            ));
        }
        Ok(())
    }

    /// A complete header block: a new request, or a request's trailers.
    /// HPACK runs first, whatever becomes of the block: the client's
    /// table must stay in step (RFC 9113 §4.3).
    fn on_headers(&mut self, b: HeaderBlock<'_>, sh: &mut Shared) -> Result<(), H2Error> {
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        let decoded = self
            .hpack_in
            .decode(b.block, sh.cfg.max_head_size, |n, v| fields.push(n, v));
        let result = self.on_fields(&b, decoded, &fields, sh);
        // The storage is kept for the next block only if this one was of
        // a usual size: after a large list (an HPACK bomb leaves up to
        // `max_head_size` decoded bytes here) an idle connection would
        // hold it for as long as it stays open.
        let decoded_bytes: usize = fields.iter().map(|(n, v)| n.len() + v.len()).sum();
        if decoded_bytes <= KEEP_FIELD_BYTES {
            self.fields = fields;
        }
        result
    }

    fn on_fields(
        &mut self,
        b: &HeaderBlock<'_>,
        decoded: Result<(), HpackError>,
        fields: &crate::h2::hpack::FieldList,
        sh: &mut Shared,
    ) -> Result<(), H2Error> {
        let id = b.stream_id;
        if let Err(e @ HpackError::Compression(_)) = decoded {
            return Err(e.to_h2(id));
        }
        // The field count is checked once cookie crumbs are joined (below);
        // a trailer section's as it came.
        let too_large = decoded.is_err();
        let too_many = fields.len() > sh.cfg.max_header_count;
        let st = self.state_of(id);
        let next = match stream_state::on_recv(
            st,
            id,
            Recv::Headers {
                end_stream: b.end_stream,
            },
        )? {
            Verdict::Ignore => return Ok(()),
            Verdict::Go(next) => next,
        };
        if let Some(p) = b.priority {
            p.check(id)?;
        }
        if let Some(i) = self.find(id) {
            // A trailer section ends the request (RFC 9113 §8.1).
            if too_large || too_many {
                return Err(HpackError::ListTooLarge.to_h2(id));
            }
            let trailers = map_trailers(fields.iter()).map_err(|r| r.to_h2(id))?;
            let Some(s) = self.streams.get_mut(i) else {
                return Ok(());
            };
            s.state = next;
            s.body_len.end(id)?;
            if let Err(e) = s.take_body(&[], true, Some(&trailers)) {
                self.body_refused(i, e, sh);
            }
            return Ok(());
        }
        if self.is_answered(id) {
            // Its trailer section, dropped with the body it ends (a HEADERS
            // frame without END_STREAM here is malformed, RFC 9113 §8.1).
            self.answered_gone(id);
            if !b.end_stream {
                self.reset_stream(id, ErrorCode::ProtocolError, sh);
            }
            return Ok(());
        }
        // A new stream (idle before this frame).
        self.highest = id;
        if let Goaway::Sent { last } = self.goaway
            && id > last
        {
            // After the final GOAWAY: not served (RFC 9113 §6.8).
            return Ok(());
        }
        if self.peer_goaway {
            return Ok(());
        }
        let open = u32::try_from(self.open_streams()).unwrap_or(u32::MAX);
        stream_state::admit(id, open, self.local.max_concurrent_streams)?;
        let mut s = Stream::new(
            id,
            next,
            self.peer.initial_window_size,
            self.recv_initial(),
            sh.now,
        );
        s.request_ended = b.end_stream;
        self.set_idle(false, &sh.stats);
        // Counted as a request once it is one: a malformed request is
        // reset (below) and counted only among the resets sent.
        if too_large {
            self.count_request(sh);
            // RFC 6585 §5: the fields are too large. Recorded with what
            // was decoded of them.
            s.own = Some(crate::conn::own_reply::OwnReply::refused_h2(
                fields.iter(),
                431,
                sh.now,
            ));
            self.streams.push(s);
            let i = self.streams.len() - 1;
            self.answer_status(i, 431, None, sh);
            return Ok(());
        }
        let mut ex = sh.take_exchange();
        match map_request_into(fields.iter(), b.end_stream, &mut ex.req) {
            Ok((content_length, chunked)) => {
                self.count_request(sh);
                // Cookie crumbs are one field by now (RFC 9113 §8.2.3):
                // the field count is the HTTP/1 one.
                if ex.req.headers.len() > sh.cfg.max_header_count {
                    let own = crate::conn::own_reply::OwnReply::new(
                        &ex.req,
                        431,
                        sh.now,
                        crate::conn::access::Termination::ProxyError,
                    );
                    sh.recycle_exchange(ex);
                    s.own = Some(own);
                    self.streams.push(s);
                    let i = self.streams.len() - 1;
                    self.answer_status(i, 431, None, sh);
                    return Ok(());
                }
                s.body_len = BodyLength::new(content_length);
                s.chunked_up = chunked;
                s.pending = Some(ex);
                self.streams.push(s);
                Ok(())
            }
            Err(Refusal::Status(code, why)) => {
                self.count_request(sh);
                sh.recycle_exchange(ex);
                debug!("h2 client {}: stream {id}: {code}: {why}", self.addr);
                // Recorded with the fields as they came (it was logged
                // with an empty method and target).
                s.own = Some(crate::conn::own_reply::OwnReply::refused_h2(
                    fields.iter(),
                    code,
                    sh.now,
                ));
                self.streams.push(s);
                let i = self.streams.len() - 1;
                self.answer_status(i, code, None, sh);
                Ok(())
            }
            Err(r @ Refusal::Malformed(_)) => {
                sh.recycle_exchange(ex);
                // No record: there is no request to log, as for a head
                // httparse cannot read on HTTP/1 without an answer.
                Err(r.to_h2(id))
            }
        }
    }

    /// Counts a stream that became a request. The one that reaches
    /// `max_requests_per_connection` (the highest id so far) is the
    /// last: GOAWAY (NO_ERROR) names it, the streams open finish, later
    /// ones are not served (RFC 9113 §6.8) and the connection closes
    /// when none is left (`maybe_close`). `requests` is at least 1 here,
    /// so a cap of 0 never matches: one compare per stream.
    fn count_request(&mut self, sh: &mut Shared) {
        Stats::add(&sh.stats.requests, 1);
        Stats::add(&sh.stats.h2_streams, 1);
        self.requests += 1;
        if self.requests == u64::from(sh.cfg.max_requests_per_connection) {
            debug!(
                "h2 client {}: stream {} reached max_requests_per_connection: GOAWAY",
                self.addr, self.highest
            );
            self.final_goaway(sh);
        }
    }

    /// Streams open or half-closed (the ones SETTINGS_MAX_CONCURRENT_STREAMS
    /// counts, RFC 9113 §5.1.2).
    pub(super) fn open_streams(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| !matches!(s.state, StreamState::Closed(_)))
            .count()
            + self.answered.len()
    }

    /// A DATA frame: counted against both receive windows, then given to
    /// its stream's request body.
    fn on_data(
        &mut self,
        id: u32,
        data: &[u8],
        flow_len: u32,
        end_stream: bool,
        sh: &mut Shared,
    ) -> Result<(), H2Error> {
        self.recv_window.receive(flow_len, 0)?;
        self.recv_credit = self.recv_credit.saturating_add(flow_len);
        let st = self.state_of(id);
        let next = match stream_state::on_recv(st, id, Recv::Data { end_stream })? {
            Verdict::Ignore => return Ok(()),
            Verdict::Go(next) => next,
        };
        let Some(i) = self.find(id) else {
            // Answered already: the rest of its body is dropped.
            self.answered_data(id, flow_len, end_stream, sh);
            return Ok(());
        };
        let Some(s) = self.streams.get_mut(i) else {
            return Ok(());
        };
        s.recv_window.receive(flow_len, id)?;
        // Padding is given back at once: it never reaches a buffer.
        let padding = flow_len.saturating_sub(u32::try_from(data.len()).unwrap_or(u32::MAX));
        if padding > 0 {
            s.recv_window.grant(padding, id)?;
        }
        s.state = next;
        s.body_len.data(data.len(), end_stream, id)?;
        if let Some(ex) = s.ex.as_deref_mut() {
            ex.down_read_at = sh.now;
        }
        if let Err(e) = s.take_body(data, end_stream, None) {
            self.body_refused(i, e, sh);
        }
        let mut update = Vec::new();
        if padding > 0 && !end_stream {
            frame::encode_window_update(&mut update, id, padding);
        }
        if !update.is_empty() {
            self.queue(sh, &update);
        }
        Ok(())
    }

    /// The request body broke a rule of the exchange (over
    /// `max_body_size`): its error answer, as for HTTP/1.
    fn body_refused(&mut self, i: usize, e: crate::http::ParseError, sh: &mut Shared) {
        use crate::error::{ErrorKind, ProxyError};
        self.fail_stream(i, ProxyError::downstream(ErrorKind::Parse(e)), sh);
    }

    /// Sends RST_STREAM with `code` on stream `id` and ends what it
    /// holds: the exchange's record says the proxy cut it.
    pub(super) fn reset_stream(&mut self, id: u32, code: ErrorCode, sh: &mut Shared) {
        let mut bytes = Vec::with_capacity(13);
        frame::encode_rst_stream(&mut bytes, id, code);
        self.queue(sh, &bytes);
        count_reset_sent(&sh.stats, code);
        self.note_reset(id);
        if let Some(i) = self.find(id) {
            if let Some(s) = self.streams.get_mut(i) {
                s.state = StreamState::Closed(Closure::ResetByUs);
                s.sent = Sent::End;
            }
            let how = if code == ErrorCode::NoError {
                crate::conn::access::Termination::Complete
            } else {
                crate::conn::access::Termination::ProxyError
            };
            self.end_stream(i, how, sh);
        }
    }

    /// Remembers that we reset stream `id`: its late frames are ignored.
    pub(super) fn note_reset(&mut self, id: u32) {
        if self.reset_by_us.len() >= super::RECENT_RESETS {
            self.reset_by_us.pop_front();
        }
        self.reset_by_us.push_back(id);
    }
}

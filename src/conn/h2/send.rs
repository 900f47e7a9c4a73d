//! Writing to an HTTP/2 client: the queued frames go out in one write
//! per round; DATA is framed from the streams' body buffers round robin,
//! one frame per stream per pass, within the client's windows (the
//! stream's and the connection's, claimed only for bytes in hand) and
//! only while fewer than `OUT_TARGET` bytes wait to be written — so one
//! large download delays a small response by at most one frame per pass
//! (RFC 9113 §5.2, §6.9); the receive windows are granted back; and the
//! closing handshake.
//!
//! What it must not know: how the streams' bytes came, the pool.

use log::debug;

use super::stream::Sent;
use super::{H2Conn, OUT_TARGET, State};
use crate::conn::Shared;
use crate::h2::frame;
use crate::h2::map::encode_trailer_section;
use crate::h2::stream_state::{Send, on_send};
use crate::stats::Stats;

/// How long a closing connection may take to send EOF after the proxy
/// half-closed it (the HTTP/1 machine's linger).
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

impl H2Conn {
    /// Writes the queued frames (the transport's own bytes first).
    pub(super) fn write_out(&mut self, sh: &mut Shared) -> bool {
        let closing = matches!(self.state, State::Closing { .. });
        let flushed = match self.tx.wants_write() {
            true => match self.tx.flush(&mut self.io, &sh.stats) {
                Ok(f) => f,
                Err(e) => return self.write_failed(e, sh),
            },
            false => false,
        };
        let Some(out) = self.out.as_mut() else {
            return flushed;
        };
        let n = match self.tx.write_from(&mut self.io, out, closing, &sh.stats) {
            Ok(n) => n,
            Err(e) => return self.write_failed(e, sh),
        };
        if n > 0 {
            Stats::add(&sh.stats.bytes_to_downstream, n as u64);
            self.write_at = sh.now;
        }
        if out.is_empty()
            && let Some(b) = self.out.take()
        {
            sh.bufs.put_buffer(b);
        }
        flushed || n > 0
    }

    fn write_failed(&mut self, e: std::io::Error, sh: &mut Shared) -> bool {
        debug!("h2 client {}: write failed: {e}", self.addr);
        self.end_all_streams(sh, crate::conn::access::Termination::ClientAborted);
        self.state = State::Closed;
        true
    }

    /// Frames what the streams hold, round robin from where the last
    /// pass stopped: one DATA frame per stream per pass (as large as the
    /// windows, the client's SETTINGS_MAX_FRAME_SIZE and the bytes in
    /// hand allow), then the end of each finished response (END_STREAM on
    /// its last DATA, an empty DATA, or its trailers as HEADERS).
    pub(super) fn fill_out(&mut self, sh: &mut Shared) -> bool {
        let mut progress = false;
        let count = self.streams.len();
        if count == 0 {
            return false;
        }
        // Passes until a pass frames nothing or enough is queued.
        for _ in 0..64 {
            let mut moved = false;
            for k in 0..count {
                if self.queued() >= OUT_TARGET {
                    return progress;
                }
                let i = (self.next_send + k) % count;
                if self.frame_one(i, sh) {
                    moved = true;
                    progress = true;
                    self.next_send = (i + 1) % count;
                }
            }
            if !moved {
                break;
            }
        }
        progress
    }

    /// Frames one DATA frame (or the end) for stream `i`; true if it did.
    fn frame_one(&mut self, i: usize, sh: &mut Shared) -> bool {
        let max_frame = self.peer.max_frame_size;
        let conn_avail = self.send_window.available();
        let Some(s) = self.streams.get_mut(i) else {
            return false;
        };
        if s.sent != Sent::Head {
            return false;
        }
        let complete = s.response_complete();
        let pending = s.out_pending();
        // Frames go straight into the connection's queue: one copy of the
        // body bytes, from the stream's buffer.
        let q = self.out.get_or_insert_with(|| sh.bufs.head(usize::MAX / 2));
        if q.is_empty() {
            self.write_at = sh.now;
        }
        if pending > 0 {
            let n = [
                pending,
                s.send_window.available() as usize,
                conn_avail as usize,
                max_frame as usize,
            ]
            .into_iter()
            .min()
            .unwrap_or(0);
            if n == 0 {
                return false;
            }
            let no_trailers = s.ex.as_ref().is_none_or(|ex| ex.trailers.is_empty());
            let end = complete && n == pending && no_trailers;
            let len = u32::try_from(n).unwrap_or(u32::MAX);
            q.extend_from_slice(&frame::data_header(s.id, len, end));
            if let Some(out) = s.out.as_mut().filter(|b| !b.is_empty()) {
                q.extend_from_slice(out.as_slice().get(..n).unwrap_or_default());
                out.consume(n);
                // Kept while the response is still coming (see step_stream).
                if complete
                    && out.is_empty()
                    && let Some(b) = s.out.take()
                {
                    sh.bufs.put_buffer(b);
                }
            } else {
                let n = n.min(s.own_body.len());
                q.extend_from_slice(s.own_body.get(..n).unwrap_or_default());
                s.own_body.drain(..n);
            }
            s.send_window.spend(len);
            self.send_window.spend(len);
            s.write_at = sh.now;
            if end {
                s.sent = Sent::End;
                s.state = on_send(s.state, Send::Data { end_stream: true });
            }
            return true;
        }
        if !complete {
            return false;
        }
        // The end: trailers as HEADERS, or an empty DATA frame.
        let trailers =
            s.ex.as_ref()
                .map(|ex| ex.trailers.as_slice())
                .unwrap_or_default();
        self.block.clear();
        let fields = if trailers.is_empty() {
            0
        } else {
            encode_trailer_section(trailers, &mut self.hpack_out, &mut self.block)
        };
        if fields > 0 {
            self.scratch.clear();
            frame::encode_headers(&mut self.scratch, s.id, &self.block, true, max_frame);
            q.extend_from_slice(&self.scratch);
            s.state = on_send(s.state, Send::Headers { end_stream: true });
        } else {
            q.extend_from_slice(&frame::data_header(s.id, 0, true));
            s.state = on_send(s.state, Send::Data { end_stream: true });
        }
        s.sent = Sent::End;
        true
    }

    /// Grants back receive window: the connection's as DATA arrived (in
    /// steps of at least 16 KiB), each stream's as its bytes drained
    /// upstream (`Stream::grant`).
    pub(super) fn grant_windows(&mut self, sh: &mut Shared) -> bool {
        let mut bytes = Vec::new();
        if self.recv_credit >= 16 * 1024 {
            let inc = self.recv_credit;
            if self.recv_window.grant(inc, 0).is_ok() {
                frame::encode_window_update(&mut bytes, 0, inc);
            }
            self.recv_credit = 0;
        }
        for s in &mut self.streams {
            if let Some(inc) = s.grant() {
                frame::encode_window_update(&mut bytes, s.id, inc);
            }
        }
        if bytes.is_empty() {
            return false;
        }
        self.queue(sh, &bytes);
        true
    }

    /// Flushes the last frames, then half-closes and discards input until
    /// the client's EOF or the linger deadline (as the HTTP/1 machine's
    /// lingering close: a reset would destroy frames still on their way).
    pub(super) fn advance_closing(&mut self, sh: &mut Shared) -> bool {
        let State::Closing { linger_until } = self.state else {
            return false;
        };
        if self.queued() > 0 || self.tx.wants_write() {
            return false;
        }
        // Drop what the client still sends.
        let mut progress = false;
        if !self.read_eof {
            loop {
                match self.tx.discard() {
                    Ok(0) => {
                        self.read_eof = true;
                        progress = true;
                        break;
                    }
                    Ok(_) => progress = true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.io.readable = false;
                        break;
                    }
                    Err(_) => {
                        self.read_eof = true;
                        break;
                    }
                }
            }
        }
        if self.read_eof {
            self.state = State::Closed;
            return true;
        }
        if linger_until.is_none() {
            self.tx.shutdown_write(&mut self.io, &sh.stats);
            self.state = State::Closing {
                linger_until: Some(sh.now + LINGER),
            };
            return true;
        }
        progress
    }
}

//! One HTTP/2 stream of a client connection: its state (RFC 9113 §5.1),
//! its exchange (or the proxy's own answer), its windows, the response
//! body bytes waiting to be framed, and the request body's way into the
//! exchange's buffer toward the upstream.
//!
//! The request body: DATA payloads go into the exchange's
//! `to_upstream` as they come — as they are when the request declared a
//! `content-length`, else chunk-encoded (the HTTP/1.1 upstream needs a
//! framing; RFC 9112 §7.1), with a trailer section from a trailing HEADERS
//! frame — and are scanned there by the exchange's body decoder, so the
//! body limits and the access record count them as for HTTP/1. The
//! stream's receive window is granted back only as those bytes drain
//! upstream ([`Stream::grant`]).
//!
//! What it must not know: sockets, frames' bytes, the other streams.

use std::net::SocketAddr;
use std::time::Instant;

use super::super::access::Termination;
use super::super::exchange::Exchange;
use super::super::own_reply::OwnReply;
use crate::buffer::WatermarkBuffer;
use crate::h2::map::BodyLength;
use crate::h2::stream_state::StreamState;
use crate::h2::window::Window;
use crate::http::{Headers, ParseError};

/// A stream's response, as far as it went toward the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// No final HEADERS frame yet (1xx may have gone).
    Nothing,
    /// The final HEADERS went; DATA follows.
    Head,
    /// END_STREAM went (on HEADERS, DATA or trailers).
    End,
}

/// One stream.
pub(super) struct Stream {
    /// The stream identifier (odd: client-initiated).
    pub id: u32,
    /// RFC 9113 §5.1 state.
    pub state: StreamState,
    /// The exchange, once started.
    pub ex: Option<Box<Exchange>>,
    /// A request waiting to be started (its head mapped into `req`): it
    /// starts after the read that brought it, unless that read reset it.
    pub pending: Option<Box<Exchange>>,
    /// Request body bytes that came before the exchange started.
    pub early: Vec<u8>,
    /// The request's trailer section, when it came before the exchange
    /// started (in the same read as the head: a small gRPC request).
    pub early_trailers: Option<Box<Headers>>,
    /// The proxy's own answer (no exchange), for the record.
    pub own: Option<OwnReply>,
    /// The client address a trusted `X-Forwarded-For` gave.
    pub client: Option<SocketAddr>,
    /// Response body bytes to frame as DATA.
    pub out: Option<WatermarkBuffer>,
    /// The proxy's own answer's body (no exchange), framed as DATA.
    pub own_body: Vec<u8>,
    /// How far the response went.
    pub sent: Sent,
    /// What the client still lets us send on this stream.
    pub send_window: Window,
    /// What we still let the client send on this stream.
    pub recv_window: Window,
    /// The window we opened at the start (our SETTINGS_INITIAL_WINDOW_SIZE).
    pub initial_window: u32,
    /// The request's DATA against its `content-length`.
    pub body_len: BodyLength,
    /// The request body goes upstream chunk-encoded.
    pub chunked_up: bool,
    /// The client ended its side (END_STREAM received).
    pub request_ended: bool,
    /// Last DATA framed for this stream, or when bytes for it appeared:
    /// the send timeout of a stream the client's window holds.
    pub write_at: Instant,
    /// The status of the proxy's own answer (for the record).
    pub own_status: Option<u16>,
    /// The upstream closed before the response was complete (RFC 9110
    /// §6.1: an incomplete message) while body bytes waited here for the
    /// client's window: its connection is gone, the stream goes on framing
    /// what it holds, never with END_STREAM, and is reset (INTERNAL_ERROR)
    /// once it holds nothing.
    pub truncated: bool,
}

impl Stream {
    /// A new stream `id` in `state`, with the windows of the settings.
    pub fn new(id: u32, state: StreamState, send: u32, recv: u32, now: Instant) -> Self {
        Stream {
            id,
            state,
            ex: None,
            pending: None,
            early: Vec::new(),
            early_trailers: None,
            own: None,
            client: None,
            out: None,
            own_body: Vec::new(),
            sent: Sent::Nothing,
            send_window: Window::new(send),
            recv_window: Window::new(recv),
            initial_window: recv,
            body_len: BodyLength::new(None),
            chunked_up: false,
            request_ended: false,
            write_at: now,
            own_status: None,
            truncated: false,
        }
    }

    /// Response body bytes waiting to be framed.
    pub fn out_pending(&self) -> usize {
        self.out.as_ref().map_or(0, |b| b.pending()) + self.own_body.len()
    }

    /// The response is whole on our side: the exchange read it all, or
    /// the proxy's own answer (an own reply, or an error answer whose
    /// exchange already wrote its record) is all in `own_body`. Never for
    /// a truncated response: its last DATA must not carry END_STREAM.
    pub fn response_complete(&self) -> bool {
        if self.truncated {
            return false;
        }
        match &self.ex {
            Some(ex) => ex.response_done() && ex.resp_head_sent,
            None => self.pending.is_none(),
        }
    }

    /// How the record of this stream's exchange ends when the stream ends
    /// by `how`. Its `bytes_out` counts the body bytes framed as DATA:
    /// those still held in the stream's buffer (a stream cut by the send
    /// timeout, the client's reset or a drain) are dropped from it. A
    /// truncated response stays `upstream_closed_early` whatever ends its
    /// stream (its buffer emptied, the send timeout, the client's reset, a
    /// drain).
    pub fn settle_record(&self, ex: &mut Exchange, how: Termination) -> Termination {
        let dropped = self.out.as_ref().map_or(0, |b| b.pending()) as u64;
        ex.resp_body_bytes = ex.resp_body_bytes.saturating_sub(dropped);
        if self.truncated {
            Termination::UpstreamClosedEarly
        } else {
            how
        }
    }

    /// Appends request body bytes (`data`, possibly empty; `end`: the
    /// client ended its side; `trailers`: a trailer section that ended
    /// it) to the exchange's buffer toward the upstream, framed for it.
    /// Before the exchange starts they wait in `early` (the trailers in
    /// `early_trailers`); with no exchange (the proxy answered) they are
    /// dropped.
    ///
    /// Errors: the body is over the route's `max_body_size` (413), or its
    /// framing broke (a bug: the bytes are made here).
    pub fn take_body(
        &mut self,
        data: &[u8],
        end: bool,
        trailers: Option<&Headers>,
    ) -> Result<(), ParseError> {
        if end {
            self.request_ended = true;
        }
        if self.pending.is_some() {
            self.early.extend_from_slice(data);
            if let Some(t) = trailers {
                self.early_trailers = Some(Box::new(t.clone()));
            }
            return Ok(());
        }
        let chunked = self.chunked_up;
        let Some(ex) = self.ex.as_deref_mut() else {
            return Ok(());
        };
        if ex.request_taken() {
            return Ok(());
        }
        let Some(buf) = ex.to_upstream.as_mut() else {
            return Ok(());
        };
        let start = buf.pending();
        if chunked {
            if !data.is_empty() {
                let mut line = [0u8; 18];
                buf.extend_from_slice(crate::http::chunk_encode::chunk_size_line(
                    data.len(),
                    &mut line,
                ));
                buf.extend_from_slice(data);
                buf.extend_from_slice(b"\r\n");
            }
            if end {
                buf.extend_from_slice(b"0\r\n");
                if let Some(t) = trailers {
                    let mut section = Vec::new();
                    t.encode(&mut section);
                    buf.extend_from_slice(&section);
                }
                buf.extend_from_slice(b"\r\n");
            }
        } else {
            buf.extend_from_slice(data);
        }
        let added = buf.pending().saturating_sub(start);
        if added == 0 {
            return Ok(());
        }
        let fresh = buf.as_slice().get(start..).unwrap_or(&[]);
        // The chunk framing is made here: no leading zeros to leave out.
        let n = ex
            .req_half
            .scan(fresh, &mut ex.req_body_bytes, &mut ex.ranges)?;
        if n < added {
            // More than the framing allows: the content-length rule is
            // checked first, so this is a bug; the rest is dropped.
            buf.unfill(added - n);
        }
        ex.expect_continue = false;
        if start == 0 {
            ex.up_write_at = ex.up_write_at.max(ex.down_read_at);
        }
        ex.check_body_limit()
    }

    /// Moves the body bytes that came before the exchange started into it.
    ///
    /// Errors: as [`Stream::take_body`].
    pub fn feed_early(&mut self) -> Result<(), ParseError> {
        let early = std::mem::take(&mut self.early);
        let trailers = self.early_trailers.take();
        let end = self.request_ended;
        if early.is_empty() && !end {
            return Ok(());
        }
        self.take_body(&early, end, trailers.as_deref())
    }

    /// The window to grant back to the client now, if any: what it used
    /// and the upstream took (RFC 9113 §6.9). Granted only while the body
    /// goes on; in halves of the window, or all once the buffer is empty,
    /// so a slow upstream pauses the client and a fast one never waits on
    /// small updates.
    pub fn grant(&mut self) -> Option<u32> {
        if self.request_ended {
            return None;
        }
        let held = match self.ex.as_deref() {
            Some(ex) if !ex.request_taken() => ex.to_upstream.as_ref().map_or(0, |b| b.pending()),
            // Not started yet, or no exchange: what it sent waits or is
            // dropped; a started one that took its body wants no more.
            Some(_) => return None,
            None if self.pending.is_some() => self.early.len(),
            // The proxy answered: the body is not wanted.
            None => return None,
        };
        // What the client sent and we have not granted back: the initial
        // window less what is open (negative after our SETTINGS shrank a
        // stream opened on the 65,535 default, `H2Conn::on_settings_ack`).
        let open = self.recv_window.size();
        let used = u64::try_from(i64::from(self.initial_window).saturating_sub(open)).unwrap_or(0);
        let free = used.saturating_sub(held as u64);
        let half = u64::from(self.initial_window / 2).max(1);
        if free == 0 || (free < half && held > 0) {
            return None;
        }
        let inc = u32::try_from(free).unwrap_or(u32::MAX);
        self.recv_window.grant(inc, self.id).ok()?;
        Some(inc)
    }
}

#[cfg(test)]
mod tests {
    use super::Stream;
    use crate::h2::stream_state::StreamState;

    #[test]
    fn a_truncated_response_is_never_complete() {
        let now = std::time::Instant::now();
        let mut s = Stream::new(1, StreamState::HalfClosedRemote, 65_535, 65_535, now);
        assert!(s.response_complete(), "no exchange, nothing pending");
        s.truncated = true;
        assert!(!s.response_complete(), "END_STREAM would end a cut body");
    }
}

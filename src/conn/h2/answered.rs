//! Streams we answered in full while the client was still sending its
//! request body: "half-closed (local)" (RFC 9113 §5.1), their exchange
//! over and recorded, the rest of their body read and dropped.
//!
//! Why it exists: RFC 9113 §8.1 lets a server that sent a complete
//! response end the client's side with RST_STREAM(NO_ERROR), but sent at
//! once it races the client's last DATA frames, and some clients then
//! report a stream error and drop the answer they got (curl 7.88 with
//! nghttp2: "(92) Stream error in the HTTP/2 framing layer" for a 413,
//! a 429 or an upstream's early 401). nginx reads such a body to its end
//! before closing the stream. Here the rest is dropped as it arrives when
//! it fits what the stream's receive window still allows, for at most
//! [`ANSWERED_LINGER`]; a client that does not finish in time gets the
//! reset. A body larger than the window gets it [`ANSWERED_RESET_DELAY`]
//! after the answer (or after the window was spent): the answer was
//! written by then, so the client reads it before the reset, over TLS
//! (where curl with OpenSSL reads one record at a time) and over h2c
//! (where it reads what one `recv` returns) alike, as it does from nginx.
//!
//! What it must not know: the exchange (already ended), the upstream.

use std::time::{Duration, Instant};

use super::H2Conn;
use crate::conn::Shared;
use crate::h2::{ErrorCode, frame};

/// How long an answered stream's remaining request body is waited for
/// before RST_STREAM(NO_ERROR) (the HTTP/1 lingering close's 2 s).
pub(super) const ANSWERED_LINGER: Duration = Duration::from_secs(2);

/// How long after the answer a stream whose body cannot fit its window
/// is reset: enough for the answer to leave and be read on its own, too
/// short to matter to the client (it can send nothing more meanwhile).
pub(super) const ANSWERED_RESET_DELAY: Duration = Duration::from_millis(100);

/// A stream answered in full whose client still sends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answered {
    id: u32,
    /// When it is reset if the client has not ended it.
    until: Instant,
    /// Bytes of DATA (padding included) the stream's receive window still
    /// lets the client send.
    window: i64,
}

impl H2Conn {
    /// Stream `id` was answered in full and its request body has not
    /// ended: `window` bytes are what its receive window still allows,
    /// `left` what its `content-length` still declares. Waits for the
    /// rest when it can come without a WINDOW_UPDATE; else resets the
    /// stream with NO_ERROR (RFC 9113 §8.1) [`ANSWERED_RESET_DELAY`]
    /// later, once the answer went (at once with no room in the list). After a GOAWAY
    /// too: the stream is one it serves, and a reset in the answer's
    /// write is what curl drops the answer for; the connection closes
    /// once the list is empty (`maybe_close`).
    pub(super) fn answered_early(
        &mut self,
        id: u32,
        window: i64,
        left: Option<u64>,
        sh: &mut Shared,
    ) {
        let room = self.answered.len() < self.local.max_concurrent_streams as usize;
        if !room {
            self.reset_answered(id, sh);
            return;
        }
        let fits = window > 0 && left.is_none_or(|l| i64::try_from(l).is_ok_and(|l| l <= window));
        let until = sh.now
            + if fits {
                ANSWERED_LINGER
            } else {
                ANSWERED_RESET_DELAY
            };
        self.answered.push_back(Answered { id, until, window });
    }

    /// Stream `id` is answered and waited for.
    pub(super) fn is_answered(&self, id: u32) -> bool {
        self.answered.iter().any(|a| a.id == id)
    }

    /// A DATA frame of `flow_len` bytes on answered stream `id` (its
    /// connection window was already counted): dropped; the stream is
    /// done at END_STREAM, reset [`ANSWERED_RESET_DELAY`] later when the
    /// window is spent without it, and at once with FLOW_CONTROL_ERROR
    /// when the frame went past the window (RFC 9113 §6.9.1).
    pub(super) fn answered_data(&mut self, id: u32, flow_len: u32, end: bool, sh: &mut Shared) {
        let Some(pos) = self.answered.iter().position(|a| a.id == id) else {
            return;
        };
        let soon = sh.now + ANSWERED_RESET_DELAY;
        let left = self.answered.get_mut(pos).map_or(0, |a| {
            a.window -= i64::from(flow_len);
            if a.window <= 0 {
                a.until = a.until.min(soon);
            }
            a.window
        });
        if left < 0 {
            self.answered.remove(pos);
            self.reset_stream(id, ErrorCode::FlowControlError, sh);
        } else if end {
            self.answered.remove(pos);
        }
    }

    /// Answered stream `id` ended otherwise (a trailer section, or the
    /// client's RST_STREAM): forgotten.
    pub(super) fn answered_gone(&mut self, id: u32) {
        self.answered.retain(|a| a.id != id);
    }

    /// When the first answered stream runs out of time.
    pub(super) fn answered_deadline(&self) -> Option<Instant> {
        self.answered.iter().map(|a| a.until).min()
    }

    /// Resets the answered streams whose time ran out at `sh.now`.
    pub(super) fn expire_answered(&mut self, sh: &mut Shared) {
        let now = sh.now;
        while let Some(pos) = self.answered.iter().position(|a| a.until <= now) {
            if let Some(a) = self.answered.remove(pos) {
                self.reset_answered(a.id, sh);
            }
        }
    }

    /// RST_STREAM(NO_ERROR) on answered stream `id`; its late frames are
    /// ignored.
    fn reset_answered(&mut self, id: u32, sh: &mut Shared) {
        let mut bytes = Vec::with_capacity(13);
        frame::encode_rst_stream(&mut bytes, id, ErrorCode::NoError);
        self.queue(sh, &bytes);
        super::limits::count_reset_sent(&sh.stats, ErrorCode::NoError);
        self.note_reset(id);
    }
}

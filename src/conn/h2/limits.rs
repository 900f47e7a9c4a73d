//! The bounds of what one HTTP/2 client may make the proxy do per
//! second, each answered with GOAWAY ENHANCE_YOUR_CALM (RFC 9113 §7,
//! §10.5) past it (ARCHITECTURE.md §8):
//! - **resets**: streams the client reset (or that we refused) — rapid
//!   reset, CVE-2023-44487 — more than `max(max_concurrent_streams, 100)`
//!   in one second;
//! - **control frames** that ask for a reply (PING, SETTINGS) — more
//!   than [`MAX_CONTROL_PER_SEC`] in one second (CVE-2019-9512,
//!   CVE-2019-9515);
//! - **empty work**: frames that cost work and move nothing (empty DATA
//!   without END_STREAM, empty CONTINUATION, PRIORITY, unknown types) —
//!   more than [`MAX_EMPTY_PER_SEC`] in one second (CVE-2019-9518,
//!   CVE-2019-9516).
//!
//! Counted in fixed one-second windows from the first event of each: a
//! client at most doubles a limit across a window's edge.
//!
//! What it must not know: frames, sockets.

use std::time::{Duration, Instant};

use crate::h2::ErrorCode;
use crate::stats::Stats;

/// PING and SETTINGS frames a client may send per second.
pub(super) const MAX_CONTROL_PER_SEC: u32 = 1000;

/// Frames that move nothing a client may send per second.
pub(super) const MAX_EMPTY_PER_SEC: u32 = 1000;

/// Resets a client may cause per second at least (more with a higher
/// `h2_max_concurrent_streams`).
pub(super) const MIN_RESETS_PER_SEC: u32 = 100;

/// One counter over one-second windows.
#[derive(Debug, Clone, Copy)]
struct Rate {
    since: Option<Instant>,
    count: u32,
    max: u32,
}

impl Rate {
    fn new(max: u32) -> Self {
        Rate {
            since: None,
            count: 0,
            max,
        }
    }

    /// Counts one at `now`; false once over the limit in this window.
    fn hit(&mut self, now: Instant) -> bool {
        match self.since {
            Some(t) if now.saturating_duration_since(t) < Duration::from_secs(1) => {
                self.count = self.count.saturating_add(1);
            }
            _ => {
                self.since = Some(now);
                self.count = 1;
            }
        }
        self.count <= self.max
    }
}

/// A connection's flood counters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    resets: Rate,
    control: Rate,
    empty: Rate,
}

impl Limits {
    /// The counters of a connection allowing `max_streams` concurrent
    /// streams.
    pub(super) fn new(max_streams: u32) -> Self {
        Limits {
            resets: Rate::new(max_streams.max(MIN_RESETS_PER_SEC)),
            control: Rate::new(MAX_CONTROL_PER_SEC),
            empty: Rate::new(MAX_EMPTY_PER_SEC),
        }
    }

    /// A stream reset by the client, or refused, at `now`. False: over
    /// the limit (GOAWAY ENHANCE_YOUR_CALM).
    pub(super) fn reset(&mut self, now: Instant) -> bool {
        self.resets.hit(now)
    }

    /// A PING or SETTINGS frame at `now`. False: over the limit.
    pub(super) fn control(&mut self, now: Instant) -> bool {
        self.control.hit(now)
    }

    /// A frame that moves nothing at `now`. False: over the limit.
    pub(super) fn empty(&mut self, now: Instant) -> bool {
        self.empty.hit(now)
    }
}

/// Counts a GOAWAY we send with `code` (metrics by reason).
pub(super) fn count_goaway(stats: &Stats, code: ErrorCode) {
    let field = match code {
        ErrorCode::NoError => &stats.h2_goaways_no_error,
        ErrorCode::ProtocolError => &stats.h2_goaways_protocol_error,
        ErrorCode::EnhanceYourCalm => &stats.h2_goaways_enhance_your_calm,
        ErrorCode::FlowControlError => &stats.h2_goaways_flow_control_error,
        ErrorCode::CompressionError => &stats.h2_goaways_compression_error,
        _ => &stats.h2_goaways_other,
    };
    Stats::add(field, 1);
}

/// Counts a RST_STREAM we send with `code` (metrics by reason).
pub(super) fn count_reset_sent(stats: &Stats, code: ErrorCode) {
    let field = match code {
        ErrorCode::NoError => &stats.h2_resets_sent_no_error,
        ErrorCode::ProtocolError => &stats.h2_resets_sent_protocol_error,
        ErrorCode::RefusedStream => &stats.h2_resets_sent_refused_stream,
        ErrorCode::Cancel => &stats.h2_resets_sent_cancel,
        ErrorCode::FlowControlError => &stats.h2_resets_sent_flow_control_error,
        ErrorCode::StreamClosed => &stats.h2_resets_sent_stream_closed,
        ErrorCode::InternalError => &stats.h2_resets_sent_internal_error,
        _ => &stats.h2_resets_sent_other,
    };
    Stats::add(field, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_allows_its_limit_per_second_and_starts_again() {
        let t0 = Instant::now();
        let mut r = Rate::new(3);
        assert!(r.hit(t0) && r.hit(t0) && r.hit(t0));
        assert!(!r.hit(t0 + Duration::from_millis(999)));
        assert!(r.hit(t0 + Duration::from_secs(1)), "a new window");
    }

    #[test]
    fn resets_allow_at_least_a_hundred_a_second() {
        let t0 = Instant::now();
        let mut l = Limits::new(10);
        for _ in 0..MIN_RESETS_PER_SEC {
            assert!(l.reset(t0));
        }
        assert!(!l.reset(t0));
        let mut l = Limits::new(500);
        for _ in 0..500 {
            assert!(l.reset(t0));
        }
        assert!(!l.reset(t0));
    }

    #[test]
    fn internal_error_resets_have_their_own_count() {
        let stats = Stats::default();
        count_reset_sent(&stats, ErrorCode::InternalError);
        count_reset_sent(&stats, ErrorCode::InternalError);
        count_reset_sent(&stats, ErrorCode::EnhanceYourCalm);
        let s = stats.snapshot();
        assert_eq!(s.h2_resets_sent_internal_error, 2);
        assert_eq!(s.h2_resets_sent_other, 1);
    }
}

//! [`WarnLimit`]: at most one warning per interval for a class of errors a
//! user acts on (upstream failures, 502/504 causes), with the number of
//! warnings held back since the last one; [`WarnLimits`]: one such limit
//! per [`WarnKind`] of per-request upstream warning.
//!
//! What it must not know: what is warned about; the caller writes the line.

use std::time::{Duration, Instant};

/// Shortest time between two warnings of one class.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(1);

/// A rate limit for one class of warnings.
#[derive(Debug, Default)]
pub(crate) struct WarnLimit {
    last: Option<Instant>,
    held_back: u64,
}

impl WarnLimit {
    /// Whether a warning may be written at `now`: `Some(suffix)` (empty, or
    /// `" (N more since the last one)"`) if so, `None` if it is held back.
    pub(crate) fn allow(&mut self, now: Instant) -> Option<String> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < WARN_EVERY)
        {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        let n = std::mem::take(&mut self.held_back);
        Some(if n == 0 {
            String::new()
        } else {
            format!(" ({n} more since the last one)")
        })
    }
}

/// The kinds of per-request upstream warnings, each limited on its own,
/// so that a burst of one kind (cut responses, say) does not hide the
/// first line of another (a malformed head, a refused connect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarnKind {
    /// A group with no server available (503).
    Unavailable,
    /// A connect that failed (refused, unreachable, no descriptor).
    Connect,
    /// An upstream that sent what HTTP does not allow (a head, a chunk).
    Malformed,
    /// An upstream that closed or reset the connection early.
    Closed,
    /// An upstream timeout (connect, read, send).
    Timeout,
    /// Anything else.
    Other,
    /// A client flooding the proxy (an HTTP/2 connection closed with
    /// ENHANCE_YOUR_CALM: rapid reset, SETTINGS or PING floods, …).
    Flood,
    /// A TLS handshake with an upstream that failed, with its reason.
    TlsHandshake,
    /// A connect that could not start, in the OS's words (no descriptor,
    /// the upstream sockets' share spent); the request's own line, with
    /// its answer, is `Connect`. Apart, so each event counts once in each.
    ConnectStart,
}

/// One [`WarnLimit`] per [`WarnKind`].
#[derive(Debug, Default)]
pub(crate) struct WarnLimits([WarnLimit; 9]);

impl WarnLimits {
    /// [`WarnLimit::allow`] for warnings of `kind`.
    pub(crate) fn allow(&mut self, kind: WarnKind, now: Instant) -> Option<String> {
        self.0.get_mut(kind as usize)?.allow(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_limit() {
        let t0 = Instant::now();
        let mut l = WarnLimits::default();
        assert_eq!(l.allow(WarnKind::Closed, t0).as_deref(), Some(""));
        assert_eq!(l.allow(WarnKind::Closed, t0), None);
        assert_eq!(l.allow(WarnKind::Malformed, t0).as_deref(), Some(""));
        assert_eq!(l.allow(WarnKind::Other, t0).as_deref(), Some(""));
        // The last kind has its slot too.
        assert_eq!(l.allow(WarnKind::ConnectStart, t0).as_deref(), Some(""));
        assert_eq!(
            l.allow(WarnKind::Closed, t0 + WARN_EVERY).as_deref(),
            Some(" (1 more since the last one)")
        );
    }

    #[test]
    fn one_warning_per_interval_then_the_count_of_those_held_back() {
        let t0 = Instant::now();
        let mut l = WarnLimit::default();
        assert_eq!(l.allow(t0).as_deref(), Some(""));
        assert_eq!(l.allow(t0 + Duration::from_millis(10)), None);
        assert_eq!(l.allow(t0 + Duration::from_millis(20)), None);
        assert_eq!(
            l.allow(t0 + WARN_EVERY).as_deref(),
            Some(" (2 more since the last one)")
        );
    }
}

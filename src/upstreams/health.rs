//! A server's health, sans-IO (ARCHITECTURE.md §13): the passive state
//! (consecutive failures of real requests eject it for a time that doubles
//! on each repeated ejection, capped at 8×, as Envoy's outlier detection),
//! the active state (`rise` successes mark it up, `fall` failures down:
//! HAProxy's hysteresis). The caller
//! passes `now`.
//!
//! What it must not know: sockets, HTTP, the clock, the balancing.

use std::time::{Duration, Instant};

/// Largest multiple of `fail_timeout` an ejection lasts.
pub(crate) const MAX_EJECTION_FACTOR: u32 = 8;

/// What one request (or check) did to a server's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Counted as a success.
    Success,
    /// Counted as a failure.
    Failure,
    /// Says nothing about the server (client gone, our own timeout of a
    /// slow answer, a 4xx).
    Neutral,
}

/// How a server's availability changed after a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// It was taken out (ejected, or marked down by checks).
    Out,
    /// Active checks marked it up again.
    Up,
}

/// One server's health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Health {
    /// Consecutive passive failures.
    pub fails: u32,
    /// Ejected until then.
    pub ejected_until: Option<Instant>,
    /// Ejections in a row without a success since coming back (the
    /// doubling's exponent).
    pub ejections: u32,
    /// Active checks say it is down.
    pub down: bool,
    /// Consecutive check results pointing the other way (toward `rise`
    /// when down, toward `fall` when up).
    pub streak: u32,
}

impl Health {
    /// May be chosen at `now` (not in panic mode).
    pub(crate) fn available(&self, now: Instant) -> bool {
        !self.down && self.ejected_until.is_none_or(|t| t <= now)
    }

    /// Counts a passive result. `max_fails` 0 turns passive ejection off.
    /// Returns `Change::Out` when this failure ejects the server.
    pub(crate) fn passive(
        &mut self,
        v: Verdict,
        max_fails: u32,
        fail_timeout: Duration,
        now: Instant,
    ) -> Option<Change> {
        match v {
            Verdict::Neutral => None,
            Verdict::Success => {
                self.fails = 0;
                if self.ejected_until.is_none_or(|t| t <= now) {
                    self.ejected_until = None;
                    self.ejections = 0;
                }
                None
            }
            Verdict::Failure => {
                self.fails = self.fails.saturating_add(1);
                if max_fails == 0 || self.fails < max_fails {
                    return None;
                }
                if self.ejected_until.is_some_and(|t| t > now) {
                    return None;
                }
                let factor = 1u32
                    .checked_shl(self.ejections)
                    .unwrap_or(MAX_EJECTION_FACTOR)
                    .min(MAX_EJECTION_FACTOR);
                self.ejected_until = Some(now + fail_timeout * factor);
                self.ejections = self.ejections.saturating_add(1);
                self.fails = 0;
                Some(Change::Out)
            }
        }
    }

    /// Counts an active check's result against `rise`/`fall`.
    pub(crate) fn check(&mut self, ok: bool, rise: u32, fall: u32) -> Option<Change> {
        if ok != self.down {
            self.streak = 0;
            return None;
        }
        self.streak += 1;
        if self.down && self.streak >= rise {
            self.down = false;
            self.streak = 0;
            // Checks vouch for it: a passive ejection ends too.
            self.ejected_until = None;
            self.fails = 0;
            return Some(Change::Up);
        }
        if !self.down && self.streak >= fall {
            self.down = true;
            self.streak = 0;
            return Some(Change::Out);
        }
        None
    }
}

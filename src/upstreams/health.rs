//! A server's health, sans-IO (ARCHITECTURE.md §13): the passive state
//! (consecutive failures of real requests eject it for a time that doubles
//! on each repeated ejection, capped at 8×, as Envoy's outlier detection),
//! the active state (`rise` successes mark it up, `fall` failures down:
//! HAProxy's hysteresis), the operator's mode (`drain`, `maintenance`,
//! set through the admin write endpoint), and the reasons: the last
//! failure with its time, the last check's result. The caller passes
//! `now`.
//!
//! What it must not know: sockets, HTTP, the clock, the balancing.

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

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
    /// An answer HTTP does not allow (a malformed head, bad chunked
    /// framing) or one cut after it began: an error of the last minute,
    /// counted in its answer's class, but not toward ejection (as nginx,
    /// whose `max_fails` counts `error` and `timeout` by default, not
    /// `invalid_header`).
    Flawed,
}

/// How a server's availability changed after a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// It was taken out (ejected, or marked down by checks).
    Out,
    /// Active checks marked it up again.
    Up,
}

/// What the operator asked of a server (`POST /servers/GROUP/ADDR/state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    /// Takes requests as its health allows.
    #[default]
    Ready,
    /// No new requests; those in flight finish; idle pooled connections
    /// close.
    Drain,
    /// Out of the group until set `ready` again (as `Drain` for traffic).
    Maintenance,
}

impl Mode {
    /// The word the endpoint takes and `/status` shows.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Ready => "ready",
            Mode::Drain => "drain",
            Mode::Maintenance => "maintenance",
        }
    }

    /// The mode a word of the endpoint names.
    pub(crate) fn parse(word: &str) -> Option<Mode> {
        match word {
            "ready" => Some(Mode::Ready),
            "drain" => Some(Mode::Drain),
            "maintenance" => Some(Mode::Maintenance),
            _ => None,
        }
    }
}

/// A failure of a server, with when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What it was: `check: status 404`, `traffic: connect timeout`, ….
    pub reason: String,
    /// When (wall clock, for `/status`).
    pub at: SystemTime,
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
    /// The operator's mode.
    pub mode: Mode,
    /// The last failure, of traffic or of a check.
    pub last_failure: Option<Failure>,
    /// The last check's result (`status 200`, `timeout after 500ms`).
    pub last_check: Option<String>,
    /// Why the current (or last) ejection happened: `3 failures, last:
    /// traffic: connect refused`.
    pub eject_cause: Option<String>,
    /// Requests and errors of the last minute.
    pub minute: Minute,
    /// Requests since start, by status class, and response times.
    pub traffic: Traffic,
}

/// One server's requests since the loop started (carried across an
/// in-process reload): by status class of its answer (`1xx`…`5xx`, and
/// `none` for a try that got no response), and a histogram of the time
/// to its response's first byte over [`crate::stats::BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Traffic {
    /// Counts by class: index 0 = no response, 1..=5 = 1xx..5xx.
    pub classes: [u64; 6],
    /// Responses with a first byte at or under each bound, then +Inf
    /// (cumulative counts are worked out when exposed).
    pub buckets: [u64; crate::stats::BUCKETS.len() + 1],
    /// Sum of those times, µs.
    pub sum_us: u64,
}

impl Traffic {
    /// Counts one try that ended with `status` (0: no response) after
    /// `first_byte`.
    pub(crate) fn count(&mut self, status: u16, first_byte: Option<Duration>) {
        let class = match status {
            100..=599 => usize::from(status / 100),
            _ => 0,
        };
        if let Some(c) = self.classes.get_mut(class) {
            *c += 1;
        }
        if let Some(d) = first_byte.filter(|_| class != 0) {
            let secs = d.as_secs_f64();
            let i = crate::stats::BUCKETS
                .iter()
                .position(|&b| secs <= b)
                .unwrap_or(crate::stats::BUCKETS.len());
            if let Some(b) = self.buckets.get_mut(i) {
                *b += 1;
            }
            self.sum_us = self.sum_us.saturating_add(d.as_micros() as u64);
        }
    }
}

/// Length of one bucket of [`Minute`].
const BUCKET: Duration = Duration::from_secs(10);
/// Buckets of [`Minute`]: 6 × 10 s.
const BUCKETS: usize = 6;

/// Requests and errors (a failed try or a 5xx answer) of the last minute,
/// in six 10 s buckets (the oldest one partly out of the window: a figure
/// of the last 50 to 60 s).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Minute {
    /// Per bucket: when it began, requests, errors.
    buckets: [Option<(Instant, u64, u64)>; BUCKETS],
    /// The bucket being filled.
    current: usize,
}

impl Minute {
    /// Counts one request at `now`, an error if `error`.
    pub(crate) fn count(&mut self, now: Instant, error: bool) {
        let fresh = match self.buckets.get(self.current).copied().flatten() {
            Some((began, _, _)) => now.saturating_duration_since(began) >= BUCKET,
            None => true,
        };
        if fresh {
            self.current = (self.current + 1) % BUCKETS;
            if let Some(b) = self.buckets.get_mut(self.current) {
                *b = Some((now, 0, 0));
            }
        }
        if let Some(Some((_, n, e))) = self.buckets.get_mut(self.current) {
            *n += 1;
            *e += u64::from(error);
        }
    }

    /// The buckets as `(age at now in ms, requests, errors)`, oldest
    /// first, the one being filled last: a form another process can age
    /// ([`Minute::from_ages`]).
    pub(crate) fn ages(&self, now: Instant) -> Vec<(u64, u64, u64)> {
        (1..=BUCKETS)
            .filter_map(|k| {
                self.buckets
                    .get((self.current + k) % BUCKETS)
                    .copied()
                    .flatten()
            })
            .map(|(began, n, e)| {
                let age = now.saturating_duration_since(began).as_millis();
                (u64::try_from(age).unwrap_or(u64::MAX), n, e)
            })
            .collect()
    }

    /// The buckets of [`Minute::ages`], `later` older, at `now` (at most
    /// the newest six).
    pub(crate) fn from_ages(ages: &[(u64, u64, u64)], later: Duration, now: Instant) -> Minute {
        let mut m = Minute::default();
        let keep = ages.len().saturating_sub(BUCKETS);
        for (i, &(age, n, e)) in ages.iter().skip(keep).enumerate() {
            let age = Duration::from_millis(age).saturating_add(later);
            let began = now.checked_sub(age).unwrap_or(now);
            if let Some(b) = m.buckets.get_mut(i) {
                *b = Some((began, n, e));
            }
            m.current = i;
        }
        m
    }

    /// `(requests, errors)` of the buckets begun in the last minute.
    pub(crate) fn totals(&self, now: Instant) -> (u64, u64) {
        self.buckets
            .iter()
            .flatten()
            .filter(|(began, _, _)| now.saturating_duration_since(*began) < BUCKET * BUCKETS as u32)
            .fold((0, 0), |(n, e), (_, bn, be)| (n + bn, e + be))
    }
}

impl Health {
    /// May be chosen at `now` (not in panic mode).
    pub(crate) fn available(&self, now: Instant) -> bool {
        self.mode == Mode::Ready && !self.down && !self.ejected(now)
    }

    /// Passive health keeps it out at `now`.
    pub(crate) fn ejected(&self, now: Instant) -> bool {
        self.ejected_until.is_some_and(|t| t > now)
    }

    /// May be tried in panic mode (every server of the group out): the
    /// operator has not taken it out and active checks do not hold it
    /// down; only a passive ejection keeps it out, and that is a guess
    /// about the past a live server answers.
    pub(crate) fn panic_candidate(&self) -> bool {
        self.mode == Mode::Ready && !self.down
    }

    /// The earliest it may take requests again, from `now`: the rest of
    /// its ejection, or for a server checked down `rise` more passing
    /// checks `interval` apart (the first at most one interval away);
    /// `None` when the operator took it out.
    pub(crate) fn back_in(&self, now: Instant, rise: u32, interval: Duration) -> Option<Duration> {
        if self.mode != Mode::Ready {
            return None;
        }
        let mut wait = self
            .ejected_until
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        if self.down {
            let left = rise.saturating_sub(self.streak).max(1);
            wait = wait.max(interval * left);
        }
        Some(wait)
    }

    /// Records a failure `reason` at `at`.
    pub(crate) fn note_failure(&mut self, reason: String, at: SystemTime) {
        self.last_failure = Some(Failure { reason, at });
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
            Verdict::Neutral | Verdict::Flawed => None,
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
                let last = self
                    .last_failure
                    .as_ref()
                    .map_or("-", |f| f.reason.as_str());
                let n = self.fails;
                let s = if n == 1 { "" } else { "s" };
                self.eject_cause = Some(format!("{n} failure{s}, last: {last}"));
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

//! What the proxy learned of each upstream server's idle limit, and the
//! ages it derives from it for the pool's choice rule (`pool::IdlePool::
//! choose`, issue 14, ARCHITECTURE.md §7).
//!
//! Why: a pooled connection the server is closing at the moment it is
//! taken turns a request into a 502 when the request cannot be retried (a
//! POST). Servers close idle keep-alive connections after their own limit
//! (nginx `keepalive_timeout`, 75 s by default), and some close right after
//! a response without saying so. Both leave traces: `Keep-Alive:
//! timeout=N` on responses (RFC 9112 §9 does not define it; RFC 2068
//! §19.7.1.1 did, and Apache sends it), and the idle age at which pooled
//! connections were seen closed.
//!
//! Per peer it keeps:
//! - the last `Keep-Alive: timeout=N`;
//! - the smallest idle age of a close seen in the current and the previous
//!   window of [`WINDOW`] (a close at an idle age of [`QUICK_CLOSE`] or
//!   more: the server's idle limit);
//! - the idle ages of closes under [`QUICK_CLOSE`] seen after the
//!   connection was parked (closes right after a response) in the same two
//!   windows, as counts per power-of-two bucket of [`BUCKET_BASE`] (the
//!   guard is their 90th percentile: one stalled close must not make every
//!   just-parked connection unusable). A FIN that came with the answer is
//!   seen when the connection would be parked, so it is never parked and
//!   is no risk to a later take: such closes do not feed the guard;
//! - how many responses left a connection to keep (parked, or closed with
//!   the answer) and how many of those the server closed right after (with
//!   the answer or under [`QUICK_CLOSE`] later), in the same two windows:
//!   a server that closes at least half of them ([`AS_A_RULE`]) closes
//!   after responses as a rule, and no request gains from a just-parked
//!   connection there (issue 14: a POST slipped past the 90th percentile
//!   of a server that closed every connection, and every GET was sent
//!   twice).
//!
//! What it must not know: sockets, HTTP, the clock (`now` comes in).

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A close at a smaller idle age came right after a response, not at the
/// server's idle limit.
pub const QUICK_CLOSE: Duration = Duration::from_millis(100);

/// Observations are remembered for one to two windows of this length.
pub const WINDOW: Duration = Duration::from_secs(30);

/// Least time a non-idempotent request keeps between a connection's idle
/// age and the learned limit (its bytes must reach the server first).
const RISKY_MARGIN: Duration = Duration::from_millis(100);

/// Width of the smallest bucket of quick-close ages (and so the shortest
/// guard). An observed age is when the loop saw the FIN, at least when it
/// came: the guard errs on the safe side, so it needs no floor beyond the
/// bucket width (issue 14: a 5 ms floor made a POST refuse every pooled
/// connection of a busy loop, where all are parked under a millisecond).
pub const BUCKET_BASE: Duration = Duration::from_micros(125);

/// A server that closes at least this share of the connections its
/// responses left (with at least [`AS_A_RULE_SAMPLE`] of them seen) closes
/// after responses as a rule.
pub const AS_A_RULE: (u32, u32) = (1, 2);

/// Fewest responses seen before a share is trusted.
pub const AS_A_RULE_SAMPLE: u32 = 16;

/// Room for the loop's latency when telling one idle limit from scattered
/// ones (a FIN is seen up to a loop turn after it came).
const SHARP_SLACK: Duration = Duration::from_millis(50);

/// Most peers remembered; past it, everything learned is forgotten (peers
/// that come and go cannot grow the map without bound).
const MAX_PEERS: usize = 4096;

/// The ages the pool's choice rule uses for one peer now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleRule {
    /// Pooled connections idle this long are closed before use, whatever
    /// the method, if `limit_is_sharp`: the learned limit minus a 32nd
    /// (at least 20 ms). `Duration::MAX` when nothing was learned.
    pub retire_after: Duration,
    /// The limit is one setting of the server (announced, or its idle
    /// closes agree): connections are retired before it. A server that
    /// closes idle connections at scattered ages (the smallest is only the
    /// earliest seen) keeps its older connections: non-idempotent requests
    /// pass them over (`risky_max_idle`), idempotent ones take them with a
    /// liveness check and are retried if they fail (issue 14: retiring
    /// them cost the reuse the issue asks to keep).
    pub limit_is_sharp: bool,
    /// A non-idempotent request takes no connection idle longer than this:
    /// seven eighths of the learned limit, and at least 100 ms under it.
    /// `Duration::MAX` when nothing was learned.
    pub risky_max_idle: Duration,
    /// A non-idempotent request takes no connection idle for less than
    /// this (the server was seen closing right after responses): the 90th
    /// percentile of the quick-close ages seen, rounded up to a power of
    /// two times [`BUCKET_BASE`] (125 µs), at most [`QUICK_CLOSE`]; zero
    /// when none was seen. [`QUICK_CLOSE`] when the server closes after
    /// responses as a rule.
    pub risky_min_idle: Duration,
    /// The server closes after responses as a rule ([`AS_A_RULE`]): the
    /// `risky_min_idle` guard holds for every request, idempotent or not.
    pub closes_as_a_rule: bool,
}

impl IdleRule {
    /// The rule when nothing is known: plain LIFO for every request.
    pub const UNKNOWN: IdleRule = IdleRule {
        retire_after: Duration::MAX,
        risky_max_idle: Duration::MAX,
        risky_min_idle: Duration::ZERO,
        limit_is_sharp: false,
        closes_as_a_rule: false,
    };
}

/// A count in two windows: the current one and the one before.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    cur: u32,
    prev: u32,
}

impl Count {
    fn add(&mut self) {
        self.cur = self.cur.saturating_add(1);
    }

    fn total(&self) -> u32 {
        self.cur.saturating_add(self.prev)
    }

    fn roll(&mut self, keep_cur: bool) {
        self.prev = if keep_cur { self.cur } else { 0 };
        self.cur = 0;
    }
}

/// Two windows of a statistic: the current one and the one before.
#[derive(Debug, Default, Clone, Copy)]
struct Windows {
    cur: Option<Duration>,
    prev: Option<Duration>,
}

impl Windows {
    fn merged(&self, pick: fn(Duration, Duration) -> Duration) -> Option<Duration> {
        match (self.cur, self.prev) {
            (Some(a), Some(b)) => Some(pick(a, b)),
            (a, b) => a.or(b),
        }
    }

    fn add(&mut self, v: Duration, pick: fn(Duration, Duration) -> Duration) {
        self.cur = Some(self.cur.map_or(v, |c| pick(c, v)));
    }

    /// A new window starts; the current one becomes the previous if
    /// `keep_cur` (else both are forgotten).
    fn roll(&mut self, keep_cur: bool) {
        self.prev = if keep_cur { self.cur } else { None };
        self.cur = None;
    }
}

/// Buckets of quick-close ages: bucket `i` holds ages below
/// `BUCKET_BASE * 2^i` (the last one everything up to [`QUICK_CLOSE`]).
const QUICK_BUCKETS: usize = 11;

/// Counts of quick-close ages per bucket, in two windows.
#[derive(Debug, Default, Clone, Copy)]
struct QuickAges {
    cur: [u32; QUICK_BUCKETS],
    prev: [u32; QUICK_BUCKETS],
}

impl QuickAges {
    fn add(&mut self, age: Duration) {
        let i = (0..QUICK_BUCKETS - 1)
            .find(|&i| age < BUCKET_BASE * (1 << i))
            .unwrap_or(QUICK_BUCKETS - 1);
        if let Some(c) = self.cur.get_mut(i) {
            *c = c.saturating_add(1);
        }
    }

    fn roll(&mut self, keep_cur: bool) {
        self.prev = if keep_cur {
            self.cur
        } else {
            [0; QUICK_BUCKETS]
        };
        self.cur = [0; QUICK_BUCKETS];
    }

    /// The upper bound of the bucket holding the 90th percentile, if any
    /// age was seen (no allocation: it runs on every choice).
    fn p90(&self) -> Option<Duration> {
        let count = |i: usize| {
            u64::from(self.cur.get(i).copied().unwrap_or(0))
                + u64::from(self.prev.get(i).copied().unwrap_or(0))
        };
        let total: u64 = (0..QUICK_BUCKETS).map(count).sum();
        if total == 0 {
            return None;
        }
        let mut seen = 0;
        for i in 0..QUICK_BUCKETS {
            seen += count(i);
            if seen * 10 >= total * 9 {
                return Some((BUCKET_BASE * (1 << i)).min(QUICK_CLOSE));
            }
        }
        Some(QUICK_CLOSE)
    }
}

/// What one peer showed.
#[derive(Debug, Clone, Copy)]
struct Learned {
    hint: Option<Duration>,
    /// Smallest idle age of a close at the idle limit.
    limit: Windows,
    /// Largest idle age of a close at the idle limit (how scattered the
    /// server's closes are).
    limit_max: Windows,
    /// Idle ages of closes right after a response.
    quick: QuickAges,
    /// Responses that left a connection to keep (parked or closed with
    /// the answer), counted once a close was seen.
    kept: Count,
    /// Of those, closed right after (with the answer or a quick close).
    closed: Count,
    window_start: Instant,
}

impl Learned {
    fn new(now: Instant) -> Self {
        Learned {
            hint: None,
            limit: Windows::default(),
            limit_max: Windows::default(),
            quick: QuickAges::default(),
            kept: Count::default(),
            closed: Count::default(),
            window_start: now,
        }
    }

    /// The server closes after responses as a rule (see [`AS_A_RULE`]);
    /// `parked`: connections parked now, which may still close (they are
    /// not counted as kept yet, or a fast client would hide the share).
    fn closes_as_a_rule(&self, parked: u32) -> bool {
        let (kept, closed) = (
            self.kept.total().saturating_sub(parked),
            self.closed.total(),
        );
        kept >= AS_A_RULE_SAMPLE
            && u64::from(closed) * u64::from(AS_A_RULE.1)
                >= u64::from(kept) * u64::from(AS_A_RULE.0)
    }

    /// Moves the windows on to `now`.
    fn roll(&mut self, now: Instant) {
        let age = now.saturating_duration_since(self.window_start);
        if age < WINDOW {
            return;
        }
        let keep_cur = age < 2 * WINDOW;
        self.limit.roll(keep_cur);
        self.limit_max.roll(keep_cur);
        self.quick.roll(keep_cur);
        self.kept.roll(keep_cur);
        self.closed.roll(keep_cur);
        self.window_start = now;
    }
}

/// What one peer showed, in a form another loop or process takes over
/// (a reload, issue 27 item 4): durations in µs, the window's start as
/// its age in ms when taken.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortableLearned {
    hint_us: Option<u64>,
    limit_us: [Option<u64>; 2],
    limit_max_us: [Option<u64>; 2],
    quick: [[u32; QUICK_BUCKETS]; 2],
    kept: [u32; 2],
    closed: [u32; 2],
    window_age_ms: u64,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Learned {
    fn portable(&self, now: Instant) -> PortableLearned {
        let w = |w: &Windows| [w.cur.map(us), w.prev.map(us)];
        let age = now.saturating_duration_since(self.window_start).as_millis();
        PortableLearned {
            hint_us: self.hint.map(us),
            limit_us: w(&self.limit),
            limit_max_us: w(&self.limit_max),
            quick: [self.quick.cur, self.quick.prev],
            kept: [self.kept.cur, self.kept.prev],
            closed: [self.closed.cur, self.closed.prev],
            window_age_ms: u64::try_from(age).unwrap_or(u64::MAX),
        }
    }

    fn from_portable(p: &PortableLearned, later: Duration, now: Instant) -> Learned {
        let w = |[cur, prev]: [Option<u64>; 2]| Windows {
            cur: cur.map(Duration::from_micros),
            prev: prev.map(Duration::from_micros),
        };
        let c = |[cur, prev]: [u32; 2]| Count { cur, prev };
        let [qc, qp] = p.quick;
        let age = Duration::from_millis(p.window_age_ms).saturating_add(later);
        let mut l = Learned {
            hint: p.hint_us.map(Duration::from_micros),
            limit: w(p.limit_us),
            limit_max: w(p.limit_max_us),
            quick: QuickAges { cur: qc, prev: qp },
            kept: c(p.kept),
            closed: c(p.closed),
            window_start: now.checked_sub(age).unwrap_or(now),
        };
        l.roll(now);
        l
    }
}

/// Learned idle limits by peer key `K`.
#[derive(Debug)]
pub struct IdleLimits<K> {
    peers: HashMap<K, Learned>,
}

impl<K: Clone + Eq + Hash> Default for IdleLimits<K> {
    fn default() -> Self {
        IdleLimits {
            peers: HashMap::default(),
        }
    }
}

impl<K: Clone + Eq + Hash> IdleLimits<K> {
    fn entry(&mut self, key: &K, now: Instant) -> &mut Learned {
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(key) {
            self.peers.clear();
        }
        let l = self
            .peers
            .entry(key.clone())
            .or_insert_with(|| Learned::new(now));
        l.roll(now);
        l
    }

    /// A response of `key` said `Keep-Alive: timeout=N` (`hint` = N s).
    pub fn observe_hint(&mut self, key: &K, hint: Duration, now: Instant) {
        self.entry(key, now).hint = Some(hint);
    }

    /// A pooled connection of `key` was seen closed by the server after
    /// `idle` of idleness (an eviction by FIN, a dead one found at take, a
    /// reused one that failed before any response byte).
    pub fn observe_close(&mut self, key: &K, idle: Duration, now: Instant) {
        let l = self.entry(key, now);
        if idle < QUICK_CLOSE {
            l.quick.add(idle);
            l.closed.add();
        } else {
            l.limit.add(idle, Duration::min);
            l.limit_max.add(idle, Duration::max);
        }
    }

    /// A response of `key` left its connection to keep and it was parked.
    /// Counted only for a peer already seen closing (one lookup, no entry
    /// made: the hot path of servers that never close stays as it was).
    pub fn observe_park(&mut self, key: &K, now: Instant) {
        if let Some(l) = self.peers.get_mut(key) {
            l.roll(now);
            l.kept.add();
        }
    }

    /// A response of `key` came with the server's FIN: the connection was
    /// never parked (no risk to a later take, so no age for the guard),
    /// but the server closed right after a response.
    pub fn observe_close_with_answer(&mut self, key: &K, now: Instant) {
        let l = self.entry(key, now);
        l.kept.add();
        l.closed.add();
    }

    /// The learned limit of `key`: the smaller of its hint and the smallest
    /// recent close age; `None` if neither is known.
    pub fn limit(&self, key: &K) -> Option<Duration> {
        let l = self.peers.get(key)?;
        match (l.hint, l.limit.merged(Duration::min)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether `key`'s idle limit is one setting (nginx's
    /// `keepalive_timeout`): announced in `Keep-Alive: timeout=N`, or its
    /// recent idle closes all came within a quarter of the smallest (plus
    /// [`SHARP_SLACK`] for the loop's own latency). A server whose idle
    /// closes are scattered has no limit to retire at, only a smallest
    /// seen.
    fn limit_is_sharp(&self, key: &K) -> bool {
        let Some(l) = self.peers.get(key) else {
            return false;
        };
        if l.hint.is_some() {
            return true;
        }
        match (
            l.limit.merged(Duration::min),
            l.limit_max.merged(Duration::max),
        ) {
            (Some(lo), Some(hi)) => hi <= lo + lo / 4 + SHARP_SLACK,
            _ => false,
        }
    }

    /// Everything learned, per peer, as it stands at `now`.
    pub fn export(&self, now: Instant) -> Vec<(K, PortableLearned)> {
        self.peers
            .iter()
            .map(|(k, l)| (k.clone(), l.portable(now)))
            .collect()
    }

    /// Takes over what another loop learned of `key` (`p`, taken `later`
    /// ago), at `now`; what this loop learned of it already stays.
    pub fn import(&mut self, key: K, p: &PortableLearned, later: Duration, now: Instant) {
        if self.peers.len() >= MAX_PEERS || self.peers.contains_key(&key) {
            return;
        }
        self.peers
            .insert(key, Learned::from_portable(p, later, now));
    }

    /// The ages the choice rule uses for `key` now (see [`IdleRule`]);
    /// `parked`: how many connections of `key` are parked now.
    pub fn rule(&mut self, key: &K, now: Instant, parked: usize) -> IdleRule {
        if !self.peers.contains_key(key) {
            return IdleRule::UNKNOWN;
        }
        let l = self.entry(key, now);
        let parked = u32::try_from(parked).unwrap_or(u32::MAX);
        let (quick, as_a_rule) = (l.quick.p90(), l.closes_as_a_rule(parked));
        let mut rule = IdleRule::UNKNOWN;
        let sharp = self.limit_is_sharp(key);
        if let Some(limit) = self.limit(key) {
            let margin = (limit / 32).max(Duration::from_millis(20));
            rule.retire_after = limit.saturating_sub(margin);
            rule.limit_is_sharp = sharp;
            rule.risky_max_idle = (limit * 7 / 8).min(limit.saturating_sub(RISKY_MARGIN));
        }
        if let Some(q) = quick {
            rule.risky_min_idle = q;
        }
        if as_a_rule {
            rule.risky_min_idle = QUICK_CLOSE;
            rule.closes_as_a_rule = true;
        }
        rule
    }
}

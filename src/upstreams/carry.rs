//! Health handed from a loop to its successor (issue 27 item 4), and the
//! form a loop posts its view of the tier in for the other workers
//! (`tier_board`): a [`Snapshot`] of every server's health and of what
//! the pool learned of each peer's idle limit, taken at one time and
//! portable — no `Instant` inside, only ages and remaining times in ms
//! from the time it was taken, and wall-clock times (ms since the epoch)
//! for the reasons' `at` — so another process can take it over, or show
//! it, any time later ([`PortableHealth::to_health`]). The groups give
//! their servers' part ([`Groups::snapshot`]) and take a predecessor's
//! over ([`Groups::adopt`]).
//!
//! What a successor takes over, for the servers both configurations have
//! (same group name, same address): an ejection with its remaining time,
//! the ejection count (the doubling), the check streak and state, the
//! operator's mode, the last failure and check, the per-server counts;
//! and the learned idle limits of those peers. A server only the new
//! configuration has starts fresh: up until its checks prove it down
//! (`Group::fresh_health`). One only the old has stays with the old
//! loop, which drains it.
//!
//! In one process (`--workers 1`) the hand-over is a request and an
//! answer, so the old loop pays nothing until a reload asks:
//! [`CarrySlot::request`] (the reloading thread) sets a flag and wakes
//! the old loop; the old loop's turn sees the flag
//! ([`CarrySlot::wanted`]) and answers with a snapshot
//! ([`CarrySlot::answer`]). Between processes (`--workers N`) each loop
//! posts its snapshot on the board, and a new worker reads its
//! predecessor's there.
//!
//! What it must not know: sockets, the loop, how health is judged.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Groups;
use super::health::{Failure, Health, Minute, Mode, Traffic};
use crate::idle_limit::PortableLearned;

/// One server as a loop saw it when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Carried {
    /// The group's name.
    pub group: String,
    /// The server's address (`None`: a declared host name with no address
    /// yet, shown `resolving`).
    pub addr: Option<SocketAddr>,
    /// How it was declared: `host:port` (the address for an IP literal).
    pub name: String,
    /// Declared `backup`.
    pub backup: bool,
    /// Its state then (`up`, `ejected`, …, see `ServerState::state`).
    pub state: String,
    /// Requests in flight to it then.
    pub in_flight: u32,
    /// Idle pooled connections to it then.
    pub idle: usize,
    /// Its health.
    pub health: PortableHealth,
}

/// A server's [`Health`] with its times as ages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PortableHealth {
    /// Consecutive passive failures.
    pub fails: u32,
    /// Time left of its ejection, ms (absent: not ejected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ejected_ms: Option<u64>,
    /// Ejections in a row (the doubling's exponent).
    pub ejections: u32,
    /// Active checks say it is down.
    pub down: bool,
    /// Consecutive check results pointing the other way.
    pub streak: u32,
    /// The operator's mode.
    pub mode: Mode,
    /// The last failure: its reason and when (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<(String, u64)>,
    /// The last check's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check: Option<String>,
    /// Why the current (or last) ejection happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eject_cause: Option<String>,
    /// The last minute's buckets: (age ms, requests, errors), oldest first.
    #[serde(default)]
    pub minute: Vec<(u64, u64, u64)>,
    /// Requests by class and response times since start.
    #[serde(default)]
    pub traffic: Traffic,
}

impl PortableHealth {
    /// `h` as it stands at `now`.
    pub(crate) fn of(h: &Health, now: Instant) -> PortableHealth {
        PortableHealth {
            fails: h.fails,
            ejected_ms: h
                .ejected_until
                .filter(|&t| t > now)
                .map(|t| millis(t.saturating_duration_since(now))),
            ejections: h.ejections,
            down: h.down,
            streak: h.streak,
            mode: h.mode,
            last_failure: h.last_failure.as_ref().map(|f| {
                let at = f.at.duration_since(UNIX_EPOCH).unwrap_or_default();
                (f.reason.clone(), millis(at))
            }),
            last_check: h.last_check.clone(),
            eject_cause: h.eject_cause.clone(),
            minute: h.minute.ages(now),
            traffic: h.traffic.clone(),
        }
    }

    /// The health this describes, `later` after it was taken, at `now`.
    pub(crate) fn to_health(&self, later: Duration, now: Instant) -> Health {
        let left = self
            .ejected_ms
            .map(Duration::from_millis)
            .and_then(|d| d.checked_sub(later))
            .filter(|d| !d.is_zero());
        Health {
            fails: self.fails,
            ejected_until: left.map(|d| now + d),
            ejections: self.ejections,
            down: self.down,
            streak: self.streak,
            mode: self.mode,
            last_failure: self.last_failure.as_ref().map(|(reason, at)| Failure {
                reason: reason.clone(),
                at: UNIX_EPOCH + Duration::from_millis(*at),
            }),
            last_check: self.last_check.clone(),
            eject_cause: self.eject_cause.clone(),
            minute: Minute::from_ages(&self.minute, later, now),
            traffic: self.traffic.clone(),
        }
    }
}

/// What the pool learned of one peer's idle limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CarriedLimit {
    /// The peer's address.
    pub addr: SocketAddr,
    /// Connections to it speak TLS (the successor finds the peer's TLS
    /// identity by its group's server at that address).
    pub tls: bool,
    /// What was learned.
    pub learned: PortableLearned,
}

/// Everything a loop hands on, taken at one time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Every server of every group, group by group.
    pub servers: Vec<Carried>,
    /// What the pool learned of each peer's idle limit.
    #[serde(default)]
    pub idle_limits: Vec<CarriedLimit>,
}

/// `d` in whole ms, saturated.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A wall-clock time in ms since the epoch (0 before it).
pub(crate) fn epoch_ms(t: SystemTime) -> u64 {
    millis(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Where a loop hands its snapshot to its successor in one process.
#[derive(Debug, Default)]
pub(crate) struct CarrySlot {
    want: AtomicBool,
    data: Mutex<Option<(Snapshot, Instant)>>,
    ready: Condvar,
}

impl CarrySlot {
    /// A successor asked for the health (checked by the loop each turn).
    pub(crate) fn wanted(&self) -> bool {
        self.want.load(Ordering::Relaxed)
    }

    /// The loop's answer: `snapshot`, taken at `taken`.
    pub(crate) fn answer(&self, snapshot: Snapshot, taken: Instant) {
        self.want.store(false, Ordering::Relaxed);
        if let Ok(mut d) = self.data.lock() {
            *d = Some((snapshot, taken));
            self.ready.notify_all();
        }
    }

    /// Asks for the snapshot (`wake` wakes the loop) and waits at most
    /// `within` for it: the snapshot and when it was taken; `None` if the
    /// loop did not answer in time (it ended, or is stuck): the successor
    /// then starts fresh.
    pub(crate) fn request(&self, wake: impl Fn(), within: Duration) -> Option<(Snapshot, Instant)> {
        let deadline = Instant::now() + within;
        let mut d = self.data.lock().ok()?;
        *d = None;
        self.want.store(true, Ordering::Relaxed);
        wake();
        while d.is_none() {
            let left = deadline.checked_duration_since(Instant::now())?;
            d = self.ready.wait_timeout(d, left).ok()?.0;
        }
        d.take()
    }
}

impl Groups {
    /// Every server as it stands at `now`, group by group, in portable
    /// form (for a successor loop, or the other workers: [`carry`](self)); a
    /// declared host name with no address yet is one entry without one.
    /// `idle_of`: the idle pooled connections to an address.
    pub(crate) fn snapshot(
        &self,
        now: Instant,
        idle_of: impl Fn(SocketAddr) -> usize,
    ) -> Vec<Carried> {
        let mut out = Vec::new();
        for g in &self.groups {
            let name = g.spec.name.get_ref();
            for (i, (s, h)) in g.slots.iter().zip(&g.health).enumerate() {
                out.push(Carried {
                    group: name.clone(),
                    addr: Some(s.addr),
                    name: s.addr.to_string(),
                    backup: g.backup.get(i).copied().unwrap_or(false),
                    state: g.state_of(i, now).to_string(),
                    in_flight: s.outstanding,
                    idle: idle_of(s.addr),
                    health: PortableHealth::of(h, now),
                });
            }
            for (o, spec) in g.spec.servers.get_ref().iter().enumerate() {
                if g.origin.contains(&o) {
                    continue;
                }
                out.push(Carried {
                    group: name.clone(),
                    addr: None,
                    name: format!("{}:{}", spec.host, spec.port),
                    backup: spec.backup,
                    state: "resolving".into(),
                    in_flight: 0,
                    idle: 0,
                    health: PortableHealth::default(),
                });
            }
        }
        out
    }

    /// Takes over the health in `old` (a snapshot taken `later` ago) for
    /// the servers this configuration has too (same group name, same
    /// address); returns how many, with the ones not up named (`app
    /// 127.0.0.1:8002 checked_down`).
    pub(crate) fn adopt(
        &mut self,
        old: &[Carried],
        later: Duration,
        now: Instant,
    ) -> (usize, Vec<String>) {
        self.changed_state();
        let (mut n, mut out) = (0, Vec::new());
        for c in old {
            let Some(addr) = c.addr else {
                continue;
            };
            let Some(g) = self.find(&c.group) else {
                continue;
            };
            let Some(group) = self.groups.get_mut(g) else {
                continue;
            };
            let Some(i) = group.index(addr) else {
                continue;
            };
            if let Some(h) = group.health.get_mut(i) {
                *h = c.health.to_health(later, now);
                n += 1;
            }
            let state = group.state_of(i, now);
            if state != "up" && state != "backup" {
                out.push(format!("{} {state}", group.who(addr)));
            }
        }
        (n, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstreams::health::Verdict;

    #[test]
    fn health_survives_the_trip_through_its_portable_form_and_ages() {
        let now = Instant::now();
        let mut h = Health::default();
        h.note_failure("traffic: connect refused".into(), SystemTime::now());
        h.passive(Verdict::Failure, 1, Duration::from_secs(10), now);
        h.check(false, 2, 2);
        h.mode = Mode::Drain;
        h.minute.count(now, true);
        h.traffic.count(502, None);
        let p = PortableHealth::of(&h, now);
        let json = serde_json::to_string(&p).unwrap();
        let back: PortableHealth = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        // Taken over at once: the same health.
        let same = back.to_health(Duration::ZERO, now);
        assert_eq!(same.ejected_until, h.ejected_until);
        assert_eq!(
            (same.ejections, same.streak, same.down, same.mode),
            (1, 1, false, Mode::Drain)
        );
        assert_eq!(same.minute.totals(now), (1, 1));
        assert_eq!(same.traffic, h.traffic);
        assert_eq!(
            same.last_failure.as_ref().map(|f| f.reason.as_str()),
            Some("traffic: connect refused")
        );
        // Four seconds later: six seconds of the ejection left.
        let later = back.to_health(Duration::from_secs(4), now);
        let left = later.ejected_until.unwrap().duration_since(now);
        assert_eq!(left, Duration::from_secs(6));
        // Past its end: not ejected, but the doubling is remembered.
        let over = back.to_health(Duration::from_secs(11), now);
        assert_eq!((over.ejected_until, over.ejections), (None, 1));
        // Past the minute: no requests in the last one.
        assert_eq!(
            back.to_health(Duration::from_secs(61), now)
                .minute
                .totals(now),
            (0, 0)
        );
    }
}

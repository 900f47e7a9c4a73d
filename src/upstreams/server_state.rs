//! A server's state as the admin endpoints show it (ARCHITECTURE.md
//! §13): the state names ([`STATES`], most available first), the one a
//! live server is in now (`Group::state_of`), and [`ServerState`], the
//! row `/status` and `/metrics` show, made from a server of a snapshot
//! (`carry.rs`) as it stands some time after the snapshot was taken.
//!
//! What it must not know: sockets, the pool (idle counts come from the
//! caller), how the endpoints encode a row.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::health::{self, Mode};
use super::{Group, carry};

/// One server's health as the admin endpoints show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerState {
    /// Its group's name.
    pub group: String,
    /// The server's address (`None` while its host name has none:
    /// `resolving`).
    pub addr: Option<SocketAddr>,
    /// The address as text, or the declared `host:port` while resolving.
    pub name: String,
    /// It may be chosen now (not ejected, not marked down, not taken out
    /// by the operator).
    pub available: bool,
    /// Passive health ejected it for now.
    pub ejected: bool,
    /// Active checks mark it down.
    pub down: bool,
    /// One of [`STATES`].
    pub state: &'static str,
    /// Declared `backup`.
    pub backup: bool,
    /// The operator's mode: `ready`, `drain`, `maintenance`.
    pub mode: &'static str,
    /// Requests in flight to it.
    pub in_flight: u32,
    /// Idle pooled connections to it (filled in by the caller, who owns
    /// the pool).
    pub idle: usize,
    /// Time left of its ejection (ms), if ejected.
    pub ejected_ms: Option<u64>,
    /// What caused the ejection (`3 failures, last: traffic: connect
    /// refused`).
    pub eject_cause: Option<String>,
    /// The last check's result (`status 200`, `timeout after 500ms`).
    pub last_check: Option<String>,
    /// The last failure and when it happened.
    pub last_error: Option<health::Failure>,
    /// Requests and 5xx answers (or failed tries) in the last minute.
    pub minute: (u64, u64),
    /// Requests since start by class, and response times.
    pub traffic: health::Traffic,
}

/// Every state a server can be in, most available first: `up`; `backup`
/// (a healthy backup while a primary serves); `resolving` (its host name
/// has no address yet); `ejected` (passive health); `checked_down`
/// (active checks); `draining` and `maintenance` (the operator).
pub(crate) const STATES: [&str; 7] = [
    "up",
    "backup",
    "resolving",
    "ejected",
    "checked_down",
    "draining",
    "maintenance",
];

impl ServerState {
    /// The state of `c`, `later` after its snapshot was taken, at `now`:
    /// an ejection that ran out meanwhile is over, the last minute's
    /// counts are those of the minute before `now`.
    pub(crate) fn of(c: &carry::Carried, later: Duration, now: Instant) -> ServerState {
        let h = c.health.to_health(later, now);
        let ejected = h.ejected(now);
        let state = match h.mode {
            _ if c.addr.is_none() => "resolving",
            Mode::Maintenance => "maintenance",
            Mode::Drain => "draining",
            Mode::Ready if h.down => "checked_down",
            Mode::Ready if ejected => "ejected",
            Mode::Ready if c.state == "backup" => "backup",
            Mode::Ready => "up",
        };
        ServerState {
            group: c.group.clone(),
            addr: c.addr,
            name: c.name.clone(),
            available: c.addr.is_some() && h.available(now),
            ejected,
            down: h.down,
            state,
            backup: c.backup,
            mode: h.mode.name(),
            in_flight: c.in_flight,
            idle: c.idle,
            ejected_ms: h
                .ejected_until
                .filter(|&t| t > now)
                .map(|t| carry::millis(t.saturating_duration_since(now))),
            eject_cause: h.eject_cause.clone().filter(|_| ejected),
            last_check: h.last_check,
            last_error: h.last_failure,
            minute: h.minute.totals(now),
            traffic: h.traffic,
        }
    }
}

impl Group {
    /// The state name `/status` shows for server `i` at `now`.
    pub(super) fn state_of(&self, i: usize, now: Instant) -> &'static str {
        let Some(h) = self.health.get(i) else {
            return "up";
        };
        match h.mode {
            Mode::Maintenance => return "maintenance",
            Mode::Drain => return "draining",
            Mode::Ready => {}
        }
        if h.down {
            return "checked_down";
        }
        if h.ejected(now) {
            return "ejected";
        }
        let primaries_up = (0..self.slots.len()).any(|j| {
            !self.backup.get(j).copied().unwrap_or(false)
                && self.health.get(j).is_some_and(|h| h.available(now))
        });
        if self.backup.get(i).copied().unwrap_or(false) && primaries_up {
            return "backup";
        }
        "up"
    }
}

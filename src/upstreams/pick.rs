//! Choosing a server of a group for one request (ARCHITECTURE.md §13):
//! the tiers (a healthy primary by the group's algorithm, else a healthy
//! backup, else panic mode over what the operator and the checks leave),
//! the request's key for `balance = "hash"`, and, when none can be chosen,
//! why: [`NoPick`] with the earliest a server may be back, and the 503's
//! log line. The algorithms themselves are `balance.rs`'s.
//!
//! What it must not know: sockets, the pool, how a server's health is
//! judged (it asks `Health`), where a server's addresses came from.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::balance::{self, Ring, Slot};
use super::health::Health;
use super::spec::{Balance, HashKey};
use super::{Group, Groups};
use crate::http::RequestHead;

/// A chosen server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    /// Its address.
    pub addr: SocketAddr,
    /// Every server of the group was out when it was chosen (panic mode:
    /// the request may try each server that checks do not hold down once,
    /// within one connect timeout in all).
    pub panic: bool,
}

/// Why no server was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoPick {
    /// The group has no server with an address, or every server that may
    /// be tried was tried by this request.
    Tried,
    /// Every server is out — down by active checks, ejected, drained or in
    /// maintenance — and none may be tried in panic mode: the client gets
    /// 503 with `Retry-After` of this (the earliest a server may return).
    Unavailable(Duration),
}

impl Group {
    /// A server not in `tried` may still be tried: the operator has not
    /// taken it out and active checks do not hold it down.
    pub(crate) fn may_try_another(&self, tried: &[SocketAddr]) -> bool {
        self.slots
            .iter()
            .zip(&self.health)
            .any(|(s, h)| !tried.contains(&s.addr) && h.panic_candidate())
    }

    /// Chooses a server not in `tried`, in tiers: a healthy non-backup
    /// server by the group's algorithm; else a healthy backup; else any
    /// untried server the operator did not take out and active checks do
    /// not hold down (panic mode when the whole group is out: only a
    /// passive ejection keeps such a server out).
    fn pick(&mut self, key: u64, tried: &[SocketAddr], now: Instant) -> Result<Pick, NoPick> {
        // Eligibility is worked out per candidate: no allocation on this
        // once-per-request path.
        let panic = !self.health.iter().any(|h| h.available(now));
        let (health, backup) = (&self.health, &self.backup);
        let untried = |s: &Slot| !tried.contains(&s.addr);
        let usable = |i: usize| health.get(i).is_some_and(|h| h.available(now));
        let is_backup = |i: usize| backup.get(i).copied().unwrap_or(false);
        let primary = |i: usize, s: &Slot| untried(s) && usable(i) && !is_backup(i);
        let spare = |i: usize, s: &Slot| untried(s) && usable(i) && is_backup(i);
        let last =
            |i: usize, s: &Slot| untried(s) && health.get(i).is_some_and(Health::panic_candidate);
        let (balance, ring) = (self.spec.balance, &self.ring);
        let slots = &mut self.slots;
        let chosen = choose(balance, ring, slots, key, primary)
            .or_else(|| choose(balance, ring, slots, key, spare))
            .or_else(|| choose(balance, ring, slots, key, last));
        let Some(slot) = chosen.and_then(|i| self.slots.get_mut(i)) else {
            if panic && !self.health.iter().any(Health::panic_candidate) && !self.slots.is_empty() {
                return Err(NoPick::Unavailable(self.back_in(now)));
            }
            return Err(NoPick::Tried);
        };
        slot.outstanding += 1;
        Ok(Pick {
            addr: slot.addr,
            panic,
        })
    }

    /// The earliest any server may take requests again (rounded up to
    /// whole seconds, at least 1 s: `Retry-After`'s unit, RFC 9110
    /// §10.2.3). Servers the operator took out do not count; with only
    /// those, 1 s.
    fn back_in(&self, now: Instant) -> Duration {
        let (rise, interval) = self
            .spec
            .health_check
            .as_ref()
            .map_or((0, Duration::ZERO), |hc| (hc.rise, hc.interval));
        let wait = self
            .health
            .iter()
            .filter_map(|h| h.back_in(now, rise, interval))
            .min()
            .unwrap_or(Duration::ZERO);
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Duration::from_secs(secs.max(1))
    }
}

/// The server `balance` chooses among `slots` for `key`, of those `ok`
/// accepts; `None` when it accepts none.
fn choose(
    balance: Balance,
    ring: &Ring,
    slots: &mut [Slot],
    key: u64,
    ok: impl Fn(usize, &Slot) -> bool,
) -> Option<usize> {
    match balance {
        Balance::RoundRobin => balance::round_robin(slots, ok),
        Balance::LeastConn => balance::least_conn(slots, ok),
        Balance::Hash => ring.pick(slots, key, ok),
    }
}

impl Groups {
    /// The hash of `req`'s key for group `g` (`balance = "hash"`), 0 for
    /// the other algorithms.
    pub(crate) fn hash_of(&self, g: usize, client: IpAddr, req: &RequestHead) -> u64 {
        let Some(group) = self
            .groups
            .get(g)
            .filter(|g| g.spec.balance == Balance::Hash)
        else {
            return 0;
        };
        match &group.spec.hash_key {
            HashKey::ClientIp => match client {
                IpAddr::V4(a) => balance::hash_bytes(&a.octets()),
                IpAddr::V6(a) => balance::hash_bytes(&a.octets()),
            },
            HashKey::Header(name) => balance::hash_bytes(req.headers.get(name).unwrap_or(&[])),
            HashKey::Path => {
                let t = req.target.as_bytes();
                let end = t.iter().position(|&b| b == b'?').unwrap_or(t.len());
                balance::hash_bytes(t.get(..end).unwrap_or(t))
            }
        }
    }

    /// Chooses a server of group `g` not in `tried` and counts a request
    /// in flight to it (until [`Groups::release`]).
    pub(crate) fn pick(
        &mut self,
        g: usize,
        key: u64,
        tried: &[SocketAddr],
        now: Instant,
    ) -> Result<Pick, NoPick> {
        self.changes += 1;
        self.groups
            .get_mut(g)
            .ok_or(NoPick::Tried)?
            .pick(key, tried, now)
    }

    /// Why every server of group `g` is out, for the 503's log line:
    /// `127.0.0.1:1 checked_down (check: connect refused), …`.
    pub(crate) fn why_out(&self, g: usize, now: Instant) -> String {
        let Some(group) = self.groups.get(g) else {
            return String::new();
        };
        let mut out = String::new();
        for (i, s) in group.slots.iter().enumerate() {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(&format!("{} {}", s.addr, group.state_of(i, now)));
            if let Some(f) = group.health.get(i).and_then(|h| h.last_failure.as_ref()) {
                out.push_str(&format!(" ({})", f.reason));
            }
        }
        out
    }
}

//! Upstream groups (ARCHITECTURE.md §2, §13): the servers of each group,
//! their balancing, their passive and active health, the routes that pick
//! a group, and the address sets a resolver thread hands in. Everything
//! here is plain state changed by plain calls on the loop's thread; the
//! caller passes `now`.
//!
//! - [`spec`]: the configuration's shapes (`[[upstream]]`, `[[route]]`).
//! - [`balance`]: round-robin, least_conn, ring hash.
//! - [`health`]: passive ejection, active rise/fall.
//! - [`route`]: host and path matching.
//! - [`dns`]: the resolver trait and thread.
//! - [`carry`]: health handed from a loop to its successor (reload).
//!
//! What it must not know: the sockets of exchanges or of checks, the pool,
//! the loop.

pub(crate) mod balance;
pub(crate) mod carry;
pub mod dns;
pub(crate) mod health;
pub(crate) mod route;
pub mod spec;
mod spec_check;
mod spec_codec;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use balance::{Ring, Slot};
use health::{Change, Health, Mode, Verdict};
use route::Route;
use spec::{Balance, GroupSpec, HashKey, HealthCheck, RouteSpec};

use crate::http::RequestHead;

/// One group: its declaration and its live servers.
#[derive(Debug)]
pub(crate) struct Group {
    /// The declaration.
    pub spec: GroupSpec,
    /// Balancing state, one per live server.
    slots: Vec<Slot>,
    /// Health, parallel to `slots`.
    health: Vec<Health>,
    /// Index of the `ServerSpec` each live server came from.
    origin: Vec<usize>,
    /// Each live server is a backup (parallel to `slots`).
    backup: Vec<bool>,
    /// The hash ring (`balance = "hash"` only).
    ring: Ring,
}

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
    fn new(spec: GroupSpec) -> Self {
        Group {
            spec,
            slots: Vec::new(),
            health: Vec::new(),
            origin: Vec::new(),
            backup: Vec::new(),
            ring: Ring::default(),
        }
    }

    /// The live servers' addresses.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.slots.iter().map(|s| s.addr)
    }

    /// A connection to `addr` may be parked after its exchange: the
    /// server is still in the group and not drained or in maintenance.
    pub(crate) fn parks(&self, addr: SocketAddr) -> bool {
        self.index(addr)
            .and_then(|i| self.health.get(i))
            .is_some_and(|h| h.mode == Mode::Ready)
    }

    /// A server not in `tried` may still be tried: the operator has not
    /// taken it out and active checks do not hold it down.
    pub(crate) fn may_try_another(&self, tried: &[SocketAddr]) -> bool {
        self.slots
            .iter()
            .zip(&self.health)
            .any(|(s, h)| !tried.contains(&s.addr) && h.panic_candidate())
    }

    /// Number of live servers.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn index(&self, addr: SocketAddr) -> Option<usize> {
        self.slots.iter().position(|s| s.addr == addr)
    }

    /// Sets the addresses of server `origin` (its host name resolved to
    /// `addrs`): new ones join with fresh health, missing ones leave.
    /// Returns the addresses that left.
    fn set_addrs(&mut self, origin: usize, addrs: &[SocketAddr]) -> Vec<SocketAddr> {
        let Some((weight, backup)) = self
            .spec
            .servers
            .get_ref()
            .get(origin)
            .map(|s| (s.weight, s.backup))
        else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        let mut i = 0;
        while i < self.slots.len() {
            let gone = self.origin.get(i) == Some(&origin)
                && self.slots.get(i).is_some_and(|s| !addrs.contains(&s.addr));
            if gone {
                removed.push(self.slots.remove(i).addr);
                self.health.remove(i);
                self.origin.remove(i);
                self.backup.remove(i);
            } else {
                i += 1;
            }
        }
        for &a in addrs {
            if self.index(a).is_none() {
                self.slots.push(Slot::new(a, weight));
                self.health.push(self.fresh_health());
                self.origin.push(origin);
                self.backup.push(backup);
            }
        }
        if self.spec.balance == Balance::Hash {
            self.ring = Ring::new(&self.slots);
        }
        // A new member starts level with the others in round-robin.
        for s in &mut self.slots {
            s.current = 0;
        }
        removed
    }

    /// The health a server joining the group starts with: up until
    /// proven down (as nginx and HAProxy start a server), so a new server
    /// of a group in service takes traffic at once; its first checks take
    /// it out if it fails `fall` of them.
    fn fresh_health(&self) -> Health {
        Health::default()
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

    /// The state name `/status` shows for server `i` at `now`.
    fn state_of(&self, i: usize, now: Instant) -> &'static str {
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

    /// The log line's name of server `i`: `app 127.0.0.1:8002`.
    fn who(&self, addr: SocketAddr) -> String {
        format!("{} {addr}", self.spec.name.get_ref())
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

/// All groups and routes of the process.
#[derive(Debug)]
pub(crate) struct Groups {
    groups: Vec<Group>,
    routes: Vec<Route>,
    /// Bumped by every change of a server's state or its reasons (a mode,
    /// a check result, an ejection, an address set, a take-over).
    states: u64,
    /// Bumped by every change a snapshot would show (those, and each
    /// request picked or released): the loop posts a new snapshot only
    /// when one moved (`tier_board`).
    changes: u64,
}

impl Groups {
    /// The groups of `specs` (each server's addresses from `addrs_of(group,
    /// server)`) and `routes` (unknown group names were refused by
    /// `Config::validate`; such a route is skipped).
    pub(crate) fn new(
        specs: &[GroupSpec],
        routes: &[RouteSpec],
        mut addrs_of: impl FnMut(usize, usize) -> Vec<SocketAddr>,
    ) -> Self {
        let mut groups: Vec<Group> = specs.iter().cloned().map(Group::new).collect();
        for (gi, g) in groups.iter_mut().enumerate() {
            for si in 0..g.spec.servers.get_ref().len() {
                g.set_addrs(si, &addrs_of(gi, si));
            }
        }
        let routes = routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                // A route that answers itself and names no group keeps
                // group 0: its requests never reach a group.
                let gi = match specs
                    .iter()
                    .position(|g| g.name.get_ref() == r.upstream.get_ref())
                {
                    Some(gi) => gi,
                    None if r.answers_itself() => 0,
                    None => return None,
                };
                let mut route = Route::new(r.host.as_deref(), r.path_prefix.as_deref(), gi);
                route.spec = i;
                route.tls = r.scheme.map(|s| s == spec::Scheme::Https);
                Some(route)
            })
            .collect();
        Groups {
            groups,
            routes,
            states: 0,
            changes: 0,
        }
    }

    /// The counts of state changes and of any change (see the fields):
    /// one differs from an earlier reading if what a snapshot shows may
    /// have changed since.
    pub(crate) fn changes(&self) -> (u64, u64) {
        (self.states, self.changes)
    }

    /// Counts a change of a server's state.
    fn changed_state(&mut self) {
        self.states += 1;
        self.changes += 1;
    }

    /// The group `g`.
    pub(crate) fn get(&self, g: usize) -> Option<&Group> {
        self.groups.get(g)
    }

    /// Every group with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Group)> {
        self.groups.iter().enumerate()
    }

    /// Every server as it stands at `now`, group by group, in portable
    /// form (for a successor loop, or the other workers: [`carry`]); a
    /// declared host name with no address yet is one entry without one.
    /// `idle_of`: the idle pooled connections to an address.
    pub(crate) fn snapshot(
        &self,
        now: Instant,
        idle_of: impl Fn(SocketAddr) -> usize,
    ) -> Vec<carry::Carried> {
        let mut out = Vec::new();
        for g in &self.groups {
            let name = g.spec.name.get_ref();
            for (i, (s, h)) in g.slots.iter().zip(&g.health).enumerate() {
                out.push(carry::Carried {
                    group: name.clone(),
                    addr: Some(s.addr),
                    name: s.addr.to_string(),
                    backup: g.backup.get(i).copied().unwrap_or(false),
                    state: g.state_of(i, now).to_string(),
                    in_flight: s.outstanding,
                    idle: idle_of(s.addr),
                    health: carry::PortableHealth::of(h, now),
                });
            }
            for (o, spec) in g.spec.servers.get_ref().iter().enumerate() {
                if g.origin.contains(&o) {
                    continue;
                }
                out.push(carry::Carried {
                    group: name.clone(),
                    addr: None,
                    name: format!("{}:{}", spec.host, spec.port),
                    backup: spec.backup,
                    state: "resolving".into(),
                    in_flight: 0,
                    idle: 0,
                    health: carry::PortableHealth::default(),
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
        old: &[carry::Carried],
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

    /// The group and server of each address some group has, for the
    /// successor's idle limits (a TLS peer's identity is its server's).
    pub(crate) fn servers_at(&self, addr: SocketAddr) -> Vec<usize> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.index(addr).is_some())
            .map(|(gi, _)| gi)
            .collect()
    }

    /// Sets every server's mode to the one `table` gives it (`ready` if it
    /// gives none): the servers whose mode changed, with their new mode.
    pub(crate) fn apply_modes(
        &mut self,
        table: &[(String, SocketAddr, Mode)],
    ) -> Vec<(SocketAddr, Mode, Mode)> {
        let mut changed = Vec::new();
        for g in &mut self.groups {
            let name = g.spec.name.get_ref();
            for (s, h) in g.slots.iter().zip(&mut g.health) {
                let want = table
                    .iter()
                    .find(|(tg, ta, _)| tg == name && *ta == s.addr)
                    .map_or(Mode::Ready, |e| e.2);
                if h.mode != want {
                    changed.push((s.addr, h.mode, want));
                    h.mode = want;
                }
            }
        }
        if !changed.is_empty() {
            self.changed_state();
        }
        changed
    }

    /// Sets the operator's `mode` of server `addr` in group `name`.
    /// Returns its old mode, or `None` if no such server.
    pub(crate) fn set_mode(&mut self, name: &str, addr: SocketAddr, mode: Mode) -> Option<Mode> {
        self.changed_state();
        let g = self.find(name)?;
        let group = self.groups.get_mut(g)?;
        let i = group.index(addr)?;
        let h = group.health.get_mut(i)?;
        Some(std::mem::replace(&mut h.mode, mode))
    }

    /// The group named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| g.spec.name.get_ref() == name)
    }

    /// The group for `req` by the routes, with the index of the
    /// `[[route]]` that matched; with no routes, the first group (and no
    /// route). `None`: routes exist and none matches (the client gets 404).
    /// `tls`: the request came over TLS (`scheme`).
    pub(crate) fn route_of(&self, req: &RequestHead, tls: bool) -> Option<(Option<usize>, usize)> {
        if self.routes.is_empty() {
            return (!self.groups.is_empty()).then_some((None, 0));
        }
        route::first_match(&self.routes, req, tls).map(|r| (Some(r.spec), r.group))
    }

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

    /// Server `addr` of group `g` failed for `reason` (`traffic: connect
    /// refused`): kept as its last failure, shown in `/status` and in the
    /// ejection line.
    pub(crate) fn note_failure(&mut self, g: usize, addr: SocketAddr, reason: String) {
        self.changes += 1;
        if let Some(group) = self.groups.get_mut(g)
            && let Some(i) = group.index(addr)
            && let Some(h) = group.health.get_mut(i)
        {
            h.note_failure(reason, SystemTime::now());
        }
    }

    /// A request to `addr` of group `g` ended with `verdict`: no longer in
    /// flight, its health counted. `Some(Change::Out)`: it was ejected.
    /// `status` is the upstream's (0: none came), `first_byte` the time
    /// to its first byte.
    pub(crate) fn release(
        &mut self,
        g: usize,
        addr: SocketAddr,
        verdict: Verdict,
        (status, first_byte): (u16, Option<Duration>),
        now: Instant,
    ) -> Option<Change> {
        self.changes += 1;
        let group = self.groups.get_mut(g)?;
        let i = group.index(addr)?;
        if let Some(s) = group.slots.get_mut(i) {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        let (max_fails, timeout) = (group.spec.max_fails, group.spec.fail_timeout);
        let old = group.state_of(i, now);
        let h = group.health.get_mut(i)?;
        h.minute
            .count(now, verdict == Verdict::Failure || status >= 500);
        if verdict != Verdict::Neutral || status != 0 {
            h.traffic.count(status, first_byte);
        }
        let change = h.passive(verdict, max_fails, timeout, now);
        if change.is_some() {
            let left = h
                .ejected_until
                .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
            let cause = h.eject_cause.clone().unwrap_or_default();
            log::warn!(
                "{}: {old} -> ejected for {}s: {cause}",
                group.who(addr),
                left.as_secs_f64().ceil() as u64
            );
        }
        if change.is_some() {
            self.states += 1;
        }
        change
    }

    /// Whether `status` from a server of group `g` counts as a failure.
    pub(crate) fn fails_on(&self, g: usize, status: u16) -> bool {
        self.groups
            .get(g)
            .is_some_and(|gr| gr.spec.fail_on_status.contains(&status))
    }

    /// The active check of `addr` in group `g` passed (`ok`) or not;
    /// `result` says what it saw (`status 200`, `timeout after 500ms`).
    pub(crate) fn check_result(
        &mut self,
        g: usize,
        addr: SocketAddr,
        ok: bool,
        result: &str,
        now: Instant,
    ) -> Option<Change> {
        self.changed_state();
        let group = self.groups.get_mut(g)?;
        let hc = group.spec.health_check.clone()?;
        let i = group.index(addr)?;
        let old = group.state_of(i, now);
        let h = group.health.get_mut(i)?;
        h.last_check = Some(result.to_string());
        if !ok {
            h.note_failure(format!("check: {result}"), SystemTime::now());
        }
        let change = h.check(ok, hc.rise, hc.fall);
        let new = group.state_of(i, now);
        match change {
            Some(Change::Out) => log::warn!(
                "{}: {old} -> {new}: {} failed check{}, last: {result}",
                group.who(addr),
                hc.fall,
                if hc.fall == 1 { "" } else { "s" }
            ),
            Some(Change::Up) => log::info!(
                "{}: {old} -> {new}: {} passed check{}, last: {result}",
                group.who(addr),
                hc.rise,
                if hc.rise == 1 { "" } else { "s" }
            ),
            None => {}
        }
        change
    }

    /// The `Host` a check of `addr` in group `g` sends: the check's
    /// `host`; else the group's `tls_server_name`, else the host name the
    /// server was declared with, each with `:port` unless the port is the
    /// scheme's default (80, or 443 for a TLS group); else the address.
    pub(crate) fn check_host(&self, g: usize, addr: SocketAddr) -> String {
        let Some(group) = self.groups.get(g) else {
            return addr.to_string();
        };
        if let Some(h) = group
            .spec
            .health_check
            .as_ref()
            .and_then(|hc| hc.host.clone())
        {
            return h;
        }
        let spec = group
            .index(addr)
            .and_then(|i| group.origin.get(i))
            .and_then(|&o| group.spec.servers.get_ref().get(o));
        let name = group
            .spec
            .tls_server_name
            .clone()
            .or_else(|| spec.filter(|s| s.ip().is_none()).map(|s| s.host.clone()));
        let default_port = if group.spec.tls { 443 } else { 80 };
        match name {
            Some(n) if addr.port() == default_port => n,
            Some(n) => format!("{n}:{}", addr.port()),
            None => addr.to_string(),
        }
    }

    /// The index in group `g`'s `servers` of the server `addr` is an
    /// address of, if it is one now.
    pub(crate) fn origin_of(&self, g: usize, addr: SocketAddr) -> Option<usize> {
        let group = self.groups.get(g)?;
        group.index(addr).and_then(|i| group.origin.get(i)).copied()
    }

    /// The health check of group `g`, if it has one.
    pub(crate) fn health_check(&self, g: usize) -> Option<&HealthCheck> {
        self.groups.get(g)?.spec.health_check.as_ref()
    }

    /// Server `origin` of group `g` now resolves to `addrs`: returns the
    /// addresses that left the group.
    pub(crate) fn set_addrs(
        &mut self,
        g: usize,
        origin: usize,
        addrs: &[SocketAddr],
    ) -> Vec<SocketAddr> {
        self.changed_state();
        match self.groups.get_mut(g) {
            Some(group) => group.set_addrs(origin, addrs),
            None => Vec::new(),
        }
    }

    /// Some server of some group has `addr` (a pooled connection to it may
    /// stay).
    pub(crate) fn knows(&self, addr: SocketAddr) -> bool {
        self.groups.iter().any(|g| g.index(addr).is_some())
    }
}

#[cfg(test)]
mod tests;

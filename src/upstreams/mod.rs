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
//!
//! What it must not know: the sockets of exchanges or of checks, the pool,
//! the loop.

pub(crate) mod balance;
pub mod dns;
pub(crate) mod health;
pub(crate) mod route;
pub mod spec;

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use balance::{Ring, Slot};
use health::{Change, Health, Verdict};
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
    /// The hash ring (`balance = "hash"` only).
    ring: Ring,
}

/// A chosen server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    /// Its address.
    pub addr: SocketAddr,
    /// Every server of the group was out when it was chosen (panic mode:
    /// the request may try each server once).
    pub panic: bool,
}

impl Group {
    fn new(spec: GroupSpec) -> Self {
        Group {
            spec,
            slots: Vec::new(),
            health: Vec::new(),
            origin: Vec::new(),
            ring: Ring::default(),
        }
    }

    /// The live servers' addresses.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.slots.iter().map(|s| s.addr)
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
        let Some(weight) = self.spec.servers.get_ref().get(origin).map(|s| s.weight) else {
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
            } else {
                i += 1;
            }
        }
        for &a in addrs {
            if self.index(a).is_none() {
                self.slots.push(Slot::new(a, weight));
                self.health.push(Health::default());
                self.origin.push(origin);
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

    /// Chooses a server not in `tried`: a healthy one by the group's
    /// algorithm; if none is healthy and untried, any untried one (panic
    /// mode when the whole group is out).
    fn pick(&mut self, key: u64, tried: &[SocketAddr], now: Instant) -> Option<Pick> {
        // Eligibility is worked out per candidate: no allocation on this
        // once-per-request path.
        let panic = !self.health.iter().any(|h| h.available(now));
        let health = &self.health;
        let any = |_: usize, s: &Slot| !tried.contains(&s.addr);
        let ok = |i: usize, s: &Slot| any(i, s) && health.get(i).is_some_and(|h| h.available(now));
        let (balance, ring) = (self.spec.balance, &self.ring);
        let slots = &mut self.slots;
        let i = choose(balance, ring, slots, key, ok)
            .or_else(|| choose(balance, ring, slots, key, any))?;
        let slot = self.slots.get_mut(i)?;
        slot.outstanding += 1;
        Some(Pick {
            addr: slot.addr,
            panic,
        })
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
    /// The server's address.
    pub server: SocketAddr,
    /// It may be chosen now (not ejected, not marked down).
    pub available: bool,
    /// Passive health ejected it for now.
    pub ejected: bool,
    /// Active checks mark it down.
    pub down: bool,
}

/// All groups and routes of the process.
#[derive(Debug)]
pub(crate) struct Groups {
    groups: Vec<Group>,
    routes: Vec<Route>,
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
        Groups { groups, routes }
    }

    /// The group `g`.
    pub(crate) fn get(&self, g: usize) -> Option<&Group> {
        self.groups.get(g)
    }

    /// Every group with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Group)> {
        self.groups.iter().enumerate()
    }

    /// Every live server's health at `now`, group by group.
    pub(crate) fn server_states(&self, now: Instant) -> Vec<ServerState> {
        self.groups
            .iter()
            .flat_map(|g| {
                g.slots
                    .iter()
                    .zip(&g.health)
                    .map(move |(s, h)| ServerState {
                        group: g.spec.name.get_ref().clone(),
                        server: s.addr,
                        available: h.available(now),
                        ejected: h.ejected_until.is_some_and(|t| t > now),
                        down: h.down,
                    })
            })
            .collect()
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
    ) -> Option<Pick> {
        self.groups.get_mut(g)?.pick(key, tried, now)
    }

    /// A request to `addr` of group `g` ended with `verdict`: no longer in
    /// flight, its health counted. `Some(Change::Out)`: it was ejected.
    pub(crate) fn release(
        &mut self,
        g: usize,
        addr: SocketAddr,
        verdict: Verdict,
        now: Instant,
    ) -> Option<Change> {
        let group = self.groups.get_mut(g)?;
        let i = group.index(addr)?;
        if let Some(s) = group.slots.get_mut(i) {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        let (max_fails, timeout) = (group.spec.max_fails, group.spec.fail_timeout);
        let change = group
            .health
            .get_mut(i)?
            .passive(verdict, max_fails, timeout, now);
        if change.is_some() {
            log::warn!(
                "upstream {} server {addr}: ejected after {max_fails} consecutive failures",
                group.spec.name.get_ref()
            );
        }
        change
    }

    /// Whether `status` from a server of group `g` counts as a failure.
    pub(crate) fn fails_on(&self, g: usize, status: u16) -> bool {
        self.groups
            .get(g)
            .is_some_and(|gr| gr.spec.fail_on_status.contains(&status))
    }

    /// The active check of `addr` in group `g` passed (`ok`) or not.
    pub(crate) fn check_result(&mut self, g: usize, addr: SocketAddr, ok: bool) -> Option<Change> {
        let group = self.groups.get_mut(g)?;
        let hc = group.spec.health_check.clone()?;
        let i = group.index(addr)?;
        let change = group.health.get_mut(i)?.check(ok, hc.rise, hc.fall);
        match change {
            Some(Change::Out) => log::warn!(
                "upstream {} server {addr}: down after {} failed checks",
                group.spec.name.get_ref(),
                hc.fall
            ),
            Some(Change::Up) => log::info!(
                "upstream {} server {addr}: up after {} passed checks",
                group.spec.name.get_ref(),
                hc.rise
            ),
            None => {}
        }
        change
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

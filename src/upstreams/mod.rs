//! Upstream groups (ARCHITECTURE.md §2, §13): the servers of each group,
//! their balancing, their passive and active health, the routes that pick
//! a group, and the address sets a resolver thread hands in. Everything
//! here is plain state changed by plain calls on the loop's thread; the
//! caller passes `now`. This file holds that state ([`Group`], [`Groups`]),
//! builds it, and answers the lookups into it (a request's route, a
//! server's declaration, a check's `Host`); the calls that change it are
//! in the files of their job:
//!
//! - [`pick`]: a server chosen for a request, or why none can be.
//! - [`members`]: a server's addresses joining and leaving its group.
//! - [`group_health`]: requests' ends, check results and the operator's
//!   modes counted into the servers' health.
//! - [`server_state`]: a server's state as the admin endpoints show it.
//! - [`spec`]: the configuration's shapes (`[[upstream]]`, `[[route]]`);
//!   [`spec_codec`]: their text forms; [`spec_check`]: their checks.
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
mod group_health;
pub(crate) mod health;
mod members;
mod pick;
pub(crate) mod route;
mod server_state;
pub mod spec;
mod spec_check;
mod spec_codec;

use std::net::SocketAddr;

use balance::{Ring, Slot};
use health::{Health, Mode};
use route::Route;
use spec::{GroupSpec, HealthCheck, RouteSpec};

use crate::http::RequestHead;

pub(crate) use pick::NoPick;
pub(crate) use server_state::{STATES, ServerState};

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

    /// Number of live servers.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn index(&self, addr: SocketAddr) -> Option<usize> {
        self.slots.iter().position(|s| s.addr == addr)
    }

    /// The log line's name of server `i`: `app 127.0.0.1:8002`.
    fn who(&self, addr: SocketAddr) -> String {
        format!("{} {addr}", self.spec.name.get_ref())
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

    /// Some server of some group has `addr` (a pooled connection to it may
    /// stay).
    pub(crate) fn knows(&self, addr: SocketAddr) -> bool {
        self.groups.iter().any(|g| g.index(addr).is_some())
    }
}

#[cfg(test)]
mod tests;

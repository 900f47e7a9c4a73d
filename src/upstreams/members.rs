//! Who is in a group (ARCHITECTURE.md §13): the addresses of each
//! declared server, set when the groups are built and again whenever its
//! host name resolves to another set (`dns.rs`'s thread hands the sets to
//! the loop, which calls [`Groups::set_addrs`]). A new address joins with
//! fresh health, one no longer there leaves with its own; the hash ring
//! is rebuilt and round-robin starts level.
//!
//! What it must not know: DNS itself (names, the resolver thread),
//! sockets, the pool (the caller closes idle connections to the addresses
//! that left).

use std::net::SocketAddr;

use super::balance::{Ring, Slot};
use super::health::Health;
use super::spec::Balance;
use super::{Group, Groups};

impl Group {
    /// Sets the addresses of server `origin` (its host name resolved to
    /// `addrs`): new ones join with fresh health, missing ones leave.
    /// Returns the addresses that left.
    pub(super) fn set_addrs(&mut self, origin: usize, addrs: &[SocketAddr]) -> Vec<SocketAddr> {
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
}

impl Groups {
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
}

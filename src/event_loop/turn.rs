//! The client slab's part of a loop turn: an event recorded on the
//! connection it concerns (an upstream or health-check event goes to its
//! owner), the queued connections driven once each, their deadlines armed
//! and fired, closed ones freed, and idle ones parked
//! (`park_later`). DNS answers the resolver thread handed in are applied
//! here too.
//!
//! What it must not know: HTTP; it calls the client machines' `drive`,
//! `on_timer`, `park` and `close`, and asks them for their next deadline.

use slab::Slab;

use super::token::{self, ConnId, Kind};
use super::{Entry, Server};

impl Server {
    pub(super) fn record(&mut self, t: mio::Token, event: &mio::event::Event) {
        let Some((kind, id)) = token::split(t) else {
            return;
        };
        let owner = match kind {
            Kind::Client => Some(id),
            Kind::Upstream => self
                .sh
                .ups
                .on_event(id, event, &self.sh.stats, self.sh.events_at),
            Kind::Check => {
                let sh = &mut self.sh;
                let out = sh.checks.on_event(id, sh.now, &mut sh.groups, &sh.stats);
                for addr in out {
                    sh.server_out(addr);
                }
                None
            }
        };
        let Some(owner) = owner else {
            return;
        };
        if let Some(e) = entry_mut(&mut self.clients, owner) {
            if kind == Kind::Client {
                e.conn.on_event(event);
            }
            queue(&mut self.runnable, owner, e);
        }
    }

    /// Applies the address sets the resolver thread handed in: servers
    /// join or leave their groups; idle pooled connections to a removed
    /// address are closed (in-flight exchanges on it finish).
    pub(super) fn apply_dns(&mut self) {
        let Some(r) = self.resolver.as_ref() else {
            return;
        };
        let mut changed = false;
        while let Some(u) = r.try_next() {
            changed = true;
            for addr in self.sh.groups.set_addrs(u.group, u.origin, &u.addrs) {
                if !self.sh.groups.knows(addr) {
                    self.sh.server_out(addr);
                }
            }
        }
        if changed {
            let sh = &mut self.sh;
            sh.checks.sync(&sh.groups, sh.now);
        }
    }

    pub(super) fn drive_runnable(&mut self) {
        // Swap with the spare list (both keep their capacity): connections
        // queued while driving wait for the next turn.
        let mut list = std::mem::take(&mut self.runnable_spare);
        std::mem::swap(&mut list, &mut self.runnable);
        for &id in &list {
            let Some(e) = entry_mut(&mut self.clients, id) else {
                continue;
            };
            e.queued = false;
            let more = e.conn.drive(&mut self.sh);
            self.after_drive(id, more);
        }
        list.clear();
        self.runnable_spare = list;
    }

    /// Frees a closed connection, or arms its next deadline.
    pub(super) fn after_drive(&mut self, id: ConnId, more: bool) {
        let Some(e) = entry_mut(&mut self.clients, id) else {
            return;
        };
        if e.conn.is_closed() {
            let e = self.clients.remove(id.key());
            e.conn.close(&mut self.sh, false);
            if self.at_capacity && self.clients.len() < self.sh.cfg.max_connections {
                self.at_capacity = false;
                self.accept();
            }
            return;
        }
        if let Some((at, _)) = e.conn.deadline(&self.sh)
            && e.armed.is_none_or(|a| at < a)
        {
            e.armed = Some(at);
            self.timers.push(at, id.key(), id.generation());
        }
        // At the cap, a client that just went idle in keep-alive can make
        // room for a connection waiting in the accept queue (the
        // edge-triggered listener raises no new event for it).
        let now_idle = self.at_capacity && e.conn.idle_since().is_some();
        if more {
            queue(&mut self.runnable, id, e);
        } else if !e.park_listed && e.conn.waits_live() {
            e.park_listed = true;
            self.park_later.add(id, self.sh.now);
        }
        if now_idle {
            self.accept();
        }
    }

    /// Parks the listed connections that still wait, once the list is
    /// due (`park_later`).
    pub(super) fn park_idle(&mut self) {
        let Some(ids) = self.park_later.take_due(self.sh.now) else {
            return;
        };
        for &id in &ids {
            if let Some(e) = entry_mut(&mut self.clients, id) {
                e.park_listed = false;
                e.conn.park();
            }
        }
        self.park_later.give_back(ids);
    }

    pub(super) fn fire_timers(&mut self) {
        while let Some((at, key, generation)) = self.timers.pop_due(self.sh.now) {
            let id = ConnId::new(key, generation);
            let Some(e) = entry_mut(&mut self.clients, id) else {
                continue;
            };
            if e.armed != Some(at) {
                continue;
            }
            e.armed = None;
            e.conn.on_timer(&mut self.sh);
            self.after_drive(id, false);
        }
    }
}

/// The entry `id` names, if the slot still holds that generation.
pub(super) fn entry_mut(clients: &mut Slab<Entry>, id: ConnId) -> Option<&mut Entry> {
    clients
        .get_mut(id.key())
        .filter(|e| e.generation == id.generation())
}

/// Queues `e` (slot `id`) for a drive in this turn, once.
pub(super) fn queue(runnable: &mut Vec<ConnId>, id: ConnId, e: &mut Entry) {
    if !e.queued {
        e.queued = true;
        runnable.push(id);
    }
}

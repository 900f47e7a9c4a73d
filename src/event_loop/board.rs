//! The loop's side of health across reloads and across workers (issue 27
//! items 3, 4, 5): taking over a predecessor's snapshot (one in this
//! process, `upstreams::carry::CarrySlot`, or a worker of the previous
//! generation, `tier_board`), posting this loop's own on the board, and
//! applying the workers' modes table.
//!
//! What it must not know: HTTP, connections; it moves snapshots between
//! `Shared` and the board.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use log::info;
use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::{Server, token};
use crate::conn::Shared;
use crate::tier_board::Share;
use crate::upstreams::carry::Snapshot;

impl Server {
    /// Takes over `old` (a snapshot taken `later` ago, by `from`: empty
    /// for this process's previous loop, else ` from worker N (pid P)`),
    /// logged as `reload: kept the health of N servers and the idle
    /// limits of M peers; out: app 127.0.0.1:8002 checked_down` (`what`:
    /// `reload`, or `restart` for a worker that replaces one that died).
    pub(super) fn take_over(&mut self, old: &Snapshot, later: Duration, what: &str, from: &str) {
        self.sh.now = Instant::now();
        let (n, limits, out) = self.sh.adopt(old, later);
        let s = |n: usize| if n == 1 { "" } else { "s" };
        info!(
            "{what}: kept the health of {n} server{} and the idle limits of {limits} peer{}{from}{}{}",
            s(n),
            s(limits),
            if out.is_empty() { "" } else { "; out: " },
            out.join(", ")
        );
    }

    /// A worker's loop at start: its seat at the board (none in a single
    /// process), the wake-up of the modes table registered, the health of
    /// its predecessor taken over, the modes table applied.
    ///
    /// Errors: the registration failed.
    pub(super) fn join_board(&mut self, started_ms: u64) -> io::Result<()> {
        let Some(share) = Share::join(started_ms) else {
            return Ok(());
        };
        register(self.poll.registry(), share.wake_fd())?;
        if let Some(v) = share.predecessor() {
            let from = format!(" from worker {} (pid {})", v.index, v.pid);
            let what = if v.sibling { "restart" } else { "reload" };
            self.take_over(&v.snapshot, v.age, what, &from);
        }
        self.sh.board = Some(share);
        apply_modes(&mut self.sh);
        Ok(())
    }

    /// Once per loop turn: answers a successor in this process that asked
    /// for the health; applies the modes table if it changed; posts this
    /// loop's snapshot on the board when it changed (`draining`: the loop
    /// drains).
    pub(super) fn share_turn(&mut self, draining: bool) {
        if self.carry.wanted() {
            self.carry.answer(self.sh.snapshot(), self.sh.now);
        }
        if self.sh.board.is_none() {
            return;
        }
        apply_modes(&mut self.sh);
        let (states, changes) = self.sh.groups.changes();
        let key = (states, changes, self.sh.ups.idle_count(), draining);
        let now = self.sh.now;
        let sh = &mut self.sh;
        let Some(mut share) = sh.board.take() else {
            return;
        };
        share.post_if_due(key, now, || sh.snapshot());
        sh.board = Some(share);
    }
}

/// Applies the board's modes table to `sh` if it changed.
pub(super) fn apply_modes(sh: &mut Shared) {
    if let Some(table) = sh.board.as_mut().and_then(Share::changed_modes) {
        sh.apply_modes(&table);
    }
}

/// Registers the board's eventfd: readable after every write of the
/// modes table.
fn register(registry: &Registry, fd: RawFd) -> io::Result<()> {
    registry.register(&mut SourceFd(&fd), token::TIER_WAKE, Interest::READABLE)
}

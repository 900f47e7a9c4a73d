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
    /// Takes over `old` (a snapshot taken `later` ago, by `from`), as
    /// [`take_over`].
    pub(super) fn take_over(&mut self, old: &Snapshot, later: Duration, what: &str, from: &str) {
        take_over(&mut self.sh, old, later, what, from);
    }

    /// A worker's loop at start: its seat at the board (none in a single
    /// process), the wake-up of the modes table registered, then as
    /// [`seat`].
    ///
    /// Errors: the registration failed.
    pub(super) fn join_board(&mut self, started_ms: u64) -> io::Result<()> {
        let Some(share) = Share::join(started_ms) else {
            return Ok(());
        };
        register(self.poll.registry(), share.wake_fd())?;
        seat(&mut self.sh, share);
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
        post(&mut self.sh, draining);
    }
}

/// Takes over `old` (a snapshot taken `later` ago, by `from`: empty for
/// this process's previous loop, else ` from worker N (pid P)`), logged
/// as `reload: kept the health of N servers and the idle limits of M
/// peers; out: app 127.0.0.1:8002 checked_down` (`what`: `reload`, or
/// `restart` for a worker that replaces one that died).
fn take_over(sh: &mut Shared, old: &Snapshot, later: Duration, what: &str, from: &str) {
    sh.now = Instant::now();
    let (n, limits, out) = sh.adopt(old, later);
    let s = |n: usize| if n == 1 { "" } else { "s" };
    info!(
        "{what}: kept the health of {n} server{} and the idle limits of {limits} peer{}{from}{}{}",
        s(n),
        s(limits),
        if out.is_empty() { "" } else { "; out: " },
        out.join(", ")
    );
}

/// Seats the loop of `sh` at the board with `share`: the health of its
/// predecessor taken over, the modes table applied, and its first
/// snapshot posted — now, before the worker says READY, not in its first
/// loop turn, which comes only with its first event or timer (with
/// health checks, the first one, at a random point of the interval;
/// without, the first connection). Until a loop posts, the other
/// workers' `/status` leaves its worker out — `agreed` is worked out
/// over the rest, or the view of the worker it replaces stands in its
/// place — and a successor finds no view of it to take over.
fn seat(sh: &mut Shared, share: Share) {
    if let Some(v) = share.predecessor() {
        let from = format!(" from worker {} (pid {})", v.index, v.pid);
        let what = if v.sibling { "restart" } else { "reload" };
        take_over(sh, &v.snapshot, v.age, what, &from);
    }
    sh.board = Some(share);
    apply_modes(sh);
    sh.now = Instant::now();
    post(sh, false);
}

/// Posts `sh`'s snapshot on its board if what it shows changed
/// ([`Share::post_if_due`]; always the first time); with `now`, whatever
/// changed ([`Share::post_now`]: before a scrape is answered).
pub(super) fn post(sh: &mut Shared, draining: bool) {
    post_when(sh, draining, false);
}

/// [`post`], at once (`force`) or when due.
pub(super) fn post_when(sh: &mut Shared, draining: bool, force: bool) {
    let Some(mut share) = sh.board.take() else {
        return;
    };
    let (states, changes) = sh.groups.changes();
    let key = (states, changes, sh.ups.idle_count(), draining);
    let now = sh.now;
    if force {
        share.post_now(key, now, || sh.snapshot());
    } else {
        share.post_if_due(key, now, || sh.snapshot());
    }
    sh.board = Some(share);
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

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use super::*;
    use crate::access_log::AccessLog;
    use crate::config::Config;
    use crate::pool::IdlePool;
    use crate::tier_board::{Seat, TierBoard};
    use crate::upstreams::dns::SystemResolver;
    use crate::upstreams::health::Mode;

    /// A loop's `Shared` for `cfg`, as `Server::build` makes it (no
    /// listener, no loop).
    fn shared(cfg: Config) -> Shared {
        let poll = mio::Poll::new().unwrap();
        let registry = poll.registry().try_clone().unwrap();
        let (groups, _) = super::super::build_groups(&cfg, &SystemResolver).unwrap();
        let pool = IdlePool::new(
            cfg.pool_max_idle_per_peer,
            cfg.pool_max_idle_total,
            cfg.pool_idle_timeout,
        );
        let access = AccessLog::open(&cfg.access_log, cfg.access_log_format).unwrap();
        Shared::new(
            cfg,
            Box::new(crate::ByRoutes),
            registry,
            pool,
            groups,
            access,
        )
    }

    #[test]
    fn a_loop_posts_its_view_when_it_takes_its_seat_before_any_turn() {
        let board = Arc::new(TierBoard::create(3).unwrap());
        let app: SocketAddr = "127.0.0.1:9".parse().unwrap();
        // Another worker of the group: it set app's mode, and reads the
        // views as its /status would.
        let one = Seat {
            index: 1,
            generation: 1,
            restarted: false,
        };
        let other = Share::at(board.clone(), one, 10);
        other.write_mode("app", app, Mode::Maintenance).unwrap();
        let cfg: Config = toml::from_str(&format!(
            "access_log = \"off\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{app}\"]\n"
        ))
        .unwrap();
        let mut sh = shared(cfg);
        seat(
            &mut sh,
            Share::at(board.clone(), Seat { index: 0, ..one }, 20),
        );
        // No loop turn ran: its view is on the board all the same, with
        // the modes table applied.
        let (views, mine) = other.workers();
        // Its own (shown fresh by the caller), and the new loop's.
        assert!(mine);
        assert_eq!(views.len(), 1);
        let v = &views[0];
        assert_eq!(v.index, 0);
        let servers: Vec<_> = v
            .snapshot
            .servers
            .iter()
            .map(|c| (c.addr, c.health.mode))
            .collect();
        assert_eq!(servers, [(Some(app), Mode::Maintenance)]);
    }
}

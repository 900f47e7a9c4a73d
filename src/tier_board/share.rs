//! [`Share`]: one loop's seat at the [`TierBoard`] — the slot it posts
//! its snapshot in (first when it joins, before its worker says it is
//! ready; then at once when a server's state changed, at most every
//! [`POST_EVERY`] when only counts did), the
//! predecessor whose health it takes over at start, the other workers'
//! views it reads for `/status` and `/metrics`, and the modes table it
//! applies and writes.
//!
//! What it must not know: the loop, sockets, how a snapshot is made or
//! taken over (the loop hands them in and out as values).

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::warn;

use super::{POST_EVERY, Post, Seat, TierBoard};
use crate::upstreams::carry::Snapshot;
use crate::upstreams::health::Mode;

/// What a post showed, to tell whether a new one is due: the groups'
/// count of state changes (a mode, a check result, an ejection, an
/// address set: posted at once), their count of any change (a request
/// counted: posted at most every [`POST_EVERY`]), the idle pooled
/// connections, the draining flag (at once).
pub(crate) type PostKey = (u64, u64, usize, bool);

/// One operator mode of the table: group, server, mode.
pub(crate) type ModeEntry = (String, SocketAddr, Mode);

/// A loop's seat at the board.
#[derive(Debug)]
pub(crate) struct Share {
    board: Arc<TierBoard>,
    seat: Seat,
    /// Its slot (`None`: every slot was taken; it posts nothing).
    slot: Option<usize>,
    /// What the last post showed.
    posted: Option<PostKey>,
    /// When it last posted.
    last_post: Option<Instant>,
    /// A change waits to be posted at this time.
    pending: Option<Instant>,
    /// The modes table's sequence last applied.
    modes_seen: Option<u64>,
    /// A snapshot was too large for the slot once (logged once).
    warned_big: bool,
}

/// Another loop's post, read and parsed: who, when, what.
#[derive(Debug)]
pub(crate) struct View {
    /// Worker index.
    pub index: usize,
    /// Its process.
    pub pid: u32,
    /// Its snapshot.
    pub snapshot: Snapshot,
    /// How long ago the snapshot was taken.
    pub age: Duration,
    /// It is of this loop's own generation (a worker that died is
    /// replaced), not an earlier one (a reload).
    pub sibling: bool,
}

impl Share {
    /// The seat of this process's loop, if it is a worker with a board
    /// (`TierBoard::inherited`): a slot claimed for a loop started at
    /// `started_ms` (ms since the epoch).
    pub(crate) fn join(started_ms: u64) -> Option<Share> {
        let (board, seat) = TierBoard::inherited()?;
        Some(Share::at(board, seat, started_ms))
    }

    /// A seat at `board` as worker `seat`: a slot claimed for a loop
    /// started at `started_ms`. The slot holds no snapshot until the
    /// first [`Share::post_if_due`]: the loop posts one before its
    /// worker says it is ready (`event_loop::board`).
    pub(crate) fn at(board: Arc<TierBoard>, seat: Seat, started_ms: u64) -> Share {
        let slot = board.claim(seat, started_ms);
        if slot.is_none() {
            warn!(
                "tier board: no free slot for worker {}: its view is missing from the other workers' /status",
                seat.index
            );
        }
        Share {
            board,
            seat,
            slot,
            posted: None,
            last_post: None,
            pending: None,
            modes_seen: None,
            warned_big: false,
        }
    }

    /// The eventfd that says the modes table changed.
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.board.wake_fd()
    }

    /// The worker whose health this loop takes over at start: a loop of
    /// an earlier generation (a reload), of the same index if one runs,
    /// serving rather than draining, the newest; for a worker that
    /// replaces one that died, a running worker of its own generation.
    /// `None`: none has posted (the first start).
    pub(crate) fn predecessor(&self) -> Option<View> {
        let me = std::process::id();
        let posts: Vec<Post> = self
            .board
            .posts()
            .into_iter()
            .filter(|p| Some(p.slot) != self.slot && p.pid != me && !p.data.is_empty())
            .collect();
        let older = |p: &&Post| p.generation < self.seat.generation;
        let sibling = |p: &&Post| self.seat.restarted && p.generation == self.seat.generation;
        let rank = |p: &&Post| (p.index == self.seat.index, !p.draining, p.started_ms);
        let best = posts
            .iter()
            .filter(older)
            .max_by_key(rank)
            .or_else(|| posts.iter().filter(sibling).max_by_key(rank))?;
        let mut v = view(best)?;
        v.sibling = best.generation == self.seat.generation;
        Some(v)
    }

    /// The running workers' views, one per worker index: the newest
    /// generation's loop of each index that serves (loops that drain, a
    /// reload's old side or a shutdown, are left out while another serves
    /// their index). `mine`: whether this loop's own slot is among them;
    /// the caller shows its own, fresher view in its place.
    pub(crate) fn workers(&self) -> (Vec<View>, bool) {
        let posts: Vec<Post> = self
            .board
            .posts()
            .into_iter()
            .filter(|p| !p.draining && (!p.data.is_empty() || Some(p.slot) == self.slot))
            .collect();
        let newest = |i: usize| {
            posts
                .iter()
                .filter(|p| p.index == i)
                .max_by_key(|p| (p.generation, p.started_ms))
                .map(|p| p.slot)
        };
        let mut mine = false;
        let mut out = Vec::new();
        for p in &posts {
            if newest(p.index) != Some(p.slot) {
                continue;
            }
            if Some(p.slot) == self.slot {
                mine = true;
            } else if let Some(v) = view(p) {
                out.push(v);
            }
        }
        (out, mine)
    }

    /// Posts `snapshot()` if what it would show (`key`) changed since the
    /// last post: at once for a change of state or of the draining flag,
    /// else once the last post is [`POST_EVERY`] old (until then it
    /// remembers to, [`Share::next_deadline`]).
    pub(crate) fn post_if_due(
        &mut self,
        key: PostKey,
        now: Instant,
        snapshot: impl FnOnce() -> Snapshot,
    ) {
        let Some(slot) = self.slot else {
            return;
        };
        if self.posted == Some(key) {
            self.pending = None;
            return;
        }

        let urgent = self
            .posted
            .is_none_or(|(states, _, _, draining)| states != key.0 || draining != key.3);
        if let Some(t) = self.last_post.map(|t| t + POST_EVERY)
            && now < t
            && !urgent
        {
            self.pending = Some(t);
            return;
        }
        let mut snap = snapshot();
        let taken = crate::shm::monotonic_ns();
        let mut data = serde_json::to_vec(&snap).unwrap_or_default();
        // Too large for the slot: the idle limits go first, then servers
        // from the end, until it fits (logged once).
        while !self.board.post(slot, key.3, taken, &data) {
            if !self.warned_big {
                self.warned_big = true;
                warn!(
                    "tier board: a snapshot of {} bytes does not fit a slot: the other workers see part of it",
                    data.len()
                );
            }
            if !snap.idle_limits.is_empty() {
                snap.idle_limits.clear();
            } else if snap.servers.is_empty() {
                break;
            } else {
                snap.servers.truncate(snap.servers.len() / 2);
            }
            data = serde_json::to_vec(&snap).unwrap_or_default();
        }
        self.posted = Some(key);
        self.last_post = Some(now);
        self.pending = None;
    }

    /// Posts `snapshot()` now, whether or not it changed or the last
    /// post is recent: before a scrape is answered, so that this worker's
    /// own counters in the answer are the ones the other workers read
    /// from the board from then on (a counter any worker shows never goes
    /// down between two scrapes answered by different workers). It does
    /// not count as the last post for [`Share::post_if_due`]'s pacing: a
    /// change just after a scrape (a learned idle limit, say) is posted at
    /// once as it would be without the scrape, not up to `POST_EVERY`
    /// later, when a successor started by a reload may already have read
    /// the board.
    pub(crate) fn post_now(
        &mut self,
        key: PostKey,
        now: Instant,
        snapshot: impl FnOnce() -> Snapshot,
    ) {
        let paced_from = self.last_post;
        self.posted = None;
        self.last_post = None;
        self.post_if_due(key, now, snapshot);
        self.last_post = paced_from;
    }

    /// When a change waits to be posted.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending
    }

    /// The modes table if it changed since the last call (always on the
    /// first): every server's mode that is not `ready`.
    pub(crate) fn changed_modes(&mut self) -> Option<Vec<ModeEntry>> {
        let seq = self.board.modes_seq();
        if self.modes_seen == Some(seq) {
            return None;
        }
        let (seq, table) = self.board.read_modes()?;
        self.modes_seen = Some(seq);
        Some(parse_modes(&table))
    }

    /// Sets `mode` for server `addr` of `group` in the table (removed
    /// when `ready`) and wakes every worker to apply it. An entry stays
    /// until it is set `ready`, also while a reload's configuration does
    /// not have the server (a server taken out for maintenance and added
    /// back is still in maintenance).
    ///
    /// Errors: as [`TierBoard::write_modes`].
    pub(crate) fn write_mode(&self, group: &str, addr: SocketAddr, mode: Mode) -> io::Result<()> {
        self.board.write_modes(|old| {
            let mut modes = parse_modes(old);
            modes.retain(|(g, a, _)| !(g == group && *a == addr));
            if mode != Mode::Ready {
                modes.push((group.to_string(), addr, mode));
            }
            serde_json::to_vec(&modes).unwrap_or_default()
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.board.release(slot);
        }
    }
}

/// The modes table's entries (none if it is empty or unreadable).
fn parse_modes(table: &[u8]) -> Vec<ModeEntry> {
    if table.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice(table).unwrap_or_default()
}

/// `p` parsed, aged to now.
fn view(p: &Post) -> Option<View> {
    let snapshot = serde_json::from_slice(&p.data).ok()?;
    let age = crate::shm::monotonic_ns().saturating_sub(p.taken_ns);
    Some(View {
        index: p.index,
        pid: p.pid,
        snapshot,
        age: Duration::from_nanos(age),
        sibling: false,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_post_before_a_scrape_does_not_hold_back_the_next_change() {
        let board = Arc::new(TierBoard::create(2).unwrap());
        let seat = Seat {
            index: 0,
            generation: 1,
            restarted: false,
        };
        let mut share = Share::at(board, seat, 10);
        let t0 = Instant::now();
        share.post_if_due((1, 1, 1, false), t0, Snapshot::default);
        // Two seconds on, a scrape posts; 10 ms later a count changes.
        let scrape = t0 + Duration::from_secs(2);
        share.post_now((1, 1, 1, false), scrape, Snapshot::default);
        let mut called = false;
        share.post_if_due((1, 2, 0, false), scrape + Duration::from_millis(10), || {
            called = true;
            Snapshot::default()
        });
        assert!(called, "posted at once, as without the scrape");
        assert_eq!(share.next_deadline(), None);
        // The pacing still holds after a post of its own.
        share.post_if_due((1, 3, 0, false), scrape + Duration::from_millis(20), || {
            panic!("too soon")
        });
        assert!(share.next_deadline().is_some());
    }
}

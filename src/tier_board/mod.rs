//! [`TierBoard`]: where the worker processes of one sluice (`--workers
//! N`) share their view of the upstream tier (issue 27 items 3, 4, 5).
//!
//! Every worker checks its servers on its own and keeps its own health
//! state (ARCHITECTURE.md §13). The board lets each see the others':
//!
//! - **Posts**: each running loop holds a slot in which it posts a
//!   [`Snapshot`](crate::upstreams::carry::Snapshot) of its servers'
//!   health and its pool's learned idle limits (JSON): first when it
//!   joins, before its worker says it is ready, then whenever it
//!   changed, at most every [`POST_EVERY`]. A worker answering `/status`
//!   or `/metrics` reads every worker's post (the group-wide view and the
//!   workers that disagree); a new worker of a reload reads its
//!   predecessor's and takes it over, so health survives a reload across
//!   the process boundary.
//! - **Modes**: the operator's modes (`drain`, `maintenance`, set by
//!   `POST /servers/GROUP/ADDR/state` on whichever worker the admin
//!   connection reached) are one table for the whole group: the worker
//!   that takes the request writes it and wakes the others through an
//!   `eventfd` every worker has registered in its poll; each applies it
//!   in its next turn. A new generation applies it at start, so a mode
//!   outlives every reload until it is set `ready`.
//!
//! Why shared memory, as the metrics `Region` (`metrics/region.rs`):
//! reading the others' views costs a scrape no wait on another process,
//! and a busy or stuck worker delays nobody. The supervisor creates the
//! board (a memory file, [`crate::shm`]) and the eventfd before it starts
//! the first worker, whatever the configuration (no `--admin` needed: a
//! reload carries health anyway), and passes both to every worker of
//! every generation ([`TierBoard::pass_to`], [`TIER_ENV`]). A single
//! process (`--workers 1`) has no board: its loops hand health over in
//! memory (`upstreams::carry::CarrySlot`).
//!
//! Consistency: a slot and the modes table are each written by one
//! writer at a time (a slot by its loop; the table under a lock cell that
//! holds the writer's pid, taken over from a writer that died) and read
//! as a seqlock — the writer makes the sequence odd, stores, makes it
//! even; a reader copies and keeps the copy only if the sequence was even
//! and unchanged — with atomic loads and stores of whole cells only.
//!
//! Layout, in `u64` cells: a header ([`MAGIC`], slot count, data cells
//! per slot, modes sequence, modes lock, modes length in bytes, two
//! spare), the modes table ([`MODES_CELLS`]), then per slot
//! [`SLOT_HEAD`] cells (owner = pid | (index + 1) << 32, sequence, length
//! in bytes, `CLOCK_MONOTONIC` ns when the snapshot was taken, draining,
//! generation, start time in ms since the epoch, spare) and its data.
//!
//! What it must not know: HTTP, the loop, what a snapshot holds.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::shm::{Cells, inherit, process_exists, take_owner};

pub(crate) mod share;
pub(crate) use share::Share;

/// Environment variable a worker finds the board in:
/// `BOARD_FD,WAKE_FD,INDEX,GENERATION,RESTARTED` (the board's and the
/// eventfd's descriptors, the worker index, the reload generation, and 1
/// if the worker replaces one that died).
pub const TIER_ENV: &str = "SLUICE_TIER";

/// First header cell: identifies the layout (bumped when it changes).
const MAGIC: u64 = 0x736c_7569_6365_7401;
/// Header cells.
const HEADER: usize = 8;
/// Cells of the modes table: 64 KiB of JSON.
const MODES_CELLS: usize = 8 * 1024;
/// Cells of a slot before its data.
const SLOT_HEAD: usize = 8;
/// Data cells of a slot: 256 KiB of JSON, some 400 servers.
const SLOT_DATA: usize = 32 * 1024;
/// A loop posts a changed snapshot at most this often.
pub(crate) const POST_EVERY: Duration = Duration::from_millis(100);
/// Tries a reader makes before it gives up on a slot being written.
const READ_TRIES: usize = 64;
/// Tries a writer makes for the modes lock (yielding between tries).
const LOCK_TRIES: usize = 10_000;

/// The header cells by name.
#[derive(Clone, Copy)]
enum H {
    Magic = 0,
    Slots = 1,
    SlotData = 2,
    ModesSeq = 3,
    ModesLock = 4,
    ModesLen = 5,
}

/// A slot's head cells by name.
#[derive(Clone, Copy)]
enum S {
    Owner = 0,
    Seq = 1,
    Len = 2,
    Taken = 3,
    Draining = 4,
    Generation = 5,
    Started = 6,
}

/// The shared board and the eventfd that wakes its workers.
#[derive(Debug)]
pub struct TierBoard {
    cells: Cells,
    wake: OwnedFd,
}

/// Which worker this process is, from [`TIER_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seat {
    /// Worker index.
    pub index: usize,
    /// Reload generation (0: the first).
    pub generation: u64,
    /// It replaces a worker of its index that died.
    pub restarted: bool,
}

/// One loop's post, read.
#[derive(Debug, Clone)]
pub(crate) struct Post {
    /// Its slot.
    pub slot: usize,
    /// Its worker index.
    pub index: usize,
    /// Its process.
    pub pid: u32,
    /// Its reload generation.
    pub generation: u64,
    /// It drains (a reload's old side, or a shutdown).
    pub draining: bool,
    /// When the snapshot was taken, `CLOCK_MONOTONIC` ns.
    pub taken_ns: u64,
    /// When the loop started, ms since the epoch.
    pub started_ms: u64,
    /// The snapshot (empty: none posted yet).
    pub data: Vec<u8>,
}

impl TierBoard {
    /// A board with `slots` loop slots (at least 1) and its eventfd,
    /// both close-on-exec until [`TierBoard::pass_to`].
    ///
    /// Errors: the memory file, its mapping or the eventfd failed.
    pub fn create(slots: usize) -> io::Result<TierBoard> {
        let slots = slots.max(1);
        let len = HEADER + MODES_CELLS + slots * (SLOT_HEAD + SLOT_DATA);
        let cells = Cells::create(c"sluice-tier", len)?;
        // SAFETY: plain flags; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just returned by eventfd and is ours alone.
        let wake = unsafe { OwnedFd::from_raw_fd(raw) };
        let board = TierBoard { cells, wake };
        board.set(H::Slots, slots as u64);
        board.set(H::SlotData, SLOT_DATA as u64);
        if let Some(m) = board.cells.cells().get(H::Magic as usize) {
            m.store(MAGIC, Ordering::Release);
        }
        Ok(board)
    }

    /// Makes the worker `cmd` starts inherit the board as worker `seat`.
    pub fn pass_to(&self, cmd: &mut Command, index: usize, generation: u64, restarted: bool) {
        let fds = [self.cells.raw_fd(), self.wake.as_raw_fd()];
        cmd.env(
            TIER_ENV,
            format!(
                "{},{},{index},{generation},{}",
                fds[0],
                fds[1],
                u8::from(restarted)
            ),
        );
        inherit(cmd, fds);
    }

    /// The board this process inherited as a worker, and its seat: read
    /// from [`TIER_ENV`] once per process (the descriptors are taken the
    /// first time); `None` without it (a single process, a test).
    pub(crate) fn inherited() -> Option<(Arc<TierBoard>, Seat)> {
        static BOARD: OnceLock<Option<(Arc<TierBoard>, Seat)>> = OnceLock::new();
        BOARD
            .get_or_init(|| {
                let v = std::env::var(TIER_ENV).ok()?;
                match TierBoard::parse_env(&v) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        log::warn!(
                            "{TIER_ENV}={v:?}: {e}: health is not shared with the other workers"
                        );
                        None
                    }
                }
            })
            .clone()
    }

    fn parse_env(v: &str) -> io::Result<(Arc<TierBoard>, Seat)> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "not a board");
        let mut it = v.split(',').map(|p| p.parse::<u64>().map_err(|_| bad()));
        let mut next = || it.next().unwrap_or_else(|| Err(bad()));
        let (fd, wake, index, generation, restarted) =
            (next()?, next()?, next()?, next()?, next()?);
        let fd = RawFd::try_from(fd).map_err(|_| bad())?;
        let wake = RawFd::try_from(wake).map_err(|_| bad())?;
        // SAFETY: the supervisor passed these descriptors to this process
        // alone, for this use; `inherited` takes them once.
        let cells = unsafe { Cells::from_raw_fd(fd, HEADER + MODES_CELLS)? };
        // SAFETY: as above.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let board = TierBoard { cells, wake };
        let magic = board
            .cells
            .cells()
            .first()
            .map(|m| m.load(Ordering::Acquire));
        if magic != Some(MAGIC) || board.get(H::SlotData) as usize != SLOT_DATA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a tier board of this version",
            ));
        }
        let seat = Seat {
            index: usize::try_from(index).map_err(|_| bad())?,
            generation,
            restarted: restarted != 0,
        };
        Ok((Arc::new(board), seat))
    }

    /// The eventfd to register for [`TierBoard::write_modes`]' wake-ups
    /// (readable after every write; never read, so every worker's poll
    /// sees each write).
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    fn get(&self, h: H) -> u64 {
        self.cells
            .cells()
            .get(h as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn set(&self, h: H, v: u64) {
        if let Some(c) = self.cells.cells().get(h as usize) {
            c.store(v, Ordering::Relaxed);
        }
    }

    fn slots(&self) -> usize {
        let n = usize::try_from(self.get(H::Slots)).unwrap_or(0);
        let fit = self
            .cells
            .cells()
            .len()
            .saturating_sub(HEADER + MODES_CELLS)
            / (SLOT_HEAD + SLOT_DATA);
        n.min(fit)
    }

    fn slot(&self, slot: usize) -> Option<&[AtomicU64]> {
        if slot >= self.slots() {
            return None;
        }
        let start = HEADER + MODES_CELLS + slot * (SLOT_HEAD + SLOT_DATA);
        self.cells.cells().get(start..start + SLOT_HEAD + SLOT_DATA)
    }

    /// Claims a free slot (or one whose process is gone) for this
    /// process's loop at worker `seat`: its number, or `None` if every
    /// slot is taken.
    pub(crate) fn claim(&self, seat: Seat, started_ms: u64) -> Option<usize> {
        let owner = u64::from(std::process::id()) | ((seat.index as u64 + 1) << 32);
        (0..self.slots()).find(|&slot| {
            let Some(cells) = self.slot(slot) else {
                return false;
            };
            if !cells
                .get(S::Owner as usize)
                .is_some_and(|o| take_owner(o, owner))
            {
                return false;
            }
            let head = [
                (S::Len, 0),
                (S::Taken, 0),
                (S::Draining, 0),
                (S::Generation, seat.generation),
                (S::Started, started_ms),
            ];
            // Under the slot's sequence: a reader that began before the
            // claim does not mix the old loop's post with the new head.
            if let Some(seq) = cells.get(S::Seq as usize) {
                write_locked(seq, || {
                    for (h, v) in head {
                        store(cells, h as usize, v);
                    }
                });
            }
            true
        })
    }

    /// Frees `slot` (its loop ended).
    pub(crate) fn release(&self, slot: usize) {
        let Some(cells) = self.slot(slot) else {
            return;
        };
        if let Some(l) = cells.get(S::Len as usize) {
            l.store(0, Ordering::Relaxed);
        }
        if let Some(o) = cells.get(S::Owner as usize) {
            o.store(0, Ordering::Release);
        }
    }

    /// Posts `data` (a snapshot taken at `taken_ns`, `CLOCK_MONOTONIC`)
    /// in `slot`, with the loop's `draining` flag. False if it does not
    /// fit (nothing is written).
    pub(crate) fn post(&self, slot: usize, draining: bool, taken_ns: u64, data: &[u8]) -> bool {
        let Some(cells) = self.slot(slot) else {
            return false;
        };
        if data.len() > SLOT_DATA * 8 {
            return false;
        }
        let (head, body) = cells.split_at(SLOT_HEAD.min(cells.len()));
        let Some(seq) = head.get(S::Seq as usize) else {
            return false;
        };
        write_locked(seq, || {
            store(head, S::Len as usize, data.len() as u64);
            store(head, S::Taken as usize, taken_ns);
            store(head, S::Draining as usize, u64::from(draining));
            pack(body, data);
        });
        true
    }

    /// Every running loop's post (owner set, process alive), by index
    /// then start; a slot being written throughout [`READ_TRIES`] reads
    /// is left out.
    pub(crate) fn posts(&self) -> Vec<Post> {
        let mut out: Vec<Post> = (0..self.slots())
            .filter_map(|slot| {
                let cells = self.slot(slot)?;
                let owner = cells.get(S::Owner as usize)?.load(Ordering::Acquire);
                if owner == 0 || !process_exists(owner) {
                    return None;
                }
                let (head, body) = cells.split_at(SLOT_HEAD.min(cells.len()));
                let seq = head.get(S::Seq as usize)?;
                let (_, (taken_ns, draining, generation, started_ms, data)) =
                    read_locked(seq, || {
                        let len = load(head, S::Len as usize);
                        (
                            load(head, S::Taken as usize),
                            load(head, S::Draining as usize) != 0,
                            load(head, S::Generation as usize),
                            load(head, S::Started as usize),
                            unpack(body, usize::try_from(len).unwrap_or(0)),
                        )
                    })?;
                Some(Post {
                    slot,
                    index: usize::try_from((owner >> 32).saturating_sub(1)).unwrap_or(0),
                    pid: (owner & 0xffff_ffff) as u32,
                    generation,
                    draining,
                    taken_ns,
                    started_ms,
                    data,
                })
            })
            .collect();
        out.sort_by_key(|p| (p.index, p.started_ms));
        out
    }

    /// The modes table's sequence: changes with every write.
    pub(crate) fn modes_seq(&self) -> u64 {
        self.get(H::ModesSeq)
    }

    /// The modes table (JSON; empty before the first write), with its
    /// sequence; `None` if it was being written throughout the reads.
    pub(crate) fn read_modes(&self) -> Option<(u64, Vec<u8>)> {
        let cells = self.cells.cells();
        let seq = cells.get(H::ModesSeq as usize)?;
        let table = cells.get(HEADER..HEADER + MODES_CELLS)?;
        read_locked(seq, || {
            let len = usize::try_from(self.get(H::ModesLen)).unwrap_or(0);
            unpack(table, len)
        })
    }

    /// Rewrites the modes table with `change` of its current contents,
    /// under the writers' lock, and wakes every worker.
    ///
    /// Errors: the lock stayed held by a live process, or the new table
    /// does not fit.
    pub(crate) fn write_modes(&self, change: impl FnOnce(&[u8]) -> Vec<u8>) -> io::Result<()> {
        let cells = self.cells.cells();
        let (Some(lock), Some(seq), Some(table)) = (
            cells.get(H::ModesLock as usize),
            cells.get(H::ModesSeq as usize),
            cells.get(HEADER..HEADER + MODES_CELLS),
        ) else {
            return Err(io::Error::other("tier board too small"));
        };
        let me = u64::from(std::process::id());
        let mut tries = 0;
        loop {
            let held = lock.load(Ordering::Acquire);
            let free = held == 0 || !process_exists(held);
            if free
                && lock
                    .compare_exchange(held, me, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                break;
            }
            tries += 1;
            if tries >= LOCK_TRIES {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the modes table stayed locked by another worker",
                ));
            }
            std::thread::yield_now();
        }
        let len = usize::try_from(self.get(H::ModesLen)).unwrap_or(0);
        let new = change(&unpack(table, len));
        let fits = new.len() <= MODES_CELLS * 8;
        if fits {
            write_locked(seq, || {
                self.set(H::ModesLen, new.len() as u64);
                pack(table, &new);
            });
        }
        lock.store(0, Ordering::Release);
        if !fits {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the modes table is full",
            ));
        }
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&raw const one).cast(), 8) };
        Ok(())
    }
}

fn load(cells: &[AtomicU64], i: usize) -> u64 {
    cells.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
}

fn store(cells: &[AtomicU64], i: usize, v: u64) {
    if let Some(c) = cells.get(i) {
        c.store(v, Ordering::Relaxed);
    }
}

/// Runs `write` as the one writer of what `seq` guards: the sequence is
/// odd meanwhile.
fn write_locked(seq: &AtomicU64, write: impl FnOnce()) {
    let s = seq.load(Ordering::Relaxed);
    seq.store(s | 1, Ordering::Relaxed);
    fence(Ordering::Release);
    write();
    seq.store((s | 1).wrapping_add(1), Ordering::Release);
}

/// What `read` copies of what `seq` guards, once a copy was made while
/// no write ran, with the sequence it was made at; `None` after
/// [`READ_TRIES`] torn copies.
fn read_locked<T>(seq: &AtomicU64, mut read: impl FnMut() -> T) -> Option<(u64, T)> {
    for _ in 0..READ_TRIES {
        let before = seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            std::thread::yield_now();
            continue;
        }
        let v = read();
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == before {
            return Some((before, v));
        }
    }
    None
}

/// Stores `data` into `cells`, 8 bytes a cell (little-endian).
fn pack(cells: &[AtomicU64], data: &[u8]) {
    for (c, chunk) in cells.iter().zip(data.chunks(8)) {
        let mut b = [0u8; 8];
        for (d, s) in b.iter_mut().zip(chunk) {
            *d = *s;
        }
        c.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

/// The first `len` bytes stored in `cells` (at most what they hold).
fn unpack(cells: &[AtomicU64], len: usize) -> Vec<u8> {
    let len = len.min(cells.len() * 8);
    let mut out = Vec::with_capacity(len);
    for c in cells.iter().take(len.div_ceil(8)) {
        out.extend_from_slice(&c.load(Ordering::Relaxed).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_and_modes_round_trip_and_a_released_slot_is_not_read() {
        let board = TierBoard::create(3).unwrap();
        let seat = Seat {
            index: 1,
            generation: 2,
            restarted: false,
        };
        let a = board.claim(seat, 10).unwrap();
        let b = board.claim(Seat { index: 0, ..seat }, 20).unwrap();
        assert_ne!(a, b);
        assert!(board.post(a, false, 7, b"{\"servers\":[]}"));
        assert!(board.post(b, true, 8, b"0123456789"));
        assert!(!board.post(b, true, 8, &vec![b'x'; SLOT_DATA * 8 + 1]));
        let posts = board.posts();
        assert_eq!(posts.len(), 2);
        // By index: worker 0 first.
        assert_eq!(
            (posts[0].index, posts[0].draining, posts[0].data.as_slice()),
            (0, true, &b"0123456789"[..])
        );
        assert_eq!(
            (posts[1].index, posts[1].generation, posts[1].taken_ns),
            (1, 2, 7)
        );
        assert_eq!(posts[1].pid, std::process::id());
        board.release(b);
        assert_eq!(board.posts().len(), 1);
        let seq = board.modes_seq();
        board
            .write_modes(|old| {
                assert!(old.is_empty());
                b"[1]".to_vec()
            })
            .unwrap();
        board
            .write_modes(|old| {
                let mut v = old.to_vec();
                v.extend_from_slice(b"[2]");
                v
            })
            .unwrap();
        let (now, table) = board.read_modes().unwrap();
        assert_ne!(now, seq);
        assert_eq!(table, b"[1][2]");
        assert!(board.write_modes(|_| vec![0; MODES_CELLS * 8 + 1]).is_err());
        assert_eq!(board.read_modes().unwrap().1, b"[1][2]");
    }
}

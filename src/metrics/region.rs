//! [`Region`]: the shared-memory table every worker of a process group
//! publishes its numbers into, and the admin endpoint reads them all from
//! (ARCHITECTURE.md §11).
//!
//! Why shared memory and not a pipe to the supervisor: workers are re-exec'd
//! processes that keep running on their own loops; a scrape must not wait
//! for each of them. The supervisor creates the region before it starts the
//! workers — an anonymous file (`memfd_create`) of fixed size — and passes
//! its descriptor to each worker (inherited across `exec`, its number in an
//! environment variable). Each worker maps it; the worker that answers a
//! scrape reads it with relaxed atomic loads. Each number is exact on its
//! own; a scrape is not one instant (as with [`Stats`](crate::stats::Stats) itself).
//!
//! Two tables, because a worker *position* (index `w0`, `w1`, …) outlives
//! the processes that hold it: during a reload's drain the old and the new
//! process of one index run side by side, a crashed worker is restarted in
//! its index, and with `--workers 1` a reload runs a second loop in the
//! same process.
//!
//! - **Totals**, one block per index: every loop that holds the index adds
//!   what its counters grew by since its last publish (`fetch_add`). A
//!   total is only ever added to, so it never goes down — not across a
//!   reload, a restart, or two loops of one index at once — and it sums
//!   what every process of the index counted.
//! - **Loops**, one slot per running loop: claimed when a loop is built
//!   (its pid and index in one compare-and-swap), written with its own
//!   numbers (stores), released (zeroed) when the loop ends. A slot whose
//!   process no longer exists (`kill(pid, 0)`: a worker killed before it
//!   could release) is not read, and is claimed again by the next loop.
//!   Gauges, the draining flag and `/status` come from here.
//!
//! Layout, in `u64` cells: a header ([`MAGIC`], index count, group start
//! time in ms since the epoch, loop-slot count), then per index
//! [`VALUE_COUNT`] totals in [`Stats::values`](crate::stats::Stats::values) order, then per loop slot
//! [`LOOP_HEAD`] cells (owner = pid | (index + 1) << 32, start time in ms,
//! config digest, draining flag) and [`VALUE_COUNT`] values. A slot whose
//! owner is 0 is free.
//!
//! What it must not know: HTTP, the loop, what the values mean.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shm::{Cells, process_exists, take_owner};
use crate::stats::VALUE_COUNT;

/// First header cell: identifies the layout (bumped when it changes).
pub(crate) const MAGIC: u64 = 0x736c_7569_6365_0004;
/// Header cells before the first slot.
const HEADER: usize = 4;
/// Cells of a loop slot before its values.
const LOOP_HEAD: usize = 4;
/// Cells of one loop slot.
const LOOP: usize = LOOP_HEAD + VALUE_COUNT;
/// Most indices (and loop slots) a region holds.
pub(crate) const MAX_SLOTS: usize = 4096;

/// One running loop's slot, read.
#[derive(Debug, Clone)]
pub(crate) struct LoopView {
    /// Its loop slot.
    pub slot: usize,
    /// Its worker index.
    pub index: usize,
    /// Process id of the loop.
    pub pid: u64,
    /// When the loop started, ms since the epoch.
    pub started_ms: u64,
    /// Its config digest.
    pub digest: u64,
    /// The loop is draining.
    pub draining: bool,
    /// Its own numbers, in [`Stats::values`](crate::stats::Stats::values) order.
    pub values: Vec<u64>,
}

/// A mapped region of shared `u64` cells.
#[derive(Debug)]
pub struct Region {
    cells: Cells,
}

impl Region {
    /// Creates a region with totals for `indices` worker indices and
    /// `loops` loop slots (each 1..=`MAX_SLOTS`) for a group started now.
    /// Its descriptor is close-on-exec; see [`Region::raw_fd`] to pass it
    /// on. Pages no loop writes cost no memory.
    ///
    /// Errors: `memfd_create`, `ftruncate` or `mmap` failed, or a count is
    /// out of range (`InvalidInput`).
    pub fn create(indices: usize, loops: usize) -> io::Result<Region> {
        if !(1..=MAX_SLOTS).contains(&indices) || !(1..=MAX_SLOTS).contains(&loops) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "metrics region: slot count out of range",
            ));
        }
        let cells = HEADER + indices * VALUE_COUNT + loops * LOOP;
        let region = Region {
            cells: Cells::create(c"sluice-metrics", cells)?,
        };
        if let [magic, n, start, l, ..] = region.cells() {
            n.store(indices as u64, Ordering::Relaxed);
            start.store(now_ms(), Ordering::Relaxed);
            l.store(loops as u64, Ordering::Relaxed);
            magic.store(MAGIC, Ordering::Release);
        }
        Ok(region)
    }

    /// Maps the region behind an inherited descriptor `fd` (from
    /// [`Region::raw_fd`] of the supervisor), taking ownership of it.
    ///
    /// Errors: `fd` is not such a region (size or magic), or `mmap` failed.
    ///
    /// # Safety
    /// `fd` must be an open descriptor this process owns and uses nowhere
    /// else.
    pub unsafe fn from_raw_fd(fd: RawFd) -> io::Result<Region> {
        // SAFETY: the caller owns `fd`.
        let cells = unsafe { Cells::from_raw_fd(fd, HEADER + VALUE_COUNT + LOOP)? };
        let len = cells.cells().len();
        let region = Region { cells };
        if region.cells().first().map(|m| m.load(Ordering::Acquire)) != Some(MAGIC)
            || region.indices() == 0
            || region.loops() == 0
            || region.end() > len
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a sluice metrics region of this version",
            ));
        }
        Ok(region)
    }

    /// The descriptor, to be inherited by a worker (clear its
    /// close-on-exec flag in the child).
    pub fn raw_fd(&self) -> RawFd {
        self.cells.raw_fd()
    }

    fn cells(&self) -> &[AtomicU64] {
        self.cells.cells()
    }

    fn header(&self, i: usize) -> usize {
        self.cells()
            .get(i)
            .map_or(0, |c| {
                usize::try_from(c.load(Ordering::Relaxed)).unwrap_or(0)
            })
            .min(MAX_SLOTS)
    }

    /// Number of worker indices with totals.
    pub fn indices(&self) -> usize {
        self.header(1)
    }

    /// Number of loop slots.
    fn loops(&self) -> usize {
        self.header(3)
    }

    fn end(&self) -> usize {
        HEADER + self.indices() * VALUE_COUNT + self.loops() * LOOP
    }

    /// When the group started (ms since the epoch).
    pub(crate) fn group_start_ms(&self) -> u64 {
        self.cells().get(2).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn totals(&self, index: usize) -> Option<&[AtomicU64]> {
        if index >= self.indices() {
            return None;
        }
        let start = HEADER + index * VALUE_COUNT;
        self.cells().get(start..start + VALUE_COUNT)
    }

    fn loop_slot(&self, slot: usize) -> Option<&[AtomicU64]> {
        if slot >= self.loops() {
            return None;
        }
        let start = HEADER + self.indices() * VALUE_COUNT + slot * LOOP;
        self.cells().get(start..start + LOOP)
    }

    /// Claims a free loop slot (or one whose process is gone) for a loop of
    /// process `pid` at worker `index`, started at `started_ms` with config
    /// `digest`: its slot number, or `None` if every slot is taken or
    /// `index` has no totals.
    pub(crate) fn claim(
        &self,
        pid: u32,
        index: usize,
        started_ms: u64,
        digest: u64,
    ) -> Option<usize> {
        self.totals(index)?;
        let owner = u64::from(pid) | ((index as u64 + 1) << 32);
        (0..self.loops()).find(|&slot| {
            let Some(cells) = self.loop_slot(slot) else {
                return false;
            };
            if !cells.first().is_some_and(|o| take_owner(o, owner)) {
                return false;
            }
            let head = [started_ms, digest, 0];
            for (c, v) in cells
                .iter()
                .skip(1)
                .zip(head.into_iter().chain(std::iter::repeat(0)))
            {
                c.store(v, Ordering::Relaxed);
            }
            true
        })
    }

    /// Publishes a loop's numbers `now` (in [`Stats::values`](crate::stats::Stats::values) order): what
    /// each grew by since `last` (wrapping) is added to the totals of
    /// `index`, and `now` is stored with `draining` in the loop's `slot`
    /// (if it has one); `last` becomes `now`.
    pub(crate) fn publish(
        &self,
        index: usize,
        slot: Option<usize>,
        draining: bool,
        last: &mut [u64],
        now: impl Iterator<Item = u64>,
    ) {
        let totals = self.totals(index).unwrap_or(&[]);
        let cells = slot.and_then(|s| self.loop_slot(s)).unwrap_or(&[]);
        if let Some(d) = cells.get(LOOP_HEAD - 1) {
            d.store(u64::from(draining), Ordering::Relaxed);
        }
        for (i, (l, v)) in last.iter_mut().zip(now).enumerate() {
            let delta = v.wrapping_sub(*l);
            *l = v;
            if delta != 0
                && let Some(t) = totals.get(i)
            {
                t.fetch_add(delta, Ordering::Relaxed);
            }
            if let Some(c) = cells.get(LOOP_HEAD + i) {
                c.store(v, Ordering::Relaxed);
            }
        }
    }

    /// Frees `slot`: its cells are zeroed first, then its owner.
    pub(crate) fn release(&self, slot: usize) {
        let Some(cells) = self.loop_slot(slot) else {
            return;
        };
        for c in cells.iter().skip(1) {
            c.store(0, Ordering::Relaxed);
        }
        if let Some(o) = cells.first() {
            o.store(0, Ordering::Release);
        }
    }

    /// Every running loop (owner set, process alive), by index then start.
    pub(crate) fn read_loops(&self) -> Vec<LoopView> {
        let mut out: Vec<LoopView> = (0..self.loops())
            .filter_map(|slot| {
                let cells = self.loop_slot(slot)?;
                let owner = cells.first()?.load(Ordering::Acquire);
                if owner == 0 || !process_exists(owner) {
                    return None;
                }
                let v: Vec<u64> = cells.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                let (head, values) = v.split_at(LOOP_HEAD.min(v.len()));
                let [_, started_ms, digest, draining] = <[u64; LOOP_HEAD]>::try_from(head).ok()?;
                Some(LoopView {
                    slot,
                    index: usize::try_from((owner >> 32).saturating_sub(1)).unwrap_or(0),
                    pid: owner & 0xffff_ffff,
                    started_ms,
                    digest,
                    draining: draining != 0,
                    values: values.to_vec(),
                })
            })
            .collect();
        out.sort_by_key(|l| (l.index, l.started_ms));
        out
    }

    /// The totals of worker `index` (zeros if it has none).
    pub(crate) fn read_totals(&self, index: usize) -> Vec<u64> {
        self.totals(index).map_or_else(
            || vec![0; VALUE_COUNT],
            |cells| cells.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        )
    }
}

/// Milliseconds since the epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_across_loops_of_one_index_and_released_slots_are_not_read() {
        let r = Region::create(2, 4).unwrap();
        let me = std::process::id();
        let a = r.claim(me, 1, 10, 7).unwrap();
        let b = r.claim(me, 1, 20, 7).unwrap();
        assert_ne!(a, b);
        let (mut la, mut lb) = ([0u64; 2], [0u64; 2]);
        r.publish(1, Some(a), true, &mut la, [4u64, 1].into_iter());
        r.publish(1, Some(a), true, &mut la, [5u64, 1].into_iter());
        r.publish(1, Some(b), false, &mut lb, [3u64, 0].into_iter());
        assert_eq!(r.read_totals(1).get(..2), Some(&[8u64, 1][..]));
        assert_eq!(r.read_loops().len(), 2);
        r.release(a);
        let left = r.read_loops();
        assert_eq!(left.len(), 1);
        assert_eq!(
            (left[0].index, left[0].started_ms, left[0].draining),
            (1, 20, false)
        );
        assert_eq!(r.read_totals(1).get(..2), Some(&[8u64, 1][..]));
        assert_eq!(r.claim(me, 2, 0, 0), None, "index 2 has no totals");
    }
}

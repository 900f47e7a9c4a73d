//! [`Region`]: the shared-memory table every worker of a process group
//! publishes its numbers into, and the admin endpoint reads them all from
//! (ARCHITECTURE.md §11).
//!
//! Why shared memory and not a pipe to the supervisor: workers are re-exec'd
//! processes that keep running on their own loops; a scrape must not wait
//! for each of them. The supervisor creates the region before it starts the
//! workers — an anonymous file (`memfd_create`) of fixed size — and passes
//! its descriptor to each worker (inherited across `exec`, its number in an
//! environment variable). Each worker maps it and, once per loop turn,
//! copies its [`Stats`] into its own slot with relaxed atomic stores; the
//! worker that answers a scrape reads every slot with relaxed atomic loads.
//! Each number is exact on its own; a slot is not one instant (as with
//! [`Stats`] itself).
//!
//! Layout, in `u64` cells: a header ([`MAGIC`], slot count, group start
//! time in ms since the epoch, padding), then per slot [`SLOT_HEAD`] cells
//! (pid, start time in ms, config digest, draining flag) and
//! [`VALUE_COUNT`] values in [`Stats::values`] order. A slot whose pid is 0
//! is unused.
//!
//! What it must not know: HTTP, the loop, what the values mean.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stats::{Stats, VALUE_COUNT};

/// First header cell: identifies the layout (bumped when it changes).
pub(crate) const MAGIC: u64 = 0x736c_7569_6365_0001;
/// Header cells before the first slot.
const HEADER: usize = 4;
/// Cells of a slot before its values.
pub(crate) const SLOT_HEAD: usize = 4;
/// Cells of one slot.
const SLOT: usize = SLOT_HEAD + VALUE_COUNT;
/// Most slots a region holds.
pub(crate) const MAX_SLOTS: usize = 4096;

/// One slot, read.
#[derive(Debug, Clone)]
pub(crate) struct SlotView {
    /// Its index.
    pub index: usize,
    /// Process id of the worker that last wrote it.
    pub pid: u64,
    /// When that worker started, ms since the epoch.
    pub started_ms: u64,
    /// The worker's config digest.
    pub digest: u64,
    /// The worker is draining.
    pub draining: bool,
    /// Its numbers, in [`Stats::values`] order.
    pub values: Vec<u64>,
}

/// A mapped region of `cells` `u64` cells backed by `fd`.
#[derive(Debug)]
pub struct Region {
    ptr: NonNull<AtomicU64>,
    cells: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is only ever accessed through `AtomicU64`s, which are
// safe to share between threads (and processes); the pointer stays valid
// until `Drop` unmaps it.
unsafe impl Send for Region {}
// SAFETY: as above: shared access goes through atomics only.
unsafe impl Sync for Region {}

impl Region {
    /// Creates a region of `slots` slots (1..=`MAX_SLOTS`) for a group
    /// started now. Its descriptor is close-on-exec; see
    /// [`Region::raw_fd`] to pass it on.
    ///
    /// Errors: `memfd_create`, `ftruncate` or `mmap` failed, or `slots` is
    /// out of range (`InvalidInput`).
    pub fn create(slots: usize) -> io::Result<Region> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "metrics region: slot count out of range",
            ));
        }
        // SAFETY: a valid NUL-terminated name and flags; the result is
        // checked before it is used as a descriptor.
        let raw = unsafe { libc::memfd_create(c"sluice-metrics".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let cells = HEADER + slots * SLOT;
        File::from(fd.try_clone()?).set_len((cells * 8) as u64)?;
        let region = Region::map(fd, cells)?;
        let h = region.cells();
        if let [magic, n, start, ..] = h {
            n.store(slots as u64, Ordering::Relaxed);
            start.store(now_ms(), Ordering::Relaxed);
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
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let len = File::from(fd.try_clone()?).metadata()?.len();
        let cells = usize::try_from(len / 8).unwrap_or(0);
        if cells < HEADER + SLOT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "metrics region too small",
            ));
        }
        let region = Region::map(fd, cells)?;
        let slots = region.slots();
        if region.cells().first().map(|m| m.load(Ordering::Acquire)) != Some(MAGIC)
            || slots == 0
            || HEADER + slots * SLOT > cells
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a sluice metrics region of this version",
            ));
        }
        Ok(region)
    }

    fn map(fd: OwnedFd, cells: usize) -> io::Result<Region> {
        // SAFETY: mapping `cells * 8` bytes of a file at least that large,
        // shared, readable and writable; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cells * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<AtomicU64>()).ok_or_else(|| io::Error::other("mmap"))?;
        Ok(Region { ptr, cells, fd })
    }

    /// The descriptor, to be inherited by a worker (clear its
    /// close-on-exec flag in the child).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn cells(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` is a page-aligned mapping of `cells` u64 cells that
        // lives as long as `self`; `AtomicU64` has the layout of `u64`, and
        // every access (here and in other processes) is atomic.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cells) }
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.cells()
            .get(1)
            .map_or(0, |c| {
                usize::try_from(c.load(Ordering::Relaxed)).unwrap_or(0)
            })
            .min(MAX_SLOTS)
    }

    /// When the group started (ms since the epoch).
    pub(crate) fn group_start_ms(&self) -> u64 {
        self.cells().get(2).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn slot(&self, index: usize) -> Option<&[AtomicU64]> {
        if index >= self.slots() {
            return None;
        }
        let start = HEADER + index * SLOT;
        self.cells().get(start..start + SLOT)
    }

    /// Copies `stats` into slot `index` with the worker's identity.
    pub(crate) fn publish(&self, index: usize, head: [u64; SLOT_HEAD], stats: &Stats) {
        let Some(slot) = self.slot(index) else {
            return;
        };
        for (cell, v) in slot.iter().zip(head.into_iter().chain(stats.values())) {
            cell.store(v, Ordering::Relaxed);
        }
    }

    /// Every slot in use (pid not 0).
    pub(crate) fn read(&self) -> Vec<SlotView> {
        (0..self.slots())
            .filter_map(|index| {
                let slot = self.slot(index)?;
                let v: Vec<u64> = slot.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                let (head, values) = v.split_at(SLOT_HEAD.min(v.len()));
                let [pid, started_ms, digest, draining] =
                    <[u64; SLOT_HEAD]>::try_from(head).ok()?;
                (pid != 0).then(|| SlotView {
                    index,
                    pid,
                    started_ms,
                    digest,
                    draining: draining != 0,
                    values: values.to_vec(),
                })
            })
            .collect()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`; no reference
        // into it outlives `self` (`cells` borrows `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.cells * 8);
        }
    }
}

/// Milliseconds since the epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

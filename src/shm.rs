//! [`Cells`]: a table of `u64` cells in shared memory, the one way the
//! processes of a worker group share state without a syscall per read
//! (ARCHITECTURE.md §12): an anonymous file (`memfd_create`, nothing on
//! disk) of fixed size, mapped shared, whose descriptor the supervisor
//! passes to each worker across `exec` ([`inherit`]). Every access is an
//! atomic load or store of one cell, in this process and in the others,
//! so sharing it is sound; what the cells mean, and how a reader knows
//! a group of them is consistent, is the user's business (the metrics
//! `Region`, the `TierBoard`).
//!
//! Pages no process writes cost no memory.
//!
//! What it must not know: what the cells hold.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// A mapped table of `u64` cells backed by a memory file.
#[derive(Debug)]
pub(crate) struct Cells {
    ptr: NonNull<AtomicU64>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is only ever accessed through `AtomicU64`s, which are
// safe to share between threads (and processes); the pointer stays valid
// until `Drop` unmaps it.
unsafe impl Send for Cells {}
// SAFETY: as above: shared access goes through atomics only.
unsafe impl Sync for Cells {}

impl Cells {
    /// A new memory file named `name` (shown in `/proc/PID/fd`) of `len`
    /// zeroed cells, mapped. Its descriptor is close-on-exec; see
    /// [`inherit`] to pass it on.
    ///
    /// Errors: `memfd_create`, `ftruncate` or `mmap` failed.
    pub(crate) fn create(name: &CStr, len: usize) -> io::Result<Cells> {
        // SAFETY: a valid NUL-terminated name and flags; the result is
        // checked before it is used as a descriptor.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        File::from(fd.try_clone()?).set_len((len * 8) as u64)?;
        Cells::map(fd, len)
    }

    /// Maps the memory file behind an inherited descriptor `fd`, taking
    /// ownership of it; its length in cells is its size over 8.
    ///
    /// Errors: the file is smaller than `min` cells, or `mmap` failed.
    ///
    /// # Safety
    /// `fd` must be an open descriptor this process owns and uses nowhere
    /// else.
    pub(crate) unsafe fn from_raw_fd(fd: RawFd, min: usize) -> io::Result<Cells> {
        // SAFETY: the caller owns `fd`.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let size = File::from(fd.try_clone()?).metadata()?.len();
        let len = usize::try_from(size / 8).unwrap_or(0);
        if len < min.max(1) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared memory file too small",
            ));
        }
        Cells::map(fd, len)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<Cells> {
        // SAFETY: mapping `len * 8` bytes of a file at least that large,
        // shared, readable and writable; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len * 8,
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
        Ok(Cells { ptr, len, fd })
    }

    /// Every cell.
    pub(crate) fn cells(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` is a page-aligned mapping of `len` u64 cells that
        // lives as long as `self`; `AtomicU64` has the layout of `u64`, and
        // every access (here and in other processes) is atomic.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The descriptor, for [`inherit`].
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for Cells {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`; no reference
        // into it outlives `self` (`cells` borrows `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len * 8);
        }
    }
}

/// Makes the process `cmd` starts inherit the descriptors `fds` (their
/// close-on-exec flag cleared in the child only).
pub(crate) fn inherit<const N: usize>(cmd: &mut Command, fds: [RawFd; N]) {
    // SAFETY: runs in the child between fork and exec; fcntl is
    // async-signal-safe and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            for fd in fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Whether the process in an owner cell (`pid` in the low 32 bits) exists:
/// `kill(pid, 0)` does not fail with `ESRCH`.
pub(crate) fn process_exists(owner: u64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(owner & 0xffff_ffff) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill(2) with signal 0 only checks that `pid` exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Takes the owner cell `cell` for `owner` if it is free (0) or its
/// process is gone ([`process_exists`]); false if a live process holds it
/// or another taker came first.
pub(crate) fn take_owner(cell: &std::sync::atomic::AtomicU64, owner: u64) -> bool {
    use std::sync::atomic::Ordering;
    let was = cell.load(Ordering::Acquire);
    if was != 0 && process_exists(was) {
        return false;
    }
    cell.compare_exchange(was, owner, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// `CLOCK_MONOTONIC` in ns: one clock for every process of the machine
/// (what `std::time::Instant` reads on Linux, which cannot be sent to
/// another process), so a time taken in one worker can be aged in
/// another.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

//! A counting allocator for the crate's tests: heap bytes allocated and not
//! yet freed on the calling thread, and their peak, so that a test can
//! bound what one piece of work holds (the TLS transport's sessions through
//! the feed harness, `transport_feed_refused.rs`) while other tests run on
//! other threads. Requested sizes, not the allocator's rounding; a
//! reallocation counts the old and the new block at its peak (as if it
//! moved), as the `tls_server` fuzz target's allocator does.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting per thread.
struct Counting;

thread_local! {
    /// Bytes live on this thread (may go below zero when a block made
    /// elsewhere is freed here), and the peak since [`measure`] began.
    static COUNT: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
}

fn note(grow: isize, shrink: isize) {
    let _ = COUNT.try_with(|c| {
        let (live, peak) = c.get();
        let top = live + grow;
        c.set((top - shrink, peak.max(top)));
    });
}

fn size(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call goes to `System` unchanged; only counters change,
// in a thread-local without a destructor (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(size(layout.size()), 0);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(size(layout.size()), 0);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        note(0, size(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new) };
        if !p.is_null() {
            note(size(new), size(layout.size()));
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Runs `work` on this thread; returns its value, the peak of heap bytes
/// it held above what was live before it, and the bytes it left live.
pub(crate) fn measure<T>(work: impl FnOnce() -> T) -> (T, usize, isize) {
    let base = COUNT.with(|c| {
        let (live, _) = c.get();
        c.set((live, live));
        live
    });
    let out = work();
    let (live, peak) = COUNT.with(Cell::get);
    let peak = usize::try_from(peak - base).unwrap_or(0);
    (out, peak, live - base)
}

//! The descriptor budget shared by the loops of one process (docs/operations.md,
//! "Descriptor budget"; ARCHITECTURE.md §4, §12).
//!
//! `RLIMIT_NOFILE` is per process. With `--workers 1` a reload runs a new
//! loop beside the draining old one in the same process, so each loop
//! fitting its connections to the whole limit could together use twice
//! it (`EMFILE`: 503s, a failed reload). Every loop publishes here what
//! it reserves (two descriptors per client connection, one per pooled idle
//! upstream socket) and accepts a client only while the sum over all loops
//! stays within the budget; each loop past the first also takes
//! [`LOOP_FDS`] out of it for its own poll, waker, listener and log.
//!
//! What it must not know: connections, HTTP; it counts numbers the loop
//! hands it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Descriptors a loop holds besides its connections (poll, waker, its copy
/// of the listener, access log, admin listener, resolver): what a second
/// loop takes from the budget while two run side by side.
pub(crate) const LOOP_FDS: usize = 8;

/// Descriptors reserved by the connections of every loop of the process.
static RESERVED: AtomicUsize = AtomicUsize::new(0);
/// Loops of the process that exist (from their bind to their drop).
static LOOPS: AtomicUsize = AtomicUsize::new(0);

/// One loop's part of the process-wide account; its part is given back
/// when it is dropped (the loop ended and closed its connections).
#[derive(Debug)]
pub(crate) struct FdShare {
    /// What this loop reserves, as last published.
    published: usize,
}

impl FdShare {
    /// Joins the account (a new loop, before it opens any descriptor).
    pub(crate) fn join() -> FdShare {
        LOOPS.fetch_add(1, Ordering::SeqCst);
        FdShare { published: 0 }
    }

    /// Publishes `own`, the descriptors this loop reserves now.
    pub(crate) fn publish(&mut self, own: usize) {
        if own == self.published {
            // The common case on a loop pass: no atomic write.
            return;
        }
        if own > self.published {
            RESERVED.fetch_add(own - self.published, Ordering::SeqCst);
        } else {
            RESERVED.fetch_sub(self.published - own, Ordering::SeqCst);
        }
        self.published = own;
    }

    /// Descriptors reserved by the other loops of the process, plus
    /// [`LOOP_FDS`] for each loop beyond the first.
    pub(crate) fn others(&self) -> usize {
        let reserved = RESERVED
            .load(Ordering::SeqCst)
            .saturating_sub(self.published);
        let extra_loops = LOOPS.load(Ordering::SeqCst).saturating_sub(1);
        reserved.saturating_add(extra_loops.saturating_mul(LOOP_FDS))
    }
}

impl Drop for FdShare {
    fn drop(&mut self) {
        self.publish(0);
        LOOPS.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_loop_sees_what_the_first_reserves_until_it_ends() {
        // The statics are process-wide: this is the only test using them.
        let mut first = FdShare::join();
        first.publish(10);
        let mut second = FdShare::join();
        second.publish(4);
        assert_eq!(second.others(), 10 + LOOP_FDS);
        assert_eq!(first.others(), 4 + LOOP_FDS);
        first.publish(2);
        assert_eq!(second.others(), 2 + LOOP_FDS);
        drop(first);
        assert_eq!(second.others(), 0);
    }
}

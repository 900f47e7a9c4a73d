//! `Timers`: deadlines of client connections (slots of the loop's client
//! slab), earliest first. An exchange's deadlines (connect, upstream gaps)
//! are its client's; the pool's idle deadlines are kept by the pool.
//!
//! A binary heap with lazy deletion: an entry is `(deadline, key, generation)`; the
//! owner keeps the deadline it armed last and ignores a popped entry that is
//! not that one (re-armed earlier, or freed: a different `generation`). Each owner
//! arms only when its deadline moves earlier, so the heap holds about one
//! entry per connection, not one per read.
//!
//! What it must not know: what a deadline guards (the machine knows).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Heap of `(deadline, slab key, generation)`: 24 bytes an entry (slab
/// keys fit in 32 bits, see `token`).
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u32, u32)>>,
}

impl Timers {
    /// A heap with room for `n` entries up front (about one per client
    /// connection: growing by doubling would copy it and leave the old
    /// storage as a hole in the heap; untouched room costs no RSS).
    pub(crate) fn with_capacity(n: usize) -> Self {
        Timers {
            heap: BinaryHeap::with_capacity(n),
        }
    }

    /// Adds a deadline for entry `key` of generation `generation`.
    pub(crate) fn push(&mut self, at: Instant, key: usize, generation: u32) {
        let key = u32::try_from(key).unwrap_or(u32::MAX);
        self.heap.push(Reverse((at, key, generation)));
    }

    /// Removes and returns the earliest entry due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, usize, u32)> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now => self
                .heap
                .pop()
                .map(|Reverse((at, key, generation))| (at, key as usize, generation)),
            _ => None,
        }
    }

    /// The earliest deadline in the heap.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }
}

/// Time from `now` until the earliest of `deadlines` (zero if one passed);
/// `None` if there is none (poll may block).
pub(crate) fn poll_timeout(
    now: Instant,
    deadlines: impl IntoIterator<Item = Option<Instant>>,
) -> Option<Duration> {
    deadlines
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(now))
}

//! How big a body buffer is now: the adaptive sizing rule (ARCHITECTURE.md
//! §4), as plain arithmetic over byte counts and durations.
//!
//! Why: a buffer the size of the high watermark (32 KiB) is what each slow
//! reader pins for the whole of its response, while only a fast pair of
//! peers gains from large reads and writes (fewer syscalls per MiB).
//! HAProxy uses fixed 16 KiB buffers; sluice starts there and grows only
//! for a sink that proved it drains as fast as the source fills.
//!
//! The rule, per body buffer:
//! - **Start** at [`BODY_START`] (16 KiB; the configured high watermark if
//!   that is smaller: then the size is fixed).
//! - **Full drain**: the buffer had reached its high mark (the source had
//!   at least a whole buffer to give) and one write to the sink took every
//!   pending byte. Those bytes add to a *streak*.
//! - **Grow**: once the streak reaches [`PROBATION`] (8 MiB), every
//!   further full drain doubles the capacity, up to the configured high
//!   watermark. 8 MiB is twice the largest send buffer Linux gives a socket
//!   by default (`net.ipv4.tcp_wmem` max, 4 MiB): a reader that reads
//!   nothing can absorb at most that much (plus its receive window) before
//!   the proxy's write blocks, so the burst at the start of every response
//!   — which looks like a fast sink for about half a millisecond on
//!   loopback — never grows a slow reader's buffer.
//! - **Stall**: a full buffer whose sink took nothing for [`STALL`]
//!   (100 ms) or longer. The streak restarts from 0 and the capacity goes
//!   back to the start size: a reader that turned slow ends up holding
//!   the small buffer. The storage itself shrinks as soon as the pending
//!   bytes fit in it (they are never dropped). The wait is wall time
//!   since the sink's last progress, so a loop turn that itself lasts
//!   100 ms (an overloaded proxy) counts too: under overload buffers fall
//!   back to the start size, memory before speed.
//! - **Marks scale with the capacity**: high = capacity, low = capacity ×
//!   configured low / configured high (32 KiB / 8 KiB by default, so 16 /
//!   4 KiB at the start size, then 32 / 8).
//!
//! What it must not know: sockets, the clock (the caller passes the
//! stall's length), HTTP, the storage it sizes.

use std::time::Duration;

/// Capacity a body buffer starts with, bytes (HAProxy's `tune.bufsize`).
pub const BODY_START: usize = 16 * 1024;

/// Bytes of full drains without a stall before a buffer grows, bytes:
/// twice the default largest TCP send buffer (`tcp_wmem` max, 4 MiB).
pub const PROBATION: u64 = 8 * 1024 * 1024;

/// How long a full buffer's sink must take nothing to count as stalled.
pub const STALL: Duration = Duration::from_millis(100);

/// One body buffer's size state: the capacity now, its bounds, and the
/// streak of full drains since the last stall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizing {
    /// Smallest (and first) capacity, bytes.
    min: usize,
    /// Largest capacity: the configured high watermark, bytes.
    max: usize,
    /// Configured low watermark, bytes (scaled with the capacity).
    max_low: usize,
    /// Capacity now, bytes: `min <= cap <= max`.
    cap: usize,
    /// Bytes of full drains since the start or the last stall.
    streak: u64,
}

impl Sizing {
    /// The state of a new buffer with configured watermarks `high` /
    /// `low` (bytes): capacity `min(BODY_START, high)`, no streak.
    pub fn new(high: usize, low: usize) -> Self {
        let max = high.max(1);
        let min = BODY_START.min(max);
        Sizing {
            min,
            max,
            max_low: low,
            cap: min,
            streak: 0,
        }
    }

    /// The capacity now, bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The watermarks for the capacity now: `(high, low)` in bytes.
    pub fn marks(&self) -> (usize, usize) {
        marks_for(self.cap, self.max, self.max_low)
    }

    /// One write took all `n` pending bytes of a buffer that had reached
    /// its high mark. Returns true when the capacity changed (grew).
    pub fn full_drain(&mut self, n: usize) -> bool {
        self.streak = self.streak.saturating_add(n as u64);
        let grown = grown(self.cap, self.max, self.streak);
        let changed = grown != self.cap;
        self.cap = grown;
        changed
    }

    /// The sink of a full buffer has taken nothing for `waited`. Returns
    /// true when the capacity changed (went back to the start size).
    pub fn sink_waited(&mut self, waited: Duration) -> bool {
        if waited < STALL {
            return false;
        }
        self.streak = 0;
        let changed = self.cap != self.min;
        self.cap = self.min;
        changed
    }
}

/// The capacity after a full drain: `cap` doubled (at most `max`) once
/// `streak` bytes of full drains reach [`PROBATION`], else `cap`.
pub fn grown(cap: usize, max: usize, streak: u64) -> usize {
    if streak < PROBATION {
        return cap;
    }
    cap.saturating_mul(2).min(max).max(cap)
}

/// Watermarks `(high, low)` for capacity `cap` when the configured marks
/// are `max` / `max_low`: high = `cap`, low = `cap × max_low / max`
/// (rounded down, and below high).
pub fn marks_for(cap: usize, max: usize, max_low: usize) -> (usize, usize) {
    let high = cap.max(1);
    let scaled = (high as u128 * max_low as u128) / (max.max(1) as u128);
    let low = usize::try_from(scaled).unwrap_or(usize::MAX);
    (high, low.min(high.saturating_sub(1)))
}

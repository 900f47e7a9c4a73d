//! One direction's pending bytes, with high and low watermarks (ARCHITECTURE.md §4).
//!
//! Why: the proxy relays each direction of an exchange through one buffer of
//! bytes read from the source and not yet written to the sink. The buffer
//! tells its owner when to stop reading the source (the *high* watermark) and
//! when to read again (the *low* watermark), so the slow side sets the pace
//! for the fast one and memory stays flat. A [`BufferPool`] hands out and
//! takes back the storage, so idle connections hold no buffers.
//!
//! What it must not know: sockets, mio, HTTP. Reads come in through a
//! closure ([`WatermarkBuffer::fill_with`]); writes are reported back with
//! [`WatermarkBuffer::consume`]. Crossings are returned, never called back,
//! so the owner turns read interest off or on without borrow tangles.
//!
//! Counting: a buffer handed out by [`BufferPool::body`] or
//! [`BufferPool::head`] carries a [`Meter`] and keeps the process's
//! counters itself — buffers in use, bytes pending (body buffers only),
//! pauses at the high mark and resumes at the low mark — so no caller
//! updates them by hand. Dropping or returning it settles its share.
//!
//! Invariants kept:
//! - `start <= end <= storage.len()`; `start..end` are the pending bytes,
//!   oldest first; when pending reaches 0, `start = end = 0` (no copy),
//!   or `LENT_HEADROOM` for a response-start buffer.
//! - Hysteresis: `paused` turns true once when pending reaches `>= high`
//!   ([`Crossing::High`]) and false once when pending drains to `<= low`
//!   ([`Crossing::Low`]); in between, nothing is reported.
//! - Not paused implies `pending < high`.
//! - `low < high` and `high >= 1` (clamped in [`WatermarkBuffer::new`]), so a
//!   resume always needs bytes to leave and a read can always make progress.
//! - Reads never take pending past `high` ([`WatermarkBuffer::room`]); only
//!   [`WatermarkBuffer::extend_from_slice`] (heads the proxy encodes) may.
//!
//! Adaptive body buffers (ARCHITECTURE.md §4, issue 11): a body buffer from
//! [`BufferPool::body`] does not hold the configured high watermark from
//! the start. The rule, in [`sizing`] as plain arithmetic:
//! - it starts at 16 KiB ([`BODY_START`]) with marks scaled to that size
//!   (high = capacity, low = capacity × configured low / configured high:
//!   16 / 4 KiB by default);
//! - a *full drain* — the buffer had reached its high mark and one write
//!   to the sink took every pending byte — adds those bytes to a streak;
//!   once the streak reaches 8 MiB ([`sizing::PROBATION`], more than a
//!   reader that reads nothing can absorb in kernel buffers), each further
//!   full drain doubles the capacity, up to the configured high watermark
//!   (32 KiB by default);
//! - a *stall* — the buffer full and its sink taking nothing for 100 ms
//!   ([`sizing::STALL`], the caller measures it) — restarts the streak and
//!   takes the capacity back to 16 KiB; the storage shrinks once the
//!   pending bytes fit (no byte is dropped).
//!
//! So a slow reader holds 16 KiB, a fast pair of peers 32 KiB, and the
//! watermark semantics stay: pause at the (current) high mark, resume at
//! the (current) low mark, reads never past the (current) high mark.

mod pool;
pub mod sizing;

use std::io;
use std::sync::Arc;
use std::time::Duration;

pub use pool::{BufferPool, HEAD_START, RESPONSE_READ, TRIM_EVERY};

use crate::stats::Stats;
use sizing::{BODY_START, Sizing};

/// Which watermark a change crossed (the caller turns read interest off/on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// No watermark was crossed: keep read interest as it is.
    None,
    /// Pending bytes reached the high watermark: stop reading the source.
    High,
    /// A paused buffer drained to the low watermark: read the source again
    /// (at once: mio is edge-triggered, no new event will come by itself).
    Low,
}

/// One direction's pending bytes: read from a source, not yet written to the
/// sink.
///
/// Storage is a `Vec<u8>` whose `len()` is its full capacity in bytes (zeroed
/// once when allocated, reused after), with `start..end` the pending bytes.
///
/// Hysteresis: `paused` becomes true when pending reaches `>= high`
/// ([`Crossing::High`], once); it becomes false only when pending drains to
/// `<= low` ([`Crossing::Low`], once).
#[derive(Debug)]
pub struct WatermarkBuffer {
    /// Backing bytes; `len()` is the usable capacity.
    storage: Vec<u8>,
    /// Index of the oldest pending byte.
    start: usize,
    /// One past the newest pending byte.
    end: usize,
    /// Pending bytes at or above which reads pause.
    high: usize,
    /// Pending bytes at or below which a paused buffer resumes.
    low: usize,
    /// True between a `High` crossing and the next `Low` crossing.
    paused: bool,
    /// Where this buffer reports itself (none for a bare buffer).
    meter: Option<Meter>,
    /// A head buffer: storage starts small and doubles only when full
    /// (up to `high`), so a connection holding a partial head holds about
    /// what it sent (issue 14), not a whole `high`.
    elastic: bool,
    /// An adaptive body buffer's size state (see the module doc); `None`
    /// for bare and head buffers, whose marks never change.
    sizing: Option<Sizing>,
    /// A response-start buffer ([`BufferPool::response_head`]): its
    /// storage keeps [`LENT_HEADROOM`] bytes free in front of the pending
    /// bytes whenever it is empty, so the head the proxy encodes can take
    /// the place of the head that arrived ([`WatermarkBuffer::replace_front`])
    /// and the body bytes behind it are never copied.
    lent: bool,
}

/// Bytes kept free in front of a response-start buffer's first read: room
/// for the encoded head to be longer than the one that arrived (a `Date`
/// or `Connection` field added, a `response_filter`'s fields).
pub const LENT_HEADROOM: usize = 1024;

/// The counters a buffer from a [`BufferPool`] keeps up to date.
#[derive(Debug, Clone)]
struct Meter {
    stats: Arc<Stats>,
    /// Pending bytes count in `buffered_bytes` (body buffers; head buffers
    /// only count as in use).
    bytes: bool,
}

impl WatermarkBuffer {
    /// A buffer over `storage` (from [`BufferPool::get`]) with no pending
    /// bytes, not paused.
    ///
    /// `high` and `low` are pending byte counts. `high` is raised to at least
    /// 1 byte (a zero high watermark would never let a read happen) and `low`
    /// is lowered to at most `high - 1` bytes (so that a resume needs bytes
    /// to leave the buffer).
    pub fn new(storage: Vec<u8>, high: usize, low: usize) -> Self {
        let high = high.max(1);
        let low = low.min(high.saturating_sub(1));
        WatermarkBuffer {
            storage,
            start: 0,
            end: 0,
            high,
            low,
            paused: false,
            meter: None,
            elastic: false,
            sizing: None,
            lent: false,
        }
    }

    /// True for a response-start buffer (see [`BufferPool::response_head`]).
    pub fn is_lent(&self) -> bool {
        self.lent
    }

    /// Makes a response-start buffer carry a response body toward the
    /// client: marks `high`/`low` (pending bytes), pending bytes counted as
    /// body bytes, paused (and the pause counted) if they already reach
    /// `high`. Its storage stays
    /// (no copy, no adaptive sizing); the owner gives it back once empty,
    /// and later reads go to an ordinary body buffer.
    pub(crate) fn lent_into_body(&mut self, high: usize, low: usize) {
        self.high = high.max(1);
        self.low = low.min(self.high.saturating_sub(1));
        if let Some(m) = self.meter.as_mut() {
            m.bytes = true;
        }
        self.count_in(self.pending());
        self.paused = false;
        self.after_grow();
    }

    /// Index pending bytes start from when the buffer is empty: the
    /// headroom of a response-start buffer, else 0.
    fn base(&self) -> usize {
        if self.lent {
            LENT_HEADROOM.min(self.storage.len())
        } else {
            0
        }
    }

    /// Replaces the `raw` oldest pending bytes by `head` in place, if the
    /// storage in front of them has room (`head.len() <= start + raw`):
    /// the bytes behind them stay where they are. Returns false, changing
    /// nothing, if `raw > pending` or there is no room.
    pub fn replace_front(&mut self, raw: usize, head: &[u8]) -> bool {
        if raw > self.pending() {
            return false;
        }
        let Some(new_start) = (self.start + raw).checked_sub(head.len()) else {
            return false;
        };
        let Some(slot) = self.storage.get_mut(new_start..self.start + raw) else {
            return false;
        };
        slot.copy_from_slice(head);
        let grew = head.len() > raw;
        self.start = new_start;
        if grew {
            self.count_in(head.len() - raw);
        } else {
            self.count_out(raw - head.len());
        }
        true
    }

    /// Bytes read from the source and not yet written to the sink.
    pub fn pending(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// True when no bytes are pending.
    pub fn is_empty(&self) -> bool {
        self.pending() == 0
    }

    /// The pending bytes, oldest first: what to write to the sink next.
    pub fn as_slice(&self) -> &[u8] {
        match self.storage.get(self.start..self.end) {
            Some(bytes) => bytes,
            None => {
                debug_assert!(false, "start <= end <= storage.len() broken");
                &[]
            }
        }
    }

    /// True while reads of the source must stop: from the `High` crossing
    /// until the `Low` crossing.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The high watermark, in pending bytes (after clamping by
    /// [`WatermarkBuffer::new`]).
    #[cfg(test)]
    pub fn high(&self) -> usize {
        self.high
    }

    /// The low watermark, in pending bytes (after clamping by
    /// [`WatermarkBuffer::new`]).
    #[cfg(test)]
    pub fn low(&self) -> usize {
        self.low
    }

    /// Bytes a read from the source may add now: 0 while paused, else
    /// `high - pending` (saturating).
    pub fn room(&self) -> usize {
        if self.paused {
            0
        } else {
            self.high.saturating_sub(self.pending())
        }
    }

    /// Storage bytes held (the storage's `len()`, pending or not).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.storage.len()
    }

    /// Offers `f` one contiguous writable slice of `min(max, room())` bytes
    /// right after the pending bytes (compacting pending bytes to the front
    /// first if the tail space is too small, growing storage if still too
    /// small), and records the `n` bytes `f` reports it filled (read from the
    /// source into the buffer). Returns `(n, crossing)`.
    ///
    /// `f`'s error is returned unchanged and nothing is recorded. If
    /// `min(max, room()) == 0`, `f` is not called and `Ok((0,
    /// Crossing::None))` is returned. An `n` larger than the slice is a bug
    /// in `f`; it is clamped to the slice length.
    pub fn fill_with<F>(&mut self, max: usize, f: F) -> io::Result<(usize, Crossing)>
    where
        F: FnOnce(&mut [u8]) -> io::Result<usize>,
    {
        let mut want = max.min(self.room());
        if want == 0 {
            return Ok((0, Crossing::None));
        }
        if self.elastic {
            want = want.min(self.elastic_room());
        }
        self.make_tail_room(want);
        let Some(stop) = self.end.checked_add(want) else {
            debug_assert!(false, "end + want overflowed");
            return Ok((0, Crossing::None));
        };
        let Some(slice) = self.storage.get_mut(self.end..stop) else {
            debug_assert!(false, "make_tail_room left too little room");
            return Ok((0, Crossing::None));
        };
        let filled = f(slice)?;
        debug_assert!(
            filled <= want,
            "fill_with closure reported more than it was given"
        );
        let filled = filled.min(want);
        self.end = self.end.saturating_add(filled);
        self.count_in(filled);
        Ok((filled, self.after_grow()))
    }

    /// Appends `bytes` after the pending bytes (used for heads the proxy
    /// encodes toward the sink); grows storage if needed, even past `high`.
    /// Returns the crossing ([`Crossing::High`] if this reached `high`).
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> Crossing {
        if bytes.is_empty() {
            return Crossing::None;
        }
        self.make_tail_room(bytes.len());
        let Some(stop) = self.end.checked_add(bytes.len()) else {
            debug_assert!(false, "end + bytes.len() overflowed");
            return Crossing::None;
        };
        let Some(slice) = self.storage.get_mut(self.end..stop) else {
            debug_assert!(false, "make_tail_room left too little room");
            return Crossing::None;
        };
        slice.copy_from_slice(bytes);
        self.end = stop;
        self.count_in(bytes.len());
        self.after_grow()
    }

    /// Removes the `n` oldest pending bytes (they were written to the sink).
    /// `n > pending` is clamped. Returns [`Crossing::Low`] when this drains a
    /// paused buffer to `<= low`.
    ///
    /// An adaptive buffer that had reached its high mark and is emptied by
    /// this call counts a full drain (see the module doc), and may grow.
    pub fn consume(&mut self, n: usize) -> Crossing {
        let before = self.pending();
        let n = n.min(before);
        let full = self.paused && n == before && n > 0;
        self.start = self.start.saturating_add(n);
        self.count_out(n);
        let crossing = self.after_shrink();
        if full && self.sizing.as_mut().is_some_and(|s| s.full_drain(n)) {
            self.apply_sizing();
        }
        crossing
    }

    /// The sink of this buffer has taken nothing for `waited` (the caller
    /// measures it from the sink's last progress). For an adaptive buffer
    /// that is full (paused), `waited >=` [`sizing::STALL`] is a stall: the
    /// streak restarts and the capacity goes back to the start size, its
    /// storage as soon as the pending bytes fit. Otherwise nothing happens.
    pub fn sink_waited(&mut self, waited: Duration) {
        if self.paused && self.sizing.as_mut().is_some_and(|s| s.sink_waited(waited)) {
            self.apply_sizing();
            self.fit_storage();
        }
    }

    /// Takes the marks of the sizing's capacity now. Pending bytes stay;
    /// a smaller high mark keeps a paused buffer paused (pending was at
    /// least the old, larger mark).
    fn apply_sizing(&mut self) {
        if let Some((high, low)) = self.sizing.as_ref().map(Sizing::marks) {
            self.high = high;
            self.low = low;
        }
    }

    /// An adaptive buffer whose storage is larger than its capacity (it
    /// shrank, or a head went past the mark) gives the excess back once
    /// the pending bytes fit in the capacity.
    fn fit_storage(&mut self) {
        let Some(cap) = self.sizing.as_ref().map(Sizing::capacity) else {
            return;
        };
        if self.storage.len() <= cap || self.pending() > cap {
            return;
        }
        if self.start > 0 && self.start <= self.end && self.end <= self.storage.len() {
            self.storage.copy_within(self.start..self.end, 0);
            self.end = self.end.saturating_sub(self.start);
            self.start = 0;
        }
        self.storage.truncate(cap);
        self.storage.shrink_to_fit();
    }

    /// The `n` newest pending bytes, writable (fewer if fewer are
    /// pending): for rewriting bytes just read in place before `unfill`
    /// drops a tail of them.
    pub fn tail_mut(&mut self, n: usize) -> &mut [u8] {
        let len = self.end.saturating_sub(self.start);
        let from = self.end.saturating_sub(n.min(len));
        self.storage.get_mut(from..self.end).unwrap_or_default()
    }

    /// Removes the `n` newest pending bytes (bytes read from the source past
    /// the end of a body, which belong elsewhere). `n > pending` is clamped.
    /// Returns [`Crossing::Low`] if that un-pauses the buffer.
    pub fn unfill(&mut self, n: usize) -> Crossing {
        let n = n.min(self.pending());
        self.end = self.end.saturating_sub(n);
        self.count_out(n);
        self.after_shrink()
    }

    /// Drops every pending byte and un-pauses, without reporting a crossing
    /// (the caller resets read interest itself).
    pub fn clear(&mut self) {
        self.count_out(self.pending());
        self.start = self.base();
        self.end = self.start;
        self.paused = false;
        self.fit_storage();
    }

    /// Gives the storage back (to [`BufferPool::put`]); pending bytes are
    /// lost.
    pub fn into_storage(mut self) -> Vec<u8> {
        std::mem::take(&mut self.storage)
    }

    /// Free storage bytes of an elastic buffer, after doubling its
    /// storage (up to `high`, at least [`HEAD_START`]) if none were free.
    fn elastic_room(&mut self) -> usize {
        let free = self.storage.len().saturating_sub(self.pending());
        if free > 0 {
            return free;
        }
        let grown = self
            .storage
            .len()
            .saturating_mul(2)
            .max(HEAD_START)
            .min(self.high.max(self.pending() + 1));
        self.make_tail_room(grown.saturating_sub(self.pending()));
        self.storage.len().saturating_sub(self.pending())
    }

    /// Makes `storage[end..end + want]` exist: compacts pending bytes to the
    /// front if the tail is too short, then grows storage (zero-filled) if it
    /// is still too short.
    fn make_tail_room(&mut self, want: usize) {
        if self.storage.len().saturating_sub(self.end) >= want {
            return;
        }
        let base = self.base();
        if self.start > base && self.start <= self.end && self.end <= self.storage.len() {
            let pending = self.pending();
            self.storage.copy_within(self.start..self.end, base);
            self.start = base;
            self.end = base + pending;
        }
        let need = self.end.saturating_add(want);
        if self.storage.len() < need {
            self.storage.resize(need, 0);
        }
    }

    /// Adds `n` bytes read in to the metered pending bytes.
    fn count_in(&self, n: usize) {
        if let Some(m) = self.meter.as_ref().filter(|m| m.bytes) {
            m.stats.buffered_add(n as u64);
        }
    }

    /// Takes `n` bytes that left the buffer from the metered pending bytes.
    fn count_out(&self, n: usize) {
        if let Some(m) = self.meter.as_ref().filter(|m| m.bytes) {
            Stats::sub(&m.stats.buffered_bytes, n as u64);
        }
    }

    /// Reports `High` once when pending reaches the high watermark.
    fn after_grow(&mut self) -> Crossing {
        if !self.paused && self.pending() >= self.high {
            self.paused = true;
            if let Some(m) = &self.meter {
                Stats::add(&m.stats.read_pauses, 1);
            }
            Crossing::High
        } else {
            Crossing::None
        }
    }

    /// Resets offsets when empty; reports `Low` once when a paused buffer
    /// drains to the low watermark.
    fn after_shrink(&mut self) -> Crossing {
        if self.start == self.end {
            self.start = self.base();
            self.end = self.start;
        }
        if self.sizing.is_some() {
            self.fit_storage();
        }
        if self.paused && self.pending() <= self.low {
            self.paused = false;
            if let Some(m) = &self.meter {
                Stats::add(&m.stats.read_resumes, 1);
            }
            Crossing::Low
        } else {
            Crossing::None
        }
    }
}

impl Drop for WatermarkBuffer {
    /// Settles the buffer's share of the counters: its pending bytes and
    /// its place among the buffers in use.
    fn drop(&mut self) {
        self.count_out(self.pending());
        if let Some(m) = &self.meter {
            Stats::sub(&m.stats.buffers_in_use, 1);
        }
    }
}

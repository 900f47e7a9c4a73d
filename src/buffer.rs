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
//!   oldest first; when pending reaches 0, `start = end = 0` (no copy).
//! - Hysteresis: `paused` turns true once when pending reaches `>= high`
//!   ([`Crossing::High`]) and false once when pending drains to `<= low`
//!   ([`Crossing::Low`]); in between, nothing is reported.
//! - Not paused implies `pending < high`.
//! - `low < high` and `high >= 1` (clamped in [`WatermarkBuffer::new`]), so a
//!   resume always needs bytes to leave and a read can always make progress.
//! - Reads never take pending past `high` ([`WatermarkBuffer::room`]); only
//!   [`WatermarkBuffer::extend_from_slice`] (heads the proxy encodes) may.

use std::io;
use std::sync::Arc;

use crate::stats::Stats;

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
}

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
        }
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
    pub fn consume(&mut self, n: usize) -> Crossing {
        let n = n.min(self.pending());
        self.start = self.start.saturating_add(n);
        self.count_out(n);
        self.after_shrink()
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
        self.start = 0;
        self.end = 0;
        self.paused = false;
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
        if self.start > 0 && self.start <= self.end && self.end <= self.storage.len() {
            let pending = self.pending();
            self.storage.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = pending;
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
            self.start = 0;
            self.end = 0;
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

/// Bytes a head buffer's storage starts with (nginx's
/// `client_header_buffer_size` is 1 KiB); it doubles as the head grows.
pub const HEAD_START: usize = 1024;

/// Most head storages ([`HEAD_START`] bytes each) kept on the free list.
const MAX_FREE_HEADS: usize = 1024;

/// A bounded free list of storages for [`WatermarkBuffer`], so idle
/// connections hold no buffers (ARCHITECTURE.md §4) and busy ones do not
/// allocate per request.
///
/// Two sizes are kept: body storages of exactly `buf_size` bytes (at most
/// `max_free`) and head storages of [`HEAD_START`] bytes (at most
/// `MAX_FREE_HEADS`), so the free list never holds more than `max_free *
/// buf_size + 1024 * HEAD_START` bytes. A storage that grew past its size
/// is dropped when it comes back. After a peak, [`BufferPool::trim`]
/// (called every [`TRIM_EVERY`]) drops what the last period never took
/// and gives freed memory back to the OS. Storages are not zeroed again on
/// reuse: a [`WatermarkBuffer`] only exposes bytes written into it since.
#[derive(Debug)]
pub struct BufferPool {
    /// Bytes per body storage.
    buf_size: usize,
    /// Most body storages kept on the free list.
    max_free: usize,
    /// Body storages ready for reuse, each `len() == capacity() == buf_size`.
    free: Vec<Vec<u8>>,
    /// Head storages ready for reuse, each `len() == HEAD_START`.
    heads: Vec<Vec<u8>>,
    /// Fewest storages on each list since the last trim (never taken).
    low_free: (usize, usize),
    /// Storages freed to the allocator since the last trim.
    released: usize,
    /// Counters the buffers handed out keep (see the module doc).
    stats: Arc<Stats>,
}

/// How often [`BufferPool::trim`] should run: storages a whole period
/// never took are dropped, so the free list falls back within two
/// periods after a peak (under the minute the issue asks).
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(25);

impl BufferPool {
    /// A pool handing out body storages of `buf_size` bytes and keeping at
    /// most `max_free` of them on its free list. Allocates nothing up front.
    /// The buffers it hands out keep `stats` up to date.
    pub fn new(buf_size: usize, max_free: usize, stats: Arc<Stats>) -> Self {
        BufferPool {
            buf_size,
            max_free,
            free: Vec::new(),
            heads: Vec::new(),
            low_free: (0, 0),
            released: 0,
            stats,
        }
    }

    /// A body buffer with watermarks `high`/`low` (pending bytes): counted
    /// in use and its pending bytes counted in `buffered_bytes` until it is
    /// dropped or given back with [`BufferPool::put_buffer`].
    pub fn body(&mut self, high: usize, low: usize) -> WatermarkBuffer {
        Stats::add(&self.stats.buffers_in_use, 1);
        let mut buf = WatermarkBuffer::new(self.get(), high, low);
        buf.meter = Some(self.meter(true));
        buf
    }

    /// A buffer for heads: its storage starts at [`HEAD_START`] bytes and
    /// doubles when full; reads stop at `max_head` bytes and any consumed
    /// byte makes room again. Counted in use; its bytes are not body bytes
    /// and are not counted.
    pub fn head(&mut self, max_head: usize) -> WatermarkBuffer {
        Stats::add(&self.stats.buffers_in_use, 1);
        let storage = self.heads.pop().unwrap_or_else(|| vec![0; HEAD_START]);
        self.low_free.1 = self.low_free.1.min(self.heads.len());
        let mut buf = WatermarkBuffer::new(storage, max_head, max_head.saturating_sub(1));
        buf.meter = Some(self.meter(false));
        buf.elastic = true;
        buf
    }

    /// Takes a buffer back: its storage returns to the free list (see
    /// [`BufferPool::put`]); its counters are settled.
    pub fn put_buffer(&mut self, buf: WatermarkBuffer) {
        self.put(buf.into_storage());
    }

    fn meter(&self, bytes: bool) -> Meter {
        Meter {
            stats: self.stats.clone(),
            bytes,
        }
    }

    /// A storage of `len() == buf_size` bytes, from the free list if it has
    /// one, else freshly allocated and zeroed.
    pub fn get(&mut self) -> Vec<u8> {
        let storage = self.free.pop();
        self.low_free.0 = self.low_free.0.min(self.free.len());
        storage.unwrap_or_else(|| vec![0; self.buf_size])
    }

    /// Takes a storage back (from [`WatermarkBuffer::into_storage`]). It is
    /// kept if its `len()` and `capacity()` are both `buf_size` bytes (or
    /// both [`HEAD_START`]) and its list has room; otherwise (it grew, or
    /// the list is full) it is dropped.
    pub fn put(&mut self, storage: Vec<u8>) {
        let (len, cap) = (storage.len(), storage.capacity());
        if len == self.buf_size && cap == len && self.free.len() < self.max_free {
            self.free.push(storage);
        } else if len == HEAD_START && cap == len && self.heads.len() < MAX_FREE_HEADS {
            self.heads.push(storage);
        } else {
            self.released += 1;
        }
    }

    /// Drops the storages neither list handed out since the last trim
    /// (what the last period did not need), then asks the allocator to
    /// give free memory back to the OS if anything was freed. Returns the
    /// storages dropped. Call every [`TRIM_EVERY`].
    pub fn trim(&mut self) -> usize {
        let (body, head) = self.low_free;
        let keep_body = self.free.len().saturating_sub(body);
        let keep_head = self.heads.len().saturating_sub(head);
        self.free.truncate(keep_body);
        self.heads.truncate(keep_head);
        self.free.shrink_to_fit();
        self.heads.shrink_to_fit();
        let dropped = body + head;
        if dropped + self.released > 0 {
            release_free_memory();
        }
        self.released = 0;
        self.low_free = (self.free.len(), self.heads.len());
        dropped
    }

    /// True when a trim could free something (the loop wakes for it only
    /// then).
    pub fn may_trim(&self) -> bool {
        !self.free.is_empty() || !self.heads.is_empty() || self.released > 0
    }

    /// Storages on the free lists now (body, head).
    #[cfg(test)]
    pub fn free_count(&self) -> usize {
        self.free.len() + self.heads.len()
    }

    /// Bytes per storage handed out by [`BufferPool::get`].
    #[cfg(test)]
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }
}

/// Gives the allocator's free pages back to the OS (glibc keeps freed
/// heap memory otherwise: after 5,000 slow readers RSS stayed at 248 MB).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

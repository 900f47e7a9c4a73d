//! The free list of buffer storages (ARCHITECTURE.md §4): idle connections
//! hold no buffers, busy ones do not allocate per request, and after a
//! peak the list and the allocator give memory back.
//!
//! What it must not know: sockets, HTTP, what the buffers carry.

use std::sync::Arc;

use super::sizing::Sizing;
use super::{LENT_HEADROOM, Meter, WatermarkBuffer};
use crate::stats::Stats;

/// Bytes a head buffer's storage starts with (nginx's
/// `client_header_buffer_size` is 1 KiB); it doubles as the head grows.
pub const HEAD_START: usize = 1024;

/// Most head storages ([`HEAD_START`] bytes each) kept on the free list.
const MAX_FREE_HEADS: usize = 1024;

/// Bytes a response-start buffer reads at most in one go: a head of up to
/// [`HEAD_START`] bytes and one body buffer's start size
/// ([`BODY_START`](super::BODY_START), 16 KiB) in one `recv` (issue 22), so
/// a 16 KiB body with its head takes one read, and a client that reads
/// nothing holds no more than it did with a 1 KiB head buffer and a 16 KiB
/// body buffer (plus what the proxy adds to the head).
pub const RESPONSE_READ: usize = super::BODY_START + HEAD_START;

/// Bytes of a response-start storage: the read and the headroom in front.
const LENT_SIZE: usize = RESPONSE_READ + LENT_HEADROOM;

/// Most response-start storages kept on the free list. One is out only
/// from a response's first read until the client's buffer it became is
/// empty again (normally within the same loop turn), so a few suffice.
const MAX_FREE_LENT: usize = 32;

/// A bounded free list of storages for [`WatermarkBuffer`], so idle
/// connections hold no buffers (ARCHITECTURE.md §4) and busy ones do not
/// allocate per request.
///
/// Two sizes are kept: body storages of exactly the body start size
/// (`buf_size`: [`BODY_START`](super::BODY_START), or the high watermark if
/// smaller; at most `max_free`) and head storages of [`HEAD_START`] bytes
/// (at most `MAX_FREE_HEADS`), plus response-start storages of
/// `LENT_SIZE` bytes (at most `MAX_FREE_LENT`), so the free list never
/// holds more than `max_free * buf_size + 1024 * HEAD_START + 32 *
/// LENT_SIZE` bytes. A storage that grew
/// past its size (an adaptive body buffer that grew, a head that doubled)
/// is dropped when it comes back: the allocator reuses it, and the trim
/// gives it back to the OS. After a peak, [`BufferPool::trim`]
/// (called every [`TRIM_EVERY`]) drops what the last period never took
/// and gives freed memory back to the OS. Storages are not zeroed again on
/// reuse: a [`WatermarkBuffer`] only exposes bytes written into it since.
#[derive(Debug)]
pub struct BufferPool {
    /// Bytes per body storage on the free list: the start size of an
    /// adaptive body buffer.
    buf_size: usize,
    /// Most body storages kept on the free list.
    max_free: usize,
    /// Body storages ready for reuse, each `len() == capacity() == buf_size`.
    free: Vec<Vec<u8>>,
    /// Head storages ready for reuse, each `len() == HEAD_START`.
    heads: Vec<Vec<u8>>,
    /// Response-start storages ready for reuse, each `len() == LENT_SIZE`.
    lent: Vec<Vec<u8>>,
    /// Fewest storages on each list since the last trim (never taken):
    /// body, head, response-start.
    low_free: (usize, usize, usize),
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
    /// A pool for body buffers whose high watermark is at most `high`
    /// bytes: it hands out body storages of the start size (`min(BODY_START,
    /// high)` bytes) and keeps at most `max_free` of them on its free list.
    /// Allocates nothing up front. The buffers it hands out keep `stats` up
    /// to date.
    pub fn new(high: usize, max_free: usize, stats: Arc<Stats>) -> Self {
        BufferPool {
            buf_size: super::BODY_START.min(high.max(1)),
            max_free,
            free: Vec::new(),
            heads: Vec::new(),
            lent: Vec::new(),
            low_free: (0, 0, 0),
            released: 0,
            stats,
        }
    }

    /// An adaptive body buffer for configured watermarks `high`/`low`
    /// (pending bytes): it starts at `min(BODY_START, high)` bytes with
    /// marks scaled to that size, and grows and shrinks by the rule of
    /// [`sizing`](super::sizing). Counted in use and its pending bytes
    /// counted in `buffered_bytes` until it is dropped or given back with
    /// [`BufferPool::put_buffer`].
    pub fn body(&mut self, high: usize, low: usize) -> WatermarkBuffer {
        Stats::add(&self.stats.buffers_in_use, 1);
        let sizing = Sizing::new(high, low);
        let (high, low) = sizing.marks();
        let mut storage = self.get();
        storage.resize(sizing.capacity(), 0);
        let mut buf = WatermarkBuffer::new(storage, high, low);
        buf.meter = Some(self.meter(true));
        buf.sizing = Some(sizing);
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

    /// A buffer for a response head and the bytes that come with it: one
    /// read of up to [`RESPONSE_READ`] bytes lands behind a headroom of
    /// [`LENT_HEADROOM`] bytes, so that once the head is planned, the
    /// encoded head takes the raw head's place and the buffer itself goes
    /// on toward the client ([`WatermarkBuffer::lent_into_body`]): the
    /// head and the first body bytes leave in one write, without a copy.
    /// Reads stop at `max(max_head, RESPONSE_READ)` pending bytes (the
    /// caller enforces the head size limit itself). Counted in use; its
    /// bytes count as body bytes only once it carries a body.
    pub fn response_head(&mut self, max_head: usize) -> WatermarkBuffer {
        Stats::add(&self.stats.buffers_in_use, 1);
        let storage = self.lent.pop().unwrap_or_else(|| vec![0; LENT_SIZE]);
        self.low_free.2 = self.low_free.2.min(self.lent.len());
        let high = max_head.max(RESPONSE_READ);
        let mut buf = WatermarkBuffer::new(storage, high, high.saturating_sub(1));
        buf.meter = Some(self.meter(false));
        buf.lent = true;
        buf.start = LENT_HEADROOM;
        buf.end = LENT_HEADROOM;
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
        } else if len == LENT_SIZE && cap == len && self.lent.len() < MAX_FREE_LENT {
            self.lent.push(storage);
        } else {
            self.released += 1;
        }
    }

    /// Drops the storages neither list handed out since the last trim
    /// (what the last period did not need), then asks the allocator to
    /// give free memory back to the OS if anything was freed. Returns the
    /// storages dropped. Call every [`TRIM_EVERY`].
    pub fn trim(&mut self) -> usize {
        let (body, head, lent) = self.low_free;
        let keep_body = self.free.len().saturating_sub(body);
        let keep_head = self.heads.len().saturating_sub(head);
        let keep_lent = self.lent.len().saturating_sub(lent);
        self.free.truncate(keep_body);
        self.heads.truncate(keep_head);
        self.lent.truncate(keep_lent);
        self.free.shrink_to_fit();
        self.heads.shrink_to_fit();
        self.lent.shrink_to_fit();
        let dropped = body + head + lent;
        if dropped + self.released > 0 {
            release_free_memory();
        }
        self.released = 0;
        self.low_free = (self.free.len(), self.heads.len(), self.lent.len());
        dropped
    }

    /// `n` storages of another free list were freed to the allocator (the
    /// TLS record storages, `conn/transport/records.rs`): the next trim
    /// gives the memory back to the OS as for its own.
    pub fn freed_elsewhere(&mut self, n: usize) {
        self.released += n;
    }

    /// True when a trim could free something (the loop wakes for it only
    /// then).
    pub fn may_trim(&self) -> bool {
        !self.free.is_empty()
            || !self.heads.is_empty()
            || !self.lent.is_empty()
            || self.released > 0
    }

    /// Storages on the free lists now (body, head).
    #[cfg(test)]
    pub fn free_count(&self) -> usize {
        self.free.len() + self.heads.len() + self.lent.len()
    }

    /// Bytes per body storage handed out by [`BufferPool::get`].
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

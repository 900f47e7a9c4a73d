//! Record storages of the TLS sessions (ARCHITECTURE.md §3): the
//! ciphertext read from a socket and not yet decrypted, and the ciphertext
//! made for a socket and not yet written. rustls' unbuffered sessions keep
//! no buffer of their own; a session holds a storage only while records
//! are in flight and gives it back the moment its records are gone, so a
//! connection waiting between requests (parked, or pooled upstream) holds
//! none (issue 23's T5: an idle TLS connection costs its session's keys
//! and state, about 2 KB, not 4 KiB of deframer on top).
//!
//! Two sizes: [`SMALL`] holds one whole record (every read; a write of up
//! to 17 KiB of plaintext: a request, a head and a 16 KiB body buffer,
//! what a slow reader has), [`LARGE`] two (a write from a 32 KiB body
//! buffer, one `send` for a fast reader). They come from free lists per
//! loop thread (each loop is one thread, ARCHITECTURE.md §3), so a
//! keep-alive request takes and returns two without an allocation, and the
//! loop's periodic trim drops what the last period never took (`trim`,
//! with `BufferPool::trim`).
//!
//! What it must not know: TLS, sockets, HTTP.

use std::cell::RefCell;

/// Bytes of a small record storage: one TLS record of 16 KiB of plaintext
/// with its header and AEAD tag (16,406 bytes in TLS 1.3, 16,413 in TLS
/// 1.2), or a response head and a 16 KiB body encrypted together. A
/// socket read takes at most this much: a client that uploads faster than
/// the upstream takes holds at most one record of ciphertext beside its
/// buffer.
pub(crate) const SMALL: usize = 17 * 1024;

/// Bytes of a large record storage: two full records, so that a 32 KiB
/// body buffer (the default high watermark) leaves in one write.
pub(crate) const LARGE: usize = 33 * 1024;

/// Plaintext bytes encrypted per write at most: what fits a [`LARGE`]
/// storage with the overhead of its records (29 bytes per record at most:
/// TLS 1.2 AES-GCM).
pub(crate) const ENCRYPT_MAX: usize = LARGE - 128;

/// Plaintext bytes of a full TLS record (RFC 8446 §5.1: 2^14).
pub(crate) const RECORD: usize = 16 * 1024;

/// The plaintext bytes to encrypt for one write when `pending` wait: all
/// of them if they fit [`ENCRYPT_MAX`], else two full records (so a large
/// body goes out in whole 16 KiB records, two per `send`, not as full
/// records and a short one).
pub(crate) fn encrypt_take(pending: usize) -> usize {
    if pending <= ENCRYPT_MAX {
        pending
    } else {
        2 * RECORD
    }
}

/// The storage bytes `plain` bytes of plaintext need once encrypted (at
/// most two records, each with at most 29 bytes of overhead, and room for
/// a `close_notify` behind them).
pub(crate) fn sealed_len(plain: usize) -> usize {
    plain + 128
}

/// Largest storage a session may grow to: a handshake message of up to
/// 64 KiB (rustls' cap) kept whole in the storage while it is joined
/// from its records, with their headers.
pub(crate) const GROW_MAX: usize = 0x10000 + 8 * 1024;

/// Most storages of each size on one thread's free list.
const MAX_FREE: usize = 32;

/// A thread's spare storages of one size, each `len() == capacity()`.
struct Free {
    list: Vec<Vec<u8>>,
    /// Fewest on the list since the last trim (never taken).
    low: usize,
}

impl Free {
    const fn new() -> Self {
        Free {
            list: Vec::new(),
            low: 0,
        }
    }

    fn trim(&mut self) -> usize {
        let drop = self.low.min(self.list.len());
        let keep = self.list.len() - drop;
        self.list.truncate(keep);
        self.list.shrink_to_fit();
        self.low = self.list.len();
        drop
    }
}

thread_local! {
    /// The spare [`SMALL`] and [`LARGE`] storages.
    static FREE: RefCell<[Free; 2]> = const { RefCell::new([Free::new(), Free::new()]) };
}

/// The free list's index of a storage of `len` bytes, if it keeps that
/// size.
fn class(len: usize) -> Option<usize> {
    match len {
        SMALL => Some(0),
        LARGE => Some(1),
        _ => None,
    }
}

/// A storage of `size` bytes ([`SMALL`] or [`LARGE`]): a spare one, else a
/// new one.
fn take(size: usize) -> Vec<u8> {
    let spare = class(size).and_then(|c| {
        FREE.with(|f| {
            let mut f = f.try_borrow_mut().ok()?;
            let free = f.get_mut(c)?;
            let s = free.list.pop();
            free.low = free.low.min(free.list.len());
            s
        })
    });
    spare.unwrap_or_else(|| vec![0; size])
}

/// Takes a storage back: kept if it has one of the two sizes and its list
/// has room, else freed (one that grew for a large handshake message).
fn give(storage: Vec<u8>) {
    let Some(c) = class(storage.len()).filter(|_| storage.capacity() == storage.len()) else {
        return;
    };
    FREE.with(|f| {
        if let Ok(mut f) = f.try_borrow_mut()
            && let Some(free) = f.get_mut(c)
            && free.list.len() < MAX_FREE
        {
            free.list.push(storage);
        }
    });
}

/// Drops the spare storages this thread's lists did not hand out since
/// the last trim (call every `buffer::TRIM_EVERY`, from the loop). Returns
/// how many were freed.
pub(crate) fn trim() -> usize {
    FREE.with(|f| {
        f.try_borrow_mut()
            .map_or(0, |mut f| f.iter_mut().map(Free::trim).sum())
    })
}

/// True when this thread's lists hold spare storages (a trim could free
/// them).
pub(crate) fn may_trim() -> bool {
    FREE.with(|f| {
        f.try_borrow()
            .is_ok_and(|f| f.iter().any(|l| !l.list.is_empty()))
    })
}

/// One direction's records in flight: bytes `start..end` of a storage
/// (none while nothing is in flight).
#[derive(Debug, Default)]
pub(crate) struct Records {
    storage: Vec<u8>,
    start: usize,
    end: usize,
}

impl Records {
    /// The bytes in flight, oldest first.
    pub(crate) fn pending(&self) -> &[u8] {
        self.storage.get(self.start..self.end).unwrap_or_default()
    }

    /// The bytes in flight, writable (rustls decrypts and joins records in
    /// place).
    pub(crate) fn pending_mut(&mut self) -> &mut [u8] {
        self.storage
            .get_mut(self.start..self.end)
            .unwrap_or_default()
    }

    /// Bytes of storage held (0 while nothing is in flight).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.storage.len()
    }

    /// Bytes in flight.
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// Nothing in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The free space after the bytes in flight, for a read: all of the
    /// storage but the bytes in flight (taking a [`SMALL`] storage first if
    /// none is held, moving the bytes in flight to the front); a full
    /// storage grows by [`SMALL`] (a record or a handshake message larger
    /// than one), up to [`GROW_MAX`]. Empty when full at [`GROW_MAX`].
    pub(crate) fn space(&mut self) -> &mut [u8] {
        // A full standard (or grown) storage grows by a small one; a
        // storage of the bytes' own size moves into a standard one.
        let want = if self.len() >= self.storage.len() && self.storage.len() >= SMALL {
            SMALL
        } else {
            1
        };
        self.space_for(want)
    }

    /// The free space after the bytes in flight, at least `want` bytes if
    /// the storage may grow to that (as [`Self::space`]; for encoding a
    /// record of a known size). With no storage held it takes a [`SMALL`]
    /// one, or a [`LARGE`] one for more. A storage that grew is freed, not
    /// kept, once it is empty.
    pub(crate) fn space_for(&mut self, want: usize) -> &mut [u8] {
        if self.storage.is_empty() {
            self.storage = take(if want > SMALL { LARGE } else { SMALL });
        } else if self.storage.len() < SMALL && self.end.saturating_add(want) > self.storage.len() {
            // A storage of the bytes' own size (`fit`) that must grow:
            // its bytes move into a standard one (from the free list, not
            // a new 17 KiB allocation).
            let need = self.len().saturating_add(want);
            let mut standard = take(if need > SMALL { LARGE } else { SMALL });
            let pending = self.pending();
            if let Some(dst) = standard.get_mut(..pending.len()) {
                dst.copy_from_slice(pending);
            }
            self.end = pending.len();
            self.start = 0;
            self.storage = standard;
        }
        if self.start > 0 {
            // Bytes of a record not yet whole (at most one storage's
            // worth): moved so that the next read can fill the rest.
            self.storage.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let need = self.end.saturating_add(want).min(GROW_MAX);
        if need > self.storage.len() {
            self.storage.resize(need, 0);
        }
        self.storage.get_mut(self.end..).unwrap_or_default()
    }

    /// `n` bytes were written into [`Self::space`] or [`Self::space_for`].
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.storage.len());
    }

    /// The `n` oldest bytes are gone (written, or processed by rustls).
    /// Once nothing is in flight the storage goes back to the free list.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            give(std::mem::take(&mut self.storage));
        }
    }
}

impl Records {
    /// Moves the bytes in flight, if any, into a storage of their own
    /// size and gives the standard storage back (a connection that goes
    /// idle over a record not yet whole holds its bytes, not 17 KiB).
    pub(crate) fn fit(&mut self) {
        if self.is_empty() || class(self.storage.len()).is_none() {
            return;
        }
        let kept = self.pending().to_vec();
        self.end = kept.len();
        self.start = 0;
        give(std::mem::replace(&mut self.storage, kept));
    }
}

impl Drop for Records {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.storage));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_takes_all_that_fits_else_one_full_record() {
        assert_eq!(encrypt_take(38), 38);
        assert!(sealed_len(encrypt_take(16 * 1024 + 240)) <= SMALL);
        assert!(sealed_len(encrypt_take(usize::MAX)) <= LARGE);
        // a 16 KiB body and its head: two records, one write
        assert_eq!(encrypt_take(16 * 1024 + 240), 16 * 1024 + 240);
        assert_eq!(encrypt_take(ENCRYPT_MAX), ENCRYPT_MAX);
        // a 32 KiB body buffer: one write
        assert_eq!(encrypt_take(32 * 1024), 32 * 1024);
        assert_eq!(encrypt_take(ENCRYPT_MAX + 1), 2 * RECORD);
    }

    #[test]
    fn storage_is_held_only_while_bytes_are_in_flight() {
        let mut r = Records::default();
        assert!(r.is_empty() && r.storage.is_empty());
        let s = r.space();
        assert!(s.len() >= 10);
        s[..3].copy_from_slice(b"abc");
        r.filled(3);
        assert_eq!(r.pending(), b"abc");
        r.consume(1);
        assert_eq!(r.pending(), b"bc");
        assert!(!r.storage.is_empty());
        r.consume(2);
        assert!(r.is_empty() && r.storage.is_empty(), "given back");
    }

    #[test]
    fn space_compacts_then_grows_up_to_the_cap() {
        let mut r = Records::default();
        assert_eq!(r.space().len(), SMALL);
        r.filled(SMALL);
        r.consume(SMALL - 5);
        // the 5 left move to the front: the rest of the storage is room
        assert_eq!(r.space().len(), SMALL - 5);
        assert_eq!(r.pending().len(), 5);
        r.filled(SMALL - 5);
        // full: a read's space grows by a small storage, up to GROW_MAX
        assert_eq!(r.space().len(), SMALL);
        assert_eq!(r.space_for(1000).len(), SMALL);
        let room = r.space_for(GROW_MAX).len();
        assert_eq!(room, GROW_MAX - SMALL);
        r.filled(room);
        assert_eq!(r.len(), GROW_MAX);
        assert!(r.space().is_empty(), "full at the cap");
    }

    #[test]
    fn a_write_of_more_than_a_record_takes_a_large_storage() {
        let mut w = Records::default();
        assert_eq!(w.space_for(sealed_len(32 * 1024)).len(), LARGE);
        let mut small = Records::default();
        assert_eq!(small.space_for(sealed_len(1000)).len(), SMALL);
    }

    #[test]
    fn fit_keeps_a_partial_record_in_its_own_size() {
        let mut r = Records::default();
        r.space()[..4].copy_from_slice(b"part");
        r.filled(4);
        r.fit();
        assert_eq!(r.pending(), b"part");
        assert_eq!(r.storage.len(), 4);
        // more bytes: back in a standard storage
        assert_eq!(r.space().len(), SMALL - 4);
        r.space()[..2].copy_from_slice(b"!!");
        r.filled(2);
        assert_eq!(r.pending(), b"part!!");
        assert_eq!(r.storage.len(), SMALL);
        r.consume(2);
        r.fit();
        assert_eq!(r.pending(), b"rt!!");
        assert_eq!(r.space_for(SMALL).len(), LARGE - 4);
    }

    #[test]
    fn spare_storages_are_reused_and_trimmed() {
        // this test's thread starts with an empty list
        assert_eq!(trim(), 0);
        let mut a = Records::default();
        a.space();
        a.filled(1);
        a.consume(1); // back on the list
        assert!(may_trim());
        let mut b = Records::default();
        b.space(); // taken again: no allocation
        assert!(!may_trim());
        b.filled(1);
        drop(b); // back again
        assert_eq!(trim(), 0, "it was taken since the last trim");
        assert_eq!(trim(), 1, "not taken for a whole period");
        assert!(!may_trim());
    }
}

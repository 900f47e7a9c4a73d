//! Unit tests for `crate::buffer`: each watermark at -1, 0, +1 bytes,
//! crossings counted, clamping, compaction, growth, the free list.

use crate::buffer::{
    BufferPool, Crossing, HEAD_START, LENT_HEADROOM, RESPONSE_READ, WatermarkBuffer,
};
use std::io;

const HIGH: usize = 16;
const LOW: usize = 4;

fn buffer() -> WatermarkBuffer {
    WatermarkBuffer::new(vec![0; HIGH], HIGH, LOW)
}

/// Fills `n` bytes counting up from `from`, through `fill_with`.
#[track_caller]
fn fill(buf: &mut WatermarkBuffer, from: u8, n: usize) -> (usize, Crossing) {
    buf.fill_with(n, |slice| {
        let mut next = from;
        for byte in slice.iter_mut() {
            *byte = next;
            next = next.wrapping_add(1);
        }
        Ok(slice.len())
    })
    .expect("closure never fails")
}

/// Counts crossings of each kind in a sequence of results.
fn count(crossings: &[Crossing]) -> (usize, usize) {
    let high = crossings.iter().filter(|c| **c == Crossing::High).count();
    let low = crossings.iter().filter(|c| **c == Crossing::Low).count();
    (high, low)
}

#[test]
fn new_buffer_is_empty_and_not_paused() {
    let buf = buffer();
    assert_eq!(buf.pending(), 0);
    assert!(buf.is_empty());
    assert!(!buf.is_paused());
    assert_eq!(buf.room(), HIGH);
    assert_eq!(buf.capacity(), HIGH);
    assert_eq!(buf.as_slice(), b"");
}

#[test]
fn one_byte_below_high_does_not_pause() {
    let mut buf = buffer();
    assert_eq!(fill(&mut buf, 0, HIGH - 1), (HIGH - 1, Crossing::None));
    assert!(!buf.is_paused());
    assert_eq!(buf.room(), 1);
}

#[test]
fn pause_happens_once_at_high() {
    let mut buf = buffer();
    assert_eq!(fill(&mut buf, 0, HIGH - 1).1, Crossing::None);
    assert_eq!(fill(&mut buf, 0, 1), (1, Crossing::High));
    assert!(buf.is_paused());
    assert_eq!(buf.room(), 0);
    // Appending more while paused reports nothing new.
    assert_eq!(buf.extend_from_slice(b"x"), Crossing::None);
    assert_eq!(buf.pending(), HIGH + 1);
}

#[test]
fn one_byte_above_high_pauses_once() {
    let mut buf = buffer();
    let mut seen = vec![fill(&mut buf, 0, HIGH - 1).1];
    seen.push(buf.extend_from_slice(b"ab"));
    seen.push(buf.extend_from_slice(b"cd"));
    assert_eq!(buf.pending(), HIGH + 3);
    assert_eq!(count(&seen), (1, 0));
    assert_eq!(seen.get(1), Some(&Crossing::High));
}

#[test]
fn one_byte_above_low_does_not_resume() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    assert_eq!(buf.consume(HIGH - LOW - 1), Crossing::None);
    assert_eq!(buf.pending(), LOW + 1);
    assert!(buf.is_paused());
    assert_eq!(buf.room(), 0);
}

#[test]
fn resume_happens_once_at_low() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    let mut seen = Vec::new();
    for _ in 0..HIGH {
        seen.push(buf.consume(1));
    }
    assert_eq!(count(&seen), (0, 1));
    // The Low crossing is on the byte that reached `low` exactly.
    assert_eq!(seen.get(HIGH - LOW - 1), Some(&Crossing::Low));
    assert!(!buf.is_paused());
    assert!(buf.is_empty());
}

#[test]
fn one_byte_below_low_resumes_when_jumped_over() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    assert_eq!(buf.consume(HIGH - LOW + 1), Crossing::Low);
    assert_eq!(buf.pending(), LOW - 1);
    assert!(!buf.is_paused());
    assert_eq!(buf.room(), HIGH - LOW + 1);
}

#[test]
fn below_low_without_pause_reports_nothing() {
    let mut buf = buffer();
    fill(&mut buf, 0, LOW + 1);
    assert_eq!(buf.consume(LOW + 1), Crossing::None);
}

#[test]
fn refilling_between_marks_does_not_pause_again() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    buf.consume(HIGH - LOW);
    // Resumed at low: room is back to high - pending.
    assert_eq!(buf.room(), HIGH - LOW);
    assert_eq!(fill(&mut buf, 0, HIGH - LOW - 1).1, Crossing::None);
    assert_eq!(fill(&mut buf, 0, 1).1, Crossing::High);
}

#[test]
fn many_cycles_alternate_high_and_low() {
    let mut buf = buffer();
    let mut seen = Vec::new();
    for round in 0..50u8 {
        while !buf.is_paused() {
            seen.push(fill(&mut buf, round, 3).1);
        }
        while buf.is_paused() {
            seen.push(buf.consume(5));
        }
    }
    let crossings: Vec<_> = seen.into_iter().filter(|c| *c != Crossing::None).collect();
    assert_eq!(crossings.len(), 100);
    for pair in crossings.chunks(2) {
        assert_eq!(pair, [Crossing::High, Crossing::Low]);
    }
}

#[test]
fn fill_with_clamps_to_room() {
    let mut buf = buffer();
    fill(&mut buf, 0, 10);
    let mut offered = 0;
    let got = buf.fill_with(1000, |slice| {
        offered = slice.len();
        Ok(slice.len())
    });
    assert_eq!(offered, HIGH - 10);
    assert_eq!(got.ok(), Some((HIGH - 10, Crossing::High)));
}

#[test]
fn fill_with_clamps_to_max() {
    let mut buf = buffer();
    let mut offered = 0;
    let got = buf.fill_with(3, |slice| {
        offered = slice.len();
        Ok(2)
    });
    assert_eq!(offered, 3);
    assert_eq!(got.ok(), Some((2, Crossing::None)));
    assert_eq!(buf.pending(), 2);
}

#[test]
fn fill_with_does_not_call_f_without_room() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    let mut called = false;
    let got = buf.fill_with(100, |_| {
        called = true;
        Ok(0)
    });
    assert_eq!(got.ok(), Some((0, Crossing::None)));
    assert!(!called);
    let mut empty = buffer();
    let got = empty.fill_with(0, |_| {
        called = true;
        Ok(0)
    });
    assert_eq!(got.ok(), Some((0, Crossing::None)));
    assert!(!called);
}

#[test]
fn fill_with_error_records_nothing() {
    let mut buf = buffer();
    fill(&mut buf, 1, 3);
    let got = buf.fill_with(5, |slice| {
        slice.fill(0xee);
        Err(io::Error::from(io::ErrorKind::WouldBlock))
    });
    assert_eq!(got.err().map(|e| e.kind()), Some(io::ErrorKind::WouldBlock));
    assert_eq!(buf.as_slice(), [1, 2, 3]);
}

#[test]
fn fill_with_eof_reports_zero() {
    let mut buf = buffer();
    assert_eq!(buf.fill_with(8, |_| Ok(0)).ok(), Some((0, Crossing::None)));
    assert!(buf.is_empty());
}

#[test]
fn compaction_keeps_bytes_in_order() {
    let mut buf = buffer();
    fill(&mut buf, 0, 12);
    buf.consume(8); // pending 8..12 at the back, 4 bytes of tail space
    let got = fill(&mut buf, 12, 10);
    assert_eq!(got, (10, Crossing::None));
    assert_eq!(buf.as_slice(), (8..22).collect::<Vec<u8>>());
    assert_eq!(buf.capacity(), HIGH, "compaction, not growth");
}

#[test]
fn small_storage_grows_only_to_high() {
    let mut buf = WatermarkBuffer::new(vec![0; 4], HIGH, LOW);
    assert_eq!(fill(&mut buf, 0, 100), (HIGH, Crossing::High));
    assert_eq!(buf.capacity(), HIGH);
    assert_eq!(buf.as_slice(), (0..HIGH as u8).collect::<Vec<u8>>());
}

#[test]
fn empty_storage_works() {
    let mut buf = WatermarkBuffer::new(Vec::new(), HIGH, LOW);
    assert_eq!(buf.extend_from_slice(b"GET / HTTP/1.1\r\n"), Crossing::High);
    assert_eq!(buf.as_slice(), b"GET / HTTP/1.1\r\n");
}

#[test]
fn extend_past_high_grows() {
    let mut buf = buffer();
    let head = [7u8; HIGH * 3];
    assert_eq!(buf.extend_from_slice(&head), Crossing::High);
    assert_eq!(buf.pending(), HIGH * 3);
    assert!(buf.capacity() >= HIGH * 3);
    assert_eq!(buf.as_slice(), head);
    assert_eq!(buf.room(), 0);
}

#[test]
fn extend_after_consume_keeps_order() {
    let mut buf = buffer();
    fill(&mut buf, 0, 10);
    buf.consume(6);
    assert_eq!(
        buf.extend_from_slice(&[10, 11, 12, 13, 14, 15, 16, 17]),
        Crossing::None
    );
    assert_eq!(buf.as_slice(), (6..18).collect::<Vec<u8>>());
}

#[test]
fn extend_empty_is_a_no_op() {
    let mut buf = buffer();
    assert_eq!(buf.extend_from_slice(b""), Crossing::None);
    assert!(buf.is_empty());
}

#[test]
fn consume_more_than_pending_is_clamped() {
    let mut buf = buffer();
    fill(&mut buf, 0, 5);
    assert_eq!(buf.consume(usize::MAX), Crossing::None);
    assert!(buf.is_empty());
    assert_eq!(buf.room(), HIGH);
    assert_eq!(buf.consume(1), Crossing::None);
}

#[test]
fn consume_removes_oldest() {
    let mut buf = buffer();
    fill(&mut buf, 0, 5);
    buf.consume(2);
    assert_eq!(buf.as_slice(), [2, 3, 4]);
}

#[test]
fn unfill_removes_newest() {
    let mut buf = buffer();
    fill(&mut buf, 0, 5);
    assert_eq!(buf.unfill(2), Crossing::None);
    assert_eq!(buf.as_slice(), [0, 1, 2]);
    fill(&mut buf, 9, 1);
    assert_eq!(buf.as_slice(), [0, 1, 2, 9]);
}

#[test]
fn unfill_more_than_pending_is_clamped() {
    let mut buf = buffer();
    fill(&mut buf, 0, 5);
    buf.consume(1);
    assert_eq!(buf.unfill(100), Crossing::None);
    assert!(buf.is_empty());
}

#[test]
fn unfill_to_low_resumes_once() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    assert_eq!(buf.unfill(HIGH - LOW - 1), Crossing::None);
    assert_eq!(buf.unfill(1), Crossing::Low);
    assert_eq!(buf.unfill(1), Crossing::None);
    assert_eq!(buf.as_slice(), (0..LOW as u8 - 1).collect::<Vec<u8>>());
}

#[test]
fn clear_empties_and_unpauses() {
    let mut buf = buffer();
    fill(&mut buf, 0, HIGH);
    buf.clear();
    assert!(buf.is_empty());
    assert!(!buf.is_paused());
    assert_eq!(buf.room(), HIGH);
}

#[test]
fn low_at_or_above_high_is_clamped_below_high() {
    let mut buf = WatermarkBuffer::new(vec![0; 8], 8, 8);
    assert_eq!((buf.high(), buf.low()), (8, 7));
    fill(&mut buf, 0, 8);
    assert!(buf.is_paused());
    assert_eq!(
        buf.consume(0),
        Crossing::None,
        "resume needs bytes to leave"
    );
    assert_eq!(buf.consume(1), Crossing::Low);
}

#[test]
fn zero_high_is_raised_to_one() {
    let mut buf = WatermarkBuffer::new(Vec::new(), 0, 0);
    assert_eq!((buf.high(), buf.low()), (1, 0));
    assert_eq!(fill(&mut buf, 5, 10), (1, Crossing::High));
    assert_eq!(buf.consume(1), Crossing::Low);
}

#[test]
fn into_storage_returns_the_storage() {
    let mut buf = buffer();
    fill(&mut buf, 0, 3);
    let storage = buf.into_storage();
    assert_eq!(storage.len(), HIGH);
}

#[test]
fn pool_get_hands_out_buf_size_storage() {
    let mut pool = BufferPool::new(32, 2, Default::default());
    assert_eq!(pool.buf_size(), 32);
    let storage = pool.get();
    assert_eq!(storage.len(), 32);
    assert!(storage.iter().all(|b| *b == 0));
    assert_eq!(pool.free_count(), 0);
}

#[test]
fn pool_reuses_returned_storage() {
    let mut pool = BufferPool::new(32, 2, Default::default());
    let storage = pool.get();
    let ptr = storage.as_ptr();
    pool.put(storage);
    assert_eq!(pool.free_count(), 1);
    let again = pool.get();
    assert_eq!(again.as_ptr(), ptr);
    assert_eq!(pool.free_count(), 0);
}

#[test]
fn pool_free_list_is_bounded() {
    let mut pool = BufferPool::new(32, 2, Default::default());
    let storages: Vec<_> = (0..5).map(|_| pool.get()).collect();
    for storage in storages {
        pool.put(storage);
    }
    assert_eq!(pool.free_count(), 2);
}

#[test]
fn pool_with_zero_max_free_keeps_nothing() {
    let mut pool = BufferPool::new(32, 0, Default::default());
    let storage = pool.get();
    pool.put(storage);
    assert_eq!(pool.free_count(), 0);
}

#[test]
fn pool_drops_mismatched_sizes() {
    let mut pool = BufferPool::new(32, 4, Default::default());
    pool.put(vec![0; 31]);
    pool.put(vec![0; 33]);
    pool.put(Vec::with_capacity(32));
    let mut shrunk = vec![0; 64];
    shrunk.truncate(32);
    pool.put(shrunk);
    assert_eq!(pool.free_count(), 0);
}

#[test]
fn pool_drops_storage_a_buffer_grew() {
    let mut pool = BufferPool::new(8, 4, Default::default());
    let mut buf = WatermarkBuffer::new(pool.get(), 8, 2);
    buf.extend_from_slice(&[1; 20]);
    pool.put(buf.into_storage());
    assert_eq!(pool.free_count(), 0);
    let buf = WatermarkBuffer::new(pool.get(), 8, 2);
    pool.put(buf.into_storage());
    assert_eq!(pool.free_count(), 1);
}

#[test]
fn head_buffer_starts_small_and_doubles_only_when_full() {
    let mut pool = BufferPool::new(64 * 1024, 4, Default::default());
    let mut head = pool.head(64 * 1024);
    assert_eq!(head.capacity(), HEAD_START);
    // A 37-byte partial head offered a 64 KiB read stays in the start size.
    assert_eq!(fill(&mut head, 0, 37).0, 37);
    assert_eq!(fill(&mut head, 0, 64 * 1024).0, HEAD_START - 37);
    assert_eq!(head.capacity(), HEAD_START);
    // Full: the next read doubles the storage, once.
    assert_eq!(fill(&mut head, 0, 64 * 1024).0, HEAD_START);
    assert_eq!(head.capacity(), 2 * HEAD_START);
    assert_eq!(head.pending(), 2 * HEAD_START);
}

#[test]
fn head_buffer_never_grows_past_the_head_limit() {
    let mut pool = BufferPool::new(64, 4, Default::default());
    let limit = 3 * HEAD_START / 2;
    let mut head = pool.head(limit);
    let mut total = 0;
    for _ in 0..10 {
        total += fill(&mut head, 0, usize::MAX).0;
    }
    assert_eq!(total, limit);
    assert_eq!(head.room(), 0);
    assert!(head.capacity() <= 2 * HEAD_START);
}

#[test]
fn head_storage_returns_to_its_own_free_list_unless_it_grew() {
    let mut pool = BufferPool::new(64, 4, Default::default());
    let head = pool.head(4096);
    pool.put_buffer(head);
    assert_eq!(pool.free_count(), 1);
    let mut grown = pool.head(4096);
    fill(&mut grown, 0, 4096);
    fill(&mut grown, 0, 4096);
    pool.put_buffer(grown);
    assert_eq!(pool.free_count(), 0);
}

#[test]
fn trim_drops_only_storages_a_whole_period_never_took() {
    let mut pool = BufferPool::new(32, 8, Default::default());
    let peak: Vec<_> = (0..6).map(|_| pool.get()).collect();
    for storage in peak {
        pool.put(storage);
    }
    // The period of the peak: the list was empty at its low point.
    assert_eq!(pool.trim(), 0);
    assert_eq!(pool.free_count(), 6);
    // One storage in use during the next period: five were never taken.
    let one = pool.get();
    pool.put(one);
    assert_eq!(pool.trim(), 5);
    assert_eq!(pool.free_count(), 1);
    assert!(pool.may_trim());
    assert_eq!(pool.trim(), 1);
    assert!(!pool.may_trim());
}

// ---- response-start buffers (issue 22) ----

#[test]
fn response_start_buffer_reads_a_head_and_a_16_kib_body_at_once() {
    let mut pool = BufferPool::new(32 * 1024, 4, Default::default());
    let mut buf = pool.response_head(64 * 1024);
    assert!(buf.is_lent());
    let (n, _) = fill(&mut buf, 0, RESPONSE_READ);
    assert_eq!(n, RESPONSE_READ);
    assert_eq!(buf.pending(), RESPONSE_READ);
}

#[test]
fn replace_front_puts_a_shorter_or_longer_head_in_place_of_the_raw_one() {
    let mut pool = BufferPool::new(32 * 1024, 4, Default::default());
    let mut buf = pool.response_head(64 * 1024);
    buf.extend_from_slice(b"RAWHEAD|body");
    // Shorter: the body bytes stay where they were.
    assert!(buf.replace_front(8, b"HEAD|"));
    assert_eq!(buf.as_slice(), b"HEAD|body");
    // Longer, into the headroom.
    assert!(buf.replace_front(5, b"A MUCH LONGER HEAD|"));
    assert_eq!(buf.as_slice(), b"A MUCH LONGER HEAD|body");
    // More than the headroom and the raw head: refused, nothing changes.
    let huge = vec![b'h'; LENT_HEADROOM + 64];
    assert!(!buf.replace_front(19, &huge));
    assert_eq!(buf.as_slice(), b"A MUCH LONGER HEAD|body");
    // More raw bytes than are pending: refused.
    assert!(!buf.replace_front(100, b"x"));
}

#[test]
fn an_emptied_response_start_buffer_gets_its_headroom_back() {
    let mut pool = BufferPool::new(32 * 1024, 4, Default::default());
    let mut buf = pool.response_head(64 * 1024);
    buf.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    buf.consume(buf.pending());
    buf.extend_from_slice(b"raw|");
    let longer = vec![b'h'; LENT_HEADROOM];
    assert!(
        buf.replace_front(4, &longer),
        "headroom restored when empty"
    );
    // A plain buffer has no headroom.
    let mut plain = WatermarkBuffer::new(vec![0; 64], 64, 8);
    plain.extend_from_slice(b"raw|");
    assert!(!plain.replace_front(4, b"longer|"));
    assert!(plain.replace_front(4, b"ok|"));
    assert_eq!(plain.as_slice(), b"ok|");
}

#[test]
fn a_response_start_buffer_carrying_a_body_pauses_at_its_new_mark_and_is_counted() {
    let stats = std::sync::Arc::new(crate::stats::Stats::default());
    let mut pool = BufferPool::new(32 * 1024, 4, stats.clone());
    let mut buf = pool.response_head(64 * 1024);
    fill(&mut buf, 0, RESPONSE_READ);
    assert_eq!(
        stats.snapshot().buffered_bytes,
        0,
        "a head is not body bytes"
    );
    buf.lent_into_body(16 * 1024, 4 * 1024);
    assert!(buf.is_paused());
    assert_eq!(buf.room(), 0);
    let s = stats.snapshot();
    assert_eq!((s.buffered_bytes, s.read_pauses), (RESPONSE_READ as u64, 1));
    assert_eq!(buf.consume(16 * 1024), Crossing::Low);
    assert_eq!(stats.snapshot().read_resumes, 1);
    pool.put_buffer(buf);
    assert_eq!(stats.snapshot().buffered_bytes, 0);
    assert_eq!(pool.free_count(), 1, "the storage went back to its list");
    assert!(pool.response_head(64 * 1024).is_lent());
    assert_eq!(pool.free_count(), 0, "and was taken again");
}

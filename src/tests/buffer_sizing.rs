//! Unit tests for the adaptive body-buffer rule (`crate::buffer::sizing`),
//! sans-IO: first the arithmetic over byte counts and durations, then a
//! pooled body buffer driven through full drains and stalls.

use std::time::Duration;

use crate::buffer::sizing::{BODY_START, PROBATION, STALL, Sizing, grown, marks_for};
use crate::buffer::{BufferPool, Crossing, WatermarkBuffer};
use crate::stats::Stats;

const KIB: usize = 1024;
const HIGH: usize = 64 * KIB;
const LOW: usize = 16 * KIB;

// ---- the arithmetic ----

#[test]
fn marks_scale_with_the_capacity_in_the_configured_ratio() {
    assert_eq!(marks_for(16 * KIB, HIGH, LOW), (16 * KIB, 4 * KIB));
    assert_eq!(marks_for(32 * KIB, HIGH, LOW), (32 * KIB, 8 * KIB));
    assert_eq!(marks_for(HIGH, HIGH, LOW), (HIGH, LOW));
}

#[test]
fn marks_keep_low_below_high_and_high_at_least_one() {
    assert_eq!(marks_for(8, 8, 8), (8, 7));
    assert_eq!(marks_for(0, 0, 0), (1, 0));
    assert_eq!(marks_for(16, 64, 0), (16, 0));
}

#[test]
fn no_growth_before_the_probation_then_doubling_up_to_max() {
    let p = PROBATION;
    assert_eq!(grown(16 * KIB, HIGH, p - 1), 16 * KIB);
    assert_eq!(grown(16 * KIB, HIGH, p), 32 * KIB);
    assert_eq!(grown(32 * KIB, HIGH, p + 1), HIGH);
    assert_eq!(grown(HIGH, HIGH, u64::MAX), HIGH);
    // A maximum that is not a power-of-two multiple is reached exactly.
    assert_eq!(grown(32 * KIB, 48 * KIB, p), 48 * KIB);
}

#[test]
fn a_new_sizing_starts_at_16_kib_or_the_high_watermark_if_smaller() {
    let s = Sizing::new(HIGH, LOW);
    assert_eq!(s.capacity(), BODY_START);
    assert_eq!(s.marks(), (16 * KIB, 4 * KIB));
    let small = Sizing::new(4096, 1024);
    assert_eq!(small.capacity(), 4096);
    assert_eq!(small.marks(), (4096, 1024));
}

#[test]
fn full_drains_grow_only_after_the_probation_then_on_each_one() {
    let mut s = Sizing::new(HIGH, LOW);
    let drains = (PROBATION as usize) / BODY_START;
    for i in 1..drains {
        assert!(!s.full_drain(BODY_START), "grew after {i} drains");
    }
    assert!(s.full_drain(BODY_START));
    assert_eq!(s.capacity(), 32 * KIB);
    assert!(s.full_drain(32 * KIB));
    assert_eq!(s.capacity(), HIGH);
    assert!(!s.full_drain(HIGH), "never past the high watermark");
    assert_eq!(s.marks(), (HIGH, LOW));
}

#[test]
fn a_reader_absorbing_a_kernel_send_buffer_then_stalling_never_grows() {
    // What a reader that reads nothing looks like: 4 MiB taken at once
    // (the send buffer filling), then seconds without a byte; then a third
    // of the send buffer each time it drains, again and again.
    let mut s = Sizing::new(HIGH, LOW);
    for _ in 0..(4 * 1024 * KIB / BODY_START) {
        s.full_drain(BODY_START);
    }
    s.sink_waited(Duration::from_secs(3));
    for _ in 0..100 {
        for _ in 0..(1400 * KIB / BODY_START) {
            assert!(!s.full_drain(BODY_START));
        }
        assert!(!s.sink_waited(Duration::from_secs(4)));
    }
    assert_eq!(s.capacity(), BODY_START);
}

#[test]
fn short_waits_of_a_fast_sink_keep_the_streak_and_the_size() {
    let mut s = Sizing::new(HIGH, LOW);
    let mut grew = false;
    for _ in 0..(2 * PROBATION as usize / BODY_START) {
        grew |= s.full_drain(s.capacity());
        assert!(!s.sink_waited(STALL - Duration::from_millis(1)));
    }
    assert!(grew);
    assert_eq!(s.capacity(), HIGH);
}

#[test]
fn a_stall_takes_a_grown_buffer_back_to_the_start_size_and_restarts_the_streak() {
    let mut s = Sizing::new(HIGH, LOW);
    while s.capacity() < HIGH {
        s.full_drain(HIGH);
    }
    assert!(s.sink_waited(STALL));
    assert_eq!(s.capacity(), BODY_START);
    assert!(!s.sink_waited(STALL), "already at the start size");
    // The whole probation again before it grows.
    assert!(!s.full_drain(PROBATION as usize - 1));
    assert!(s.full_drain(1));
}

// ---- a pooled body buffer ----

fn pool() -> BufferPool {
    BufferPool::new(HIGH, 4, Default::default())
}

/// Reads as much as the buffer takes (a source with more than a buffer).
fn fill_all(buf: &mut WatermarkBuffer) -> (usize, Crossing) {
    buf.fill_with(usize::MAX, |space| {
        space.fill(7);
        Ok(space.len())
    })
    .expect("closure never fails")
}

/// Full drains until the buffer's capacity changed or `bytes` moved.
fn pump(buf: &mut WatermarkBuffer, bytes: usize) -> usize {
    let mut moved = 0;
    while moved < bytes {
        let (n, crossing) = fill_all(buf);
        assert_eq!(crossing, Crossing::High, "a full read pauses");
        assert_eq!(buf.consume(n), Crossing::Low);
        moved += n;
    }
    moved
}

#[test]
fn a_body_buffer_starts_at_16_kib_with_scaled_marks() {
    let mut pool = pool();
    let buf = pool.body(HIGH, LOW);
    assert_eq!(buf.capacity(), BODY_START);
    assert_eq!((buf.high(), buf.low()), (16 * KIB, 4 * KIB));
    assert_eq!(buf.room(), 16 * KIB);
}

#[test]
fn a_body_buffer_drained_as_fast_as_it_fills_grows_to_the_high_watermark() {
    let mut pool = pool();
    let mut buf = pool.body(HIGH, LOW);
    pump(&mut buf, PROBATION as usize);
    assert_eq!(buf.high(), 32 * KIB);
    assert_eq!(fill_all(&mut buf).0, 32 * KIB);
    assert_eq!(buf.capacity(), 32 * KIB);
    buf.consume(32 * KIB);
    assert_eq!(fill_all(&mut buf).0, HIGH);
    assert_eq!((buf.capacity(), buf.high(), buf.low()), (HIGH, HIGH, LOW));
}

#[test]
fn partial_writes_and_unfilled_reads_are_not_full_drains() {
    let mut pool = pool();
    let mut buf = pool.body(HIGH, LOW);
    for _ in 0..(2 * PROBATION as usize / BODY_START) {
        // The sink takes all but one byte, then the rest.
        let (n, _) = fill_all(&mut buf);
        buf.consume(n - 1);
        buf.consume(1);
        // A short read (the source had less than the room) drained whole.
        buf.fill_with(100, |s| Ok(s.len())).expect("no error");
        buf.consume(100);
    }
    assert_eq!(buf.capacity(), BODY_START);
}

#[test]
fn a_stalled_grown_buffer_keeps_its_bytes_and_shrinks_once_they_fit() {
    let mut pool = pool();
    let mut buf = pool.body(HIGH, LOW);
    pump(&mut buf, PROBATION as usize + 32 * KIB);
    let (n, crossing) = fill_all(&mut buf);
    assert_eq!((n, crossing), (HIGH, Crossing::High));
    // A short wait changes nothing; a stall lowers the marks at once.
    buf.sink_waited(STALL / 2);
    assert_eq!(buf.high(), HIGH);
    buf.sink_waited(STALL);
    assert_eq!((buf.high(), buf.low()), (16 * KIB, 4 * KIB));
    assert!(buf.is_paused(), "still full: no read");
    assert_eq!(buf.room(), 0);
    assert_eq!(buf.pending(), HIGH, "no byte dropped");
    assert_eq!(buf.capacity(), HIGH);
    // Draining to 16 KiB gives the storage back, bytes kept in order.
    assert_eq!(buf.consume(HIGH - 16 * KIB), Crossing::None);
    assert_eq!(buf.capacity(), 16 * KIB);
    assert_eq!(buf.as_slice(), &[7; 16 * KIB][..]);
    assert_eq!(buf.consume(12 * KIB), Crossing::Low);
    assert_eq!(fill_all(&mut buf).0, 12 * KIB);
    assert_eq!(buf.capacity(), 16 * KIB);
}

#[test]
fn a_wait_on_a_buffer_that_is_not_full_is_no_stall() {
    let mut pool = pool();
    let mut buf = pool.body(HIGH, LOW);
    pump(&mut buf, PROBATION as usize + 32 * KIB);
    buf.fill_with(10, |s| Ok(s.len())).expect("no error");
    buf.sink_waited(Duration::from_secs(60));
    assert_eq!(buf.high(), HIGH);
}

#[test]
fn a_bare_buffer_never_changes_size() {
    let mut buf = WatermarkBuffer::new(vec![0; 16], 16, 4);
    for _ in 0..10 {
        fill_all(&mut buf);
        buf.consume(16);
    }
    fill_all(&mut buf);
    buf.sink_waited(Duration::from_secs(60));
    assert_eq!((buf.capacity(), buf.high(), buf.low()), (16, 16, 4));
}

#[test]
fn meters_settle_across_growth_and_shrink() {
    let stats = std::sync::Arc::new(Stats::default());
    let mut pool = BufferPool::new(HIGH, 4, stats.clone());
    let mut buf = pool.body(HIGH, LOW);
    pump(&mut buf, PROBATION as usize + 32 * KIB);
    fill_all(&mut buf);
    buf.sink_waited(STALL);
    buf.consume(HIGH - 100);
    let s = stats.snapshot();
    assert_eq!(s.buffered_bytes, 100);
    assert_eq!(s.buffers_in_use, 1);
    assert_eq!(s.read_pauses, s.read_resumes);
    drop(buf);
    let s = stats.snapshot();
    assert_eq!((s.buffered_bytes, s.buffers_in_use), (0, 0));
}

#[test]
fn only_start_size_body_storages_go_back_to_the_free_list() {
    let mut pool = pool();
    let small = pool.body(HIGH, LOW);
    pool.put_buffer(small);
    assert_eq!(pool.free_count(), 1);
    let mut grown = pool.body(HIGH, LOW);
    pump(&mut grown, PROBATION as usize + 32 * KIB);
    fill_all(&mut grown);
    pool.put_buffer(grown);
    assert_eq!(pool.free_count(), 0, "the grown storage is dropped");
    // A buffer that grew and shrank back is the start size again.
    let mut back = pool.body(HIGH, LOW);
    pump(&mut back, PROBATION as usize + 32 * KIB);
    fill_all(&mut back);
    back.sink_waited(STALL);
    back.clear();
    assert_eq!(back.capacity(), BODY_START);
    pool.put_buffer(back);
    assert_eq!(pool.free_count(), 1);
}

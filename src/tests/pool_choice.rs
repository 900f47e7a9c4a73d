//! Unit tests for the pool's choice rule (`IdlePool::choose`,
//! `idle_limit`): plain LIFO when nothing is known, retirement before a
//! learned idle limit, and what a non-idempotent request may not risk.

use crate::idle_limit::{BUCKET_BASE, IdleRule, QUICK_CLOSE, WINDOW};
use crate::pool::{Choice, IdlePool};
use std::time::{Duration, Instant};

const PEER: &str = "p";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A pool with ids parked at `base + ages[i]` before `now`... given as
/// idle ages at `now`, oldest first.
fn pool_with(now: Instant, idle_ms: &[u64]) -> IdlePool<&'static str> {
    let mut pool = IdlePool::new(16, 16, Duration::from_secs(60));
    for (id, age) in idle_ms.iter().enumerate() {
        assert!(pool.put(PEER, id, now - ms(*age)).is_none());
    }
    pool
}

fn take(choice: Choice) -> Option<(usize, bool)> {
    match choice {
        Choice::Take { id, older, .. } => Some((id, older)),
        _ => None,
    }
}

#[test]
fn nothing_learned_is_plain_lifo_for_every_method() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool = pool_with(now, &[5000, 10, 0]);
    assert_eq!(pool.rule(&PEER, now), IdleRule::UNKNOWN);
    assert_eq!(take(pool.choose(&PEER, now, false)), Some((2, false)));
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((1, false)));
    assert_eq!(
        pool.choose(&"other", now, false),
        Choice::Open { for_risk: false }
    );
}

#[test]
fn closes_at_the_idle_limit_retire_connections_before_it_for_every_method() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool = pool_with(now, &[980, 900, 300]);
    pool.observe_close(&PEER, ms(1000), now);
    let rule = pool.rule(&PEER, now);
    assert_eq!(rule.retire_after, ms(1000) - ms(1000) / 32);
    assert_eq!(rule.risky_max_idle, ms(875));
    // The oldest (980 ms) is past 968.75 ms: retired first, whatever the method.
    assert_eq!(pool.choose(&PEER, now, true), Choice::Retire(0));
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((2, false)));
    // A POST may not take one idle 900 ms (> seven eighths of the limit).
    assert_eq!(
        pool.choose(&PEER, now, false),
        Choice::Open { for_risk: true }
    );
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((1, false)));
}

#[test]
fn the_smallest_recent_close_is_the_limit_and_a_hint_counts_too() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    pool.observe_close(&PEER, ms(3000), now);
    pool.observe_close(&PEER, ms(500), now);
    pool.observe_close(&PEER, ms(2000), now);
    assert_eq!(pool.rule(&PEER, now).risky_max_idle, ms(400));
    pool.observe_hint(&PEER, ms(200), now);
    // 175 ms would leave less than 100 ms before the limit.
    assert_eq!(pool.rule(&PEER, now).risky_max_idle, ms(100));
    assert_eq!(pool.rule(&PEER, now).retire_after, ms(180));
}

#[test]
fn closes_are_forgotten_after_two_windows_but_not_after_one() {
    let t0 = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    pool.observe_close(&PEER, ms(500), t0);
    let t1 = t0 + WINDOW + ms(1);
    assert_eq!(pool.rule(&PEER, t1).risky_max_idle, ms(400));
    let t2 = t1 + WINDOW + ms(1);
    assert_eq!(pool.rule(&PEER, t2).risky_max_idle, Duration::MAX);
}

#[test]
fn after_closes_right_after_responses_a_post_skips_just_parked_connections() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool = pool_with(now, &[40, 2, 0]);
    pool.observe_close(&PEER, ms(3), now);
    assert!(ms(3) < QUICK_CLOSE);
    let rule = pool.rule(&PEER, now);
    // 3 ms rounds up to 125 µs times a power of two.
    assert_eq!(rule.risky_min_idle, ms(4));
    // A quick close is not an idle limit: nothing is retired.
    assert_eq!(rule.retire_after, Duration::MAX);
    // GET: LIFO.
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((2, false)));
    // POST: the 2 ms one is passed over, the 40 ms one taken.
    assert_eq!(take(pool.choose(&PEER, now, false)), Some((0, true)));
    // Only a fresh one left: a new connection rather than a gamble.
    assert_eq!(
        pool.choose(&PEER, now, false),
        Choice::Open { for_risk: true }
    );
    assert_eq!(pool.len(), 1);
}

#[test]
fn the_fresh_guard_is_the_90th_percentile_between_125_us_and_100_ms() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    pool.observe_close(&PEER, Duration::ZERO, now);
    assert_eq!(pool.rule(&PEER, now).risky_min_idle, BUCKET_BASE);
    // 19 closes at 10 ms and one stalled at 90 ms: the stall is the top 5 %.
    for _ in 0..18 {
        pool.observe_close(&PEER, ms(10), now);
    }
    pool.observe_close(&PEER, ms(90), now);
    assert_eq!(pool.rule(&PEER, now).risky_min_idle, ms(16));
    for _ in 0..10 {
        pool.observe_close(&PEER, ms(90), now);
    }
    assert_eq!(pool.rule(&PEER, now).risky_min_idle, ms(100));
}

#[test]
fn a_post_to_a_server_seen_closing_after_responses_is_always_checked() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    // Nothing learned: a hot connection is taken without a check.
    assert!(!pool.needs_check(&PEER, ms(10), now, false));
    pool.observe_close(&PEER, ms(1), now);
    let guard = pool.rule(&PEER, now).risky_min_idle;
    assert_eq!(guard, ms(2));
    // Past the guard and hot: a GET goes unchecked, a POST is checked.
    assert!(!pool.needs_check(&PEER, ms(10), now, true));
    assert!(pool.needs_check(&PEER, ms(10), now, false));
    // Inside the guard, both are.
    assert!(pool.needs_check(&PEER, ms(1), now, true));
}

/// `responses` responses of which the server closed every `every`-th one
/// right after it (a FIN with the answer, or 200 µs after parking).
fn closing_every(pool: &mut IdlePool<&'static str>, now: Instant, responses: usize, every: usize) {
    for i in 0..responses {
        let id = 1000 + i;
        if i % every == 0 {
            if i % 2 == 0 {
                pool.observe_close_with_answer(&PEER, now);
            } else {
                assert!(pool.put(PEER, id, now).is_none());
                assert!(pool.remove(id));
                pool.observe_close(&PEER, Duration::from_micros(200), now);
            }
        } else {
            assert!(pool.put(PEER, id, now).is_none());
            assert!(pool.remove(id));
        }
    }
}

#[test]
fn a_server_closing_after_responses_as_a_rule_gets_no_just_parked_connection_for_any_method() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(16, 16, Duration::from_secs(60));
    closing_every(&mut pool, now, 40, 1);
    let rule = pool.rule(&PEER, now);
    assert!(rule.closes_as_a_rule, "{rule:?}");
    assert_eq!(rule.risky_min_idle, QUICK_CLOSE);
    assert!(pool.put(PEER, 1, now - ms(150)).is_none());
    assert!(pool.put(PEER, 2, now - ms(1)).is_none());
    // A GET passes over the fresh one too (it would be sent twice), and
    // takes the one that outlived the guard, checked.
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((1, true)));
    assert!(pool.needs_check(&PEER, ms(150), now, true));
    assert_eq!(
        pool.choose(&PEER, now, true),
        Choice::Open { for_risk: true }
    );
}

#[test]
fn a_server_closing_a_few_connections_keeps_lifo_for_gets() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(16, 16, Duration::from_secs(60));
    // One response in eight closed: a habit, not a rule.
    closing_every(&mut pool, now, 64, 8);
    let rule = pool.rule(&PEER, now);
    assert!(!rule.closes_as_a_rule, "{rule:?}");
    assert!(pool.put(PEER, 1, now - ms(150)).is_none());
    assert!(pool.put(PEER, 2, now - ms(1)).is_none());
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((2, false)));
}

#[test]
fn the_share_of_closes_needs_a_sample_before_it_is_a_rule() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool: IdlePool<&str> = IdlePool::new(16, 16, Duration::from_secs(60));
    closing_every(&mut pool, now, 8, 1);
    assert!(!pool.rule(&PEER, now).closes_as_a_rule);
    closing_every(&mut pool, now, 8, 1);
    assert!(pool.rule(&PEER, now).closes_as_a_rule);
}

#[test]
fn idle_closes_at_scattered_ages_retire_nothing_but_posts_still_pass_old_connections_over() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool = pool_with(now, &[600, 10]);
    // The server closed idle connections at 0.5 s and at 2.5 s: no one
    // limit, only the earliest seen.
    pool.observe_close(&PEER, ms(500), now);
    pool.observe_close(&PEER, ms(2500), now);
    let rule = pool.rule(&PEER, now);
    assert!(!rule.limit_is_sharp, "{rule:?}");
    assert_eq!(rule.risky_max_idle, ms(400));
    // A POST takes the 10 ms one, then passes the 600 ms one over (no
    // retiring it: a GET may still use it, checked).
    assert_eq!(take(pool.choose(&PEER, now, false)), Some((1, false)));
    assert_eq!(
        pool.choose(&PEER, now, false),
        Choice::Open { for_risk: true }
    );
    assert!(pool.needs_check(&PEER, ms(600), now, true));
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((0, false)));
}

#[test]
fn idle_closes_that_agree_are_one_limit_and_retire_for_every_method() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut pool = pool_with(now, &[990, 10]);
    pool.observe_close(&PEER, ms(1000), now);
    pool.observe_close(&PEER, ms(1030), now);
    assert!(pool.rule(&PEER, now).limit_is_sharp);
    // Past the limit minus a 32nd: retired before a GET too.
    assert_eq!(pool.choose(&PEER, now, true), Choice::Retire(0));
    assert_eq!(take(pool.choose(&PEER, now, true)), Some((1, false)));
}

#[test]
fn what_was_learned_is_taken_over_by_another_pool_and_ages_there() {
    let now = Instant::now() + Duration::from_secs(100);
    let mut old: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    old.observe_close(&PEER, ms(1000), now);
    for age in [40, 50, 60] {
        old.observe_close(&PEER, Duration::from_micros(age * 10), now);
    }
    let want = old.rule(&PEER, now);
    let learned = old.export_limits(now);
    assert_eq!(learned.len(), 1);
    // Through its portable form, as a worker of a reload reads it.
    let json = serde_json::to_string(&learned[0].1).unwrap();
    let back: crate::idle_limit::PortableLearned = serde_json::from_str(&json).unwrap();
    let mut new: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    new.import_limit(PEER, &back, Duration::ZERO, now);
    assert_eq!(new.rule(&PEER, now), want);
    // Taken over two windows later: forgotten, as it would be in the old
    // pool.
    let mut late: IdlePool<&str> = IdlePool::new(4, 4, Duration::from_secs(60));
    late.import_limit(PEER, &back, 2 * WINDOW, now);
    assert_eq!(late.rule(&PEER, now).retire_after, Duration::MAX);
}

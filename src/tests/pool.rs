//! Unit tests for `crate::pool`: LIFO per key, exact caps with the right
//! victims, removal, expiry order, and a long deterministic random walk.

use super::Lcg;
use crate::pool::{EvictReason, IdlePool};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

fn secs(base: Instant, s: u64) -> Instant {
    base + Duration::from_secs(s)
}

#[test]
fn empty_pool_has_nothing() {
    let mut pool: IdlePool<&str> = IdlePool::new(4, 8, TIMEOUT);
    assert!(pool.is_empty());
    assert_eq!(pool.len(), 0);
    assert_eq!(pool.take(&"a"), None);
    assert_eq!(pool.next_deadline(), None);
    assert_eq!(pool.pop_expired(Instant::now()), None);
    assert!(!pool.remove(1));
}

#[test]
fn take_is_lifo_per_key() {
    let now = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    for id in [1, 2, 3] {
        assert_eq!(pool.put("a", id, now), None);
    }
    pool.put("b", 10, now);
    assert_eq!(pool.take(&"a"), Some(3));
    assert_eq!(pool.take(&"a"), Some(2));
    assert_eq!(pool.take(&"a"), Some(1));
    assert_eq!(pool.take(&"a"), None);
    assert_eq!(pool.take(&"b"), Some(10));
    assert!(pool.is_empty());
}

#[test]
fn per_peer_cap_evicts_that_peers_oldest() {
    let base = Instant::now();
    let mut pool = IdlePool::new(16, 1000, TIMEOUT);
    let mut evicted = Vec::new();
    for id in 0..20 {
        if let Some(victim) = pool.put("a", id, secs(base, id as u64)) {
            evicted.push(victim);
        }
    }
    assert_eq!(pool.len_for(&"a"), 16);
    assert_eq!(pool.len(), 16);
    let expected: Vec<_> = (0..4).map(|id| (id, EvictReason::PeerCap)).collect();
    assert_eq!(evicted, expected);
    for id in 0..4 {
        assert!(!pool.contains(id));
    }
    assert_eq!(pool.take(&"a"), Some(19));
}

#[test]
fn per_peer_cap_leaves_other_peers_alone() {
    let now = Instant::now();
    let mut pool = IdlePool::new(2, 100, TIMEOUT);
    pool.put("b", 100, now);
    pool.put("a", 1, now);
    pool.put("a", 2, now);
    assert_eq!(pool.put("a", 3, now), Some((1, EvictReason::PeerCap)));
    assert!(pool.contains(100));
}

#[test]
fn global_cap_evicts_globally_oldest_across_keys() {
    let base = Instant::now();
    let mut pool = IdlePool::new(10, 3, TIMEOUT);
    assert_eq!(pool.put("a", 1, secs(base, 0)), None);
    assert_eq!(pool.put("b", 2, secs(base, 1)), None);
    assert_eq!(pool.put("a", 3, secs(base, 2)), None);
    assert_eq!(
        pool.put("b", 4, secs(base, 3)),
        Some((1, EvictReason::GlobalCap))
    );
    assert_eq!(
        pool.put("c", 5, secs(base, 4)),
        Some((2, EvictReason::GlobalCap))
    );
    assert_eq!(pool.len(), 3);
    assert_eq!(
        (pool.len_for(&"a"), pool.len_for(&"b"), pool.len_for(&"c")),
        (1, 1, 1)
    );
}

#[test]
fn global_oldest_ties_break_by_put_order() {
    let now = Instant::now();
    let mut pool = IdlePool::new(10, 2, TIMEOUT);
    pool.put("b", 7, now);
    pool.put("a", 3, now);
    assert_eq!(pool.put("a", 9, now), Some((7, EvictReason::GlobalCap)));
}

#[test]
fn peer_cap_wins_over_global_cap_with_one_eviction() {
    let now = Instant::now();
    let mut pool = IdlePool::new(2, 3, TIMEOUT);
    pool.put("b", 1, now);
    pool.put("a", 2, now);
    pool.put("a", 3, now);
    // Full globally and for "a": only a's oldest goes, "b" stays.
    assert_eq!(pool.put("a", 4, now), Some((2, EvictReason::PeerCap)));
    assert_eq!(pool.len(), 3);
    assert!(pool.contains(1));
}

#[test]
fn zero_caps_return_the_id_itself() {
    let now = Instant::now();
    let mut per_peer = IdlePool::new(0, 10, TIMEOUT);
    assert_eq!(per_peer.put("a", 5, now), Some((5, EvictReason::PeerCap)));
    assert!(per_peer.is_empty());
    let mut total = IdlePool::new(10, 0, TIMEOUT);
    assert_eq!(total.put("a", 6, now), Some((6, EvictReason::GlobalCap)));
    assert!(total.is_empty());
}

#[test]
fn removed_id_is_never_taken() {
    let now = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    for id in [1, 2, 3] {
        pool.put("a", id, now);
    }
    assert!(pool.remove(3));
    assert!(pool.remove(1));
    assert!(!pool.remove(1), "second remove finds nothing");
    assert_eq!(pool.len(), 1);
    assert_eq!(pool.take(&"a"), Some(2));
    assert_eq!(pool.take(&"a"), None);
}

#[test]
fn removed_id_does_not_expire_later() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    pool.put("a", 1, base);
    pool.put("a", 2, secs(base, 1));
    pool.remove(1);
    assert_eq!(pool.next_deadline(), Some(secs(base, 61)));
    assert_eq!(pool.pop_expired(secs(base, 1000)), Some(2));
    assert_eq!(pool.pop_expired(secs(base, 1000)), None);
}

#[test]
fn pop_expired_returns_oldest_first_at_deadline() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    pool.put("a", 1, secs(base, 0));
    pool.put("b", 2, secs(base, 5));
    pool.put("a", 3, secs(base, 10));
    assert_eq!(pool.next_deadline(), Some(secs(base, 60)));
    // One tick before the deadline: nothing.
    let before = secs(base, 60) - Duration::from_nanos(1);
    assert_eq!(pool.pop_expired(before), None);
    // At the deadline exactly: the oldest.
    assert_eq!(pool.pop_expired(secs(base, 60)), Some(1));
    assert_eq!(pool.pop_expired(secs(base, 60)), None);
    assert_eq!(pool.next_deadline(), Some(secs(base, 65)));
    // Well after every deadline: all, in order.
    let late = secs(base, 500);
    assert_eq!(pool.pop_expired(late), Some(2));
    assert_eq!(pool.pop_expired(late), Some(3));
    assert_eq!(pool.pop_expired(late), None);
    assert_eq!(pool.next_deadline(), None);
    assert!(pool.is_empty());
}

#[test]
fn take_moves_next_deadline() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    pool.put("a", 1, secs(base, 0));
    pool.put("b", 2, secs(base, 3));
    assert_eq!(pool.take(&"a"), Some(1));
    assert_eq!(pool.next_deadline(), Some(secs(base, 63)));
}

#[test]
fn max_timeout_never_expires() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, Duration::MAX);
    pool.put("a", 1, base);
    assert_eq!(pool.next_deadline(), None);
    assert_eq!(pool.pop_expired(secs(base, 1_000_000)), None);
    assert!(pool.contains(1));
}

#[test]
fn drain_returns_everything_oldest_first() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, TIMEOUT);
    pool.put("a", 1, secs(base, 0));
    pool.put("b", 2, secs(base, 1));
    pool.put("a", 3, secs(base, 2));
    assert_eq!(pool.drain(), vec![1, 2, 3]);
    assert!(pool.is_empty());
    assert_eq!(pool.len_for(&"a"), 0);
    assert_eq!(pool.take(&"a"), None);
    assert_eq!(pool.next_deadline(), None);
    pool.put("a", 1, base);
    assert_eq!(pool.take(&"a"), Some(1));
}

#[test]
fn random_walk_keeps_caps_and_counts() {
    const PER_PEER: usize = 5;
    const TOTAL: usize = 12;
    let base = Instant::now();
    let mut pool = IdlePool::new(PER_PEER, TOTAL, Duration::from_secs(30));
    let mut rng = Lcg(0x5eed);
    // The model: which key each parked id is under.
    let mut model: HashMap<usize, u64> = HashMap::new();
    // When each parked id was parked (ids grow with puts, so (time, id)
    // orders them as the pool must).
    let mut since: HashMap<usize, u64> = HashMap::new();
    let mut next_id = 0usize;
    let mut clock = 0u64;
    let mut evictions = 0usize;
    for _ in 0..20_000 {
        clock += rng.below(3);
        let now = secs(base, clock);
        let key = rng.below(4);
        match rng.below(10) {
            0..=4 => {
                let id = next_id;
                next_id += 1;
                let oldest = since.iter().map(|(&i, &t)| (t, i)).min();
                if let Some((victim, reason)) = pool.put(key, id, now) {
                    evictions += 1;
                    let victim_key = model.remove(&victim).expect("victim was parked");
                    since.remove(&victim);
                    if reason == EvictReason::PeerCap {
                        assert_eq!(victim_key, key);
                    } else {
                        assert_eq!(oldest.map(|(_, i)| i), Some(victim), "globally oldest");
                    }
                }
                model.insert(id, key);
                since.insert(id, clock);
            }
            5..=7 => {
                if let Some(id) = pool.take(&key) {
                    assert_eq!(model.remove(&id), Some(key));
                    since.remove(&id);
                    let newer = model.iter().any(|(other, k)| *k == key && *other > id);
                    assert!(!newer, "take must return the newest id of the key");
                }
            }
            8 => {
                let id = rng.below(next_id.max(1) as u64) as usize;
                assert_eq!(pool.remove(id), model.remove(&id).is_some());
                since.remove(&id);
                assert!(!pool.contains(id));
            }
            _ => {
                let oldest = since.iter().map(|(&i, &t)| (t, i)).min();
                if let Some(id) = pool.pop_expired(now) {
                    assert_eq!(oldest.map(|(_, i)| i), Some(id), "oldest expires first");
                    assert!(model.remove(&id).is_some());
                    since.remove(&id);
                }
                while let Some(id) = pool.pop_expired(now) {
                    assert!(model.remove(&id).is_some());
                    since.remove(&id);
                }
                if let Some(deadline) = pool.next_deadline() {
                    assert!(deadline > now);
                }
            }
        }
        assert!(pool.len() <= TOTAL);
        let mut sum = 0;
        for key in 0..4 {
            let n = pool.len_for(&key);
            assert!(n <= PER_PEER);
            assert_eq!(n, model.values().filter(|k| **k == key).count());
            sum += n;
        }
        assert_eq!(pool.len(), sum);
        assert_eq!(pool.len(), model.len());
        assert_eq!(pool.is_empty(), model.is_empty());
        assert!(
            pool.order_len() <= 2 * (pool.len() + 1) + 64,
            "order stays compact"
        );
    }
    assert!(evictions > 0, "the walk should hit a cap");
    let drained: HashSet<usize> = pool.drain().into_iter().collect();
    let expected: HashSet<usize> = model.keys().copied().collect();
    assert_eq!(drained, expected);
}

#[test]
fn pop_oldest_takes_the_globally_oldest_whatever_its_deadline() {
    let t0 = std::time::Instant::now();
    let mut pool: IdlePool<&str> = IdlePool::new(8, 8, std::time::Duration::from_secs(60));
    assert_eq!(pool.put("a", 1, t0), None);
    assert_eq!(
        pool.put("b", 2, t0 + std::time::Duration::from_millis(1)),
        None
    );
    assert_eq!(pool.pop_oldest(), Some(1));
    assert!(!pool.contains(1));
    assert_eq!(pool.take(&"b"), Some(2));
    assert_eq!(pool.pop_oldest(), None);
}

#[test]
fn a_put_with_an_earlier_time_is_ordered_by_its_time() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 8, Duration::from_secs(30));
    pool.put("a", 1, secs(base, 10));
    pool.put("b", 2, secs(base, 5));
    pool.put("c", 3, secs(base, 7));
    pool.put("d", 4, secs(base, 7));
    assert_eq!(pool.next_deadline(), Some(secs(base, 35)));
    assert_eq!(pool.pop_oldest(), Some(2));
    assert_eq!(pool.pop_oldest(), Some(3));
    assert_eq!(pool.pop_oldest(), Some(4));
    assert_eq!(pool.pop_oldest(), Some(1));
    assert_eq!(pool.pop_oldest(), None);
}

#[test]
fn removals_behind_a_long_idle_connection_do_not_grow_the_order() {
    let base = Instant::now();
    let mut pool = IdlePool::new(8, 64, Duration::from_secs(3600));
    pool.put("old", 0, base);
    for i in 1..10_000 {
        let now = secs(base, 1) + Duration::from_micros(i as u64);
        pool.put("b", 2 * i, now);
        pool.put("c", 2 * i + 1, now);
        // The middle entry dies; the newest stays.
        assert_eq!(pool.take(&"b"), Some(2 * i));
        assert!(pool.order_len() <= 2 * (pool.len() + 1) + 64);
    }
    assert_eq!(pool.pop_oldest(), Some(0), "the oldest is still first");
    assert_eq!(pool.len(), 8, "c holds its cap");
}

//! Idle upstream connections by peer key, as plain ids (ARCHITECTURE.md §7).
//!
//! Why: reusing a kept-alive upstream connection saves a TCP (and later TLS)
//! handshake per request. This module decides which idle connection to reuse
//! and which to close: newest first per peer (LIFO: the one least likely to
//! have hit the upstream's keep-alive timeout), a per-peer cap, a global cap
//! that evicts the globally oldest idle connection, and one idle timeout.
//!
//! What it must not know: HTTP, mio, sockets, the clock. It manages plain
//! `usize` ids the caller chose (e.g. slab keys); time comes in as `now`.
//! The caller owns the sockets: every id this pool returns from
//! [`IdlePool::put`], [`IdlePool::pop_expired`] or [`IdlePool::drain`] is the
//! caller's to close, and whether a connection may be parked at all is
//! decided outside the pool.
//!
//! Invariants kept (single-threaded, so the caps hold exactly):
//! - Each parked id is in exactly three places: its peer's stack, the global
//!   order, and the id map; `len()` is the size of each view.
//! - `len_for(key) <= max_per_peer` and `len() <= max_total` after every call.
//! - A peer's stack is in put order (oldest first, newest last) and a peer
//!   with no parked id has no stack.
//! - The global order is by (parked time, put sequence): its first entry is
//!   the globally oldest id and, since all ids share one idle timeout, the
//!   one with the earliest deadline.
//!
//! Costs: `put`, `take`, `remove`, `pop_expired` are O(log n) plus
//! O(per-peer cap) for a removal inside a peer's stack.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Why [`IdlePool::put`] evicted an id (for the caller's debug log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    /// The peer already held `max_per_peer` idle ids: its oldest went.
    PeerCap,
    /// The pool already held `max_total` idle ids: the globally oldest went.
    GlobalCap,
    /// The id stayed idle for the whole idle timeout.
    IdleTimeout,
}

/// Where a parked id lives, so any view can find it in the others.
#[derive(Debug)]
struct Parked<K> {
    /// The peer whose stack holds the id.
    key: K,
    /// When it was parked; its deadline is this plus the idle timeout.
    parked_at: Instant,
    /// Put sequence number: breaks ties between equal `parked_at`.
    seq: u64,
}

/// Peers whose emptied LIFO stack is kept for reuse; past this many
/// peers, an emptied stack is dropped so peers that come and go cannot
/// grow the map without bound.
const KEEP_EMPTY_STACKS: usize = 1024;

/// Idle upstream connection ids by peer key `K`: LIFO per peer, per-peer and
/// global caps, idle deadlines.
#[derive(Debug)]
pub struct IdlePool<K> {
    /// Most idle ids one peer key may hold.
    max_per_peer: usize,
    /// Most idle ids the whole pool may hold.
    max_total: usize,
    /// How long an id may stay parked before [`IdlePool::pop_expired`]
    /// returns it.
    idle_timeout: Duration,
    /// Per peer: parked ids, oldest first, newest last.
    peers: HashMap<K, Vec<usize>>,
    /// Every parked id by (parked time, put sequence): oldest first.
    order: BTreeMap<(Instant, u64), usize>,
    /// Every parked id: its key and its place in `order`.
    parked: HashMap<usize, Parked<K>>,
    /// Sequence number for the next put.
    next_seq: u64,
}

impl<K: Clone + Eq + Hash> IdlePool<K> {
    /// An empty pool keeping at most `max_per_peer` idle ids per key and
    /// `max_total` in all, each for at most `idle_timeout`
    /// (`Duration::MAX` means they never expire).
    pub fn new(max_per_peer: usize, max_total: usize, idle_timeout: Duration) -> Self {
        IdlePool {
            max_per_peer,
            max_total,
            idle_timeout,
            peers: HashMap::new(),
            order: BTreeMap::new(),
            parked: HashMap::new(),
            next_seq: 0,
        }
    }

    /// Parks `id` (unique; a `usize` the caller chose) under `key`, idle
    /// since `now`.
    ///
    /// Keeps the caps exactly: if the peer already holds `max_per_peer` ids,
    /// that peer's oldest id is evicted ([`EvictReason::PeerCap`]); else if
    /// the pool holds `max_total` ids, the globally oldest id is evicted
    /// ([`EvictReason::GlobalCap`]). At most one eviction per put. If a cap
    /// is 0, `id` itself is returned as evicted and not parked. Returns the
    /// evicted id for the caller to close.
    ///
    /// Parking an id that is already parked is a caller bug: it is moved
    /// (as if removed first) and counts as newest.
    pub fn put(&mut self, key: K, id: usize, now: Instant) -> Option<(usize, EvictReason)> {
        if self.max_per_peer == 0 {
            return Some((id, EvictReason::PeerCap));
        }
        if self.max_total == 0 {
            return Some((id, EvictReason::GlobalCap));
        }
        if self.contains(id) {
            debug_assert!(false, "IdlePool::put: id {id} is already parked");
            self.remove(id);
        }
        let evicted = if self.len_for(&key) >= self.max_per_peer {
            self.peer_oldest(&key)
                .filter(|&old| self.remove(old))
                .map(|old| (old, EvictReason::PeerCap))
        } else if self.len() >= self.max_total {
            self.global_oldest()
                .filter(|&old| self.remove(old))
                .map(|old| (old, EvictReason::GlobalCap))
        } else {
            None
        };
        let seq = self.next_seq;
        // u64 put counts do not wrap in practice (584 years at 1 GHz).
        self.next_seq = self.next_seq.wrapping_add(1);
        self.order.insert((now, seq), id);
        self.peers.entry(key.clone()).or_default().push(id);
        self.parked.insert(
            id,
            Parked {
                key,
                parked_at: now,
                seq,
            },
        );
        evicted
    }

    /// Takes the newest idle id of `key` (LIFO: least likely to have hit the
    /// upstream's keep-alive timeout), or `None` if the peer has none.
    pub fn take(&mut self, key: &K) -> Option<usize> {
        let id = self
            .peers
            .get(key)
            .and_then(|stack| stack.last().copied())?;
        if self.remove(id) {
            Some(id)
        } else {
            debug_assert!(false, "IdlePool::take: stack id {id} not in map");
            None
        }
    }

    /// Removes `id` wherever it is (the upstream closed it, or sent stray
    /// bytes). Returns false if it was not parked.
    pub fn remove(&mut self, id: usize) -> bool {
        let Some(entry) = self.parked.remove(&id) else {
            return false;
        };
        let in_order = self.order.remove(&(entry.parked_at, entry.seq));
        debug_assert_eq!(in_order, Some(id), "IdlePool: order out of sync");
        let mut emptied = false;
        if let Some(stack) = self.peers.get_mut(&entry.key) {
            // Newest ids are taken most: search from the top of the stack.
            if let Some(pos) = stack.iter().rposition(|&other| other == id) {
                stack.remove(pos);
            } else {
                debug_assert!(false, "IdlePool: id {id} missing from its stack");
            }
            emptied = stack.is_empty();
        } else {
            debug_assert!(false, "IdlePool: id {id} has no stack");
        }
        // An emptied stack keeps its allocation for the peer's next put
        // (no allocation per request on the steady path), unless many
        // peers have come and gone.
        if emptied && self.peers.len() > KEEP_EMPTY_STACKS {
            self.peers.remove(&entry.key);
        }
        true
    }

    /// Removes and returns one id whose idle deadline (parked time +
    /// idle timeout) is `<= now`, oldest first; `None` if none. Call in a
    /// loop; each returned id was evicted for [`EvictReason::IdleTimeout`].
    pub fn pop_expired(&mut self, now: Instant) -> Option<usize> {
        let (&(parked_at, _), &id) = self.order.first_key_value()?;
        let deadline = parked_at.checked_add(self.idle_timeout)?;
        if deadline > now {
            return None;
        }
        if self.remove(id) {
            Some(id)
        } else {
            debug_assert!(false, "IdlePool::pop_expired: order id {id} not in map");
            None
        }
    }

    /// Removes and returns the globally oldest parked id, whatever its
    /// deadline (the caller needs its socket's descriptor back).
    pub fn pop_oldest(&mut self) -> Option<usize> {
        let id = self.order.values().next().copied()?;
        self.remove(id);
        Some(id)
    }

    /// The earliest idle deadline of any parked id (when to call
    /// [`IdlePool::pop_expired`] next); `None` if nothing is parked or the
    /// deadline is past what `Instant` can hold (never expires).
    pub fn next_deadline(&self) -> Option<Instant> {
        let (&(parked_at, _), _) = self.order.first_key_value()?;
        parked_at.checked_add(self.idle_timeout)
    }

    /// Idle ids parked, over all keys.
    pub fn len(&self) -> usize {
        self.parked.len()
    }

    /// True when no id is parked.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// Idle ids parked under `key`.
    pub fn len_for(&self, key: &K) -> usize {
        self.peers.get(key).map_or(0, Vec::len)
    }

    /// True if `id` is parked.
    pub fn contains(&self, id: usize) -> bool {
        self.parked.contains_key(&id)
    }

    /// Removes and returns every parked id, oldest first (shutdown).
    pub fn drain(&mut self) -> Vec<usize> {
        let ids = std::mem::take(&mut self.order).into_values().collect();
        self.peers.clear();
        self.parked.clear();
        ids
    }

    /// The oldest id parked under `key`.
    fn peer_oldest(&self, key: &K) -> Option<usize> {
        self.peers.get(key).and_then(|stack| stack.first().copied())
    }

    /// The globally oldest parked id.
    fn global_oldest(&self) -> Option<usize> {
        self.order.first_key_value().map(|(_, &id)| id)
    }
}

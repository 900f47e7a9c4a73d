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
//!   order, and the id map; `len()` is the size of the stacks and the map.
//!   The global order may also hold entries of ids removed since (lazy
//!   deletion), never at either end, and at most about twice as many
//!   entries as ids parked.
//! - `len_for(key) <= max_per_peer` and `len() <= max_total` after every call.
//! - A peer's stack is in put order (oldest first, newest last) and a peer
//!   with no parked id has no stack.
//! - The global order is by (parked time, put sequence): its first entry is
//!   the globally oldest id and, since all ids share one idle timeout, the
//!   one with the earliest deadline.
//!
//! Costs: `put`, `take`, `remove`, `pop_expired` are O(1) amortized (hash
//! maps, and a queue that puts append to) plus O(per-peer cap) for a
//! removal inside a peer's stack. A put with a parked time earlier than
//! the newest one (time does not go back in the loop; tests may) is
//! inserted in order, O(n).
//!
//! # The choice rule ([`IdlePool::choose`], issue 14)
//!
//! Which connection a request gets depends on what it risks if the
//! connection turns out closed by the server. The pool learns each peer's
//! idle limit (`idle_limit`: `Keep-Alive: timeout=N`, and the smallest
//! recent idle age at which the server was seen closing pooled
//! connections) and whether the server closes right after responses (a
//! close seen under 100 ms of idleness). Then, per request:
//! 1. **Every method**, when the limit is one setting of the server
//!    (announced, or its recent idle closes within a quarter of each
//!    other): a connection idle for `retire_after` (the limit minus a
//!    32nd, at least 20 ms) is closed, never used (oldest first, counted
//!    in `pool_retired_near_limit`). A server whose idle closes are
//!    scattered has only an earliest close seen: nothing is retired, and
//!    rule 3 keeps non-idempotent requests off the older connections.
//! 2. **Idempotent requests** (RFC 9110 §9.2.2) take the newest connection
//!    (LIFO: the least likely to be at the limit); if it dies in flight,
//!    the request is retried on a new connection (ARCHITECTURE.md §7).
//!    Counted in `pool_take_newest`.
//! 3. **Non-idempotent requests** cannot be retried, so they never gamble:
//!    no connection idle longer than seven eighths of the learned limit
//!    (and at least 100 ms under it), and, if the
//!    server was seen closing right after responses, none parked less
//!    than `risky_min_idle` ago (the 90th percentile of the idle ages at
//!    which such closes were seen, rounded up to 125 µs times a power of
//!    two, at most 100 ms: LIFO would pick exactly the connection most
//!    likely to be doomed then), and the one taken is always checked for
//!    a FIN first. The newest connection that passes is taken
//!    (`pool_take_newest`, or `pool_take_older` when a fresher one was
//!    passed over); if none does, a new connection is opened
//!    (`pool_new_for_risk`). A fresh connection passed over stays parked
//!    and ages into a safe one, so the pool grows by what the guard needs
//!    instead of never reusing.
//! 4. **A server that closes after responses as a rule** (at least half
//!    of the connections its responses left, over at least 16 of them:
//!    `idle_limit::AS_A_RULE`): the guard is 100 ms and holds for every
//!    request, idempotent or not — a just-parked connection there is
//!    doomed, a GET on it is sent twice and a POST lost.
//!
//! With nothing learned the rule is plain LIFO for every request.

use std::collections::VecDeque;
use std::hash::Hash;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::idle_limit::{IdleLimits, IdleRule};

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

/// One entry of the global order: `id`, parked at `parked_at` by put
/// number `seq`. It stands for the id only while the id map holds the
/// same `seq` for it (else the id was removed, and maybe parked again).
#[derive(Debug, Clone, Copy)]
struct Entry {
    parked_at: Instant,
    seq: u64,
    id: usize,
}

impl Entry {
    /// The order's sort key.
    fn rank(&self) -> (Instant, u64) {
        (self.parked_at, self.seq)
    }
}

/// Entries of removed ids the global order may hold beyond the parked
/// ids before it is compacted (plus as many as there are parked ids).
const COMPACT_SLACK: usize = 64;

/// Peers whose emptied LIFO stack is kept for reuse; past this many
/// peers, an emptied stack is dropped so peers that come and go cannot
/// grow the map without bound.
const KEEP_EMPTY_STACKS: usize = 1024;

/// A pooled connection idle less than this (and less than a quarter of its
/// server's learned idle limit) is taken without a liveness check: parked
/// sockets stay registered, so a FIN that came before this loop turn's
/// poll already evicted it; only the instant since that poll is not
/// covered, and at such idle ages the server is far from its own timeout
/// (issue 11: the `MSG_PEEK` cost one syscall per request).
pub const HOT_IDLE: Duration = Duration::from_secs(1);

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
    /// Every parked id by (parked time, put sequence): oldest first; its
    /// first and last entries are always live (see [`Entry`]).
    order: VecDeque<Entry>,
    /// Every parked id: its key and its place in `order`.
    parked: HashMap<usize, Parked<K>>,
    /// Sequence number for the next put.
    next_seq: u64,
    /// What each peer showed of its idle limit.
    limits: IdleLimits<K>,
}

/// What [`IdlePool::choose`] tells the caller to do for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Use `id` (it left the pool), idle for `idle`; `older`: a fresher
    /// connection was passed over; `check`: check it is alive first
    /// (decided with the same rule: hot or not, the quick-close guard).
    Take {
        id: usize,
        idle: Duration,
        older: bool,
        check: bool,
    },
    /// Close `id` (it left the pool): idle too close to the peer's learned
    /// limit. Then ask again.
    Retire(usize),
    /// Open a new connection; `for_risk`: pooled ones exist, but none the
    /// request may risk.
    Open { for_risk: bool },
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
            peers: HashMap::default(),
            order: VecDeque::new(),
            parked: HashMap::default(),
            next_seq: 0,
            limits: IdleLimits::default(),
        }
    }

    /// The choice rule (see the module doc): what a request to `key` that
    /// is `idempotent` (RFC 9110 §9.2.2) or not gets at `now`. Call until
    /// it returns `Take` (with a live connection) or `Open`.
    pub fn choose(&mut self, key: &K, now: Instant, idempotent: bool) -> Choice {
        let rule = self.limits.rule(key, now, self.len_for(key));
        let Some(stack) = self.peers.get(key).filter(|s| !s.is_empty()) else {
            return Choice::Open { for_risk: false };
        };
        let idle = |id: &usize, parked: &HashMap<usize, Parked<K>>| {
            parked.get(id).map_or(Duration::MAX, |p| {
                now.saturating_duration_since(p.parked_at)
            })
        };
        // 1. Retire from the bottom of the stack (oldest first).
        if let Some(&oldest) = stack.first()
            && rule.limit_is_sharp
            && idle(&oldest, &self.parked) >= rule.retire_after
        {
            self.remove(oldest);
            return Choice::Retire(oldest);
        }
        // 2. and 3. Newest first; risky requests skip the too fresh and
        // stop at the too old (ages only grow down the stack).
        let mut found = None;
        for (depth, id) in stack.iter().rev().enumerate() {
            let age = idle(id, &self.parked);
            if !idempotent && age > rule.risky_max_idle {
                break;
            }
            if (!idempotent || rule.closes_as_a_rule) && age < rule.risky_min_idle {
                continue;
            }
            found = Some((*id, age, depth > 0));
            break;
        }
        match found {
            Some((id, idle, older)) if self.remove(id) => {
                let check = self.check_under(&rule, key, idle, idempotent);
                Choice::Take {
                    id,
                    idle,
                    older,
                    check,
                }
            }
            _ => Choice::Open { for_risk: true },
        }
    }

    /// How long `id` has been parked at `now` (`None` if it is not).
    pub fn idle_for(&self, id: usize, now: Instant) -> Option<Duration> {
        let p = self.parked.get(&id)?;
        Some(now.saturating_duration_since(p.parked_at))
    }

    /// A response of `key` said `Keep-Alive: timeout=N` (`hint`).
    pub fn observe_hint(&mut self, key: &K, hint: Duration, now: Instant) {
        self.limits.observe_hint(key, hint, now);
    }

    /// The server of `key` was seen closing a pooled connection after
    /// `idle` of idleness (feeds the choice rule).
    pub fn observe_close(&mut self, key: &K, idle: Duration, now: Instant) {
        self.limits.observe_close(key, idle, now);
    }

    /// What `choose` decides for a take, with the rule at `now` (tests).
    #[cfg(test)]
    pub fn needs_check(&mut self, key: &K, idle: Duration, now: Instant, idempotent: bool) -> bool {
        let rule = self.limits.rule(key, now, self.len_for(key));
        self.check_under(&rule, key, idle, idempotent)
    }

    /// Whether a connection of `key` idle for `idle` must be checked for
    /// liveness before a request that is `idempotent` or not uses it,
    /// under the `rule` `choose` already worked out (no second pass over
    /// what was learned per take): unless it is hot (idle less than
    /// [`HOT_IDLE`] and than a quarter of the learned limit), or it was
    /// parked so recently that a server seen closing right after responses
    /// may be closing it now (the rule's quick-close guard). A
    /// non-idempotent request to such a server is always checked: one
    /// `recv` is cheaper than a request that cannot be retried.
    fn check_under(&self, rule: &IdleRule, key: &K, idle: Duration, idempotent: bool) -> bool {
        let hot = self
            .limits
            .limit(key)
            .map_or(HOT_IDLE, |l| HOT_IDLE.min(l / 4));
        let quick = rule.risky_min_idle;
        let guarded = !idempotent || rule.closes_as_a_rule;
        idle >= hot || idle < quick || (guarded && quick > Duration::ZERO)
    }

    /// The server of `key` closed a connection with its answer (seen
    /// before parking it): feeds the choice rule's share of closes.
    pub fn observe_close_with_answer(&mut self, key: &K, now: Instant) {
        self.limits.observe_close_with_answer(key, now);
    }

    /// What was learned of each peer's idle limit, at `now` (handed to a
    /// reload's successor).
    pub fn export_limits(&self, now: Instant) -> Vec<(K, crate::idle_limit::PortableLearned)> {
        self.limits.export(now)
    }

    /// Takes over what another loop learned of `key`'s idle limit, taken
    /// `later` ago.
    pub fn import_limit(
        &mut self,
        key: K,
        learned: &crate::idle_limit::PortableLearned,
        later: Duration,
        now: Instant,
    ) {
        self.limits.import(key, learned, later, now);
    }

    /// The rule `choose` applies to `key` now.
    #[cfg(test)]
    pub fn rule(&mut self, key: &K, now: Instant) -> crate::idle_limit::IdleRule {
        self.limits.rule(key, now, self.len_for(key))
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
        let entry = Entry {
            parked_at: now,
            seq,
            id,
        };
        match self.order.back() {
            Some(newest) if newest.parked_at > now => {
                let at = self.order.partition_point(|e| e.rank() <= entry.rank());
                self.order.insert(at, entry);
            }
            _ => self.order.push_back(entry),
        }
        self.limits.observe_park(&key, now);
        self.peers.entry(key.clone()).or_default().push(id);
        self.parked.insert(
            id,
            Parked {
                key,
                parked_at: now,
                seq,
            },
        );
        if self.order.len() > self.parked.len() * 2 + COMPACT_SLACK {
            let parked = &self.parked;
            self.order.retain(|e| is_live(parked, e));
        }
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
        // Its entry in the global order goes when it reaches an end (at
        // once for the newest: the usual LIFO take) or at a compaction.
        while self
            .order
            .front()
            .is_some_and(|e| !is_live(&self.parked, e))
        {
            self.order.pop_front();
        }
        while self.order.back().is_some_and(|e| !is_live(&self.parked, e)) {
            self.order.pop_back();
        }
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
        let &Entry { parked_at, id, .. } = self.order.front()?;
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
        let id = self.order.front()?.id;
        self.remove(id);
        Some(id)
    }

    /// The earliest idle deadline of any parked id (when to call
    /// [`IdlePool::pop_expired`] next); `None` if nothing is parked or the
    /// deadline is past what `Instant` can hold (never expires).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.order.front()?.parked_at.checked_add(self.idle_timeout)
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
        let parked = &self.parked;
        let ids = self
            .order
            .iter()
            .filter(|e| is_live(parked, e))
            .map(|e| e.id)
            .collect();
        self.order.clear();
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
        self.order.front().map(|e| e.id)
    }

    /// Entries in the global order, live or not (tests: its size stays
    /// bounded).
    #[cfg(test)]
    pub fn order_len(&self) -> usize {
        self.order.len()
    }
}

/// True if `e` still stands for its id: the id is parked by the same put.
fn is_live<K>(parked: &HashMap<usize, Parked<K>>, e: &Entry) -> bool {
    parked.get(&e.id).is_some_and(|p| p.seq == e.seq)
}

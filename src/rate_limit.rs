//! Per-client request rates (`rate_limit` of a route, docs/edge.md): one
//! token bucket per client address in a bounded table.
//!
//! A bucket holds at most `burst` tokens and gains `requests_per_second`
//! of them per second; a request takes one, and a request that finds
//! less than one is refused (429, `Retry-After`: the seconds until a
//! token is there). Each bucket is stored as one number, the instant at
//! which it is full again (the "theoretical arrival time" of the GCRA,
//! ITU-T I.371, which is this token bucket written without a division):
//! with `T = 1 / requests_per_second`, the bucket at `now` holds
//! `burst - (full_at - now) / T` tokens, and a request is admitted when
//! `full_at - now <= (burst - 1) × T`, which moves `full_at` on by `T`.
//!
//! The table holds at most `capacity` clients (100,000 for a route) in
//! least-recently-seen order; a new client at the cap takes the place of
//! the one seen longest ago. An evicted client whose bucket was full
//! loses nothing (an absent client is a full bucket); one evicted while
//! it was being limited starts again full. Memory per tracked client
//! (x86-64): a 40-byte node (`full_at` 8, the order's links 2 × 4, the
//! address 17, padding) plus its index entry (address and node number,
//! 24 bytes and a control byte, at most 7/8 full): about 70 bytes, 7 MB
//! for a full table of 100,000.
//!
//! Time is a value the caller passes in (nanoseconds on any monotonic
//! scale), so the rule is tested without a clock or a socket.
//!
//! What it must not know: sockets, HTTP, the clock.

use std::collections::HashMap;
use std::net::IpAddr;

/// Clients a route's table tracks at most (the 100,000).
pub const TABLE_CAPACITY: usize = 100_000;

/// No node: the end of the order.
const NIL: u32 = u32::MAX;

/// Nanoseconds per second.
const NANOS: u64 = 1_000_000_000;

/// One tracked client.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// When its bucket is full again, ns.
    full_at: u64,
    /// The client seen just before it (towards the most recent), or NIL.
    newer: u32,
    /// The client seen just after it (towards the oldest), or NIL.
    older: u32,
    /// Its address.
    key: IpAddr,
}

/// A bounded table of token buckets, one per client address.
#[derive(Debug)]
pub struct RateLimiter {
    /// Nanoseconds between two tokens (`1e9 / requests_per_second`).
    interval: u64,
    /// How far `full_at` may run ahead of now and still admit one more
    /// request: `(burst - 1) × interval`, ns.
    tolerance: u64,
    /// Most clients tracked.
    capacity: usize,
    /// Client address → node number.
    index: HashMap<IpAddr, u32>,
    /// The nodes (never shrinks; at most `capacity`).
    nodes: Vec<Node>,
    /// The client seen most recently, or NIL.
    newest: u32,
    /// The client seen longest ago, or NIL.
    oldest: u32,
}

impl RateLimiter {
    /// A table of at most `capacity` clients (≥ 1), each with a bucket of
    /// `burst` tokens (≥ 1) refilled at `per_second` tokens a second
    /// (≥ 1; `Config::validate` refuses 0).
    pub fn new(per_second: u32, burst: u32, capacity: usize) -> Self {
        let interval = NANOS / u64::from(per_second.max(1));
        RateLimiter {
            interval,
            tolerance: interval.saturating_mul(u64::from(burst.max(1) - 1)),
            capacity: capacity.clamp(1, NIL as usize),
            index: HashMap::new(),
            nodes: Vec::new(),
            newest: NIL,
            oldest: NIL,
        }
    }

    /// Takes a token of `client`'s bucket at `now` (ns). `Ok(())`: the
    /// request may go. `Err(wait)`: refused; a token is there in `wait`
    /// ns (the caller rounds it up to whole seconds for `Retry-After`,
    /// RFC 6585 §4). A refused request takes nothing.
    pub fn check(&mut self, client: IpAddr, now: u64) -> Result<(), u64> {
        let client = client.to_canonical();
        let n = match self.index.get(&client) {
            Some(&n) => {
                self.unlink(n);
                n
            }
            None => self.insert(client, now),
        };
        self.link_newest(n);
        let Some(node) = self.nodes.get_mut(n as usize) else {
            return Ok(());
        };
        let full_at = node.full_at.max(now);
        let ahead = full_at - now;
        if ahead > self.tolerance {
            return Err(ahead - self.tolerance);
        }
        node.full_at = full_at.saturating_add(self.interval);
        Ok(())
    }

    /// Clients tracked now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }

    /// A node for `client` with a full bucket at `now`: a new one while
    /// the table has room, else the oldest client's, taken over.
    fn insert(&mut self, client: IpAddr, now: u64) -> u32 {
        let fresh = Node {
            full_at: now,
            newer: NIL,
            older: NIL,
            key: client,
        };
        if self.nodes.len() < self.capacity {
            let n = self.nodes.len() as u32;
            self.nodes.push(fresh);
            self.index.insert(client, n);
            return n;
        }
        let n = self.oldest;
        self.unlink(n);
        if let Some(node) = self.nodes.get_mut(n as usize) {
            self.index.remove(&node.key);
            *node = fresh;
        }
        self.index.insert(client, n);
        n
    }

    /// Takes node `n` out of the order.
    fn unlink(&mut self, n: u32) {
        let Some(&Node { newer, older, .. }) = self.nodes.get(n as usize) else {
            return;
        };
        match self.nodes.get_mut(newer as usize) {
            Some(p) => p.older = older,
            None => self.newest = older,
        }
        match self.nodes.get_mut(older as usize) {
            Some(p) => p.newer = newer,
            None => self.oldest = newer,
        }
    }

    /// Puts node `n` (out of the order) at its newest end.
    fn link_newest(&mut self, n: u32) {
        let old_newest = self.newest;
        if let Some(node) = self.nodes.get_mut(n as usize) {
            node.newer = NIL;
            node.older = old_newest;
        }
        match self.nodes.get_mut(old_newest as usize) {
            Some(p) => p.newer = n,
            None => self.oldest = n,
        }
        self.newest = n;
    }
}

/// Whole seconds of `Retry-After` for a wait of `ns`: rounded up, at
/// least 1 (RFC 9110 §10.2.3 delta-seconds).
pub fn retry_after_secs(ns: u64) -> u64 {
    ns.div_ceil(NANOS).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_then_one_token_per_interval() {
        // 10 per second, burst 20.
        let mut l = RateLimiter::new(10, 20, 100);
        let a = ip("192.0.2.1");
        for i in 0..20 {
            assert_eq!(l.check(a, 0), Ok(()), "request {i} of the burst");
        }
        assert_eq!(l.check(a, 0), Err(100 * MS), "the 21st waits one interval");
        assert_eq!(l.check(a, 50 * MS), Err(50 * MS), "refusals take nothing");
        assert_eq!(l.check(a, 100 * MS), Ok(()));
        assert_eq!(l.check(a, 100 * MS), Err(100 * MS));
        // A long pause fills the bucket to `burst`, never above.
        let later = 10_000 * MS;
        for _ in 0..20 {
            assert_eq!(l.check(a, later), Ok(()));
        }
        assert!(l.check(a, later).is_err());
    }

    #[test]
    fn admitted_count_over_a_steady_stream_matches_the_bucket() {
        // 1,000 requests at 1 ms apart (1,000/s) against 50/s, burst 100:
        // the bucket admits 100 + 50 × (elapsed seconds), to the request.
        let mut l = RateLimiter::new(50, 100, 10);
        let a = ip("2001:db8::1");
        let admitted = (0..1000u64).filter(|i| l.check(a, i * MS).is_ok()).count();
        // Elapsed 0.999 s: 49 tokens came (the 50th at 1.0 s), plus the
        // burst; refill is exact to the nanosecond.
        assert_eq!(admitted, 100 + 49);
    }

    #[test]
    fn clients_have_their_own_buckets_and_mapped_v4_is_v4() {
        let mut l = RateLimiter::new(1, 1, 100);
        assert_eq!(l.check(ip("10.0.0.1"), 0), Ok(()));
        assert!(l.check(ip("::ffff:10.0.0.1"), 0).is_err());
        assert_eq!(l.check(ip("10.0.0.2"), 0), Ok(()));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_least_recently_seen() {
        let mut l = RateLimiter::new(1, 1, 3);
        let (a, b, c, d) = (
            ip("10.0.0.1"),
            ip("10.0.0.2"),
            ip("10.0.0.3"),
            ip("10.0.0.4"),
        );
        for k in [a, b, c] {
            assert_eq!(l.check(k, 0), Ok(()));
        }
        // `a` seen again (refused), so `b` is the oldest now.
        assert!(l.check(a, 0).is_err());
        assert_eq!(l.check(d, 0), Ok(()));
        assert_eq!(l.len(), 3);
        // `a`, `c`, `d` are still limited; `b` was evicted: full again.
        assert!(l.check(a, 0).is_err());
        assert!(l.check(c, 0).is_err());
        assert!(l.check(d, 0).is_err());
        assert_eq!(l.check(b, 0), Ok(()));
        assert_eq!(l.len(), 3);
        // Many clients through a table of 3: never more than 3 nodes.
        for i in 0..1000u32 {
            let _ = l.check(IpAddr::from(i.to_be_bytes()), u64::from(i));
        }
        assert_eq!((l.len(), l.nodes.len()), (3, 3));
    }

    #[test]
    fn a_table_of_one_and_the_node_size() {
        let mut l = RateLimiter::new(1, 2, 1);
        assert_eq!(l.check(ip("10.0.0.1"), 0), Ok(()));
        assert_eq!(l.check(ip("10.0.0.2"), 0), Ok(()));
        assert_eq!(l.check(ip("10.0.0.2"), 0), Ok(()));
        assert!(l.check(ip("10.0.0.2"), 0).is_err());
        assert_eq!(l.check(ip("10.0.0.1"), 0), Ok(()), "evicted: full");
        // The figure the module documentation gives.
        assert_eq!(std::mem::size_of::<Node>(), 40);
        assert_eq!(std::mem::size_of::<(IpAddr, u32)>(), 24);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(1), 1);
        assert_eq!(retry_after_secs(NANOS), 1);
        assert_eq!(retry_after_secs(NANOS + 1), 2);
        assert_eq!(retry_after_secs(0), 1);
    }
}

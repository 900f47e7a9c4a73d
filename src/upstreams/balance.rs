//! Choosing one server of a group (ARCHITECTURE.md §13), sans-IO: smooth
//! weighted round-robin (nginx's `ngx_http_upstream_get_peer`), least
//! outstanding requests with weights and round-robin ties, and a ring hash
//! with virtual nodes (Karger et al.) so that removing one of N servers
//! moves only the keys it held, about 1/N of them.
//!
//! Each function sees the servers and a predicate over a server's index
//! and slot saying which may be chosen now (healthy and not yet tried by
//! this request); the predicate allocates nothing (once per request).
//!
//! What it must not know: sockets, the clock, HTTP, why a server is out.

use std::net::SocketAddr;

/// The balancing state of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The server's address.
    pub addr: SocketAddr,
    /// Its weight, 1..=1000.
    pub weight: u32,
    /// Smooth round-robin's running weight.
    pub current: i64,
    /// Requests in flight to it (least_conn).
    pub outstanding: u32,
}

impl Slot {
    /// A server at `addr` with `weight`, nothing in flight.
    pub(crate) fn new(addr: SocketAddr, weight: u32) -> Self {
        Slot {
            addr,
            weight: weight.max(1),
            current: 0,
            outstanding: 0,
        }
    }
}

/// Smooth weighted round-robin: every candidate's running weight grows by
/// its weight, the largest is chosen and loses the candidates' total. Over
/// a cycle each server is chosen `weight` times, interleaved (5,1,1 gives
/// a a b a c a a, not a a a a a b c).
pub(crate) fn round_robin(slots: &mut [Slot], ok: impl Fn(usize, &Slot) -> bool) -> Option<usize> {
    let mut total: i64 = 0;
    let mut best: Option<usize> = None;
    for i in 0..slots.len() {
        let Some(s) = slots.get_mut(i) else { continue };
        if !ok(i, s) {
            continue;
        }
        s.current += i64::from(s.weight);
        total += i64::from(s.weight);
        let cur = s.current;
        if best
            .and_then(|b| slots.get(b))
            .is_none_or(|b| cur > b.current)
        {
            best = Some(i);
        }
    }
    let b = best?;
    if let Some(s) = slots.get_mut(b) {
        s.current -= total;
    }
    best
}

/// Fewest requests in flight relative to weight (`outstanding / weight`,
/// compared without division); ties go by smooth weighted round-robin
/// ([`round_robin`] among the tied), so weights count even when nothing
/// is in flight (nginx's `least_conn` breaks ties the same way).
pub(crate) fn least_conn(slots: &mut [Slot], ok: impl Fn(usize, &Slot) -> bool) -> Option<usize> {
    let mut best: Option<(u64, u64)> = None; // (outstanding, weight)
    for (i, s) in slots.iter().enumerate() {
        if !ok(i, s) {
            continue;
        }
        let (o, w) = (u64::from(s.outstanding), u64::from(s.weight));
        if best.is_none_or(|(bo, bw)| o * bw < bo * w) {
            best = Some((o, w));
        }
    }
    let (bo, bw) = best?;
    round_robin(slots, |i, s| {
        ok(i, s) && u64::from(s.outstanding) * bw == bo * u64::from(s.weight)
    })
}

/// Virtual nodes per unit of weight on the hash ring (160, as nginx's
/// ketama-compatible `hash ... consistent`): enough that a server's share
/// of the keys stays near its weight's.
pub(crate) const VNODES_PER_WEIGHT: u32 = 160;

/// A hash ring: `VNODES_PER_WEIGHT × weight` points per server, placed by
/// hashing the server's address and the point's number, so a server's
/// points do not depend on which other servers exist.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ring {
    points: Vec<(u64, SocketAddr)>,
}

impl Ring {
    /// The ring of `slots`.
    pub(crate) fn new(slots: &[Slot]) -> Self {
        let mut points = Vec::new();
        for s in slots {
            let name = s.addr.to_string();
            for v in 0..s.weight.saturating_mul(VNODES_PER_WEIGHT) {
                let h = hash_bytes(name.as_bytes()) ^ mix(u64::from(v).wrapping_add(1));
                points.push((mix(h), s.addr));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// The first server clockwise from `key` whose address `ok` accepts,
    /// as an index into `slots`.
    pub(crate) fn pick(
        &self,
        slots: &[Slot],
        key: u64,
        ok: impl Fn(usize, &Slot) -> bool,
    ) -> Option<usize> {
        let n = self.points.len();
        let start = self.points.partition_point(|(h, _)| *h < key);
        // Walk at most once around; remember addresses already refused.
        let mut refused: Vec<SocketAddr> = Vec::new();
        for step in 0..n {
            let Some(&(_, addr)) = self.points.get((start + step) % n) else {
                continue;
            };
            if refused.contains(&addr) {
                continue;
            }
            match slots.iter().position(|s| s.addr == addr) {
                Some(i) if slots.get(i).is_some_and(|s| ok(i, s)) => return Some(i),
                _ => {
                    refused.push(addr);
                    if refused.len() >= slots.len() {
                        return None;
                    }
                }
            }
        }
        None
    }
}

/// FNV-1a over `bytes`, finished with [`mix`]: stable across processes and
/// versions (every worker maps a key to the same server).
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// SplitMix64's finalizer: spreads nearby inputs over the whole ring.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

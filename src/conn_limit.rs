//! Open connections per client address (`max_connections_per_client`,
//! docs/edge.md): a count per address, taken when a connection's client
//! address is known (at accept, or after its PROXY header) and given back
//! when it closes.
//!
//! The table holds only addresses with an open connection, so it is
//! bounded by the loop's connection cap (`max_connections`): an entry
//! is an address and a count (17 + 4 bytes, 24 with padding, plus a
//! control byte of the index), gone when its count falls to 0.
//!
//! What it must not know: sockets, HTTP.

use std::collections::HashMap;
use std::net::IpAddr;

/// Open connections per client address.
#[derive(Debug, Default)]
pub struct ConnCounts {
    /// Address → its open connections (never 0).
    open: HashMap<IpAddr, u32>,
}

impl ConnCounts {
    /// Counts one more connection of `client` if it holds fewer than
    /// `max` (0: no limit, nothing is counted). Returns whether it may
    /// stay; a refused one is not counted (do not [`release`] it).
    ///
    /// [`release`]: ConnCounts::release
    pub fn admit(&mut self, client: IpAddr, max: usize) -> bool {
        if max == 0 {
            return true;
        }
        let n = self.open.entry(client.to_canonical()).or_insert(0);
        if *n as usize >= max {
            if *n == 0 {
                self.open.remove(&client.to_canonical());
            }
            return false;
        }
        *n += 1;
        true
    }

    /// Gives back one connection of `client` that [`admit`] counted.
    ///
    /// [`admit`]: ConnCounts::admit
    pub fn release(&mut self, client: IpAddr) {
        let key = client.to_canonical();
        if let Some(n) = self.open.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.open.remove(&key);
            }
        }
    }

    /// Addresses with an open counted connection.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn admits_up_to_the_cap_per_address_and_forgets_closed_ones() {
        let mut c = ConnCounts::default();
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        assert!(c.admit(a, 2));
        assert!(c.admit(ip("::ffff:10.0.0.1"), 2), "mapped counts as IPv4");
        assert!(!c.admit(a, 2));
        assert!(c.admit(b, 2));
        c.release(a);
        assert!(c.admit(a, 2));
        for _ in 0..2 {
            c.release(a);
        }
        c.release(b);
        assert_eq!(c.len(), 0, "no entry without an open connection");
        c.release(b);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn zero_is_no_limit_and_counts_nothing() {
        let mut c = ConnCounts::default();
        for _ in 0..10 {
            assert!(c.admit(ip("10.0.0.1"), 0));
        }
        assert_eq!(c.len(), 0);
    }
}

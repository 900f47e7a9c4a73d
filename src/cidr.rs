//! IP networks written as CIDR (`10.0.0.0/8`, `2001:db8::/32`, or a bare
//! address for one host): the value of `accept_proxy_protocol`,
//! `trusted_proxies` and a route's `allow`/`deny` lists.
//!
//! An IPv4-mapped IPv6 address (`::ffff:10.1.2.3`, what a dual-stack
//! socket reports for an IPv4 peer) is matched as the IPv4 address it
//! maps (RFC 4291 §2.5.5.2), so one IPv4 list covers both listeners.
//!
//! What it must not know: sockets, HTTP, where a list is used.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One network: an address whose bits past `prefix` are zero, and the
/// prefix length in bits (0..=32 for IPv4, 0..=128 for IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// A network inside the IPv4-mapped range (`::ffff:10.0.0.0/104`, a
    /// prefix of 96 or more) as the IPv4 network it maps (`10.0.0.0/8`):
    /// clients are matched by their IPv4 address, so the mapped form never
    /// matched anyone — a `deny` written so failed open (found by a
    /// break-it pass). Other networks as they are.
    fn canonical(self) -> Cidr {
        match self.addr {
            IpAddr::V6(a) if self.prefix >= 96 => match a.to_ipv4_mapped() {
                Some(v4) => Cidr {
                    addr: IpAddr::V4(v4),
                    prefix: self.prefix - 96,
                },
                None => self,
            },
            _ => self,
        }
    }

    /// Whether `ip` is inside this network (an IPv4-mapped IPv6 `ip` is
    /// taken as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                mask32(self.prefix) & (u32::from(net) ^ u32::from(a)) == 0
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                mask128(self.prefix) & (u128::from(net) ^ u128::from(a)) == 0
            }
            _ => false,
        }
    }
}

/// Whether any network of `list` contains `ip`.
pub fn any_contains(list: &[Cidr], ip: IpAddr) -> bool {
    list.iter().any(|c| c.contains(ip))
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

impl FromStr for Cidr {
    type Err = String;

    /// `ADDR/LEN` or a bare `ADDR` (one host). Bits set past the prefix
    /// are refused (`10.0.0.1/8` is most likely a typo for one host or
    /// for `10.0.0.0/8`; nginx only warns).
    fn from_str(v: &str) -> Result<Self, String> {
        let (a, len) = match v.split_once('/') {
            Some((a, len)) => (a, Some(len)),
            None => (v, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{v:?} is not a network (ADDR/LEN, e.g. 10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match len {
            None => max,
            Some(l) if !l.is_empty() && l.len() <= 3 && l.bytes().all(|b| b.is_ascii_digit()) => {
                l.parse::<u8>().unwrap_or(u8::MAX)
            }
            Some(_) => u8::MAX,
        };
        if prefix > max {
            return Err(format!("{v:?}: the prefix length must be 0..={max}"));
        }
        let cidr = Cidr { addr, prefix };
        let host_bits = match addr {
            IpAddr::V4(a) => u32::from(a) & !mask32(prefix) != 0,
            IpAddr::V6(a) => u128::from(a) & !mask128(prefix) != 0,
        };
        if host_bits {
            return Err(format!("{v:?} has bits set past its /{prefix} prefix"));
        }
        Ok(cidr.canonical())
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The flag parser of a network (clap `value_parser`).
pub(crate) fn parse_cidr(v: &str) -> Result<Cidr, String> {
    v.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn matches_by_prefix_in_each_family() {
        let net: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(ip("10.255.1.2")));
        assert!(!net.contains(ip("11.0.0.0")));
        // An IPv4-mapped IPv6 address matches as its IPv4 address.
        assert!(net.contains(ip("::ffff:10.1.2.3")));
        assert!(!net.contains(ip("2001:db8::1")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("1.2.3.4")));
        let host: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(host.to_string(), "127.0.0.1/32");
        assert!(host.contains(ip("127.0.0.1")) && !host.contains(ip("127.0.0.2")));
    }

    #[test]
    fn an_ipv4_mapped_network_is_its_ipv4_network() {
        for (text, shown) in [
            ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
            ("::ffff:127.0.0.1", "127.0.0.1/32"),
            ("::ffff:0.0.0.0/96", "0.0.0.0/0"),
        ] {
            let net: Cidr = text.parse().unwrap();
            assert_eq!(net.to_string(), shown, "{text}");
        }
        let net: Cidr = "::ffff:10.0.0.0/104".parse().unwrap();
        assert!(net.contains(ip("10.1.1.1")));
        assert!(net.contains(ip("::ffff:10.1.1.1")));
        assert!(!net.contains(ip("11.0.0.1")));
        // Wider than the mapped range: an IPv6 network, matched as such.
        let wide: Cidr = "::/64".parse().unwrap();
        assert_eq!(wide.to_string(), "::/64");
        assert!(!wide.contains(ip("10.1.1.1")));
    }

    #[test]
    fn refuses_what_is_not_a_network() {
        // Each row: the text, and why it is refused.
        for bad in [
            "10.0.0.1/8",  // bits past the prefix
            "10.0.0.0/33", // prefix too long for IPv4
            "::/129",      // prefix too long for IPv6
            "10.0.0.0/",   // empty prefix
            "10.0.0.0/+8", // not digits
            "example.com", // not an address
            "10.0.0/8",    // not a whole address
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}

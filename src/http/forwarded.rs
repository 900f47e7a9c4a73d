//! The client address behind trusted proxies: the `X-Forwarded-For` walk
//! of nginx's `real_ip_recursive on` (`trusted_proxies`, docs/configuration.md,
//! "Edge rules").
//!
//! When the peer is trusted, the elements of every `X-Forwarded-For` line
//! (in arrival order, RFC 9110 §5.3: several lines are one list) are
//! walked from the right; each trusted address is skipped, and the first
//! untrusted one is the client. An element that is not an address
//! (`unknown`, an obfuscated name, garbage) stops the walk: the client is
//! the last address the walk reached, which a trusted proxy put there.
//! Every element trusted: the leftmost. From an untrusted peer the field
//! says nothing.
//!
//! What it must not know: the configuration (trust is a predicate),
//! sockets.

use std::net::IpAddr;

use super::Headers;
use super::known::Known;
use super::syntax::list_elements;

/// The client address of a request from `peer` with `headers`:
/// `peer` itself unless `trusted(peer)`, else the result of the walk.
pub fn client_address(headers: &Headers, peer: IpAddr, trusted: impl Fn(IpAddr) -> bool) -> IpAddr {
    if !trusted(peer) {
        return peer;
    }
    let lines: Vec<&[u8]> = headers.get_all_known(Known::XForwardedFor).collect();
    let mut client = peer;
    for line in lines.iter().rev() {
        let elements: Vec<&[u8]> = list_elements(line).collect();
        for e in elements.iter().rev() {
            let Some(ip) = element_address(e) else {
                return client;
            };
            client = ip;
            if !trusted(ip) {
                return ip;
            }
        }
    }
    client
}

/// An element's address: `192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`,
/// with an optional `:port` after an IPv4 address or a bracketed IPv6 one
/// (some proxies write the port; RFC 7239 nodes have that shape too).
fn element_address(e: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(e).ok()?;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok
            .then(|| inside.parse::<std::net::Ipv6Addr>().ok())
            .flatten()
            .map(|a| IpAddr::V6(a).to_canonical());
    }
    let (host, port) = s.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 5
        && p.bytes().all(|b| b.is_ascii_digit())
        && p.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// 10.0.0.0/8 and 192.168.0.0/16 are the trusted proxies.
    fn trusted(a: IpAddr) -> bool {
        match a {
            IpAddr::V4(v4) => v4.octets()[0] == 10 || v4.octets()[..2] == [192, 168],
            IpAddr::V6(_) => false,
        }
    }

    fn walk(peer: &str, lines: &[&str]) -> IpAddr {
        let mut h = Headers::new();
        for l in lines {
            h.append("X-Forwarded-For", l.as_bytes());
        }
        client_address(&h, ip(peer), trusted)
    }

    #[test]
    fn rightmost_untrusted_behind_trusted_hops() {
        // Each row: peer, fields, the client, why.
        let rows: [(&str, &[&str], &str, &str); 10] = [
            ("10.0.0.1", &["203.0.113.5"], "203.0.113.5", "one hop"),
            (
                "10.0.0.1",
                &["203.0.113.5, 192.168.1.1"],
                "203.0.113.5",
                "two trusted hops",
            ),
            (
                "10.0.0.1",
                &["198.51.100.1, 203.0.113.5, 10.1.1.1"],
                "203.0.113.5",
                "a spoofed leftmost entry is not believed",
            ),
            (
                "10.0.0.1",
                &["198.51.100.1", "203.0.113.5"],
                "203.0.113.5",
                "several lines are one list",
            ),
            (
                "10.0.0.1",
                &["10.9.9.9, 10.8.8.8"],
                "10.9.9.9",
                "all trusted: the leftmost",
            ),
            ("10.0.0.1", &[], "10.0.0.1", "no field: the peer"),
            (
                "10.0.0.1",
                &["203.0.113.5, unknown, 10.2.2.2"],
                "10.2.2.2",
                "unparsable stops the walk at the last address reached",
            ),
            (
                "10.0.0.1",
                &["garbage"],
                "10.0.0.1",
                "unparsable first: the peer",
            ),
            (
                "10.0.0.1",
                &["[2001:db8::7]:4711, 203.0.113.5:80"],
                "203.0.113.5",
                "ports after addresses",
            ),
            (
                "203.0.113.9",
                &["198.51.100.1"],
                "203.0.113.9",
                "untrusted peer: the field says nothing",
            ),
        ];
        for (peer, lines, want, why) in rows {
            assert_eq!(walk(peer, lines), ip(want), "{why}");
        }
        assert_eq!(walk("10.0.0.1", &["[2001:db8::7]"]), ip("2001:db8::7"));
        assert_eq!(
            walk("10.0.0.1", &["::ffff:10.0.0.5, ::ffff:203.0.113.5"]),
            ip("203.0.113.5")
        );
    }
}

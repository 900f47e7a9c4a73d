//! The PROXY protocol header sluice writes at the start of a new upstream
//! connection (a group's `send_proxy_protocol`, docs/edge.md): v1 text or
//! v2 binary, `PROXY` command over TCP (HAProxy's spec §2.1, §2.2), no
//! TLVs.
//!
//! Both addresses are written in one family: when the client's and the
//! local address differ (an IPv4 client on an IPv6 listener), the IPv4
//! one is written as its IPv4-mapped IPv6 address (`::ffff:a.b.c.d`),
//! as the spec asks of a sender that mixes them. An IPv4-mapped pair
//! is written as IPv4.
//!
//! What it must not know: sockets, the pool.

use std::net::{IpAddr, SocketAddr};

use super::V2_SIG;

/// Both addresses in one family: IPv4 when both are (or map to) IPv4,
/// else both IPv6.
fn one_family(src: SocketAddr, dst: SocketAddr) -> (SocketAddr, SocketAddr) {
    let (s, d) = (src.ip().to_canonical(), dst.ip().to_canonical());
    match (s, d) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => (
            SocketAddr::new(s, src.port()),
            SocketAddr::new(d, dst.port()),
        ),
        _ => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(a) => IpAddr::V6(a.to_ipv6_mapped()),
                v6 => v6,
            };
            (
                SocketAddr::new(v6(s), src.port()),
                SocketAddr::new(v6(d), dst.port()),
            )
        }
    }
}

/// Appends the v1 line for a connection from `src` to `dst`:
/// `PROXY TCP4 SRC DST SPORT DPORT\r\n` (at most 104 bytes: two full
/// IPv6 addresses, well under the spec's 107).
pub fn v1(src: SocketAddr, dst: SocketAddr, out: &mut Vec<u8>) {
    let (s, d) = one_family(src, dst);
    let proto = if s.is_ipv4() { "TCP4" } else { "TCP6" };
    let line = format!(
        "PROXY {proto} {} {} {} {}\r\n",
        s.ip(),
        d.ip(),
        s.port(),
        d.port()
    );
    out.extend_from_slice(line.as_bytes());
}

/// Appends the v2 header for a connection from `src` to `dst`: the
/// signature, version 2 `PROXY`, `TCP over IPv4` (12 address bytes) or
/// `TCP over IPv6` (36), then the addresses and ports in network order
/// (28 or 52 bytes in all).
pub fn v2(src: SocketAddr, dst: SocketAddr, out: &mut Vec<u8>) {
    let (s, d) = one_family(src, dst);
    out.extend_from_slice(V2_SIG);
    // Version 2, command PROXY.
    out.push(0x21);
    match (s.ip(), d.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            out.push(0x11);
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&a.octets());
            out.extend_from_slice(&b.octets());
        }
        (a, b) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V6(x) => x.octets(),
                IpAddr::V4(x) => x.to_ipv6_mapped().octets(),
            };
            out.push(0x21);
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&v6(a));
            out.extend_from_slice(&v6(b));
        }
    }
    out.extend_from_slice(&s.port().to_be_bytes());
    out.extend_from_slice(&d.port().to_be_bytes());
}

/// Appends the header of a connection the sender opens for itself (a
/// health check): v1 `PROXY UNKNOWN\r\n`, v2 the `LOCAL` command with no
/// address (spec §2.1, §2.2); the receiver keeps the socket's addresses.
pub fn local(v2: bool, out: &mut Vec<u8>) {
    if v2 {
        out.extend_from_slice(V2_SIG);
        // Version 2, command LOCAL, family unspecified, no address block.
        out.extend_from_slice(&[0x20, 0x00, 0, 0]);
    } else {
        out.extend_from_slice(b"PROXY UNKNOWN\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy_protocol::{Header, parse};

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// What the reader makes of `bytes`, whole and split at every byte
    /// (a prefix is "need more", never an error).
    fn read_back(bytes: &[u8]) -> Header {
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), Ok(None), "prefix of {cut} bytes");
        }
        parse(bytes).unwrap().unwrap()
    }

    #[test]
    fn v1_lines_read_back() {
        let mut out = Vec::new();
        v1(a("192.0.2.1:5000"), a("127.0.0.1:80"), &mut out);
        assert_eq!(out, b"PROXY TCP4 192.0.2.1 127.0.0.1 5000 80\r\n");
        let h = read_back(&out);
        assert_eq!((h.len, h.source), (out.len(), Some(a("192.0.2.1:5000"))));
        // A mapped pair goes as IPv4; mixed families as IPv6.
        out.clear();
        v1(a("[::ffff:10.1.2.3]:1"), a("10.0.0.1:2"), &mut out);
        assert_eq!(out, b"PROXY TCP4 10.1.2.3 10.0.0.1 1 2\r\n");
        out.clear();
        v1(a("10.1.2.3:1"), a("[2001:db8::1]:443"), &mut out);
        assert_eq!(out, b"PROXY TCP6 ::ffff:10.1.2.3 2001:db8::1 1 443\r\n");
        assert_eq!(read_back(&out).source, Some(a("[::ffff:10.1.2.3]:1")));
        // The longest line fits the spec's bound.
        out.clear();
        let long = a("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
        v1(long, long, &mut out);
        assert!(out.len() <= crate::proxy_protocol::V1_MAX, "{}", out.len());
        assert_eq!(read_back(&out).source, Some(long));
    }

    #[test]
    fn local_headers_read_back_without_a_source() {
        for v2 in [false, true] {
            let mut out = Vec::new();
            local(v2, &mut out);
            let h = read_back(&out);
            assert_eq!((h.len, h.source), (out.len(), None), "v2: {v2}");
        }
    }

    #[test]
    fn v2_headers_read_back() {
        let mut out = Vec::new();
        v2(a("192.0.2.1:5000"), a("127.0.0.1:80"), &mut out);
        assert_eq!(out.len(), 28);
        assert_eq!(&out[12..16], &[0x21, 0x11, 0, 12]);
        assert_eq!(read_back(&out).source, Some(a("192.0.2.1:5000")));
        out.clear();
        v2(a("[2001:db8::7]:6000"), a("10.0.0.1:443"), &mut out);
        assert_eq!(out.len(), 52);
        assert_eq!(&out[12..16], &[0x21, 0x21, 0, 36]);
        let h = read_back(&out);
        assert_eq!((h.len, h.source), (52, Some(a("[2001:db8::7]:6000"))));
    }
}

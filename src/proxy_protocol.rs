//! The PROXY protocol header a TCP balancer puts before a connection's
//! first byte to pass on the client's address (HAProxy's "The PROXY
//! protocol", versions 1 and 2): found and read from the bytes at the
//! start of a connection.
//!
//! Sans-IO: [`parse`] is called on the bytes buffered so far and says
//! "need more", "a header of N bytes giving this source", or why the bytes
//! are not one. It keeps no state, so it may be called again on a longer
//! buffer; the answers for a header fed whole or split at any byte agree.
//!
//! Bounds: a v1 line is at most 107 bytes with its CRLF (spec §2.1); a v2
//! header may announce 16 + 65,535 bytes, but anything above
//! [`MAX_HEADER`] is refused (a balancer's header with its TLVs is a few
//! hundred bytes). TLVs are walked only to check that each fits, then
//! skipped.
//!
//! Writing one (a group's `send_proxy_protocol`) is `write.rs`.
//!
//! What it must not know: sockets, who sent the bytes, HTTP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub mod write;

/// Longest v1 header, `PROXY` through CRLF (spec §2.1).
pub const V1_MAX: usize = 107;

/// Longest header accepted, bytes (v2 allows 16 + 65,535; HAProxy's own
/// buffers bound it lower too).
pub const MAX_HEADER: usize = 4096;

/// The v1 header starts with these bytes.
const V1_SIG: &[u8] = b"PROXY ";

/// The v2 header's 12-byte signature (spec §2.2).
pub const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A complete header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its length in bytes: the connection's own bytes start after it.
    pub len: usize,
    /// The client's address and port; `None` when the header gives none
    /// (v1 `UNKNOWN`, v2 `LOCAL`, an unspecified or UNIX family): the
    /// connection's own source address stands.
    pub source: Option<SocketAddr>,
}

/// Why the bytes are not a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Not a header, or one that breaks the spec; the reason.
    Malformed(&'static str),
    /// A v2 header longer than [`MAX_HEADER`].
    TooLarge,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Malformed(why) => write!(f, "bad PROXY protocol header: {why}"),
            Error::TooLarge => write!(f, "PROXY protocol header over {MAX_HEADER} bytes"),
        }
    }
}

/// Whether `buf` starts with a whole v1 or v2 signature (`PROXY ` or the
/// 12 bytes of v2): bytes that only a balancer sends.
pub fn has_signature(buf: &[u8]) -> bool {
    buf.starts_with(V1_SIG) || buf.starts_with(V2_SIG)
}

/// Reads the header at the start of `buf`.
///
/// `Ok(None)`: `buf` is a proper prefix of a header so far (read more).
/// `Ok(Some(h))`: a header of `h.len` bytes. Errors: the bytes cannot
/// start a header, or break the spec, or are too long.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, Error> {
    let prefix_of = |sig: &[u8]| {
        let n = buf.len().min(sig.len());
        buf.get(..n) == sig.get(..n)
    };
    if prefix_of(V2_SIG) {
        return if buf.len() < V2_SIG.len() {
            Ok(None)
        } else {
            parse_v2(buf)
        };
    }
    if prefix_of(V1_SIG) {
        return if buf.len() < V1_SIG.len() {
            Ok(None)
        } else {
            parse_v1(buf)
        };
    }
    Err(Error::Malformed("the connection does not start with one"))
}

/// `PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n` or `PROXY UNKNOWN ...\r\n`.
fn parse_v1(buf: &[u8]) -> Result<Option<Header>, Error> {
    let window = buf.get(..buf.len().min(V1_MAX)).unwrap_or(buf);
    let Some(cr) = window.windows(2).position(|w| w == b"\r\n") else {
        if window.len() >= V1_MAX {
            return Err(Error::Malformed("v1 line longer than 107 bytes"));
        }
        if window.contains(&b'\n') {
            return Err(Error::Malformed("v1 line ends in a bare LF"));
        }
        return Ok(None);
    };
    let len = cr + 2;
    let line = buf.get(V1_SIG.len()..cr).unwrap_or(&[]);
    let line = std::str::from_utf8(line).map_err(|_| Error::Malformed("v1 line is not ASCII"))?;
    let mut parts = line.split(' ');
    let source = match parts.next() {
        // The rest of an UNKNOWN line is ignored (spec §2.1).
        Some("UNKNOWN") => None,
        Some(proto @ ("TCP4" | "TCP6")) => {
            let fields: Vec<&str> = parts.collect();
            let [src, dst, sport, dport] = fields.as_slice() else {
                return Err(Error::Malformed("v1 needs SRC DST SPORT DPORT"));
            };
            let ip: IpAddr = src
                .parse()
                .map_err(|_| Error::Malformed("v1 source is not an address"))?;
            let to: IpAddr = dst
                .parse()
                .map_err(|_| Error::Malformed("v1 destination is not an address"))?;
            // Both addresses are of the line's family (spec §2.1).
            if ip.is_ipv4() != (proto == "TCP4") || to.is_ipv4() != (proto == "TCP4") {
                return Err(Error::Malformed(
                    "v1 address is not of its protocol's family",
                ));
            }
            let port = v1_port(sport)?;
            v1_port(dport)?;
            Some(SocketAddr::new(ip, port))
        }
        _ => return Err(Error::Malformed("v1 protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    Ok(Some(Header { len, source }))
}

/// A v1 port: 1 to 5 digits, at most 65535.
fn v1_port(s: &str) -> Result<u16, Error> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Malformed("v1 port is not a number"));
    }
    s.parse()
        .map_err(|_| Error::Malformed("v1 port is over 65535"))
}

/// The binary header: signature, version/command, family/transport,
/// length, addresses, TLVs (spec §2.2).
fn parse_v2(buf: &[u8]) -> Result<Option<Header>, Error> {
    let Some(fixed) = buf.first_chunk::<16>() else {
        return Ok(None);
    };
    let (ver_cmd, fam) = (fixed[12], fixed[13]);
    let body_len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    if ver_cmd >> 4 != 2 {
        return Err(Error::Malformed("v2 version is not 2"));
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(Error::Malformed("v2 command is not LOCAL or PROXY")),
    };
    let len = 16 + body_len;
    if len > MAX_HEADER {
        return Err(Error::TooLarge);
    }
    let Some(body) = buf.get(16..len) else {
        return Ok(None);
    };
    // Address block sizes by family (spec §2.2: 12, 36, 216 bytes).
    let (addr_len, source) = match fam {
        0x00 => (0, None),
        0x11 => {
            let a = body
                .first_chunk::<12>()
                .ok_or(Error::Malformed("v2 block too short for IPv4"))?;
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            let port = u16::from_be_bytes([a[8], a[9]]);
            (12, Some(SocketAddr::new(IpAddr::V4(ip), port)))
        }
        0x21 => {
            let a = body
                .first_chunk::<36>()
                .ok_or(Error::Malformed("v2 block too short for IPv6"))?;
            let (src, _) = a.split_first_chunk::<16>().unwrap_or((&[0; 16], &[]));
            let port = u16::from_be_bytes([a[32], a[33]]);
            (
                36,
                Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(*src)), port)),
            )
        }
        0x31 => {
            if body.len() < 216 {
                return Err(Error::Malformed("v2 block too short for UNIX"));
            }
            (216, None)
        }
        _ if local => (0, None),
        _ => {
            return Err(Error::Malformed(
                "v2 family is not TCP over IPv4, IPv6 or UNIX",
            ));
        }
    };
    // LOCAL: the block is ignored (spec §2.2: "the receiver must ignore
    // the address information"); its TLVs, if any, too.
    if !local {
        check_tlvs(body.get(addr_len..).unwrap_or(&[]))?;
    }
    Ok(Some(Header {
        len,
        source: if local { None } else { source },
    }))
}

/// Each TLV (type, 2-byte length, value) fits in what is left; their
/// contents are not used.
fn check_tlvs(mut rest: &[u8]) -> Result<(), Error> {
    while !rest.is_empty() {
        let Some(&[_, hi, lo]) = rest.get(..3) else {
            return Err(Error::Malformed("v2 TLV cut short"));
        };
        let end = 3 + usize::from(u16::from_be_bytes([hi, lo]));
        rest = rest
            .get(end..)
            .ok_or(Error::Malformed("v2 TLV runs past the header"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! The PROXY header reader on byte strings: whole, split at every byte
//! position (fed as two pieces into one growing buffer), and with the
//! connection's own bytes behind it; the answers must agree.

use super::*;

/// What `parse` makes of `input` fed as two pieces at every split point:
/// every prefix short of the whole says "need more" or the same error as
/// the whole; the whole and the whole plus trailing bytes give one answer.
#[track_caller]
fn parse_every_split(input: &[u8]) -> Result<Option<Header>, Error> {
    let whole = parse(input);
    for cut in 0..input.len() {
        let mut buf = input.get(..cut).unwrap().to_vec();
        let first = parse(&buf);
        match (&first, &whole) {
            (Ok(None), _) => {}
            (Err(e), Err(w)) if e == w => {}
            _ => panic!("prefix of {cut} bytes gave {first:?}, whole gave {whole:?}"),
        }
        buf.extend_from_slice(input.get(cut..).unwrap());
        assert_eq!(parse(&buf), whole, "split at {cut}");
    }
    let mut trailing = input.to_vec();
    trailing.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    if let Ok(Some(h)) = whole {
        assert_eq!(parse(&trailing), whole, "with the request behind it");
        assert_eq!(h.len, input.len());
    }
    whole
}

fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    h.push(0x20 | cmd);
    h.push(fam);
    h.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    h.extend_from_slice(body);
    h
}

fn ipv4_block() -> Vec<u8> {
    // 192.0.2.7:51000 -> 10.0.0.1:80
    let mut b = vec![192, 0, 2, 7, 10, 0, 0, 1];
    b.extend_from_slice(&51000u16.to_be_bytes());
    b.extend_from_slice(&80u16.to_be_bytes());
    b
}

fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().unwrap())
}

#[test]
fn v1_tcp4_tcp6_and_unknown() {
    let h = parse_every_split(b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 80\r\n").unwrap();
    assert_eq!(h.unwrap().source, addr("192.0.2.7:51000"));
    let h = parse_every_split(b"PROXY TCP6 2001:db8::7 2001:db8::1 4000 443\r\n").unwrap();
    assert_eq!(h.unwrap().source, addr("[2001:db8::7]:4000"));
    let h = parse_every_split(b"PROXY UNKNOWN ffff::1 whatever\r\n").unwrap();
    assert_eq!(h.unwrap().source, None);
    let h = parse_every_split(b"PROXY UNKNOWN\r\n").unwrap();
    assert_eq!(h.unwrap().source, None);
}

#[test]
fn v1_longest_line_is_read_and_one_more_byte_refused() {
    // The spec's worst case, 107 bytes: UNKNOWN with two full IPv6
    // addresses and ports behind it.
    let a = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let line = format!("PROXY UNKNOWN {a} {a} 65535 65535\r\n");
    assert_eq!(line.len(), V1_MAX);
    let h = parse_every_split(line.as_bytes()).unwrap().unwrap();
    assert_eq!(h.len, V1_MAX);
    let long = format!("PROXY UNKNOWN {}\r\n", "x".repeat(92));
    assert_eq!(long.len(), V1_MAX + 1);
    assert_eq!(
        parse_every_split(long.as_bytes()),
        Err(Error::Malformed("v1 line longer than 107 bytes"))
    );
}

#[test]
fn v1_malformed_lines_are_refused() {
    // Each row: the line, and why it is refused.
    let rows: [(&[u8], &str); 12] = [
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 51000\r\n",
            "a field missing",
        ),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 80 9\r\n",
            "a field too many",
        ),
        (
            b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n",
            "IPv6 source under TCP4",
        ),
        (
            b"PROXY TCP6 192.0.2.7 ::1 1 2\r\n",
            "IPv4 source under TCP6",
        ),
        (
            b"PROXY TCP6 ::ffff:192.0.2.2 127.0.0.1 1 2\r\n",
            "IPv4 destination under TCP6",
        ),
        (
            b"PROXY TCP4 192.0.2.7 ::1 1 2\r\n",
            "IPv6 destination under TCP4",
        ),
        (
            b"PROXY TCP4 192.0.2.7 not-an-ip 1 2\r\n",
            "destination not an address",
        ),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 65536 80\r\n",
            "port over 65535",
        ),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 +1 80\r\n",
            "port with a sign",
        ),
        (b"PROXY TCP4  192.0.2.7 10.0.0.1 1 80\r\n", "two spaces"),
        (b"PROXY UDP4 192.0.2.7 10.0.0.1 1 80\r\n", "not TCP"),
        (b"PROXY TCP4 192.0.2.7 10.0.0.1 1 80\n", "a bare LF"),
    ];
    for (line, why) in rows {
        assert!(
            matches!(parse_every_split(line), Err(Error::Malformed(_))),
            "{why}"
        );
    }
}

#[test]
fn not_a_header_at_all() {
    assert!(parse(b"GET / HTTP/1.1\r\n").is_err());
    assert!(parse(b"PROXX").is_err());
    assert!(parse(b"\r\n\r\n\0\r\nQUIX").is_err());
    // Prefixes of either signature: read more.
    assert_eq!(parse(b""), Ok(None));
    assert_eq!(parse(b"PROX"), Ok(None));
    assert_eq!(parse(b"\r\n\r\n\0"), Ok(None));
    assert!(has_signature(b"PROXY TCP4"));
    assert!(has_signature(V2_SIG));
    assert!(!has_signature(b"PROPFIND / HTTP/1.1"));
}

#[test]
fn v2_proxy_ipv4_ipv6_and_unix() {
    let h = parse_every_split(&v2(1, 0x11, &ipv4_block()))
        .unwrap()
        .unwrap();
    assert_eq!(h.source, addr("192.0.2.7:51000"));
    let mut b6 = Vec::new();
    b6.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
    b6.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    b6.extend_from_slice(&4000u16.to_be_bytes());
    b6.extend_from_slice(&443u16.to_be_bytes());
    let h = parse_every_split(&v2(1, 0x21, &b6)).unwrap().unwrap();
    assert_eq!(h.source, addr("[2001:db8::7]:4000"));
    let h = parse_every_split(&v2(1, 0x31, &[0; 216])).unwrap().unwrap();
    assert_eq!(h.source, None);
    let h = parse_every_split(&v2(1, 0x00, &[])).unwrap().unwrap();
    assert_eq!(h.source, None);
}

#[test]
fn v2_tlvs_are_skipped() {
    let mut body = ipv4_block();
    // PP2_TYPE_ALPN "h2", PP2_TYPE_AUTHORITY "example.com", an empty NOOP.
    body.extend_from_slice(&[0x01, 0, 2, b'h', b'2']);
    body.extend_from_slice(&[0x02, 0, 11]);
    body.extend_from_slice(b"example.com");
    body.extend_from_slice(&[0x04, 0, 0]);
    let h = parse_every_split(&v2(1, 0x11, &body)).unwrap().unwrap();
    assert_eq!(h.source, addr("192.0.2.7:51000"));
    assert_eq!(h.len, 16 + body.len());
    // A TLV whose length runs past the header, one cut short.
    let mut over = ipv4_block();
    over.extend_from_slice(&[0x01, 0, 9, b'h', b'2']);
    assert_eq!(
        parse_every_split(&v2(1, 0x11, &over)),
        Err(Error::Malformed("v2 TLV runs past the header"))
    );
    let mut cut = ipv4_block();
    cut.extend_from_slice(&[0x01, 0]);
    assert_eq!(
        parse_every_split(&v2(1, 0x11, &cut)),
        Err(Error::Malformed("v2 TLV cut short"))
    );
}

#[test]
fn v2_local_gives_no_source() {
    // A balancer's health check: LOCAL, with or without an address block.
    let h = parse_every_split(&v2(0, 0x00, &[])).unwrap().unwrap();
    assert_eq!((h.len, h.source), (16, None));
    let h = parse_every_split(&v2(0, 0x11, &ipv4_block()))
        .unwrap()
        .unwrap();
    assert_eq!(h.source, None);
}

#[test]
fn v2_malformed_and_oversized_are_refused() {
    let mut bad_version = v2(1, 0x11, &ipv4_block());
    bad_version[12] = 0x11;
    assert!(matches!(
        parse_every_split(&bad_version),
        Err(Error::Malformed(_))
    ));
    let mut bad_cmd = v2(1, 0x11, &ipv4_block());
    bad_cmd[12] = 0x22;
    assert!(matches!(
        parse_every_split(&bad_cmd),
        Err(Error::Malformed(_))
    ));
    // A block shorter than its family's addresses.
    assert!(matches!(
        parse_every_split(&v2(1, 0x11, &[1, 2, 3])),
        Err(Error::Malformed(_))
    ));
    assert!(matches!(
        parse_every_split(&v2(1, 0x21, &ipv4_block())),
        Err(Error::Malformed(_))
    ));
    // UDP, or an unknown family.
    assert!(matches!(
        parse_every_split(&v2(1, 0x12, &ipv4_block())),
        Err(Error::Malformed(_))
    ));
    // Over 4 KiB: refused from the 16 fixed bytes, before the rest came.
    let big = v2(1, 0x11, &vec![0; MAX_HEADER - 16 + 1]);
    assert_eq!(parse(big.get(..16).unwrap()), Err(Error::TooLarge));
    assert_eq!(parse_every_split(&big), Err(Error::TooLarge));
    // Exactly 4 KiB: one TLV fills it.
    let mut fits = ipv4_block();
    let pad = MAX_HEADER - 16 - fits.len() - 3;
    fits.extend_from_slice(&[0x04]);
    fits.extend_from_slice(&u16::try_from(pad).unwrap().to_be_bytes());
    fits.extend_from_slice(&vec![0; pad]);
    let h = parse_every_split(&v2(1, 0x11, &fits)).unwrap().unwrap();
    assert_eq!(h.len, MAX_HEADER);
}

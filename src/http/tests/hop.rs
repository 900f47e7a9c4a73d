//! Hop-by-hop fields, keep-alive verdicts and forwarding fields
//! (RFC 9110 §7.6, RFC 9112 §9.3, ARCHITECTURE.md §6).

use std::net::IpAddr;

use crate::http::Headers;
use crate::http::hop::{
    add_forwarding_fields, connection_has, drop_h2c_offer, drop_managed_lookalikes,
    is_upgrade_request, remove_hop_by_hop, request_keep_alive, response_keep_alive,
};

fn headers(fields: &[(&str, &str)]) -> Headers {
    let mut h = Headers::new();
    for (n, v) in fields {
        h.append(n, v.as_bytes());
    }
    h
}

fn encoded(h: &Headers) -> String {
    let mut out = Vec::new();
    h.encode(&mut out);
    String::from_utf8(out).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn connection_tokens_are_a_case_insensitive_list() {
    let h = headers(&[
        ("Connection", " Keep-Alive ,\tX-Foo"),
        ("connection", "CLOSE"),
    ]);
    assert!(connection_has(&h, "keep-alive"));
    assert!(connection_has(&h, "x-foo"));
    assert!(connection_has(&h, "close"));
    assert!(!connection_has(&h, "upgrade"));
    assert!(!connection_has(&h, "keep"), "whole tokens only");
    assert!(!connection_has(&Headers::new(), "close"));
}

#[test]
fn upgrade_request_needs_both_fields() {
    let yes = headers(&[
        ("Connection", "keep-alive, Upgrade"),
        ("Upgrade", "websocket"),
    ]);
    assert!(is_upgrade_request(&yes));
    assert!(!is_upgrade_request(&headers(&[("Upgrade", "websocket")])));
    assert!(!is_upgrade_request(&headers(&[("Connection", "upgrade")])));
}

#[test]
fn hop_by_hop_fields_and_connection_named_ones_go() {
    let mut h = headers(&[
        ("Host", "h"),
        ("Connection", "keep-alive, X-Secret"),
        ("Keep-Alive", "timeout=5"),
        ("X-Secret", "s"),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("Upgrade", "h2c"),
        ("Transfer-Encoding", "chunked"),
        ("Trailer", "X-Sum"),
        ("x-secret", "again"),
        ("Accept", "*/*"),
    ]);
    remove_hop_by_hop(&mut h, false);
    assert_eq!(
        encoded(&h),
        "Host: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nAccept: */*\r\n"
    );
}

#[test]
fn connection_cannot_strip_framing_trailer_or_host() {
    let mut h = headers(&[
        ("Host", "h"),
        ("Content-Length", "5"),
        ("Transfer-Encoding", "chunked"),
        ("Trailer", "X"),
        (
            "Connection",
            "content-length, transfer-encoding, trailer, host, x-a",
        ),
        ("X-A", "a"),
    ]);
    remove_hop_by_hop(&mut h, false);
    assert_eq!(
        encoded(&h),
        "Host: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n"
    );
}

#[test]
fn keep_upgrade_keeps_upgrade_and_one_connection_upgrade() {
    let mut h = headers(&[
        ("Host", "h"),
        ("Connection", "Upgrade, X-Hop"),
        ("Upgrade", "websocket"),
        ("X-Hop", "1"),
        ("Sec-WebSocket-Key", "k"),
        ("Connection", "keep-alive"),
        ("Keep-Alive", "timeout=5"),
    ]);
    assert!(is_upgrade_request(&h));
    remove_hop_by_hop(&mut h, true);
    assert_eq!(
        encoded(&h),
        "Host: h\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\nConnection: upgrade\r\n"
    );
    assert!(is_upgrade_request(&h));
}

#[test]
fn an_h2c_offer_is_dropped_with_http2_settings() {
    let mut h = headers(&[
        ("Host", "h"),
        ("Connection", "Upgrade"),
        ("Upgrade", "h2c"),
        ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA"),
    ]);
    drop_h2c_offer(&mut h);
    assert!(!is_upgrade_request(&h));
    assert_eq!(encoded(&h), "Host: h\r\nConnection: Upgrade\r\n");
    let mut h = headers(&[
        ("Connection", "upgrade"),
        ("Upgrade", "websocket, H2C/1, h2"),
        ("Upgrade", "foo"),
    ]);
    drop_h2c_offer(&mut h);
    assert!(is_upgrade_request(&h));
    assert_eq!(
        encoded(&h),
        "Connection: upgrade\r\nUpgrade: websocket, foo\r\n"
    );
    let mut h = headers(&[("Upgrade", "websocket"), ("HTTP2-Settings", "x")]);
    drop_h2c_offer(&mut h);
    assert_eq!(encoded(&h), "Upgrade: websocket\r\nHTTP2-Settings: x\r\n");
}

#[test]
fn keep_alive_verdicts() {
    let none = Headers::new();
    let close = headers(&[("Connection", "close")]);
    let ka = headers(&[("Connection", "Keep-Alive")]);
    let both = headers(&[("Connection", "keep-alive, close")]);
    // (version, headers, request verdict, response verdict, why)
    let table: &[(u8, &Headers, bool, bool, &str)] = &[
        (1, &none, true, true, "HTTP/1.1 persists by default"),
        (1, &close, false, false, "close ends it"),
        (1, &ka, true, true, "keep-alive on 1.1 changes nothing"),
        (1, &both, false, false, "close wins"),
        (0, &none, false, false, "HTTP/1.0 closes by default"),
        (
            0,
            &ka,
            true,
            false,
            "1.0 keep-alive: client yes, upstream never",
        ),
        (0, &both, false, false, "close wins on 1.0"),
    ];
    for (version, h, req, resp, why) in table {
        assert_eq!(request_keep_alive(*version, h), *req, "request: {why}");
        assert_eq!(response_keep_alive(*version, h), *resp, "response: {why}");
    }
}

#[test]
fn forwarding_fields_are_appended() {
    let mut h = headers(&[("Host", "h"), ("Accept", "*/*")]);
    add_forwarding_fields(
        &mut h,
        ip("192.0.2.7"),
        Some((&b"1.1"[..], "sluice")),
        true,
        Some(b"http"),
    );
    assert_eq!(
        encoded(&h),
        "Host: h\r\nAccept: */*\r\nVia: 1.1 sluice\r\nX-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n"
    );
}

#[test]
fn forwarded_for_grows_the_last_field_in_place() {
    let mut h = headers(&[
        ("X-Forwarded-For", "10.0.0.1"),
        ("Host", "h"),
        ("x-forwarded-for", "10.0.0.2"),
        ("Via", "1.0 other"),
        ("Accept", "*/*"),
    ]);
    add_forwarding_fields(
        &mut h,
        ip("2001:db8::1"),
        Some((&b"1.1"[..], "sluice")),
        true,
        None,
    );
    assert_eq!(
        encoded(&h),
        "X-Forwarded-For: 10.0.0.1\r\nHost: h\r\nx-forwarded-for: 10.0.0.2, 2001:db8::1\r\nVia: 1.0 other\r\nAccept: */*\r\nVia: 1.1 sluice\r\n"
    );
}

#[test]
fn forwarded_for_edge_cases() {
    let mut h = headers(&[("X-Forwarded-For", "")]);
    add_forwarding_fields(&mut h, ip("::ffff:192.0.2.1"), None, true, None);
    assert_eq!(
        encoded(&h),
        "X-Forwarded-For: 192.0.2.1\r\n",
        "empty value, mapped IPv4"
    );
    for v in ["1.1.1.1,", "1.1.1.1, "] {
        let mut h = headers(&[("X-Forwarded-For", v)]);
        add_forwarding_fields(&mut h, ip("192.0.2.1"), None, true, None);
        assert_eq!(
            encoded(&h),
            "X-Forwarded-For: 1.1.1.1, 192.0.2.1\r\n",
            "a trailing comma gets no second one: {v:?}"
        );
    }
}

#[test]
fn forwarded_proto_is_replaced_and_switches_are_honoured() {
    let mut h = headers(&[
        ("X-Forwarded-Proto", "https"),
        ("Host", "h"),
        ("x-forwarded-proto", "wss"),
    ]);
    add_forwarding_fields(&mut h, ip("192.0.2.7"), None, false, Some(b"http"));
    assert_eq!(encoded(&h), "Host: h\r\nX-Forwarded-Proto: http\r\n");
    let before = headers(&[("Host", "h"), ("X-Forwarded-For", "1.2.3.4")]);
    let mut h = before.clone();
    add_forwarding_fields(&mut h, ip("192.0.2.7"), None, false, None);
    assert_eq!(h, before, "all switches off changes nothing");
}

#[test]
fn keep_alive_timeout_is_read_from_the_timeout_parameter() {
    use crate::http::hop::keep_alive_timeout;
    let t = |v: &str| keep_alive_timeout(&headers(&[("Keep-Alive", v)]));
    assert_eq!(t("timeout=5, max=100"), Some(5));
    assert_eq!(t("max=100, TIMEOUT = 15"), Some(15));
    assert_eq!(t("timeout=\"7\""), Some(7));
    assert_eq!(t("timeout=0"), Some(0));
    assert_eq!(t("timeout=99999999"), Some(86_400));
    assert_eq!(t("max=100"), None);
    assert_eq!(t("timeout="), None);
    assert_eq!(t("timeout=5s"), None);
    assert_eq!(t("timeout=-1"), None);
    assert_eq!(t("timeout=1234567890123"), None);
    assert_eq!(
        keep_alive_timeout(&headers(&[("Connection", "keep-alive")])),
        None
    );
    let two = headers(&[("keep-alive", "max=5"), ("Keep-Alive", "timeout=2")]);
    assert_eq!(keep_alive_timeout(&two), Some(2));
}

#[test]
fn x_forwarded_for_writes_every_ipv4_octet_as_std_does() {
    for (a, b) in [(0u8, 0u8), (9, 10), (99, 100), (255, 1), (10, 255), (1, 99)] {
        for (c, d) in [(0u8, 7u8), (100, 250), (19, 200), (255, 255)] {
            let addr = std::net::Ipv4Addr::new(a, b, c, d);
            let mut h = Headers::new();
            add_forwarding_fields(&mut h, IpAddr::V4(addr), None, true, None);
            assert_eq!(
                h.get("x-forwarded-for"),
                Some(addr.to_string().as_bytes()),
                "{addr}"
            );
        }
    }
}

#[test]
fn underscore_spellings_of_the_managed_fields_are_dropped() {
    let mut h = headers(&[
        ("Host", "h"),
        ("X_Forwarded_Proto", "https"),
        ("x-forwarded_for", "1.2.3.4"),
        ("X-Forwarded-Client_Cert", "evil"),
        ("X-Forwarded-For", "5.6.7.8"),
        ("X_Custom", "kept"),
        ("X-Forwarded_Fo", "kept"),
    ]);
    drop_managed_lookalikes(&mut h);
    assert_eq!(
        encoded(&h),
        "Host: h\r\nX-Forwarded-For: 5.6.7.8\r\nX_Custom: kept\r\nX-Forwarded_Fo: kept\r\n"
    );
}

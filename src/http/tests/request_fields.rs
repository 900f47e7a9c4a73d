//! The request plan, the fields going upstream: hop-by-hop, keep-alive,
//! forwarding fields, retry class, and refusals before any rewrite, from
//! byte strings alone (ARCHITECTURE/ARCHITECTURE.md §6, §7, §8).

use std::net::IpAddr;

use super::plan_helpers::{NO_FWD, parse, plan_with, planned, refused, upstream};
use crate::http::request::is_idempotent;
use crate::http::{BodyKind, Forwarding, plan_request};

// ---- Hop-by-hop (§6) -------------------------------------------------------

#[test]
fn hop_by_hop_fields_go_and_the_rest_keep_their_order() {
    let (head, plan) = planned(&[
        "POST /p HTTP/1.1",
        "X-First: 1",
        "Connection: keep-alive, X-Secret",
        "Host: h",
        "Keep-Alive: timeout=5",
        "X-Secret: s",
        "Proxy-Connection: keep-alive",
        "TE: trailers",
        "Upgrade: h2c",
        "Content-Length: 3",
        "accept: */*",
        "x-secret: again",
        "X-Last: 2",
    ]);
    assert!(!plan.upgrade, "Connection does not list upgrade");
    assert_eq!(
        upstream(&head),
        "POST /p HTTP/1.1\r\nX-First: 1\r\nHost: h\r\nContent-Length: 3\r\naccept: */*\r\nX-Last: 2\r\n\r\n"
    );
}

#[test]
fn connection_cannot_strip_framing_trailer_or_host() {
    let (head, plan) = planned(&[
        "POST / HTTP/1.1",
        "Host: h",
        "Transfer-Encoding: chunked",
        "Trailer: X-Sum",
        "Connection: Transfer-Encoding, Trailer, Host, Content-Length",
    ]);
    assert_eq!(plan.framing, BodyKind::Chunked);
    assert_eq!(
        upstream(&head),
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
    );
    let (head, plan) = planned(&[
        "POST / HTTP/1.1",
        "Host: h",
        "Content-Length: 5",
        "Connection: content-length",
    ]);
    assert_eq!(plan.framing, BodyKind::Length(5));
    assert_eq!(head.headers.get("content-length"), Some(&b"5"[..]));
}

#[test]
fn upgrade_request_keeps_upgrade_and_one_connection_upgrade() {
    let (head, plan) = plan_with(
        &[
            "GET /ws HTTP/1.1",
            "Host: h",
            "Connection: keep-alive, Upgrade",
            "Upgrade: websocket",
            "Sec-WebSocket-Key: k",
            "Keep-Alive: timeout=5",
        ],
        Forwarding::default(),
    );
    let plan = plan.unwrap();
    assert!(plan.upgrade);
    assert!(plan.keep_alive);
    assert_eq!(
        upstream(&head),
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\
         Connection: upgrade\r\nVia: 1.1 sluice\r\nX-Forwarded-For: 192.0.2.7\r\n\
         X-Forwarded-Proto: http\r\n\r\n"
    );
    assert_eq!(head.headers.get_all("connection").count(), 1);
}

#[test]
fn upgrade_field_without_connection_upgrade_is_dropped() {
    let (head, plan) = planned(&["GET / HTTP/1.1", "Host: h", "Upgrade: websocket"]);
    assert!(!plan.upgrade);
    assert_eq!(upstream(&head), "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

#[test]
fn http10_upgrade_is_ignored() {
    let (head, plan) = planned(&[
        "GET /ws HTTP/1.0",
        "Host: h",
        "Connection: upgrade",
        "Upgrade: websocket",
    ]);
    assert!(!plan.upgrade);
    assert!(!head.headers.contains("upgrade"));
}

// ---- Keep-alive (RFC 9112 §9.3) --------------------------------------------

#[test]
fn keep_alive_verdicts() {
    // (request line, Connection value, keep_alive, why)
    let table: &[(&str, Option<&str>, bool, &str)] = &[
        ("GET / HTTP/1.1", None, true, "1.1 persists by default"),
        ("GET / HTTP/1.1", Some("close"), false, "close ends it"),
        (
            "GET / HTTP/1.1",
            Some("Keep-Alive, CLOSE"),
            false,
            "close wins",
        ),
        ("GET / HTTP/1.0", None, false, "1.0 closes by default"),
        (
            "GET / HTTP/1.0",
            Some("keep-alive"),
            true,
            "1.0 + keep-alive",
        ),
        ("GET / HTTP/1.0", Some("close"), false, "1.0 + close"),
    ];
    for (line, connection, want, why) in table {
        let field = connection.map(|c| format!("Connection: {c}"));
        let mut lines = vec![*line, "Host: h"];
        lines.extend(field.as_deref());
        let (head, plan) = planned(&lines);
        assert_eq!(plan.keep_alive, *want, "{why}");
        assert!(!head.headers.contains("connection"), "{why}: not forwarded");
    }
}

// ---- Forwarding fields (§6) ------------------------------------------------

#[test]
fn forwarding_fields_are_appended_at_the_end() {
    let (head, _) = plan_with(
        &["GET / HTTP/1.1", "Host: h", "Accept: */*"],
        Forwarding::default(),
    );
    assert_eq!(
        upstream(&head),
        "GET / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nVia: 1.1 sluice\r\n\
         X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
}

#[test]
fn forwarded_for_grows_in_place_and_proto_is_replaced() {
    let (head, _) = plan_with(
        &[
            "GET / HTTP/1.1",
            "X-Forwarded-Proto: https",
            "X-Forwarded-For: 10.0.0.1",
            "Host: h",
            "Via: 1.0 edge",
        ],
        Forwarding::default(),
    );
    assert_eq!(
        upstream(&head),
        "GET / HTTP/1.1\r\nX-Forwarded-For: 10.0.0.1, 192.0.2.7\r\nHost: h\r\n\
         Via: 1.0 edge\r\nVia: 1.1 sluice\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
}

#[test]
fn each_forwarding_field_can_be_switched_off() {
    let lines = [
        "GET / HTTP/1.1",
        "Host: h",
        "X-Forwarded-For: 10.0.0.1",
        "X-Forwarded-Proto: https",
    ];
    let all_off = {
        let (head, plan) = plan_with(&lines, NO_FWD);
        plan.unwrap();
        head
    };
    assert_eq!(
        upstream(&all_off),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\n\r\n",
        "all off: nothing changes"
    );
    let only = |fwd: Forwarding| {
        let (head, plan) = plan_with(&lines, fwd);
        plan.unwrap();
        upstream(&head)
    };
    assert_eq!(
        only(Forwarding {
            via: true,
            ..NO_FWD
        }),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\nVia: 1.1 sluice\r\n\r\n"
    );
    assert_eq!(
        only(Forwarding {
            x_forwarded_for: true,
            ..NO_FWD
        }),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.1, 192.0.2.7\r\nX-Forwarded-Proto: https\r\n\r\n"
    );
    assert_eq!(
        only(Forwarding {
            x_forwarded_proto: true,
            ..NO_FWD
        }),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
    // From a TLS listener the scheme is https, whatever the client claimed.
    assert_eq!(
        only(Forwarding {
            x_forwarded_proto: true,
            tls: true,
            ..NO_FWD
        }),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\n\r\n"
    );
}

#[test]
fn ipv4_mapped_client_is_written_as_ipv4() {
    let mut head = parse(&["GET / HTTP/1.1", "Host: h"]);
    let mapped: IpAddr = "::ffff:198.51.100.9".parse().unwrap();
    let fwd = Forwarding {
        x_forwarded_for: true,
        ..NO_FWD
    };
    plan_request(&mut head, mapped, fwd).unwrap();
    assert_eq!(
        head.headers.get("x-forwarded-for"),
        Some(&b"198.51.100.9"[..])
    );
    let mut head = parse(&["GET / HTTP/1.1", "Host: h"]);
    plan_request(&mut head, "2001:db8::7".parse().unwrap(), fwd).unwrap();
    assert_eq!(
        head.headers.get("x-forwarded-for"),
        Some(&b"2001:db8::7"[..]),
        "plain IPv6 without brackets"
    );
}

// ---- Retry class (§7) ------------------------------------------------------

#[test]
fn retry_class_follows_the_method() {
    for (method, want) in [
        ("GET", true),
        ("HEAD", true),
        ("OPTIONS", true),
        ("TRACE", true),
        ("PUT", true),
        ("DELETE", true),
        ("POST", false),
        ("PATCH", false),
        ("get", false),
    ] {
        assert_eq!(is_idempotent(method), want, "{method}");
        let line = format!("{method} / HTTP/1.1");
        let (_, plan) = planned(&[&line, "Host: h"]);
        assert_eq!(plan.idempotent, want, "{method} in the plan");
    }
}

// ---- Refusals come first ---------------------------------------------------

#[test]
fn refusals_come_before_any_rewrite_a_hook_could_see() {
    // Each is refused; nothing else is asserted about the head (it goes
    // nowhere).
    let table: &[(&[&str], u16, &str)] = &[
        (
            &[
                "GET http://h/a HTTP/1.1",
                "Host: h",
                "Transfer-Encoding: chunked",
                "Content-Length: 1",
            ],
            400,
            "framing before target",
        ),
        (
            &["CONNECT h:443 HTTP/1.1", "Content-Length: 1"],
            400,
            "missing Host before CONNECT",
        ),
        (
            &["CONNECT h:443 HTTP/1.1", "Host: h", "Content-Length: 1, 2"],
            400,
            "framing before CONNECT",
        ),
        (
            &["GET http://u@h/ HTTP/1.1", "Host: h", "Connection: close"],
            400,
            "userinfo",
        ),
    ];
    for (lines, status, why) in table {
        let r = refused(lines);
        assert_eq!(r.status(), *status, "{why}: {r:?}");
    }
}

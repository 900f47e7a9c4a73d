//! The request plan: framing, Host, target form, hop-by-hop, keep-alive,
//! forwarding fields and retry class, from byte strings alone
//! (ARCHITECTURE/DESIGN §5, §6, §8).

use crate::http::ParseHead;
use std::net::{IpAddr, Ipv4Addr};

use crate::http::request::{RequestPlan, is_idempotent};
use crate::http::{
    BodyKind, Forwarding, ParseError, Refusal, RequestHead, ensure_host, plan_request,
};

const MAX_FIELDS: usize = 100;

/// The client address used unless a test says otherwise.
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

/// No forwarding fields: the head's own fields only.
const NO_FWD: Forwarding = Forwarding {
    via: false,
    x_forwarded_for: false,
    x_forwarded_proto: false,
};

/// Parses the head made of `lines` (request-line first), each ended by
/// CRLF, then the blank line.
#[track_caller]
fn parse(lines: &[&str]) -> RequestHead {
    let mut text = lines.join("\r\n");
    text.push_str("\r\n\r\n");
    let (head, len) = RequestHead::parse(text.as_bytes(), MAX_FIELDS)
        .unwrap()
        .unwrap();
    assert_eq!(len, text.len());
    head
}

/// Parses and plans with `fwd`; returns the (rewritten) head and the plan.
#[track_caller]
fn plan_with(lines: &[&str], fwd: Forwarding) -> (RequestHead, Result<RequestPlan, Refusal>) {
    let mut head = parse(lines);
    let plan = plan_request(&mut head, CLIENT, fwd);
    (head, plan)
}

/// Plans without forwarding fields and expects success.
#[track_caller]
fn planned(lines: &[&str]) -> (RequestHead, RequestPlan) {
    let (head, plan) = plan_with(lines, NO_FWD);
    (head, plan.unwrap())
}

/// Plans and expects a refusal.
#[track_caller]
fn refused(lines: &[&str]) -> Refusal {
    let (_, plan) = plan_with(lines, Forwarding::default());
    plan.unwrap_err()
}

/// The head as it goes upstream.
fn upstream(head: &RequestHead) -> String {
    let mut out = Vec::new();
    head.encode_upstream(&mut out);
    String::from_utf8(out).unwrap()
}

/// The kind of refusal, for tables.
fn kind(r: &Refusal) -> &'static str {
    match r {
        Refusal::Invalid(ParseError::Framing(_)) => "framing",
        Refusal::Invalid(ParseError::UnknownCoding) => "unknown coding",
        Refusal::Invalid(ParseError::Malformed(_)) => "malformed",
        Refusal::Invalid(_) => "other invalid",
        Refusal::NotImplemented => "not implemented",
    }
}

// ---- Framing (§5) ----------------------------------------------------------

#[test]
fn te_and_cl_together_get_400() {
    let r = refused(&[
        "POST / HTTP/1.1",
        "Host: h",
        "Transfer-Encoding: chunked",
        "Content-Length: 5",
    ]);
    assert!(
        matches!(r, Refusal::Invalid(ParseError::Framing(_))),
        "{r:?}"
    );
    assert_eq!(r.status(), 400);
}

#[test]
fn framing_refusals() {
    // (fields after the request line, version, expected kind, status, why)
    let table: &[(&[&str], &str, &str, u16, &str)] = &[
        (
            &["Content-Length: 5", "Content-Length: 6"],
            "1.1",
            "framing",
            400,
            "differing Content-Length fields",
        ),
        (
            &["Content-Length: 5, 6"],
            "1.1",
            "framing",
            400,
            "differing Content-Length list",
        ),
        (
            &["Content-Length: 5", "Content-Length: 5"],
            "1.1",
            "framing",
            400,
            "repeated identical Content-Length (as nginx)",
        ),
        (
            &["Content-Length: 5, 5"],
            "1.1",
            "framing",
            400,
            "identical Content-Length list",
        ),
        (
            &["Content-Length: +5"],
            "1.1",
            "framing",
            400,
            "non-digit Content-Length",
        ),
        (
            &["Content-Length: 0x5"],
            "1.1",
            "framing",
            400,
            "hex Content-Length",
        ),
        (
            &["Content-Length: 99999999999999999999999"],
            "1.1",
            "framing",
            400,
            "Content-Length overflowing u64",
        ),
        (
            &["Transfer-Encoding: gzip"],
            "1.1",
            "framing",
            400,
            "last coding is not chunked",
        ),
        (
            &["Transfer-Encoding: chunked, gzip"],
            "1.1",
            "framing",
            400,
            "chunked not last",
        ),
        (
            &["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"],
            "1.1",
            "framing",
            400,
            "chunked twice",
        ),
        (
            &["Transfer-Encoding: foo, chunked"],
            "1.1",
            "unknown coding",
            501,
            "unknown coding",
        ),
        (
            &["Transfer-Encoding: chunked"],
            "1.0",
            "framing",
            400,
            "Transfer-Encoding in HTTP/1.0",
        ),
    ];
    for (fields, version, want, status, why) in table {
        let line = format!("POST / HTTP/{version}");
        let mut lines = vec![line.as_str(), "Host: h"];
        lines.extend_from_slice(fields);
        let r = refused(&lines);
        assert_eq!(kind(&r), *want, "{why}: {r:?}");
        assert_eq!(r.status(), *status, "{why}");
    }
}

#[test]
fn framing_kinds_and_has_body() {
    // (fields after Host, framing, has_body, why)
    let table: &[(&[&str], BodyKind, bool, &str)] = &[
        (&[], BodyKind::Empty, false, "neither field: no body"),
        (
            &["Transfer-Encoding: chunked"],
            BodyKind::Chunked,
            true,
            "chunked",
        ),
        (
            &["Transfer-Encoding: gzip, chunked"],
            BodyKind::Chunked,
            true,
            "a known coding, then chunked",
        ),
        (
            &["Content-Length: 5"],
            BodyKind::Length(5),
            true,
            "Content-Length: 5",
        ),
        (
            &["Content-Length: 0"],
            BodyKind::Empty,
            false,
            "Content-Length: 0 is no body",
        ),
    ];
    for (fields, framing, has_body, why) in table {
        let mut lines = vec!["POST / HTTP/1.1", "Host: h"];
        lines.extend_from_slice(fields);
        let (_, plan) = planned(&lines);
        assert_eq!(plan.framing, *framing, "{why}");
        assert_eq!(plan.has_body(), *has_body, "{why}");
    }
    let length_zero = RequestPlan {
        framing: BodyKind::Length(0),
        keep_alive: true,
        upgrade: false,
        idempotent: true,
    };
    assert!(!length_zero.has_body(), "Length(0) carries no body bytes");
}

// ---- Host (§6, §8) ---------------------------------------------------------

#[test]
fn http11_without_host_gets_400() {
    let r = refused(&["GET / HTTP/1.1", "Accept: */*"]);
    assert_eq!(kind(&r), "malformed");
    assert_eq!(r.status(), 400);
}

#[test]
fn two_host_fields_get_400() {
    let r = refused(&["GET / HTTP/1.1", "Host: a", "Host: a"]);
    assert_eq!(kind(&r), "malformed");
    assert_eq!(r.status(), 400);
    let r = refused(&["GET / HTTP/1.0", "Host: a", "host: b"]);
    assert_eq!(r.status(), 400, "several Host fields in HTTP/1.0 too");
}

#[test]
fn invalid_host_bytes_get_400() {
    for host in ["a b", "a/b", "a@b", "a\"b", "a<b>", "a\\b", "h?x"] {
        let line = format!("Host: {host}");
        let r = refused(&["GET / HTTP/1.1", &line]);
        assert_eq!(kind(&r), "malformed", "Host: {host}");
        assert_eq!(r.status(), 400, "Host: {host}");
    }
    for host in [
        "h",
        "h:8080",
        "[2001:db8::1]:80",
        "192.0.2.1",
        "a-b.c_d~e",
        "",
    ] {
        let line = format!("Host: {host}");
        let (head, _) = planned(&["GET / HTTP/1.1", &line]);
        assert_eq!(head.headers.get("host"), Some(host.as_bytes()), "{host}");
    }
}

#[test]
fn http10_without_host_is_accepted_and_ensure_host_adds_the_peer() {
    let (mut head, plan) = planned(&["GET /a HTTP/1.0", "Accept: */*"]);
    assert!(!plan.keep_alive);
    assert!(!head.headers.contains("host"));
    ensure_host(&mut head, "10.0.0.5:8080");
    assert_eq!(
        upstream(&head),
        "GET /a HTTP/1.1\r\nAccept: */*\r\nHost: 10.0.0.5:8080\r\n\r\n"
    );
}

#[test]
fn ensure_host_leaves_a_request_with_host_alone() {
    for line in ["GET / HTTP/1.0", "GET / HTTP/1.1"] {
        let (mut head, _) = planned(&[line, "host: client.example"]);
        let before = head.clone();
        ensure_host(&mut head, "10.0.0.5:8080");
        assert_eq!(head, before, "{line}");
    }
}

// ---- Target forms (§6, RFC 9112 §3.2) --------------------------------------

#[test]
fn origin_form_is_forwarded_as_is() {
    let (head, plan) = planned(&["GET /a/b?c=d HTTP/1.1", "Host: h"]);
    assert_eq!(head.target, "/a/b?c=d");
    assert_eq!(plan.framing, BodyKind::Empty);
    assert_eq!(upstream(&head), "GET /a/b?c=d HTTP/1.1\r\nHost: h\r\n\r\n");
}

#[test]
fn asterisk_only_with_options() {
    let (head, _) = planned(&["OPTIONS * HTTP/1.1", "Host: h"]);
    assert_eq!(head.target, "*");
    for method in ["GET", "HEAD", "POST", "options"] {
        let line = format!("{method} * HTTP/1.1");
        let r = refused(&[&line, "Host: h"]);
        assert_eq!(kind(&r), "malformed", "{method} *");
        assert_eq!(r.status(), 400, "{method} *");
    }
}

#[test]
fn authority_form_only_for_connect() {
    let r = refused(&["GET h:80 HTTP/1.1", "Host: h:80"]);
    assert_eq!(kind(&r), "malformed");
    assert_eq!(r.status(), 400);
}

#[test]
fn connect_gets_501() {
    let r = refused(&["CONNECT h:443 HTTP/1.1", "Host: h:443"]);
    assert_eq!(r, Refusal::NotImplemented);
    assert_eq!(r.status(), 501);
}

#[test]
fn absolute_form_becomes_origin_form_and_sets_host() {
    let (head, _) = planned(&["GET http://h/a?b HTTP/1.1", "Host: other", "Accept: */*"]);
    assert_eq!(head.target, "/a?b");
    assert_eq!(
        upstream(&head),
        "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: h\r\n\r\n",
        "the Host that came is replaced"
    );
    // Scheme in any case, https, no path, a port, a fragment.
    let table: &[(&str, &str, &str)] = &[
        ("HTTP://h/a", "/a", "h"),
        ("https://h:8443/x", "/x", "h:8443"),
        ("http://h", "/", "h"),
        ("http://h?q", "/?q", "h"),
        ("http://h/a#frag", "/a", "h"),
    ];
    for (target, origin, host) in table {
        let line = format!("GET {target} HTTP/1.1");
        let (head, _) = planned(&[&line, "Host: x"]);
        assert_eq!(head.target, *origin, "{target}");
        assert_eq!(
            head.headers.get_all("host").collect::<Vec<_>>(),
            [host.as_bytes()]
        );
    }
}

#[test]
fn options_absolute_without_path_becomes_asterisk() {
    // Last round's fix (RFC 9112 §3.2.4).
    let (head, _) = planned(&["OPTIONS http://h HTTP/1.1", "Host: h"]);
    assert_eq!(head.target, "*");
    assert_eq!(upstream(&head), "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    let (head, _) = planned(&["OPTIONS http://h/ HTTP/1.1", "Host: h"]);
    assert_eq!(head.target, "/", "a path `/` stays a path");
}

#[test]
fn absolute_form_with_userinfo_gets_400() {
    let r = refused(&["GET http://user:pw@h/ HTTP/1.1", "Host: h"]);
    assert_eq!(kind(&r), "malformed");
    assert_eq!(r.status(), 400);
}

#[test]
fn absolute_form_with_empty_authority_gets_400() {
    for target in ["http:///a", "http://", "https://?q"] {
        let line = format!("GET {target} HTTP/1.1");
        let r = refused(&[&line, "Host: h"]);
        assert_eq!(kind(&r), "malformed", "{target}");
        assert_eq!(r.status(), 400, "{target}");
    }
}

#[test]
#[ignore = "plan_request does not check the absolute-form authority: `http://a<b>/` becomes `Host: a<b>` upstream"]
fn absolute_form_with_invalid_authority_bytes_gets_400() {
    // The authority replaces Host, so it must pass the rule a Host value
    // passes (RFC 9112 §3.2: invalid Host → 400).
    let r = refused(&["GET http://a<b>/ HTTP/1.1", "Host: h"]);
    assert_eq!(r.status(), 400);
}

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
#[ignore = "plan_request honours Upgrade on an HTTP/1.0 request (RFC 9110 §7.8: a server MUST ignore it)"]
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

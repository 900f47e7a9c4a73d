//! The request plan, what a request is and where it goes: framing, Host
//! and target form, from byte strings alone (ARCHITECTURE/ARCHITECTURE.md §5, §6,
//! §8).

use super::plan_helpers::{kind, planned, refused, upstream};
use crate::http::request::RequestPlan;
use crate::http::{BodyKind, ParseError, Refusal, ensure_host};

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
        expect_continue: false,
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
    // No host at all (RFC 9110 §4.2.1) is refused too.
    for host in [
        "a b", "a/b", "a@b", "a\"b", "a<b>", "a\\b", "h?x", "", ":80", ".",
    ] {
        let line = format!("Host: {host}");
        let r = refused(&["GET / HTTP/1.1", &line]);
        assert_eq!(kind(&r), "malformed", "Host: {host}");
        assert_eq!(r.status(), 400, "Host: {host}");
    }
    for host in ["h", "h:8080", "[2001:db8::1]:80", "192.0.2.1", "a-b.c_d~e"] {
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
    ensure_host(&mut head, "10.0.0.5:8080".parse().unwrap());
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
        ensure_host(&mut head, "10.0.0.5:8080".parse().unwrap());
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
    let (head, _) = planned(&["GET http://h/a?b HTTP/1.1", "Host: H:80", "Accept: */*"]);
    assert_eq!(head.target, "/a?b");
    assert_eq!(
        upstream(&head),
        "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: h\r\n\r\n",
        "the Host that came is replaced by the target's authority"
    );
    // A Host that names another authority is refused (RFC 9112 §3.2).
    let r = refused(&["GET http://h/a HTTP/1.1", "Host: other"]);
    assert_eq!((kind(&r), r.status()), ("malformed", 400));
    // Scheme in any case, https, no path, a port, a fragment.
    let table: &[(&str, &str, &str)] = &[
        ("HTTP://h/a", "/a", "h"),
        ("https://h:8443/x", "/x", "h:8443"),
        ("http://h", "/", "h"),
        ("http://h?q", "/?q", "h"),
    ];
    for (target, origin, host) in table {
        let line = format!("GET {target} HTTP/1.1");
        let host_line = format!("Host: {}", host.to_uppercase());
        let (head, _) = planned(&[&line, &host_line]);
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
fn absolute_form_with_invalid_authority_bytes_gets_400() {
    // The authority replaces Host, so it must pass the rule a Host value
    // passes (RFC 9112 §3.2: invalid Host → 400).
    let r = refused(&["GET http://a<b>/ HTTP/1.1", "Host: h"]);
    assert_eq!(r.status(), 400);
}

#[test]
fn framing_fields_go_upstream_in_the_one_spelling_every_parser_reads_alike() {
    // (fields as sent, what the upstream gets, why)
    let rows: [(&[&str], &str, &str); 7] = [
        (
            &["Transfer-Encoding: chunked"],
            "Transfer-Encoding: chunked\r\n",
            "already canonical: left in place",
        ),
        (
            &["Transfer-Encoding: ,chunked"],
            "Transfer-Encoding: chunked\r\n",
            "an empty list element another parser may count",
        ),
        (
            &["Transfer-Encoding: CHUNKED"],
            "Transfer-Encoding: chunked\r\n",
            "codings are case-insensitive; send one case",
        ),
        (
            &["Transfer-Encoding: gzip", "Transfer-Encoding: chunked"],
            "Transfer-Encoding: gzip, chunked\r\n",
            "two fields become one list, order kept",
        ),
        (
            &["Transfer-Encoding: gzip ,  chunked"],
            "Transfer-Encoding: gzip, chunked\r\n",
            "odd whitespace around list separators",
        ),
        (
            &["Content-Length: 0003"],
            "Content-Length: 3\r\n",
            "leading zeros a 32-bit or octal parser may misread",
        ),
        (
            &["Content-Length: 3"],
            "Content-Length: 3\r\n",
            "already canonical",
        ),
    ];
    for (fields, want, why) in rows {
        let mut lines = vec!["POST /a HTTP/1.1", "Host: h"];
        lines.extend_from_slice(fields);
        let (head, _) = planned(&lines);
        let text = upstream(&head);
        assert!(text.contains(want), "{why}: {text:?}");
        let framing_lines = text
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.starts_with("transfer-encoding:") || l.starts_with("content-length:")
            })
            .count();
        assert_eq!(framing_lines, 1, "{why}: one framing field: {text:?}");
    }
}

#[test]
fn expect_100_continue_is_noted_for_an_http11_request_with_a_body() {
    // (head lines, expect_continue, why)
    let table: &[(&[&str], bool, &str)] = &[
        (
            &[
                "POST / HTTP/1.1",
                "Host: h",
                "Expect: 100-continue",
                "Content-Length: 5",
            ],
            true,
            "the usual form",
        ),
        (
            &[
                "PUT / HTTP/1.1",
                "Host: h",
                "expect: 100-Continue",
                "Transfer-Encoding: chunked",
            ],
            true,
            "case ignored, chunked",
        ),
        (
            &[
                "POST / HTTP/1.1",
                "Host: h",
                "Expect: foo, 100-continue",
                "Content-Length: 5",
            ],
            true,
            "in a list",
        ),
        (
            &[
                "POST / HTTP/1.1",
                "Host: h",
                "Expect: 100-continue",
                "Content-Length: 0",
            ],
            false,
            "no body to wait for",
        ),
        (
            &["GET / HTTP/1.1", "Host: h", "Expect: 100-continue"],
            false,
            "no body",
        ),
        (
            &[
                "POST / HTTP/1.0",
                "Host: h",
                "Expect: 100-continue",
                "Content-Length: 5",
            ],
            false,
            "HTTP/1.0: ignored",
        ),
        (
            &[
                "POST / HTTP/1.1",
                "Host: h",
                "Expect: 100-continued",
                "Content-Length: 5",
            ],
            false,
            "another expectation",
        ),
    ];
    for (lines, want, why) in table {
        let (_, plan) = planned(lines);
        assert_eq!(plan.expect_continue, *want, "{why}");
    }
}

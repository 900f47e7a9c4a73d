//! The response plan's framing: body kinds, invalid framing, hop-by-hop
//! fields, and de-chunking for HTTP/1.0 clients, from byte strings alone
//! (ARCHITECTURE/ARCHITECTURE.md §5, §6, §8).

use super::plan_helpers::{cx, cx10, encoded, final_plan, refused_response as refused};
use crate::http::{BodyKind, ParseError, ResponseContext, ResponseRefusal, finish_response_head};

// ---- Framing (§5) ----------------------------------------------------------

/// One row of [`framing_of_final_responses`].
struct FramingRow {
    method: &'static str,
    head: &'static [&'static str],
    framing: BodyKind,
    upstream_keep_alive: bool,
    close_client: bool,
    why: &'static str,
}

#[test]
fn framing_of_final_responses() {
    let table = [
        FramingRow {
            method: "HEAD",
            head: &["HTTP/1.1 200 OK", "Content-Length: 10"],
            framing: BodyKind::Empty,
            upstream_keep_alive: true,
            close_client: false,
            why: "HEAD: no body whatever Content-Length says",
        },
        FramingRow {
            method: "HEAD",
            head: &["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"],
            framing: BodyKind::Empty,
            upstream_keep_alive: true,
            close_client: false,
            why: "HEAD: no body whatever Transfer-Encoding says",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 204 No Content", "Content-Length: 10"],
            framing: BodyKind::Empty,
            upstream_keep_alive: true,
            close_client: false,
            why: "204: no body",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 304 Not Modified", "Transfer-Encoding: chunked"],
            framing: BodyKind::Empty,
            upstream_keep_alive: true,
            close_client: false,
            why: "304: no body",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"],
            framing: BodyKind::Chunked,
            upstream_keep_alive: true,
            close_client: false,
            why: "chunked",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked"],
            framing: BodyKind::Chunked,
            upstream_keep_alive: true,
            close_client: false,
            why: "final coding chunked",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Transfer-Encoding: gzip"],
            framing: BodyKind::UntilClose,
            upstream_keep_alive: false,
            close_client: true,
            why: "TE without final chunked: until close",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Content-Length: 7"],
            framing: BodyKind::Length(7),
            upstream_keep_alive: true,
            close_client: false,
            why: "Content-Length",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Content-Length: 0"],
            framing: BodyKind::Empty,
            upstream_keep_alive: true,
            close_client: false,
            why: "Content-Length: 0",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK"],
            framing: BodyKind::UntilClose,
            upstream_keep_alive: false,
            close_client: false,
            why: "neither: until close upstream, chunk-encoded to the client, which stays",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.0 200 OK", "Content-Length: 7"],
            framing: BodyKind::Length(7),
            upstream_keep_alive: false,
            close_client: false,
            why: "an HTTP/1.0 upstream is never reused",
        },
        FramingRow {
            method: "GET",
            head: &[
                "HTTP/1.0 200 OK",
                "Connection: keep-alive",
                "Content-Length: 7",
            ],
            framing: BodyKind::Length(7),
            upstream_keep_alive: false,
            close_client: false,
            why: "not even with keep-alive",
        },
        FramingRow {
            method: "GET",
            head: &["HTTP/1.1 200 OK", "Connection: close", "Content-Length: 7"],
            framing: BodyKind::Length(7),
            upstream_keep_alive: false,
            close_client: false,
            why: "Connection: close: upstream not reused, client unaffected",
        },
    ];
    for row in table {
        let c = ResponseContext {
            method: row.method,
            ..cx()
        };
        let why = row.why;
        let (_, p) = final_plan(row.head, &c);
        assert_eq!(p.framing, row.framing, "{why}");
        assert_eq!(p.upstream_keep_alive, row.upstream_keep_alive, "{why}");
        assert_eq!(p.close_client, row.close_client, "{why}");
        assert!(!p.tunnel && !p.dechunk && !p.abandon_request, "{why}");
        assert_eq!(
            p.enchunk,
            row.framing == BodyKind::UntilClose && !row.close_client,
            "{why}"
        );
    }
}

#[test]
fn a_body_delimited_by_close_is_chunk_encoded_for_an_http11_client_only() {
    // The client stays open and gets the chunked coding (nginx's
    // `chunked_transfer_encoding on`, HAProxy alike).
    for lines in [
        &["HTTP/1.1 200 OK", "Content-Type: text/plain"][..],
        &["HTTP/1.0 200 OK"][..],
        &["HTTP/1.1 200 OK", "Connection: close"][..],
    ] {
        let (head, p) = final_plan(lines, &cx());
        assert!(
            p.enchunk && !p.close_client && !p.upstream_keep_alive,
            "{lines:?}"
        );
        let wire = encoded(&head);
        assert!(
            wire.contains("\r\nTransfer-Encoding: chunked\r\n"),
            "{wire}"
        );
        assert!(!wire.contains("Content-Length"), "{wire}");
    }
    // An HTTP/1.0 client knows no chunked coding: it gets the close.
    let (head, p) = final_plan(&["HTTP/1.1 200 OK"], &cx10());
    assert!(!p.enchunk && p.close_client);
    assert!(!encoded(&head).contains("Transfer-Encoding"));
    // An HTTP/2 stream ends on its own.
    let h2 = ResponseContext {
        http1_client: false,
        ..cx()
    };
    let (head, p) = final_plan(&["HTTP/1.1 200 OK"], &h2);
    assert!(!p.enchunk);
    assert!(!encoded(&head).contains("Transfer-Encoding"));
    // Under another coding (its field would have to grow `chunked`), and
    // for a tunnel's bytes, the close stays.
    let (head, p) = final_plan(&["HTTP/1.1 200 OK", "Transfer-Encoding: gzip"], &cx());
    assert!(!p.enchunk && p.close_client);
    assert!(encoded(&head).contains("Transfer-Encoding: gzip\r\n"));
    let (_, p) = final_plan(
        super::plan_helpers::SWITCH,
        &super::plan_helpers::upgrade_cx(),
    );
    assert!(p.tunnel && !p.enchunk && p.close_client);
    // No body, no coding: HEAD, 204, 304.
    for (method, status) in [
        ("HEAD", "200 OK"),
        ("GET", "204 No Content"),
        ("GET", "304 Not Modified"),
    ] {
        let c = ResponseContext { method, ..cx() };
        let (head, p) = final_plan(&[&format!("HTTP/1.1 {status}")], &c);
        assert!(!p.enchunk, "{method} {status}");
        assert!(
            !encoded(&head).contains("Transfer-Encoding"),
            "{method} {status}"
        );
    }
}

#[test]
fn invalid_response_framing_is_refused() {
    // (head, why)
    let table: &[(&[&str], &str)] = &[
        (
            &[
                "HTTP/1.1 200 OK",
                "Transfer-Encoding: chunked",
                "Content-Length: 3",
            ],
            "both framing fields",
        ),
        (
            &["HTTP/1.1 200 OK", "Content-Length: 3, 4"],
            "differing Content-Length",
        ),
        (
            &["HTTP/1.1 200 OK", "Content-Length: x"],
            "non-digit Content-Length",
        ),
        (
            &["HTTP/1.0 200 OK", "Transfer-Encoding: chunked"],
            "Transfer-Encoding in an HTTP/1.0 response",
        ),
    ];
    for (lines, why) in table {
        let r = refused(lines, &cx());
        assert!(
            matches!(r, ResponseRefusal::Invalid(ParseError::Framing(_))),
            "{why}: {r:?}"
        );
    }
}

#[test]
fn response_hop_by_hop_fields_are_removed_framing_kept() {
    let (head, p) = final_plan(
        &[
            "HTTP/1.1 200 OK",
            "Date: d",
            "Connection: X-Hop, Transfer-Encoding, Trailer",
            "Transfer-Encoding: chunked",
            "Trailer: X-Sum",
            "X-Hop: 1",
            "Keep-Alive: timeout=5",
            "Upgrade: h2c",
            "Server: s",
        ],
        &cx(),
    );
    assert_eq!(p.framing, BodyKind::Chunked);
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 200 OK\r\nDate: d\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\
         Server: s\r\n\r\n"
    );
}

// ---- HTTP/1.0 clients ------------------------------------------------------

#[test]
fn chunked_to_an_http10_client_is_dechunked() {
    let (mut head, p) = final_plan(
        &[
            "HTTP/1.1 200 OK",
            "Transfer-Encoding: chunked",
            "Trailer: X-Sum",
            "Content-Type: text/plain",
        ],
        &cx10(),
    );
    assert_eq!(p.framing, BodyKind::Chunked, "upstream side still chunked");
    assert!(p.dechunk);
    assert!(p.close_client);
    assert!(p.upstream_keep_alive, "the upstream connection is fine");
    finish_response_head(&mut head, p.tunnel, 0, !p.close_client);
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn gzip_chunked_to_an_http10_client_gets_502() {
    // Last round's fix: a coding besides chunked cannot be undone or
    // announced to HTTP/1.0.
    for te in ["gzip, chunked", "gzip,chunked", "chunked, chunked"] {
        let line = format!("Transfer-Encoding: {te}");
        let r = refused(&["HTTP/1.1 200 OK", &line], &cx10());
        assert!(
            matches!(r, ResponseRefusal::Invalid(ParseError::Framing(_))),
            "{te}: {r:?}"
        );
    }
    let r = refused(
        &[
            "HTTP/1.1 200 OK",
            "Transfer-Encoding: gzip",
            "Transfer-Encoding: chunked",
        ],
        &cx10(),
    );
    assert!(matches!(
        r,
        ResponseRefusal::Invalid(ParseError::Framing(_))
    ));
    // The same head to an HTTP/1.1 client passes.
    let (_, p) = final_plan(
        &["HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked"],
        &cx(),
    );
    assert_eq!(p.framing, BodyKind::Chunked);
}

#[test]
fn transfer_encoding_is_removed_toward_http10_when_not_chunked() {
    // A HEAD response: the body is empty, the field is only information a
    // 1.0 client must not get (RFC 9112 §6.1).
    let head10 = ResponseContext {
        method: "HEAD",
        ..cx10()
    };
    let (head, p) = final_plan(
        &[
            "HTTP/1.1 200 OK",
            "Transfer-Encoding: chunked",
            "Trailer: X-Sum",
            "ETag: \"e\"",
        ],
        &head10,
    );
    assert_eq!(p.framing, BodyKind::Empty);
    assert!(!p.dechunk);
    assert_eq!(encoded(&head), "HTTP/1.1 200 OK\r\nETag: \"e\"\r\n\r\n");
    // The same toward HTTP/1.1 keeps both fields.
    let head11 = ResponseContext {
        method: "HEAD",
        ..cx()
    };
    let (head, _) = final_plan(
        &[
            "HTTP/1.1 200 OK",
            "Transfer-Encoding: chunked",
            "Trailer: X-Sum",
        ],
        &head11,
    );
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
    );
}

#[test]
fn gzip_until_close_to_an_http10_client_gets_502() {
    let r = refused(&["HTTP/1.1 200 OK", "Transfer-Encoding: gzip"], &cx10());
    assert!(
        matches!(r, ResponseRefusal::Invalid(ParseError::Framing(_))),
        "{r:?}"
    );
}

#[test]
fn no_content_loses_transfer_encoding() {
    let (head, p) = final_plan(
        &[
            "HTTP/1.1 204 No Content",
            "Transfer-Encoding: chunked",
            "X-A: a",
        ],
        &cx(),
    );
    assert_eq!(p.framing, BodyKind::Empty);
    assert!(!p.close_client);
    assert_eq!(encoded(&head), "HTTP/1.1 204 No Content\r\nX-A: a\r\n\r\n");
}

#[test]
fn a_transfer_coding_besides_chunked_to_an_http2_client_gets_502() {
    // HTTP/2 has no Transfer-Encoding (RFC 9113 §8.2.2): the coded bytes
    // would reach the client as if they were the content.
    let h2 = ResponseContext {
        http1_client: false,
        ..cx()
    };
    for te in ["gzip", "gzip, chunked", "x-foo", "chunked, identity"] {
        let r = refused(
            &["HTTP/1.1 200 OK", &format!("Transfer-Encoding: {te}")],
            &h2,
        );
        assert_eq!(
            r,
            ResponseRefusal::Invalid(ParseError::Framing(
                crate::http::response::UNDELIVERABLE_CODING
            )),
            "{te}"
        );
    }
    let (_, p) = final_plan(&["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"], &h2);
    assert_eq!(p.framing, BodyKind::Chunked);
}

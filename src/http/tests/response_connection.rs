//! The response plan's connection verdicts: early answers, failed writes,
//! and the `Connection` field the client gets, from byte strings alone
//! (ARCHITECTURE.md §6, §8).

use super::plan_helpers::{SWITCH, cx, cx10, encoded, final_plan, upgrade_cx};
use crate::http::{BodyKind, ResponseContext, finish_response_head};

// ---- Early answers and failed writes ---------------------------------------

#[test]
fn early_answer_from_a_closing_upstream_closes_the_client() {
    // Last round's fix: the rest of the request body cannot follow.
    let early = ResponseContext {
        method: "POST",
        request_body_done: false,
        ..cx()
    };
    for lines in [
        &[
            "HTTP/1.1 413 Content Too Large",
            "Connection: close",
            "Content-Length: 0",
        ][..],
        &["HTTP/1.0 413 Content Too Large", "Content-Length: 0"][..],
    ] {
        let (mut head, p) = final_plan(lines, &early);
        assert!(!p.upstream_keep_alive, "{lines:?}");
        assert!(p.close_client, "{lines:?}");
        assert!(!p.abandon_request, "{lines:?}");
        finish_response_head(&mut head, p.tunnel, 1, !p.close_client);
        assert_eq!(
            encoded(&head),
            "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "the client is told"
        );
    }
}

#[test]
fn early_answer_from_a_keep_alive_upstream_closes_the_client_and_says_so() {
    // The rest of the request body is never read (nginx, HAProxy close
    // too), so the client connection cannot carry another request: the
    // head says `Connection: close` (RFC 9112 §9.6), while the upstream
    // connection stays reusable as far as its head goes.
    let early = ResponseContext {
        method: "POST",
        request_body_done: false,
        ..cx()
    };
    let (mut head, p) = final_plan(
        &["HTTP/1.1 413 Content Too Large", "Content-Length: 3"],
        &early,
    );
    assert!(p.upstream_keep_alive);
    assert!(p.close_client);
    assert!(!p.abandon_request);
    finish_response_head(&mut head, p.tunnel, 1, !p.close_client);
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn answer_after_a_failed_write_abandons_the_request() {
    let failed = ResponseContext {
        method: "POST",
        request_body_done: false,
        request_write_failed: true,
        ..cx()
    };
    let (mut head, p) = final_plan(
        &["HTTP/1.1 413 Content Too Large", "Content-Length: 4"],
        &failed,
    );
    assert!(p.abandon_request);
    assert!(p.close_client);
    assert_eq!(p.framing, BodyKind::Length(4));
    finish_response_head(&mut head, p.tunnel, 1, !p.close_client);
    assert_eq!(head.headers.get("connection"), Some(&b"close"[..]));
}

// ---- finish_response_head --------------------------------------------------

#[test]
fn finish_sets_the_connection_field_the_client_gets() {
    let base = &[
        "HTTP/1.1 200 OK",
        "Content-Length: 2",
        "X-b: 1",
        "content-type: text/plain",
    ][..];
    // (request version, client keep-alive, appended field, why)
    let table: &[(u8, bool, &str, &str)] = &[
        (1, false, "Connection: close\r\n", "1.1 client closing"),
        (0, false, "Connection: close\r\n", "1.0 client closing"),
        (
            0,
            true,
            "Connection: keep-alive\r\n",
            "1.0 client kept open",
        ),
        (1, true, "", "1.1 keep-alive needs nothing"),
    ];
    for (version, keep_alive, field, why) in table {
        let c = ResponseContext {
            request_version: *version,
            ..cx()
        };
        let (mut head, p) = final_plan(base, &c);
        assert!(!p.close_client, "{why}");
        finish_response_head(&mut head, false, *version, *keep_alive);
        assert_eq!(
            encoded(&head),
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-b: 1\r\ncontent-type: text/plain\r\n{field}\r\n"
            ),
            "{why}"
        );
    }
}

#[test]
fn finish_adds_nothing_to_a_tunnel() {
    let (mut head, p) = final_plan(SWITCH, &upgrade_cx());
    let before = head.clone();
    finish_response_head(&mut head, true, 1, false);
    assert!(p.tunnel);
    assert_eq!(head, before);
}

#[test]
fn full_round_trip_keeps_order_and_spelling() {
    let (mut head, p) = final_plan(
        &[
            "HTTP/1.1 200 Fine",
            "date: Mon",
            "Connection: keep-alive",
            "X-UPPER: A",
            "Keep-Alive: timeout=5",
            "Set-Cookie: a=1",
            "set-cookie: b=2",
            "Content-Length: 3",
        ],
        &cx10(),
    );
    assert_eq!(p.framing, BodyKind::Length(3));
    assert!(!p.close_client);
    assert!(p.upstream_keep_alive);
    finish_response_head(&mut head, p.tunnel, 0, true);
    let mut out = Vec::new();
    head.encode(&mut out);
    assert_eq!(
        out,
        b"HTTP/1.1 200 Fine\r\ndate: Mon\r\nX-UPPER: A\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n\
          Content-Length: 3\r\nConnection: keep-alive\r\n\r\n"
    );
}

#[test]
fn a_426_keeps_its_upgrade_field_for_an_http11_client() {
    // RFC 9110 §15.5.22: a 426 names the protocols required in `Upgrade`;
    // without it the client cannot know what to switch to.
    let lines = [
        "HTTP/1.1 426 Upgrade Required",
        "Upgrade: websocket",
        "Connection: Upgrade, X-Hop",
        "X-Hop: 1",
        "Content-Length: 0",
    ];
    let (mut head, p) = final_plan(&lines, &cx());
    assert!(!p.tunnel && !p.close_client);
    finish_response_head(&mut head, p.tunnel, 1, !p.close_client);
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\
         Connection: upgrade\r\n\r\n"
    );
    // Any other status loses it (hop-by-hop, RFC 9110 §7.6.1), and an
    // HTTP/1.0 client cannot upgrade at all.
    let (head, _) = final_plan(
        &["HTTP/1.1 200 OK", "Upgrade: h2c", "Content-Length: 0"],
        &cx(),
    );
    assert_eq!(head.headers.get("upgrade"), None);
    let (head, _) = final_plan(&lines, &cx10());
    assert_eq!(head.headers.get("upgrade"), None);
}

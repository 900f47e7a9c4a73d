//! `max_body_size` (issue 25, item 5 of the issue, item 3 of the brief;
//! docs/configuration.md, "Edge rules"): a `Content-Length` over the limit gets 413
//! before anything reaches the upstream; a chunked body crossing it gets
//! 413 while no response started, else both connections close; a route's
//! value replaces the top level's; counted.

mod util;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use util::*;

/// A proxy by routes to one group at `up`: top-level limit `top`, routes
/// `/small` (5 bytes), `/free` (0: none), and the rest.
fn limited(up: SocketAddr, top: u64) -> (Proxy, TempFile) {
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/small".into()),
            max_body_size: Some(5),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            path_prefix: Some("/free".into()),
            max_body_size: Some(0),
            ..RouteSpec::to("app")
        },
        RouteSpec::to("app"),
    ];
    start_routed_proxy(up, routes, move |c| c.max_body_size = top)
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn terminations(log: &TempFile, n: usize) -> Vec<(u64, String)> {
    wait_access_lines(log.path(), n)
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["status"].as_u64().unwrap(),
                v["termination"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn content_length_over_the_limit_is_413_before_the_upstream() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let (proxy, log) = limited(up.addr, 10);
    // At the limit (inclusive): forwarded, on a keep-alive connection.
    let mut c = proxy.client();
    assert_eq!(c.round_trip(post("/", "0123456789")).status, 200);
    // One byte over: 413, the connection closes (its body is unread).
    let resp = c.round_trip(post("/", "0123456789a"));
    assert_proxy_error(&resp, 413);
    c.assert_closed();
    // The route's own value replaces the top level's, both ways.
    let mut c = proxy.client();
    assert_proxy_error(&c.round_trip(post("/small", "123456")), 413);
    let mut c = proxy.client();
    assert_eq!(c.round_trip(post("/free", &"x".repeat(100))).status, 200);
    assert_eq!(
        up.wait_requests(2).len(),
        2,
        "only the two allowed bodies went up"
    );
    assert_eq!(proxy.stats.snapshot().status_413, 2);
    let t = terminations(&log, 4);
    assert_eq!(t[1], (413, "body_too_large".to_string()));
    assert_eq!(t[2], (413, "body_too_large".to_string()));
}

#[test]
fn chunked_body_crossing_the_limit_before_a_response_is_413() {
    let up = Upstream::start(never_answer());
    let (proxy, log) = limited(up.addr, 10);
    let mut c = proxy.client();
    c.send(b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n");
    // 8 bytes: within the limit, they go up; 8 more cross it.
    assert!(wait_until(WAIT, || up.accepted() == 1));
    c.send(b"8\r\n12345678\r\n");
    let r = c.read_response();
    assert_proxy_error(&r, 413);
    // The same words as the 413 a Content-Length gets at once.
    assert!(
        String::from_utf8_lossy(&r.body).contains("over max_body_size"),
        "{}",
        preview(&r.body)
    );
    c.assert_closed();
    assert_eq!(terminations(&log, 1), [(413, "body_too_large".to_string())]);
}

#[test]
fn a_chunk_whose_size_alone_crosses_the_limit_is_413_at_its_size_line() {
    // As nginx: the chunk's announced size is over the limit; waiting for
    // its bytes would hold the upstream connection until the client's body
    // timeout (found by a break-it pass).
    let up = Upstream::start(never_answer());
    let (proxy, log) = limited(up.addr, 1000);
    let mut c = proxy.client();
    c.send(b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n7fffffff\r\nabc");
    let r = c.read_response();
    assert_proxy_error(&r, 413);
    c.assert_closed();
    assert_eq!(terminations(&log, 1), [(413, "body_too_large".to_string())]);
}

#[test]
fn chunked_body_crossing_the_limit_after_the_response_started_closes_both() {
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec();
    let up = Upstream::start(answer_early(head));
    let (proxy, log) = limited(up.addr, 10);
    let mut c = proxy.client();
    c.send(b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n");
    let resp = c.read_response_head();
    assert_eq!(resp.status, 200);
    c.send_lossy(b"9\r\n123456789\r\n");
    // The response is cut: the last chunk never comes.
    let rest = c.read_until_closed(Duration::from_secs(3));
    assert!(!rest.windows(5).any(|w| w == b"0\r\n\r\n"), "{rest:?}");
    // The upstream connection was closed too: its body read fails.
    assert!(up.requests().is_empty());
    let t = terminations(&log, 1);
    assert_eq!(t[0].1, "body_too_large");
}

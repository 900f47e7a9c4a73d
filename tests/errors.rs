//! Upstream failures and what the client sees (DESIGN.md §8): 502 and 504
//! written by the proxy before a response began, a cut-short body after it
//! began.

mod util;

use std::time::Duration;

use util::*;

/// Sends one GET through `proxy` and expects the proxy's own `status`
/// error, then the connection closed.
#[track_caller]
fn assert_error_for_get(proxy: &Proxy, status: u16) {
    let mut client = proxy.client();
    let resp = client.round_trip(get("/"));
    assert_proxy_error(&resp, status);
    client.assert_closed();
}

#[test]
fn refused_upstream_gets_502() {
    let proxy = start_forward_proxy(refused_addr(), |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn upstream_closing_on_request_without_answer_gets_502() {
    let upstream = Upstream::start(close_on_request());
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 0);
    assert_error_for_get(&proxy, 502);
    assert_eq!(upstream.accepted(), 1);
}

#[test]
fn malformed_upstream_response_head_gets_502() {
    let upstream = Upstream::start(send_raw_and_hold(b"HTTP/1.1 OK maybe\r\n\r\n".to_vec()));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn garbage_from_upstream_gets_502() {
    let upstream = Upstream::start(send_raw_and_hold(
        b"\x00\x01 not http at all\r\n\r\n".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn upstream_connect_timeout_gets_504() {
    let blackhole = Blackhole::start();
    let proxy = start_forward_proxy(blackhole.addr, |c| {
        c.upstream_connect_timeout = Duration::from_millis(300);
    });
    assert_error_for_get(&proxy, 504);
}

#[test]
fn silent_upstream_gets_504_at_read_timeout() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = Duration::from_millis(300);
    });
    assert_error_for_get(&proxy, 504);
}

#[test]
fn upstream_failure_after_chunked_response_began_cuts_client_off_without_last_chunk() {
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let rest = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(
        String::from_utf8_lossy(&rest),
        "5\r\nhello\r\n",
        "the client gets the chunk that came and no terminating chunk"
    );
}

#[test]
fn upstream_failure_inside_content_length_body_closes_client_early() {
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    let rest = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(String::from_utf8_lossy(&rest), "hello");
}

#[test]
fn oversized_upstream_response_head_gets_502() {
    let big = "h".repeat(70 * 1024);
    let upstream = Upstream::start(send_raw_and_hold(
        format!("HTTP/1.1 200 OK\r\nX-Big: {big}\r\nContent-Length: 2\r\n\r\nok").into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn upstream_connect_timeout_is_counted() {
    let blackhole = Blackhole::start();
    let proxy = start_forward_proxy(blackhole.addr, |c| {
        c.upstream_connect_timeout = Duration::from_millis(300);
    });
    assert_error_for_get(&proxy, 504);
    let stats = proxy.stats.snapshot();
    assert_eq!(stats.timeouts_connect, 1, "{stats:?}");
    assert_eq!(stats.status_504, 1, "{stats:?}");
}

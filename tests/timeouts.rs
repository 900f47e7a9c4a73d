//! Downstream timeouts (ARCHITECTURE.md §4, §8): idle keep-alive connections are
//! closed silently, a head that does not complete gets 408. Bounds are
//! generous: closed within 3 s, and never before half the timeout.

mod util;

use std::time::{Duration, Instant};

use util::*;

const TIMEOUT: Duration = Duration::from_millis(300);
const CLOSED_WITHIN: Duration = Duration::from_secs(3);

#[track_caller]
fn assert_not_before_half(started: Instant) {
    let took = started.elapsed();
    assert!(
        took >= TIMEOUT / 2,
        "closed after {took:?}, before half of {TIMEOUT:?}"
    );
}

/// With `TCP_DEFER_ACCEPT` (the default) the kernel hands a silent
/// connection over only after its 1 s defer; the timeout runs from then,
/// still well inside `CLOSED_WITHIN`.
#[test]
fn silent_client_is_closed_at_keepalive_timeout() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.keepalive_timeout = TIMEOUT;
        c.request_head_timeout = Duration::from_secs(5);
    });
    let started = Instant::now();
    let mut client = proxy.client();
    let got = client.read_until_closed(CLOSED_WITHIN);
    assert_not_before_half(started);
    assert!(
        got.is_empty(),
        "silent close expected, got {}",
        preview(&got)
    );
}

#[test]
fn idle_client_is_closed_at_keepalive_timeout_after_a_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.keepalive_timeout = TIMEOUT;
        c.request_head_timeout = Duration::from_secs(5);
    });
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    let started = Instant::now();
    let got = client.read_until_closed(CLOSED_WITHIN);
    assert_not_before_half(started);
    assert!(
        got.is_empty(),
        "silent close expected, got {}",
        preview(&got)
    );
}

#[test]
fn half_sent_head_gets_408_at_head_timeout() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.request_head_timeout = TIMEOUT;
        c.keepalive_timeout = Duration::from_secs(30);
    });
    let mut client = proxy.client();
    let started = Instant::now();
    client.send(b"GET /slow HTTP/1.1\r\nHost: example.test\r\n");
    let got = client.read_until_closed(CLOSED_WITHIN);
    assert_not_before_half(started);
    assert!(
        got.starts_with(b"HTTP/1.1 408"),
        "expected a 408, got {}",
        preview(&got)
    );
    let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(text.contains("\r\nconnection: close\r\n"), "{text:?}");
    assert!(text.contains("\r\ncontent-length:"), "{text:?}");
    assert_eq!(upstream.accepted(), 0);
}

#[test]
fn half_sent_second_head_gets_408_at_head_timeout() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.request_head_timeout = TIMEOUT;
        c.keepalive_timeout = Duration::from_secs(30);
    });
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/first")).status, 200);
    let started = Instant::now();
    client.send(b"GET /second HTTP/1.1\r\nHost: exa");
    let got = client.read_until_closed(CLOSED_WITHIN);
    assert_not_before_half(started);
    assert!(
        got.starts_with(b"HTTP/1.1 408"),
        "expected a 408, got {}",
        preview(&got)
    );
}

#[test]
fn stalled_request_body_is_cut_at_client_body_timeout() {
    let (closed_tx, closed) = std::sync::mpsc::channel();
    let upstream = Upstream::start(move |mut conn: UpConn| {
        // Waits for the whole body, which never comes; returns at EOF.
        let _ = conn.read_request();
        let _ = closed_tx.send(());
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.client_body_timeout = TIMEOUT);
    let mut client = proxy.client();
    let started = Instant::now();
    client.send(b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n01234");
    client.read_until_closed(CLOSED_WITHIN);
    assert_not_before_half(started);
    closed
        .recv_timeout(WAIT)
        .expect("the upstream connection is closed too");
    assert_eventually("gap timeout counted", || {
        proxy.stats.snapshot().timeouts_gap == 1
    });
}

#[test]
fn client_not_reading_is_cut_at_client_send_timeout() {
    const SIZE: usize = 16 * 1024 * 1024;
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let upstream = Upstream::start(move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            let mut resp =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n").into_bytes();
            resp.resize(resp.len() + SIZE, b'x');
            // Blocks once the proxy stops reading; fails once it closes.
            let _ = conn.send(resp);
        }
        let _ = ended_tx.send(());
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.client_send_timeout = TIMEOUT);
    let mut client = proxy.client();
    client.send(get("/huge"));
    // The client reads nothing.
    ended
        .recv_timeout(WAIT)
        .expect("the proxy gives up the exchange and closes the upstream connection");
    assert_eventually("gap timeout counted", || {
        proxy.stats.snapshot().timeouts_gap == 1
    });
    let got = client.read_until_closed(CLOSED_WITHIN);
    assert!(got.len() < SIZE, "the whole response arrived");
}

//! Timers during an upload (issue 14, docs/configuration.md, "Timeouts"): the wait for the
//! response head starts when the request was completely sent; while a
//! body flows only the gap timers apply, and a client that stalls mid-body
//! gets 408, not 504. Timeouts are scaled down (a 3-minute upload against
//! 60 s timeouts is a 1.2 s upload against 300 ms ones here; the real one
//! is `scripts/slow_upload.sh`).

mod util;

use std::thread;
use std::time::Duration;

use util::*;

const READ_TIMEOUT: Duration = Duration::from_millis(300);

/// Sends `body` as a `Content-Length` upload, `step` bytes every `pause`.
fn upload_slowly(client: &mut Client, body: &[u8], step: usize, pause: Duration) {
    client.send(format!(
        "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    for part in body.chunks(step) {
        // Pacing, not synchronisation: this client is slow on purpose.
        thread::sleep(pause);
        client.send(part);
    }
}

#[test]
fn upload_longer_than_upstream_read_timeout_at_a_steady_rate_gets_200() {
    let upstream = Upstream::start(respond_forever(ok_response("stored")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = READ_TIMEOUT;
        c.upstream_write_timeout = READ_TIMEOUT;
        c.client_body_timeout = READ_TIMEOUT;
    });
    let mut client = proxy.client();
    // 24 steps of 50 ms: 1.2 s, four times the upstream read timeout.
    let body = vec![b'u'; 240];
    upload_slowly(&mut client, &body, 10, Duration::from_millis(50));
    let resp = client.read_response();
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(upstream.single_request().body, body);
    assert_eq!(proxy.stats.snapshot().status_504, 0);
}

#[test]
fn client_stalling_mid_body_gets_408_not_504() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        // The upstream read timeout is the shorter one: it must not fire
        // while the client owes body bytes.
        c.upstream_read_timeout = Duration::from_millis(150);
        c.client_body_timeout = READ_TIMEOUT;
    });
    let mut client = proxy.client();
    client.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf");
    let got = client.read_until_closed(Duration::from_secs(3));
    assert!(got.starts_with(b"HTTP/1.1 408"), "{}", preview(&got));
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_408, st.status_504), (1, 0));
    assert_eq!((st.timeouts_gap, st.timeouts_upstream), (1, 0));
}

#[test]
fn response_head_wait_starts_when_the_request_is_completely_sent() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = READ_TIMEOUT;
        c.client_body_timeout = Duration::from_secs(2);
    });
    let mut client = proxy.client();
    let body = vec![b'b'; 60];
    upload_slowly(&mut client, &body, 10, Duration::from_millis(100));
    // The whole body reached the upstream before any timer fired; only then
    // did the silent upstream get its 504.
    assert_eq!(upstream.single_request().body, body);
    let got = client.read_until_closed(Duration::from_secs(3));
    assert!(got.starts_with(b"HTTP/1.1 504"), "{}", preview(&got));
}

#[test]
fn upstream_that_stops_reading_the_body_gets_504_by_the_write_gap() {
    // An upstream reading nothing after the head: the request body fills
    // the socket buffers and the proxy's buffer, then waits.
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request_head().is_some() {
            // Holds the socket without reading it (bounded).
            thread::sleep(UPSTREAM_TIMEOUT);
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_write_timeout = READ_TIMEOUT;
        c.upstream_read_timeout = Duration::from_secs(30);
        c.client_body_timeout = Duration::from_secs(30);
    });
    let mut client = proxy.client();
    let len = 64 << 20;
    client.send(format!(
        "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n"
    ));
    let chunk = vec![b'z'; 1 << 16];
    // Until the proxy stops reading (bounded by the body's size).
    for _ in 0..(len >> 16) {
        if client.wire.write(&chunk).is_err() {
            break;
        }
    }
    let got = client.read_until_closed(Duration::from_secs(5));
    assert!(got.starts_with(b"HTTP/1.1 504"), "{}", preview(&got));
}

// ---- Expect: 100-continue (RFC 9110 §10.1.1) --------------------------------

const EXPECT_HEAD: &[u8] =
    b"POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";

/// Reads the request head, waits `delay` (a slow upstream, on purpose),
/// sends `100 Continue`, then reads the body and answers 200 (if it came).
fn continue_after(delay: Duration) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        let Some(mut req) = conn.read_request_head() else {
            return;
        };
        thread::sleep(delay);
        conn.send(b"HTTP/1.1 100 Continue\r\n\r\n");
        if let Ok(body) = conn.wire.read_body(req.framing()) {
            req.body = body;
            conn.record(req);
            conn.send(ok_response("stored"));
        }
        conn.hold_until_closed();
    }
}

#[test]
fn client_waiting_for_100_continue_from_a_silent_upstream_gets_504_not_408() {
    // The client may wait for the 100 (RFC 9110 §10.1.1): the silent side
    // is the upstream, which has the head.
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request_head().is_some() {
            conn.hold_until_closed();
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.client_body_timeout = Duration::from_millis(100);
        c.upstream_read_timeout = READ_TIMEOUT;
    });
    let mut client = proxy.client();
    client.send(EXPECT_HEAD);
    let got = client.read_until_closed(Duration::from_secs(3));
    assert!(got.starts_with(b"HTTP/1.1 504"), "{}", preview(&got));
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_408, st.status_504), (0, 1));
}

#[test]
fn a_100_continue_later_than_the_client_body_timeout_still_gets_the_body_through() {
    let upstream = Upstream::start(continue_after(Duration::from_millis(400)));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.client_body_timeout = Duration::from_millis(100);
        c.upstream_read_timeout = Duration::from_secs(5);
    });
    let mut client = proxy.client();
    client.send(EXPECT_HEAD);
    let interim = client.read_response_head();
    assert_eq!(interim.status, 100);
    client.send(b"hello");
    let resp = client.read_response();
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(upstream.single_request().body, b"hello");
}

#[test]
fn client_silent_after_its_100_continue_gets_408() {
    // Once the 100 came, the body is the client's to send.
    let upstream = Upstream::start(continue_after(Duration::ZERO));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.client_body_timeout = READ_TIMEOUT;
        c.upstream_read_timeout = Duration::from_secs(5);
    });
    let mut client = proxy.client();
    client.send(EXPECT_HEAD);
    assert_eq!(client.read_response_head().status, 100);
    let got = client.read_until_closed(Duration::from_secs(3));
    assert!(got.starts_with(b"HTTP/1.1 408"), "{}", preview(&got));
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_408, st.status_504), (1, 0));
}

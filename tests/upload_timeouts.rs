//! Timers during an upload (issue 14, README "Timeouts"): the wait for the
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

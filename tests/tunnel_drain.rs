//! Tunnels and drains, in process: a tunnel (after a 101) is held by its
//! own idle timeout, never by an HTTP one (seen problem 7 of issue 13); a
//! graceful drain answers the next request of a keep-alive connection with
//! `Connection: close` instead of closing under the client, and closes an
//! idle one once it has been idle for a while (ARCHITECTURE.md §12).

mod util;

use std::thread;
use std::time::{Duration, Instant};

use util::*;

/// An upstream that switches to a tunnel on any request and echoes what
/// comes, prefixed with `echo:`.
fn echo_tunnel() -> Upstream {
    Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_none() {
            return;
        }
        conn.send(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        );
        while let Ok(data) = conn.wire.read_some(1024) {
            if data.is_empty() || !conn.send([b"echo:".as_slice(), &data].concat()) {
                return;
            }
        }
    })
}

/// A client through `proxy` whose connection became a tunnel.
fn open_tunnel(proxy: &Proxy) -> Client {
    let mut client = proxy.client();
    client
        .send(b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    let resp = client.read_response();
    assert_eq!(resp.status, 101, "{}", preview(&resp.raw()));
    client
}

#[test]
fn a_tunnel_passes_on_the_upstreams_half_close_and_keeps_the_other_direction() {
    // The upstream says goodbye and shuts its sending side, still reading:
    // the client gets the bytes and then the EOF, and what it sends after
    // still reaches the upstream, then the client's own EOF does.
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let tx = std::sync::Mutex::new(tx);
    let upstream = Upstream::start(move |mut conn: UpConn| {
        if conn.read_request().is_none() {
            return;
        }
        conn.send(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nBYE",
        );
        let _ = conn.wire.stream.shutdown(std::net::Shutdown::Write);
        let got = conn.wire.read_to_eof().unwrap_or_default();
        let _ = tx.lock().unwrap().send(got);
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = open_tunnel(&proxy);
    assert_eq!(client.read_until_closed(CLIENT_TIMEOUT), b"BYE");
    client.send(b"after the upstream's EOF");
    client.shutdown_write();
    let got = rx
        .recv_timeout(WAIT)
        .expect("the upstream saw the client's EOF");
    assert_eq!(got, b"after the upstream's EOF");
}

#[test]
fn idle_tunnel_outlives_the_http_timeouts() {
    let upstream = echo_tunnel();
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = Duration::from_millis(100);
        c.client_send_timeout = Duration::from_millis(100);
        c.keepalive_timeout = Duration::from_millis(100);
        c.tunnel_idle_timeout = Duration::from_secs(30);
    });
    let mut client = open_tunnel(&proxy);
    client.send(b"ping");
    assert_eq!(client.read_bytes(9), b"echo:ping");
    // Idle for several times every HTTP timeout: the tunnel must stay.
    client.assert_open(Duration::from_millis(600));
    client.send(b"pong!");
    assert_eq!(client.read_bytes(10), b"echo:pong!");
}

#[test]
fn idle_tunnel_is_closed_at_the_tunnel_idle_timeout() {
    let upstream = echo_tunnel();
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.tunnel_idle_timeout = Duration::from_millis(300);
    });
    let mut client = open_tunnel(&proxy);
    // Traffic resets the idle time.
    for _ in 0..3 {
        client.send(b"ping");
        assert_eq!(client.read_bytes(9), b"echo:ping");
    }
    let started = Instant::now();
    let rest = client.read_until_closed(Duration::from_secs(3));
    assert!(rest.is_empty(), "{}", preview(&rest));
    assert!(started.elapsed() >= Duration::from_millis(150));
}

/// A proxy (drain deadline 10 s) whose client connection served one
/// request and stays open when the drain begins.
fn drain_after_one_request() -> (Upstream, Proxy, Client) {
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.drain_timeout = Duration::from_secs(10);
    });
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).status, 200);
    proxy.handle.drain();
    (upstream, proxy, client)
}

/// With `TCP_DEFER_ACCEPT` (the default) the kernel holds a connection
/// until its first bytes come; a drain keeps the listener open, without the
/// defer, until such connections were handed over (ARCHITECTURE.md §12).
/// Closing it at once reset them.
#[test]
fn a_client_connected_but_silent_when_the_drain_begins_is_served_not_reset() {
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.drain_timeout = Duration::from_secs(10);
    });
    let mut client = proxy.client();
    proxy.handle.drain();
    thread::sleep(Duration::from_millis(300)); // pacing: the drain has begun
    let resp = client.round_trip(get("/1"));
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hello"[..]));
    assert_eq!(resp.header("connection"), Some("close"));
    client.assert_closed();
}

#[test]
fn drain_answers_the_next_request_with_connection_close() {
    let (_upstream, _proxy, mut client) = drain_after_one_request();
    // The client, unaware, sends its next request on the kept connection
    // right away: it is served, and told this is the last one.
    let resp = client.round_trip(get("/2"));
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hello"[..]));
    assert_eq!(resp.header("connection"), Some("close"));
    client.assert_closed();
}

#[test]
fn drain_lets_a_response_in_flight_promise_keep_alive_and_closes_after_the_next() {
    // The first response's head goes out before the drain (keep-alive
    // promised); its body comes after it. The next request may come on
    // the same upstream connection or on a new one (a drain closes the
    // pooled ones), so the answer depends on the target only.
    let upstream = Upstream::start(|mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            if req.target == "/slow" {
                conn.send("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab");
                thread::sleep(Duration::from_millis(300)); // pacing: the drain comes now
                conn.send("cd");
            } else if !conn.send(ok_response("next")) {
                return;
            }
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/slow"));
    let head = client.read_response_head();
    assert_eq!(head.header("connection"), None, "keep-alive promised");
    proxy.handle.drain();
    let body = client.read_bytes(4);
    assert_eq!(body, b"abcd");
    let resp = client.round_trip(get("/2"));
    assert_eq!((resp.status, &resp.body[..]), (200, &b"next"[..]));
    assert_eq!(resp.header("connection"), Some("close"));
    client.assert_closed();
}

#[test]
fn drain_closes_an_idle_keep_alive_connection_once_it_stayed_idle() {
    let (_upstream, _proxy, mut client) = drain_after_one_request();
    let rest = client.read_until_closed(Duration::from_secs(3));
    assert!(rest.is_empty(), "{}", preview(&rest));
}

/// With `TCP_DEFER_ACCEPT`, a connection that has sent nothing when the
/// drain hands it over is idle, like a kept connection: closed after the
/// drain's idle grace (1 s), not held for the request head timeout (10 s).
#[test]
fn a_silent_connection_is_closed_early_in_a_drain() {
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.drain_timeout = Duration::from_secs(20);
        c.request_head_timeout = Duration::from_secs(10);
    });
    let mut client = proxy.client();
    proxy.handle.drain();
    let rest = client.read_until_closed(Duration::from_secs(5));
    assert!(rest.is_empty(), "{}", preview(&rest));
}

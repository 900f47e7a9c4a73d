//! The server as a whole: binding, shutdown, and many connections coming
//! and going without disturbing each other (slab slots reused, ARCHITECTURE.md §3).

mod util;

use std::thread;
use std::time::Duration;

use util::*;

#[test]
fn local_addr_is_the_bound_ephemeral_port() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert!(proxy.addr.ip().is_loopback());
    assert_ne!(proxy.addr.port(), 0);
    assert_eq!(proxy.client().round_trip(get("/")).status, 200);
}

#[test]
fn shutdown_makes_run_return() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    // An open idle client must not keep the loop alive.
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    let result = proxy
        .stop(Duration::from_secs(2))
        .expect("run() returns within 2 s of shutdown()");
    assert!(result.is_ok(), "run() returned {result:?}");
}

#[test]
fn abandoned_connections_do_not_disturb_others() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let addr = proxy.addr;
    let mut threads = Vec::new();
    for t in 0..4 {
        // Connect, send a request, vanish without reading: slots are freed
        // while other connections are busy.
        threads.push(thread::spawn(move || {
            for i in 0..50 {
                let mut c = Client::connect(addr);
                if i % 2 == 0 {
                    c.send_lossy(get(&format!("/gone/{t}/{i}")));
                } else {
                    c.send_lossy(b"GET /half HTTP/1.1\r\nHo");
                }
            }
        }));
        threads.push(thread::spawn(move || {
            let mut c = Client::connect(addr);
            for i in 0..50 {
                let target = format!("/kept/{t}/{i}");
                let resp = c.round_trip(get(&target));
                assert_eq!(resp.body_str(), target, "answer for another request");
            }
        }));
    }
    for (n, t) in threads.into_iter().enumerate() {
        assert!(t.join().is_ok(), "client thread {n} failed");
    }
    let settled = wait_until(WAIT, || {
        let s = proxy.stats.snapshot();
        s.downstream_active == 0 && s.buffers_in_use == 0 && s.buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    assert!(
        settled,
        "connections or buffers left after every client closed: {s:?}"
    );
    assert_eq!(proxy.stats.snapshot().downstream_accepted, 4 * 50 + 4);
}

#[test]
fn client_eof_inside_a_head_closes_its_connection() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET /half HTTP/1.1\r\nHo");
    client.shutdown_write();
    // Whatever it says first (nothing, or a 400), the proxy closes.
    client.read_until_closed(CLIENT_TIMEOUT);
    let settled = wait_until(WAIT, || proxy.stats.snapshot().downstream_active == 0);
    let s = proxy.stats.snapshot();
    assert!(settled, "connection still counted: {s:?}");
    assert_eq!(upstream.accepted(), 0);
}

#[test]
fn client_eof_after_a_whole_request_closes_after_at_most_the_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    client.shutdown_write();
    // Answering the half-closed client or giving up at its EOF are both
    // fine; keeping the connection open is not.
    match client.try_read_response(false) {
        Ok(resp) => {
            assert_eq!(resp.status, 200);
            assert_eq!(resp.body, b"ok");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}"),
    }
    client.assert_closed();
}

/// With `TCP_DEFER_ACCEPT` (the default) the kernel hands the connection
/// over once its request arrives; without it, at once. Either way a client
/// that pauses between connecting and sending is served, and a second
/// request on the connection too.
#[test]
fn a_client_that_pauses_before_its_request_is_served_with_and_without_defer_accept() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    for defer in [true, false] {
        let proxy = start_forward_proxy(upstream.addr, |c| c.defer_accept = defer);
        let mut client = proxy.client();
        thread::sleep(Duration::from_millis(200));
        assert_eq!(
            client.round_trip(get("/first")).body_str(),
            "/first",
            "defer {defer}"
        );
        assert_eq!(
            client.round_trip(get("/second")).body_str(),
            "/second",
            "defer {defer}"
        );
    }
}

//! Downstream keep-alive (ARCHITECTURE.md §6): the client's version and
//! `Connection` decide the downstream side, the upstream's decide only the
//! upstream side; pipelined requests are answered in order.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use util::*;

#[test]
fn connection_close_from_client_closes_after_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp =
        client.round_trip(b"GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok");
    assert!(resp.says_close(), "{}", preview(&resp.head));
    client.assert_closed();
}

#[test]
fn http10_client_without_keep_alive_is_closed_after_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(b"GET / HTTP/1.0\r\nHost: example.test\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok");
    client.assert_closed();
}

#[test]
fn connection_close_from_upstream_keeps_client_connection_alive() {
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();

    let first = client.round_trip(get("/1"));
    assert_eq!(first.status, 200);
    assert_eq!(first.body, b"ok");
    assert!(
        !first.says_close(),
        "upstream's close leaked downstream: {}",
        preview(&first.head)
    );

    let second = client.round_trip(get("/2"));
    assert_eq!(second.status, 200);
    assert_eq!(second.body, b"ok");
    assert_eq!(
        upstream.accepted(),
        2,
        "the second request needs a new upstream connection"
    );
    let targets: Vec<String> = upstream
        .wait_requests(2)
        .into_iter()
        .map(|r| r.target)
        .collect();
    assert_eq!(targets, ["/1", "/2"]);
}

#[test]
fn pipelined_requests_get_responses_in_order() {
    let upstream = Upstream::start(serve(|req| {
        ok_response(&format!("answer to {}", req.target))
    }));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send([get("/one"), get("/two"), get("/three")].concat());
    for target in ["/one", "/two", "/three"] {
        let resp = client.read_response();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_str(), format!("answer to {target}"));
    }
}

#[test]
fn many_sequential_requests_share_one_client_connection() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for i in 0..20 {
        let target = format!("/seq/{i}");
        let resp = client.round_trip(get(&target));
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_str(), target);
    }
    assert_eq!(proxy.stats.snapshot().downstream_accepted, 1);
}

#[test]
fn http10_client_with_keep_alive_stays_open() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let request = b"GET / HTTP/1.0\r\nHost: example.test\r\nConnection: keep-alive\r\n\r\n";
    let first = client.round_trip(request);
    assert_eq!(first.status, 200);
    // An HTTP/1.0 client assumes close unless the response says keep-alive.
    assert!(
        first
            .header_all("connection")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("keep-alive")),
        "{}",
        preview(&first.head)
    );
    assert_eq!(client.round_trip(request).body, b"ok");
}

#[test]
fn pipelined_request_with_body_then_get_are_kept_apart() {
    let upstream = Upstream::start(serve(|req| {
        ok_response(&format!("{} {}", req.method, req.target))
    }));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let mut both =
        b"POST /post HTTP/1.1\r\nHost: example.test\r\nContent-Length: 11\r\n\r\nhello world"
            .to_vec();
    both.extend_from_slice(&get("/after"));
    client.send(both);
    assert_eq!(client.read_response().body_str(), "POST /post");
    assert_eq!(client.read_response().body_str(), "GET /after");
    let reqs = upstream.wait_requests(2);
    assert_eq!(reqs[0].body, b"hello world");
    assert!(reqs[1].body.is_empty());
}

#[test]
fn connection_above_max_connections_closes_the_longest_idle_keepalive_client() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_connections = 2);
    let mut one = proxy.client();
    let mut two = proxy.client();
    assert_eq!(one.round_trip(get("/1")).status, 200);
    assert_eq!(two.round_trip(get("/2")).status, 200);
    assert_eventually("both idle", || proxy.stats.snapshot().downstream_idle == 2);

    // As nginx does: the client idle the longest makes room (issue 14).
    let mut three = proxy.client();
    assert_eq!(three.round_trip(get("/3")).status, 200);
    assert!(one.read_until_closed(WAIT).is_empty());
    assert_eq!(two.round_trip(get("/2b")).status, 200);
}

#[test]
fn a_connection_queued_at_the_cap_gets_room_when_a_busy_client_goes_idle() {
    // The third client connects while both clients at the cap are busy:
    // nothing wakes the edge-triggered listener again, so room must be made
    // when one of them goes idle in keep-alive (not at its idle timeout).
    let release = Arc::new(AtomicBool::new(false));
    let gate = release.clone();
    let upstream = Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            // Holds the first answers until released (bounded).
            for _ in 0..1000 {
                if gate.load(Ordering::SeqCst) {
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
            if !conn.send(ok_response(&req.target)) {
                return;
            }
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.max_connections = 2;
        c.keepalive_timeout = Duration::from_secs(60);
    });
    let mut one = proxy.client();
    let mut two = proxy.client();
    one.send(get("/1"));
    two.send(get("/2"));
    upstream.wait_requests(2);
    let mut three = proxy.client();
    three.send(get("/3"));
    assert!(
        three
            .read_what_arrives(Duration::from_millis(200))
            .is_empty(),
        "at the cap with both clients busy, the third waits"
    );
    release.store(true, Ordering::SeqCst);
    assert_eq!(one.read_response().body_str(), "/1");
    assert_eq!(two.read_response().body_str(), "/2");
    let resp = three.read_response();
    assert_eq!((resp.status, resp.body_str()), (200, "/3".to_string()));
}

#[test]
fn stats_gauges_return_to_zero_after_clients_close() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    for i in 0..3 {
        let mut client = proxy.client();
        let body = "z".repeat(100_000);
        let resp = client.round_trip(format!(
            "POST /{i} HTTP/1.1\r\nHost: example.test\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
        assert_eq!(resp.status, 200);
    }
    assert_eventually("gauges back to zero", || {
        let s = proxy.stats.snapshot();
        s.downstream_active == 0
            && s.downstream_idle == 0
            && s.buffers_in_use == 0
            && s.buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    assert_eq!(s.downstream_accepted, 3, "{s:?}");
    assert_eq!(s.pool_idle, 1, "{s:?}");
}

#[test]
fn pipelined_requests_before_a_half_close_are_all_answered() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n");
    client.shutdown_write();
    let first = client.read_response();
    assert_eq!(first.body_str(), "/first");
    let second = client.read_response();
    assert_eq!(second.body_str(), "/second");
    client.assert_closed();
}

#[test]
fn a_head_split_across_writes_after_an_idle_wait_is_answered_and_the_wait_starts_over() {
    // Between requests the connection waits with nothing buffered (parked,
    // ARCHITECTURE.md §4); the next head's first bytes wake it and the
    // rest completes it; then it waits again.
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).body, b"/1");
    assert_eventually("idle", || proxy.stats.snapshot().downstream_idle == 1);
    client.send(b"GET /2 HTTP/1.1\r\nHo");
    assert_eventually("head bytes read", || {
        proxy.stats.snapshot().downstream_idle == 0
    });
    client.send(b"st: example.test\r\n\r\n");
    let resp = client.read_response();
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"/2"[..]));
    assert!(!resp.says_close(), "{}", preview(&resp.head));
    assert_eventually("idle again", || proxy.stats.snapshot().downstream_idle == 1);
    assert_eq!(client.round_trip(get("/3")).body, b"/3");
}

/// The last bytes before the proxy's FIN go with `MSG_MORE`
/// (ARCHITECTURE.md §3, "The last bytes before a FIN"): whatever the size,
/// and whether the client reads at once or only after the proxy's socket
/// buffers filled (partial writes, each with `MSG_MORE`), a `Connection:
/// close` response arrives whole and then the connection closes.
#[test]
fn connection_close_responses_of_any_size_arrive_whole_then_the_close() {
    let upstream = Upstream::start(serve(|req| {
        let n: usize = req.target.trim_start_matches('/').parse().unwrap_or(0);
        let body: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        ok_response(&body)
    }));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    for (n, late) in [
        (0, false),
        (1, false),
        (1400, false),
        (70_000, false),
        (3 << 20, true),
    ] {
        let mut client = proxy.client();
        client.send(get_close(&format!("/{n}")));
        if late {
            // Long enough for the proxy to fill the socket buffers and
            // wait for room (the response is 3 MiB).
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        let resp = client.read_response();
        assert_eq!(resp.status, 200, "size {n}");
        assert_eq!(resp.body.len(), n, "size {n}");
        assert!(
            resp.body
                .iter()
                .enumerate()
                .all(|(i, &b)| b == b'a' + (i % 26) as u8),
            "size {n}: body bytes differ"
        );
        assert!(resp.says_close(), "size {n}: {}", preview(&resp.head));
        client.assert_closed();
    }
}

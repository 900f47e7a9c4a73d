//! The upstream keep-alive pool (ARCHITECTURE.md §7): reuse across downstream
//! connections, bounded connection counts under load, eviction of dead or
//! dirty idle connections, the caps, and retries on a reused connection.

mod util;

use std::net::SocketAddr;
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::Duration;

use util::*;

/// `clients` threads, each on its own connection, each doing `requests`
/// sequential GETs and checking every answer.
#[track_caller]
fn run_clients(proxy: SocketAddr, clients: usize, requests: usize, tag: &str) {
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let tag = tag.to_string();
            thread::spawn(move || {
                let mut client = Client::connect(proxy);
                for i in 0..requests {
                    let target = format!("/{tag}/c{c}/r{i}");
                    let resp = client.round_trip(get(&target));
                    assert_eq!(resp.status, 200);
                    assert_eq!(resp.body_str(), target);
                }
            })
        })
        .collect();
    for (c, h) in handles.into_iter().enumerate() {
        if h.join().is_err() {
            panic!("client {c} of {clients} ({tag}) failed");
        }
    }
}

#[test]
fn second_downstream_connection_reuses_upstream_connection() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    {
        let mut first = proxy.client();
        assert_eq!(first.round_trip(get("/1")).status, 200);
    }
    // The proxy parks the upstream connection after the response; give it
    // (bounded) time to show, but judge only by what the upstream saw.
    wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1);
    let mut second = proxy.client();
    assert_eq!(second.round_trip(get("/2")).status, 200);
    assert_eq!(
        upstream.accepted(),
        1,
        "upstream connections for two sequential clients"
    );
}

#[test]
fn many_clients_need_at_most_one_upstream_connection_each() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    run_clients(proxy.addr, 8, 50, "eight");
    assert!(
        upstream.accepted() <= 8,
        "8 clients made {} upstream connections",
        upstream.accepted()
    );
    run_clients(proxy.addr, 64, 20, "sixty-four");
    assert!(
        upstream.accepted() <= 64,
        "64 clients made {} upstream connections",
        upstream.accepted()
    );
    assert_eq!(
        upstream.wait_requests(8 * 50 + 64 * 20).len(),
        8 * 50 + 64 * 20
    );
}

/// Runs `behaviour`, then reports the connection's index on `done`.
fn reporting(
    behaviour: impl Fn(UpConn) + Send + Sync + 'static,
    done: mpsc::Sender<usize>,
) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |conn: UpConn| {
        let index = conn.index;
        behaviour(conn);
        let _ = done.send(index);
    }
}

#[test]
fn pooled_connection_closed_by_upstream_is_not_reused() {
    let (closed_tx, closed) = mpsc::channel();
    let upstream = Upstream::start(reporting(
        close_when_idle(Duration::from_millis(100), ok_response("ok")),
        closed_tx,
    ));
    // No retry may hide a dead connection taken from the pool.
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 0);
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).status, 200);
    closed
        .recv_timeout(WAIT)
        .expect("upstream closes its idle connection");

    let resp = client.round_trip(get("/2"));
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(upstream.accepted(), 2);
}

#[test]
fn pooled_connection_is_closed_at_pool_idle_timeout() {
    let (closed_tx, closed) = mpsc::channel();
    let upstream = Upstream::start(reporting(respond_forever(ok_response("ok")), closed_tx));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.pool_idle_timeout = Duration::from_millis(200);
    });
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    // respond_forever returns when the proxy closes the connection.
    closed
        .recv_timeout(WAIT)
        .expect("the proxy closes the idle upstream connection at the pool idle timeout");
}

#[test]
fn pool_keeps_at_most_max_idle_per_peer() {
    let (closed_tx, closed) = mpsc::channel();
    let barrier = Arc::new(Barrier::new(2));
    // Both connections answer only when both requests arrived, so two
    // upstream connections are in use at once.
    let upstream = Upstream::start(reporting(
        move |mut conn: UpConn| {
            let Some(req) = conn.read_request() else {
                return;
            };
            barrier.wait();
            conn.send(ok_response(&req.target));
            conn.hold_until_closed();
        },
        closed_tx,
    ));
    let proxy = start_forward_proxy(upstream.addr, |c| c.pool_max_idle_per_peer = 1);
    run_clients(proxy.addr, 2, 1, "pair");
    assert_eq!(upstream.accepted(), 2);
    closed
        .recv_timeout(WAIT)
        .expect("one of two idle connections is closed to keep the per-peer cap of 1");
    assert!(
        closed.recv_timeout(Duration::from_millis(200)).is_err(),
        "both idle connections were closed"
    );
}

#[test]
fn reused_connection_closed_on_request_is_retried_on_new_connection() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.index == 0 {
            // Answers one request, then closes when the next one arrives.
            if conn.read_request().is_some() {
                conn.send(ok_response("first"));
                close_on_request()(conn);
            }
        } else {
            respond_forever(ok_response("retried"))(conn);
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 1);
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).body, b"first");
    let resp = client.round_trip(get("/2"));
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(resp.body, b"retried");
    assert_eq!(upstream.accepted(), 2);
    assert_eq!(proxy.stats.snapshot().retries, 1);
}

#[test]
fn upstream_sending_bytes_after_body_is_not_reused() {
    let upstream = Upstream::start(bytes_after_body(ok_response("ok"), b"STRAY BYTES".to_vec()));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let first = client.round_trip(get("/1"));
    assert_eq!(first.body, b"ok");
    let second = client.round_trip(get("/2"));
    assert_eq!(second.status, 200, "{}", preview(&second.raw()));
    assert_eq!(second.body, b"ok");
    assert_eq!(
        upstream.accepted(),
        2,
        "a connection with stray bytes was reused"
    );
}

#[test]
fn upstream_connections_are_counted_in_stats() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for _ in 0..3 {
        assert_eq!(client.round_trip(get("/")).status, 200);
    }
    assert_eventually("three requests counted", || {
        let s = proxy.stats.snapshot();
        s.requests == 3 && s.upstream_connects == 1 && s.upstream_reuses == 2
    });
}

#[test]
fn reused_connection_failing_a_post_with_body_is_not_retried() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.index == 0 {
            if conn.read_request().is_some() {
                conn.send(ok_response("first"));
                close_on_request()(conn);
            }
        } else {
            respond_forever(ok_response("retried"))(conn);
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 1);
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).body, b"first");
    let resp = client
        .round_trip(b"POST /2 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 4\r\n\r\ndata");
    assert_proxy_error(&resp, 502);
    assert_eq!(
        upstream.accepted(),
        1,
        "a POST whose bytes went up was sent again"
    );
    assert_eq!(proxy.stats.snapshot().retries, 0);
}

#[test]
fn pool_hands_out_newest_idle_connection_first() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let gates: Arc<[AtomicBool; 2]> = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let g = gates.clone();
    // Connection i answers "conn<i>"; connections 0 and 1 hold their first
    // answer until the test opens their gate.
    let upstream = Upstream::start(move |mut conn: UpConn| {
        let i = conn.index;
        let mut first = true;
        while conn.read_request().is_some() {
            if first && i < 2 {
                wait_until(WAIT, || g[i].load(Ordering::SeqCst));
            }
            first = false;
            if !conn.send(ok_response(&format!("conn{i}"))) {
                return;
            }
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut a = proxy.client();
    a.send(get("/a"));
    upstream.wait_requests(1);
    let mut b = proxy.client();
    b.send(get("/b"));
    upstream.wait_requests(2);

    gates[0].store(true, Ordering::SeqCst);
    assert_eq!(a.read_response().body_str(), "conn0");
    wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1);
    gates[1].store(true, Ordering::SeqCst);
    assert_eq!(b.read_response().body_str(), "conn1");
    wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 2);

    let mut c = proxy.client();
    assert_eq!(
        c.round_trip(get("/c")).body_str(),
        "conn1",
        "the newest idle connection (LIFO)"
    );
}

/// Sends targets starting with `/a` to `a`, everything else to `b`.
struct Route {
    a: SocketAddr,
    b: SocketAddr,
}

impl Filter for Route {
    fn upstream_peer(&self, req: &RequestHead) -> Target {
        Peer::new(if req.target.starts_with("/a") {
            self.a
        } else {
            self.b
        })
        .into()
    }
}

#[test]
fn pool_total_cap_evicts_globally_oldest_idle_connection() {
    let (a_tx, a_closed) = mpsc::channel();
    let (b_tx, b_closed) = mpsc::channel();
    let a = Upstream::start(reporting(respond_forever(ok_response("a")), a_tx));
    let b = Upstream::start(reporting(respond_forever(ok_response("b")), b_tx));
    let proxy = start_proxy(
        |c| c.pool_max_idle_total = 1,
        Route {
            a: a.addr,
            b: b.addr,
        },
    );
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/a")).body, b"a");
    assert_eq!(client.round_trip(get("/b")).body, b"b");
    a_closed
        .recv_timeout(WAIT)
        .expect("the older idle connection (to a) is closed to keep the total cap of 1");
    assert!(
        b_closed.recv_timeout(Duration::from_millis(200)).is_err(),
        "the newer idle connection (to b) was closed too"
    );
}

#[test]
fn upstream_peer_is_asked_per_request() {
    let a = Upstream::start(respond_forever(ok_response("a")));
    let b = Upstream::start(respond_forever(ok_response("b")));
    let proxy = start_proxy(
        |_| {},
        Route {
            a: a.addr,
            b: b.addr,
        },
    );
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/a/1")).body, b"a");
    assert_eq!(client.round_trip(get("/b/1")).body, b"b");
    assert_eq!(client.round_trip(get("/a/2")).body, b"a");
    let targets =
        |u: &Upstream| -> Vec<String> { u.requests().into_iter().map(|r| r.target).collect() };
    assert_eq!(targets(&a), ["/a/1", "/a/2"]);
    assert_eq!(targets(&b), ["/b/1"]);
}

#[test]
fn with_pool_max_idle_per_peer_0_every_request_gets_a_new_upstream_connection() {
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.pool_max_idle_per_peer = 0);
    let mut c = proxy.client();
    for _ in 0..3 {
        assert_eq!(c.round_trip(get("/")).status, 200);
    }
    assert_eq!(upstream.accepted(), 3);
}

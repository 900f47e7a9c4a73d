//! The upstream keep-alive pool as users meet it (ARCHITECTURE.md §7, §8):
//! upstreams that close idle connections, close on the next request, send
//! stray bytes while idle, never accept or never answer; the LIFO order;
//! the per-peer and global caps under concurrency.
//!
//! Every upstream here is hand-written. Each connection answers with an
//! `X-Conn: <index>` field (the upstream's accept order), so a test can tell
//! which upstream connection served a request, and is tracked by [`Conns`]
//! (how many are open now, which ones ended). Tests assert on what the
//! client sees, on `proxy.stats.snapshot()` and on those upstream counts;
//! every wait is bounded.

mod util;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use sluice::StatsSnapshot;
use util::*;

// ---------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------

/// `200 OK` naming the upstream connection (`X-Conn`) with `body`.
fn tagged_ok(index: usize, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nX-Conn: {index}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The upstream connection index a response names in `X-Conn`.
#[track_caller]
fn conn_of(resp: &Response) -> usize {
    resp.header("x-conn")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no X-Conn in {}", preview(&resp.head)))
}

/// Upstream-side bookkeeping: connections open now and those that ended
/// (the proxy closed them, or the behaviour gave up), by index.
#[derive(Clone, Default)]
struct Conns {
    open: Arc<AtomicUsize>,
    ended: Arc<Mutex<Vec<usize>>>,
}

impl Conns {
    /// Runs `behaviour` on each connection and keeps the counts. A
    /// connection counts as ended once the behaviour returned and its
    /// socket was dropped.
    fn track(
        &self,
        behaviour: impl Fn(UpConn) + Send + Sync + 'static,
    ) -> impl Fn(UpConn) + Send + Sync + 'static {
        let me = self.clone();
        move |conn: UpConn| {
            me.open.fetch_add(1, Ordering::SeqCst);
            let index = conn.index;
            behaviour(conn); // consumes and drops the socket
            me.open.fetch_sub(1, Ordering::SeqCst);
            me.ended.lock().unwrap().push(index);
        }
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn ended(&self) -> Vec<usize> {
        let mut v = self.ended.lock().unwrap().clone();
        v.sort_unstable();
        v
    }
}

/// Holds upstream answers to targets starting with `/hold` until the test
/// releases them (one by one or all at once). Bounded: an answer never
/// waits more than [`WAIT`].
#[derive(Clone, Default)]
struct Gate {
    arrived: Arc<AtomicUsize>,
    released: Arc<Mutex<HashSet<String>>>,
    all: Arc<AtomicBool>,
}

impl Gate {
    /// Called by the upstream before answering `target`.
    fn pass(&self, target: &str) {
        if !target.starts_with("/hold") {
            return;
        }
        self.arrived.fetch_add(1, Ordering::SeqCst);
        wait_until(WAIT, || {
            self.all.load(Ordering::SeqCst) || self.released.lock().unwrap().contains(target)
        });
    }

    fn release(&self, target: &str) {
        self.released.lock().unwrap().insert(target.to_string());
    }

    fn release_all(&self) {
        self.all.store(true, Ordering::SeqCst);
    }

    /// Waits until `n` held requests reached the upstream.
    #[track_caller]
    fn wait_arrived(&self, n: usize) {
        assert_eventually(&format!("{n} held requests reach the upstream"), || {
            self.arrived.load(Ordering::SeqCst) >= n
        });
    }
}

/// Answers every request with [`tagged_ok`] (body: the target), holding
/// `/hold...` targets at `gate`, until the proxy closes the connection.
fn tagged(gate: Gate) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            gate.pass(&req.target);
            if !conn.send(tagged_ok(conn.index, &req.target)) {
                return;
            }
        }
    }
}

/// Routes by path prefix; the first matching prefix wins, else `default`.
struct ByPath {
    routes: Vec<(&'static str, SocketAddr)>,
    default: SocketAddr,
}

impl Filter for ByPath {
    fn upstream_peer(&self, req: &RequestHead) -> Target {
        let addr = self
            .routes
            .iter()
            .find(|(prefix, _)| req.target.starts_with(prefix))
            .map_or(self.default, |&(_, addr)| addr);
        Peer::new(addr).into()
    }
}

/// Waits (bounded) until `field` of the proxy's stats reads `want`.
#[track_caller]
fn wait_stat(proxy: &Proxy, what: &str, want: u64, field: impl Fn(&StatsSnapshot) -> u64) {
    let ok = wait_until(WAIT, || field(&proxy.stats.snapshot()) == want);
    assert!(
        ok,
        "{what} != {want} within {WAIT:?}; stats {:?}",
        proxy.stats.snapshot()
    );
}

// ---------------------------------------------------------------------------
// 1. The upstream closes idle connections: FIN evicts them from the pool
// ---------------------------------------------------------------------------

/// Three GETs, the upstream closing each connection 100 ms after its
/// answer. `fresh_clients`: each request on its own client connection.
fn idle_close_scenario(fresh_clients: bool) {
    let conns = Conns::default();
    let upstream = Upstream::start(conns.track(close_when_idle(
        Duration::from_millis(100),
        ok_response("ok"),
    )));
    // No retry may hide a dead connection handed out by the pool: a pool
    // without FIN eviction answers 200, 502, 200 here.
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 0);
    let mut shared = proxy.client();
    for i in 1..=3u64 {
        let resp = if fresh_clients {
            proxy.client().round_trip(get(&format!("/{i}")))
        } else {
            shared.round_trip(get(&format!("/{i}")))
        };
        assert_eq!(resp.status, 200, "request {i}: {}", preview(&resp.raw()));
        // Earlier connections were evicted already; this one may go any
        // moment (100 ms after its answer).
        let st = proxy.stats.snapshot();
        assert!(
            (i - 1..=i).contains(&st.pool_evicted_peer_closed),
            "peer-closed evictions when answer {i} arrived: {st:?}"
        );
        // The upstream closes after 100 ms idle; the proxy must see the FIN
        // of the parked connection and evict it without anyone taking it.
        wait_stat(&proxy, "pool_evicted_peer_closed", i, |s| {
            s.pool_evicted_peer_closed
        });
        wait_stat(&proxy, "pool_idle", 0, |s| s.pool_idle);
    }
    assert_eq!(
        upstream.accepted(),
        3,
        "one upstream connection per request"
    );
    assert_eventually("the upstream's three connections ended", || {
        conns.ended().len() == 3
    });
    let st = proxy.stats.snapshot();
    assert_eq!(st.upstream_connects, 3, "{st:?}");
    assert_eq!(
        st.upstream_reuses, 0,
        "a dead connection was reused: {st:?}"
    );
    assert_eq!(st.retries, 0, "{st:?}");
    assert_eq!(st.status_502, 0, "{st:?}");
}

#[test]
fn upstream_idle_close_is_evicted_before_reuse_across_client_connections() {
    idle_close_scenario(true);
}

#[test]
fn upstream_idle_close_is_evicted_before_reuse_on_one_client_connection() {
    idle_close_scenario(false);
}

/// Connection `index` answers up to `n` requests; it answers the last one
/// with its FIN in the same TCP segment (TCP_CORK held the response back
/// until `shutdown(Write)`), without `Connection: close`: the proxy gets
/// one readable edge for response and FIN together.
fn answer_n_then_fin_with_last(n: usize) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        for i in 1..=n {
            let Some(req) = conn.read_request() else {
                return;
            };
            if i == n {
                let sock = socket2::SockRef::from(&conn.wire.stream);
                sock.set_tcp_cork(true).expect("TCP_CORK");
                conn.send(tagged_ok(conn.index, &req.target));
                let _ = conn.wire.stream.shutdown(std::net::Shutdown::Write);
                conn.hold_until_closed();
                return;
            }
            if !conn.send(tagged_ok(conn.index, &req.target)) {
                return;
            }
        }
    }
}

/// The upstream's FIN arrives with the answer (same segment, one readable
/// edge). The proxy must not park a connection it could know is closed;
/// if it parks it, the FIN must still evict it (ARCHITECTURE.md §7: checked at park
/// and at take), not leave it in the pool in CLOSE_WAIT until a take or
/// the pool idle timeout.
fn fin_with_answer_case(n: usize) {
    let conns = Conns::default();
    let upstream = Upstream::start(conns.track(answer_n_then_fin_with_last(n)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for i in 1..=n {
        let resp = client.round_trip(get(&format!("/{i}")));
        assert_eq!((resp.status, conn_of(&resp)), (200, 0), "request {i}");
        if i < n {
            wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);
        }
    }
    // The proxy closes connection 0 (the upstream sees EOF) and holds no
    // idle connection.
    let closed = wait_until(WAIT, || conns.ended() == [0]);
    let st = proxy.stats.snapshot();
    assert!(
        closed && st.pool_idle == 0,
        "upstream FIN came with answer {n}: the proxy still holds the connection \
         (closed by proxy: {closed}); stats {st:?}"
    );
    let resp = client.round_trip(get("/next"));
    assert_eq!((resp.status, conn_of(&resp)), (200, 1), "a new connection");
    let st = proxy.stats.snapshot();
    assert_eq!((st.retries, st.status_502), (0, 0), "{st:?}");
}

#[test]
fn fin_with_the_first_answer_leaves_nothing_in_the_pool() {
    fin_with_answer_case(1);
}

#[test]
fn fin_with_an_answer_on_a_reused_connection_leaves_nothing_in_the_pool() {
    fin_with_answer_case(2);
}

// ---------------------------------------------------------------------------
// 2. The upstream closes when the next request arrives: retry or 502
// ---------------------------------------------------------------------------

/// Connection 0 answers its first request, then reads the next request's
/// head, records it and closes without answering. Later connections answer
/// everything (tagged).
fn answer_once_then_close_on_next() -> impl Fn(UpConn) + Send + Sync + 'static {
    let rest = tagged(Gate::default());
    move |mut conn: UpConn| {
        if conn.index > 0 {
            return rest(conn);
        }
        if conn.read_request().is_none() || !conn.send(tagged_ok(0, "first")) {
            return;
        }
        if let Some(req) = conn.read_request_head() {
            conn.record(req);
        }
        conn.close();
    }
}

#[test]
fn reused_connection_closed_on_get_is_retried_on_new_connection() {
    let upstream = Upstream::start(answer_once_then_close_on_next());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let first = client.round_trip(get("/1"));
    assert_eq!((first.status, conn_of(&first)), (200, 0));
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    let second = client.round_trip(get("/2"));
    assert_eq!(second.status, 200, "{}", preview(&second.raw()));
    assert_eq!(conn_of(&second), 1, "the retry goes on a new connection");
    let targets: Vec<String> = upstream
        .wait_requests(3)
        .into_iter()
        .map(|r| r.target)
        .collect();
    assert_eq!(targets, ["/1", "/2", "/2"], "the upstream sees /2 twice");
    assert_eq!(upstream.accepted(), 2);
    let st = proxy.stats.snapshot();
    assert_eq!(st.retries, 1, "{st:?}");
    assert_eq!(st.upstream_reuses, 1, "{st:?}");
    assert_eq!(st.upstream_connects, 2, "{st:?}");
    assert_eq!(st.status_502, 0, "{st:?}");
}

/// GET /1 on connection 0, then `post` on the same (reused) connection,
/// which the upstream closes without answering: 502, sent once.
fn post_on_dying_reused_connection(post: &str) {
    let upstream = Upstream::start(answer_once_then_close_on_next());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).status, 200);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    let resp = client.round_trip(post);
    assert_proxy_error(&resp, 502);
    let reqs = upstream.wait_requests(2);
    assert_stays(Duration::from_millis(200), "no resend of the POST", || {
        upstream.requests().len() == 2 && upstream.accepted() == 1
    });
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].target.as_str()),
        ("POST", "/2")
    );
    let st = proxy.stats.snapshot();
    assert_eq!(st.retries, 0, "{st:?}");
    assert_eq!(st.status_502, 1, "{st:?}");
    assert_eq!(st.upstream_connects, 1, "{st:?}");
}

#[test]
fn reused_connection_closed_on_post_with_body_gives_502_without_resend() {
    post_on_dying_reused_connection(
        "POST /2 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\r\nhello",
    );
}

/// Not idempotent (RFC 9110 §9.2.2): no retry even without body bytes.
#[test]
fn reused_connection_closed_on_bodyless_post_gives_502_without_resend() {
    post_on_dying_reused_connection(
        "POST /2 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n",
    );
}

/// ARCHITECTURE.md §7: the retry goes "on a new connection". With two parked
/// connections that both die on their next request, a retry that took the
/// second parked one would fail again and answer 502.
#[test]
fn retry_uses_a_new_connection_not_another_parked_one() {
    let gate = Gate::default();
    let g = gate.clone();
    // Connections 0 and 1: answer a held first request, then close on the
    // next request without answering. Later connections answer everything.
    let upstream = Upstream::start(move |mut conn: UpConn| {
        if conn.index >= 2 {
            return tagged(g.clone())(conn);
        }
        let Some(req) = conn.read_request() else {
            return;
        };
        g.pass(&req.target);
        if !conn.send(tagged_ok(conn.index, &req.target)) {
            return;
        }
        if let Some(req) = conn.read_request_head() {
            conn.record(req);
        }
        conn.close();
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 1);
    let mut a = proxy.client();
    let mut b = proxy.client();
    a.send(get("/hold/a"));
    b.send(get("/hold/b"));
    gate.wait_arrived(2);
    gate.release_all();
    assert_eq!(a.read_response().status, 200);
    assert_eq!(b.read_response().status, 200);
    wait_stat(&proxy, "pool_idle", 2, |s| s.pool_idle);

    let resp = a.round_trip(get("/x"));
    let st = proxy.stats.snapshot();
    assert_eq!(
        resp.status,
        200,
        "GET after its reused connection died: {}; stats {st:?}; upstream saw {:?}",
        preview(&resp.raw()),
        upstream
            .requests()
            .iter()
            .map(|r| r.target.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(conn_of(&resp), 2, "answered on a new connection");
    assert_eq!(st.retries, 1, "{st:?}");
}

// ---------------------------------------------------------------------------
// 3. LIFO
// ---------------------------------------------------------------------------

/// Two overlapping requests make two upstream connections; they return to
/// the pool in the order `first`, `second`; the next request must go on
/// the one returned last.
fn lifo_case(first: &str, second: &str) {
    let gate = Gate::default();
    let upstream = Upstream::start(tagged(gate.clone()));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut c1 = proxy.client();
    let mut c2 = proxy.client();
    c1.send(get(first));
    c2.send(get(second));
    gate.wait_arrived(2);
    assert_eq!(upstream.accepted(), 2, "two overlapping requests");

    gate.release(first);
    let r1 = c1.read_response();
    assert_eq!(r1.status, 200);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);
    gate.release(second);
    let r2 = c2.read_response();
    assert_eq!(r2.status, 200);
    wait_stat(&proxy, "pool_idle", 2, |s| s.pool_idle);
    let (older, newer) = (conn_of(&r1), conn_of(&r2));
    assert_ne!(older, newer);

    let mut c3 = proxy.client();
    let next = c3.round_trip(get("/next"));
    assert_eq!(next.status, 200);
    assert_eq!(
        conn_of(&next),
        newer,
        "the connection returned last (LIFO), not {older}"
    );
    let st = proxy.stats.snapshot();
    assert_eq!((st.upstream_connects, st.upstream_reuses), (2, 1), "{st:?}");
    assert_eq!(upstream.accepted(), 2);
}

#[test]
fn pool_hands_out_the_connection_returned_last() {
    lifo_case("/hold/a", "/hold/b");
    lifo_case("/hold/b", "/hold/a");
}

// ---------------------------------------------------------------------------
// 4. Caps
// ---------------------------------------------------------------------------

#[test]
fn twenty_connections_returned_at_once_leave_per_peer_cap_idle() {
    const N: usize = 20;
    const CAP: usize = 16;
    let gate = Gate::default();
    let conns = Conns::default();
    let upstream = Upstream::start(conns.track(tagged(gate.clone())));
    let proxy = start_forward_proxy(upstream.addr, |c| c.pool_max_idle_per_peer = CAP);
    let mut clients: Vec<Client> = (0..N)
        .map(|i| {
            let mut c = proxy.client();
            c.send(get(&format!("/hold/{i}")));
            c
        })
        .collect();
    gate.wait_arrived(N);
    assert_eq!(upstream.accepted(), N);
    gate.release_all();
    for (i, c) in clients.iter_mut().enumerate() {
        let resp = c.read_response();
        assert_eq!(resp.status, 200, "client {i}");
        assert_eq!(resp.body_str(), format!("/hold/{i}"));
    }
    wait_stat(&proxy, "pool_puts", N as u64, |s| s.pool_puts);
    let st = proxy.stats.snapshot();
    assert_eq!(st.pool_idle, CAP as u64, "{st:?}");
    assert_eq!(st.pool_evicted_cap, (N - CAP) as u64, "{st:?}");
    assert_eventually("the upstream sees 4 connections closed", || {
        conns.ended().len() == N - CAP
    });
    assert_stays(Duration::from_millis(100), "16 stay open", || {
        conns.open() == CAP && conns.ended().len() == N - CAP
    });
}

#[test]
fn global_cap_closes_the_globally_oldest_idle_connection() {
    let (gate_a, gate_b) = (Gate::default(), Gate::default());
    let (conns_a, conns_b) = (Conns::default(), Conns::default());
    let a = Upstream::start(conns_a.track(tagged(gate_a.clone())));
    let b = Upstream::start(conns_b.track(tagged(gate_b.clone())));
    let proxy = start_proxy(
        |c| c.pool_max_idle_total = 2,
        ByPath {
            routes: vec![("/a", a.addr), ("/hold/a", a.addr)],
            default: b.addr,
        },
    );
    // a0 parks first: the globally oldest.
    let mut c1 = proxy.client();
    assert_eq!(conn_of(&c1.round_trip(get("/a/1"))), 0);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    // Two overlapping requests to b: b0 and b1, returned in that order.
    let mut c2 = proxy.client();
    c1.send(get("/hold/b/1"));
    c2.send(get("/hold/b/2"));
    gate_b.wait_arrived(2);
    gate_b.release("/hold/b/1");
    let first_b = conn_of(&c1.read_response());
    wait_stat(&proxy, "pool_idle", 2, |s| s.pool_idle); // a0, first_b: full
    assert!(conns_a.ended().is_empty() && conns_b.ended().is_empty());
    gate_b.release("/hold/b/2");
    let second_b = conn_of(&c2.read_response());
    // Its put finds the pool full: the oldest (a0, another peer) goes.
    wait_stat(&proxy, "pool_evicted_cap", 1, |s| s.pool_evicted_cap);
    assert_eventually("a0 is closed", || conns_a.ended() == [0]);
    let st = proxy.stats.snapshot();
    assert_eq!(st.pool_idle, 2, "{st:?}");
    assert!(conns_b.ended().is_empty(), "b lost {:?}", conns_b.ended());

    // A new a connection parks: now the oldest is the b returned first.
    assert_eq!(conn_of(&c1.round_trip(get("/a/2"))), 1);
    wait_stat(&proxy, "pool_evicted_cap", 2, |s| s.pool_evicted_cap);
    assert_eventually("the b connection returned first is closed", || {
        conns_b.ended() == [first_b]
    });
    assert_stays(Duration::from_millis(100), "the newer ones stay", || {
        conns_b.ended() == [first_b] && conns_a.ended() == [0]
    });
    assert_eq!(proxy.stats.snapshot().pool_idle, 2);
    // The survivor of b is the one handed out next.
    assert_eq!(conn_of(&c2.round_trip(get("/b/3"))), second_b);
}

#[test]
fn many_puts_never_leave_more_idle_connections_than_the_caps() {
    const CLIENTS: usize = 30;
    const REQUESTS: usize = 200;
    const PER_PEER: usize = 4;
    const TOTAL: usize = 6;
    let (conns_a, conns_b) = (Conns::default(), Conns::default());
    let a = Upstream::start(conns_a.track(tagged(Gate::default())));
    let b = Upstream::start(conns_b.track(tagged(Gate::default())));
    let proxy = start_proxy(
        |c| {
            c.pool_max_idle_per_peer = PER_PEER;
            c.pool_max_idle_total = TOTAL;
        },
        ByPath {
            routes: vec![("/a", a.addr)],
            default: b.addr,
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let monitor = {
        let (stop, peak, stats) = (stop.clone(), peak.clone(), proxy.stats.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                peak.fetch_max(stats.snapshot().pool_idle, Ordering::SeqCst);
                thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (next, addr) = (next.clone(), proxy.addr);
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= REQUESTS {
                        return;
                    }
                    let target = format!("/{}/c{c}/r{i}", if i % 2 == 0 { "a" } else { "b" });
                    let resp = client.round_trip(get(&target));
                    assert_eq!(resp.status, 200, "{target}");
                    assert_eq!(resp.body_str(), target);
                }
            })
        })
        .collect();
    for (c, h) in clients.into_iter().enumerate() {
        assert!(h.join().is_ok(), "client {c} failed");
    }
    // Settled: no request in flight, so every upstream connection still
    // open is parked, and the pool holds no more than the caps.
    assert_eventually("open upstream connections == pool_idle", || {
        let st = proxy.stats.snapshot();
        conns_a.open() + conns_b.open() == st.pool_idle as usize
            && st.upstream_connects
                == st.pool_idle + st.pool_evicted_cap + st.pool_evicted_peer_closed
    });
    stop.store(true, Ordering::SeqCst);
    monitor.join().unwrap();
    let st = proxy.stats.snapshot();
    assert!(st.pool_idle as usize <= TOTAL, "{st:?}");
    assert!(
        peak.load(Ordering::SeqCst) as usize <= TOTAL,
        "pool_idle peaked at {} > {TOTAL}",
        peak.load(Ordering::SeqCst)
    );
    assert!(conns_a.open() <= PER_PEER, "a open: {}", conns_a.open());
    assert!(conns_b.open() <= PER_PEER, "b open: {}", conns_b.open());
    assert_eq!(st.pool_evicted_peer_closed, 0, "{st:?}");
    assert_eq!(
        st.upstream_reuses + st.upstream_connects,
        REQUESTS as u64,
        "{st:?}"
    );
    assert_eq!((st.status_502, st.retries), (0, 0), "{st:?}");
}

// ---------------------------------------------------------------------------
// 5. Stray bytes on an idle pooled connection
// ---------------------------------------------------------------------------

#[test]
fn idle_connection_sending_bytes_is_closed_and_never_used() {
    let (junk_tx, junk_rx) = mpsc::channel::<()>();
    let junk_rx = Mutex::new(junk_rx);
    let rest = tagged(Gate::default());
    let conns = Conns::default();
    // Connection 0 answers once; when the test says so (the connection is
    // parked), it writes "junk" and waits for the proxy to close it.
    let upstream = Upstream::start(conns.track(move |mut conn: UpConn| {
        if conn.index > 0 {
            return rest(conn);
        }
        if conn.read_request().is_none() || !conn.send(tagged_ok(0, "first")) {
            return;
        }
        if junk_rx.lock().unwrap().recv_timeout(WAIT).is_ok() {
            conn.send(b"junk");
        }
        conn.hold_until_closed();
    }));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(conn_of(&client.round_trip(get("/1"))), 0);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);
    junk_tx.send(()).unwrap();
    wait_stat(&proxy, "pool_evicted_unexpected_data", 1, |s| {
        s.pool_evicted_unexpected_data
    });
    wait_stat(&proxy, "pool_idle", 0, |s| s.pool_idle);
    assert_eventually("connection 0 closed by the proxy", || conns.ended() == [0]);

    let resp = client.round_trip(get("/2"));
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(conn_of(&resp), 1, "a new connection");
    assert_eq!(resp.body_str(), "/2");
    let st = proxy.stats.snapshot();
    assert_eq!((st.upstream_connects, st.upstream_reuses), (2, 0), "{st:?}");
    assert_eq!((st.retries, st.status_502), (0, 0), "{st:?}");
    assert_eq!(st.pool_evicted_peer_closed, 0, "{st:?}");
}

// ---------------------------------------------------------------------------
// 6. Timeouts: 504, and the loop serves others meanwhile
// ---------------------------------------------------------------------------

/// Sends `GET /slow` (routed to `bad`) and, while it is pending, `GET /ok`
/// (routed to a healthy upstream) on another client: the second gets 200
/// before the first gets its 504, which comes after `timeout` and within
/// 3 s.
fn timeout_gives_504_while_others_are_served(
    bad: SocketAddr,
    tweak: impl FnOnce(&mut Config),
    timeout: Duration,
) -> StatsSnapshot {
    let good = Upstream::start(tagged(Gate::default()));
    let proxy = start_proxy(
        tweak,
        ByPath {
            routes: vec![("/ok", good.addr)],
            default: bad,
        },
    );
    let mut slow = proxy.client();
    let sent = Instant::now();
    slow.send(get("/slow"));
    wait_stat(&proxy, "upstream_connects", 1, |s| s.upstream_connects);

    let mut other = proxy.client();
    for i in 0..3 {
        let resp = other.round_trip(get(&format!("/ok/{i}")));
        assert_eq!(resp.status, 200);
        let st = proxy.stats.snapshot();
        assert_eq!(
            st.status_504, 0,
            "the /slow request ended before /ok/{i} was served: {st:?}"
        );
    }

    let resp = slow.read_response();
    let waited = sent.elapsed();
    assert_proxy_error(&resp, 504);
    assert!(
        waited < Duration::from_secs(3),
        "504 after {waited:?} for a {timeout:?} timeout"
    );
    assert!(
        waited >= timeout.mul_f32(0.8),
        "504 after {waited:?}, before the {timeout:?} timeout"
    );
    slow.assert_closed();
    let st = proxy.stats.snapshot();
    assert_eq!(
        (st.status_504, st.status_502, st.retries),
        (1, 0, 0),
        "{st:?}"
    );
    st
}

#[test]
fn upstream_connect_that_never_completes_gives_504() {
    // A listener whose accept queue is full: Linux drops further SYNs, so
    // the proxy's connect neither completes nor fails.
    let hole = Blackhole::start();
    let timeout = Duration::from_millis(300);
    let st = timeout_gives_504_while_others_are_served(
        hole.addr,
        |c| c.upstream_connect_timeout = timeout,
        timeout,
    );
    assert_eq!(st.timeouts_connect, 1, "{st:?}");
}

#[test]
fn upstream_that_never_answers_gives_504_at_read_timeout() {
    let silent = Upstream::start(never_answer());
    let timeout = Duration::from_millis(300);
    let st = timeout_gives_504_while_others_are_served(
        silent.addr,
        |c| c.upstream_read_timeout = timeout,
        timeout,
    );
    assert_eq!(st.timeouts_connect, 0, "{st:?}");
    let reqs = silent.wait_requests(1);
    assert_eq!(
        reqs.len(),
        1,
        "the request is not sent again after a timeout"
    );
    assert_eq!(silent.accepted(), 1);
}

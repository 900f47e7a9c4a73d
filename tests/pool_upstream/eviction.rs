//! A parked connection the upstream closed or wrote to is evicted, never handed out.

use super::*;

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

//! The pool's choice rule against servers that close pooled connections
//! (issue 14, `pool.rs`): a POST never goes on a connection the server was
//! about to close once the server's habits are known; GETs keep LIFO and
//! retry; a `Keep-Alive: timeout=N` hint retires connections before N.

mod util;

use std::thread;
use std::time::Duration;

use util::*;

const POST: &[u8] = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=1";

/// Answers one request, waits `ms`, closes without reading anything more
/// (the minimal case is 50 ms).
fn answer_then_close_after(ms: u64) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            // The server's own habit, not synchronisation.
            thread::sleep(Duration::from_millis(ms));
        }
        conn.close();
    }
}

#[test]
fn once_the_server_was_seen_closing_after_responses_a_quick_second_post_gets_200() {
    let upstream = Upstream::start(answer_then_close_after(50));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(POST).status, 200);
    // The pool sees the server close that connection 50 ms after it.
    assert_eventually("the close seen", || {
        proxy.stats.snapshot().pool_evicted_peer_closed == 1
    });
    assert_eq!(client.round_trip(POST).status, 200);
    // 10 ms later (pacing, as in the issue): the just-parked connection
    // would be closed under it; a new one is opened instead.
    thread::sleep(Duration::from_millis(10));
    assert_eq!(client.round_trip(POST).status, 200);
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_502, st.pool_new_for_risk), (0, 1), "{st:?}");
    assert_eq!(upstream.accepted(), 3);
}

#[test]
fn after_a_post_lost_to_a_close_in_flight_the_next_quick_post_gets_a_new_connection() {
    // A request sent in the 20 ms before the close is lost (the close is
    // never seen while idle, so only the failed reuse can teach the pool).
    let upstream = Upstream::start(answer_then_close_after(20));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(POST).status, 200);
    // Nothing learned yet: LIFO hands it the doomed connection.
    assert_eq!(client.round_trip(POST).status, 502);
    let mut client = proxy.client();
    assert_eq!(client.round_trip(POST).status, 200);
    assert_eq!(client.round_trip(POST).status, 200);
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_502, st.pool_new_for_risk), (1, 1), "{st:?}");
    assert_eq!(upstream.accepted(), 3);
}

#[test]
fn gets_on_the_same_server_keep_lifo_and_are_retried() {
    let upstream = Upstream::start(answer_then_close_after(50));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    assert_eq!(client.round_trip(get("/")).status, 200);
    let st = proxy.stats.snapshot();
    assert_eq!((st.status_502, st.pool_new_for_risk), (0, 0), "{st:?}");
}

#[test]
fn a_post_does_not_take_a_connection_idle_near_the_learned_limit() {
    let upstream = Upstream::start(close_when_idle(
        Duration::from_millis(300),
        ok_response("ok"),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    // Learn the limit: the server closes the idle connection at 300 ms.
    assert_eventually("the idle close seen", || {
        proxy.stats.snapshot().pool_evicted_peer_closed == 1
    });
    assert_eq!(client.round_trip(get("/")).status, 200);
    // Idle 250 ms (pacing): under the limit, past what a POST may risk
    // (200 ms); past 280 ms it is retired for every method.
    thread::sleep(Duration::from_millis(250));
    assert_eq!(client.round_trip(POST).status, 200);
    let st = proxy.stats.snapshot();
    let declined = st.pool_new_for_risk + st.pool_retired_near_limit;
    assert_eq!((st.status_502, declined), (0, 1), "{st:?}");
    assert_eq!(upstream.accepted(), 3);
}

#[test]
fn a_keep_alive_timeout_hint_retires_connections_before_it() {
    let upstream = Upstream::start(respond_forever(
        b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=0\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/")).status, 200);
    assert_eq!(client.round_trip(get("/")).status, 200);
    let st = proxy.stats.snapshot();
    assert_eq!(st.pool_retired_near_limit, 1, "{st:?}");
    assert_eq!((st.upstream_reuses, upstream.accepted()), (0, 2));
}

#[test]
fn once_a_server_closes_after_every_response_no_request_is_sent_on_a_doomed_connection() {
    let upstream = Upstream::start(answer_then_close_after(5));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    // Learning: GETs go on just-parked connections and are retried.
    for _ in 0..30 {
        assert_eq!(client.round_trip(get("/")).status, 200);
    }
    let learned = proxy.stats.snapshot();
    assert!(learned.retries > 0, "{learned:?}");
    // Learned: neither method takes a just-parked connection any more.
    for _ in 0..20 {
        assert_eq!(client.round_trip(get("/")).status, 200);
        assert_eq!(client.round_trip(POST).status, 200);
    }
    let st = proxy.stats.snapshot();
    assert_eq!(st.status_502, 0, "{st:?}");
    assert_eq!(st.retries, learned.retries, "{st:?}");
}

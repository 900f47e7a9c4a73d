//! The pool hands out the connection returned last (LIFO).

use super::*;

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

//! 504 for a connect or an answer that never comes, while the loop serves others.

use super::*;

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

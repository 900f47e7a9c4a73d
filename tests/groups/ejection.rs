//! Passive ejection: a killed server, or one that never answers, is taken out.

use super::*;

#[test]
fn a_killed_server_is_ejected_and_no_idempotent_request_fails() {
    let (live_a, live_b, live_c) = (alive(), alive(), alive());
    let (a, b, c) = (
        named("a", live_a),
        named("b", live_b.clone()),
        named("c", live_c),
    );
    let servers = [a.addr.to_string(), b.addr.to_string(), c.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, |g| g.max_fails = 2)], vec![]);
    spread(proxy.addr, 3, 30, |_| get("/"));
    // Kill b: its pooled connections close on the next request, new
    // connects are refused.
    live_b.store(false, Ordering::SeqCst);
    drop(b);
    let seen = spread(proxy.addr, 3, 200, |_| get("/"));
    assert!(!seen.contains_key("b"), "{seen:?}");
    assert!(proxy.stats.snapshot().ejections >= 1, "b was ejected");
    assert_eq!(proxy.stats.snapshot().status_502, 0);
}

#[test]
fn a_server_that_takes_requests_and_never_answers_is_ejected() {
    // nginx counts a timeout toward max_fails too: without that, every
    // other request would wait the whole read timeout on the silent one.
    let silent = Upstream::start(never_answer());
    let good = named("good", alive());
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group(
                "app",
                &[&silent.addr.to_string(), &good.addr.to_string()],
                |g| g.max_fails = 1,
            )];
            c.upstream_read_timeout = Duration::from_millis(200);
        },
        ByRoutes,
    );
    // Smooth round-robin starts with the first server: the silent one.
    let first = proxy.client().round_trip(get("/"));
    assert_eq!(first.status, 504);
    for _ in 0..10 {
        let r = proxy.client().round_trip(get("/"));
        assert_eq!((r.status, r.body_str()), (200, "good".to_string()));
    }
    assert_eq!(proxy.stats.snapshot().ejections, 1);
}

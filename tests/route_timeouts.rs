//! Per-route timeouts (issue 25, item 8; docs/edge.md "Per-route
//! timeouts"): a route's `upstream_read_timeout`,
//! `upstream_connect_timeout` and `client_body_timeout` replace the top
//! level's for its requests only (a long-poll path beside fast APIs).
//! What is asserted is the status each route's request gets: the slower
//! side of each pair is several times past the shorter timeout.

mod util;

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use util::*;

/// Answers each request after `delay`.
fn answer_after(delay: Duration) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut c: UpConn| {
        while let Some(req) = c.read_request() {
            c.record(req);
            thread::sleep(delay);
            if !c.send(ok_response("late")) {
                return;
            }
        }
    }
}

fn routes(up: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Proxy {
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/poll".into()),
            upstream_read_timeout: Some(Duration::from_secs(5)),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            path_prefix: Some("/quick".into()),
            upstream_connect_timeout: Some(Duration::from_millis(200)),
            client_body_timeout: Some(Duration::from_millis(200)),
            ..RouteSpec::to("app")
        },
        RouteSpec::to("app"),
    ];
    start_routed_proxy(up, routes, tweak).0
}

#[test]
fn a_long_poll_route_waits_longer_than_the_top_level_read_timeout() {
    let up = Upstream::start(answer_after(Duration::from_millis(900)));
    let proxy = routes(up.addr, |c| {
        c.upstream_read_timeout = Duration::from_millis(150)
    });
    let mut c = proxy.client();
    let r = c.round_trip(get("/poll/events"));
    assert_eq!(r.status, 200, "the route's 5 s outlasts the 0.9 s answer");
    assert_eq!(r.body_str(), "late");
    let mut c = proxy.client();
    assert_proxy_error(&c.round_trip(get("/api")), 504);
    let st = proxy.stats.snapshot();
    assert_eq!(st.status_504, 1);
    // Counted as the upstream's timeout, not a client's gap.
    assert_eq!((st.timeouts_upstream, st.timeouts_gap), (1, 0));
}

#[test]
fn a_route_connect_timeout_replaces_the_top_levels() {
    let hole = Blackhole::start();
    // The top level would wait 60 s; the route gives up after 0.2 s, well
    // inside the client's read timeout.
    let proxy = routes(hole.addr, |c| {
        c.upstream_connect_timeout = Duration::from_secs(60);
    });
    let mut c = proxy.client();
    assert_proxy_error(&c.round_trip(get("/quick")), 504);
}

#[test]
fn a_route_client_body_timeout_replaces_the_top_levels() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = routes(up.addr, |c| c.client_body_timeout = Duration::from_secs(60));
    let head =
        |path: &str| format!("POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nab");
    // The route's 0.2 s: a stalled body gets 408.
    let mut c = proxy.client();
    c.send(head("/quick"));
    let got = c.read_until_closed(CLIENT_TIMEOUT);
    assert!(got.starts_with(b"HTTP/1.1 408"), "{}", preview(&got));
    // Elsewhere the top level's 60 s: a pause of 0.8 s is fine.
    let mut c = proxy.client();
    c.send(head("/upload"));
    thread::sleep(Duration::from_millis(800));
    let r = c.round_trip("cd");
    assert_eq!(r.status, 200);
    assert_eq!(proxy.stats.snapshot().status_408, 1);
}

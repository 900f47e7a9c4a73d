//! Per-client limits (issue 25, item 7; docs/edge.md "Per-client
//! limits"): a route's `rate_limit` (a token bucket per client address:
//! 429 with `Retry-After`, logged as `rate_limited`, counted), and
//! `max_connections_per_client` (a client over it has its new connection
//! closed at accept, counted), both on the client address after the
//! PROXY header.

mod util;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::{Cidr, RateLimitSpec};
use util::*;

/// `/limited` with `rate_limit = { requests_per_second = rps, burst }`,
/// the rest unlimited; PROXY headers from 127.0.0.1 if `pp`.
fn rate_limited(up: SocketAddr, rps: u32, burst: u32, pp: bool) -> (Proxy, TempFile) {
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/limited".into()),
            rate_limit: Some(RateLimitSpec {
                requests_per_second: rps,
                burst,
            }),
            ..RouteSpec::to("app")
        },
        RouteSpec::to("app"),
    ];
    start_routed_proxy(up, routes, move |c| {
        if pp {
            c.accept_proxy_protocol = vec!["127.0.0.1".parse::<Cidr>().unwrap()];
        }
    })
}

/// A client whose connection opens with a v1 PROXY header naming `client`.
fn client_as(proxy: &Proxy, client: &str) -> Client {
    let mut c = proxy.client();
    c.send(format!("PROXY TCP4 {client} 127.0.0.1 5000 80\r\n"));
    c
}

#[test]
fn a_thousand_requests_get_exactly_the_buckets_worth_through() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    // 1 token a second, 100 at once: over 1,000 requests sent back to
    // back, 100 plus one per whole second elapsed go through.
    let (proxy, log) = rate_limited(up.addr, 1, 100, false);
    let mut c = proxy.client();
    let started = Instant::now();
    let mut ok = 0usize;
    let mut limited = 0usize;
    for _ in 0..1000 {
        let r = c.round_trip(get("/limited"));
        match r.status {
            200 => ok += 1,
            429 => {
                limited += 1;
                assert_eq!(r.header("Retry-After"), Some("1"), "whole seconds, ≥ 1");
                assert!(!r.says_close(), "a 429 keeps the connection");
            }
            s => panic!("status {s}"),
        }
    }
    let refills = started.elapsed().as_secs() as usize;
    assert!(
        (100..=101 + refills).contains(&ok),
        "{ok} through in {refills} s: the bucket gives 100 + 1/s"
    );
    // The bound: the 429s match the bucket within 1 %.
    assert!(limited.abs_diff(900) <= 10, "{limited} refused");
    // Other routes and other clients are not limited by it.
    assert_eq!(c.round_trip(get("/other")).status, 200);
    let mut d = proxy.client();
    assert_eq!(d.round_trip(get("/other")).status, 200);
    assert_eq!(proxy.stats.snapshot().status_429, limited as u64);
    let lines = wait_access_lines(log.path(), 1002);
    let logged = lines
        .iter()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["termination"] == "rate_limited" && v["status"] == 429
        })
        .count();
    assert_eq!(logged, limited);
    assert_eq!(up.requests().len(), ok + 2, "no refused request went up");
}

#[test]
fn each_client_address_after_the_proxy_header_has_its_own_bucket() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = rate_limited(up.addr, 1, 2, true);
    let mut a = client_as(&proxy, "10.0.0.1");
    let mut a2 = client_as(&proxy, "10.0.0.1");
    let mut b = client_as(&proxy, "10.0.0.2");
    assert_eq!(a.round_trip(get("/limited")).status, 200);
    // Another connection of the same client shares the bucket.
    assert_eq!(a2.round_trip(get("/limited")).status, 200);
    let refused = a.round_trip(get("/limited"));
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("Retry-After"), Some("1"));
    assert_eq!(a2.round_trip(get("/limited")).status, 429);
    // The balancer's address (127.0.0.1) is nobody's bucket: 10.0.0.2's
    // is full.
    assert_eq!(b.round_trip(get("/limited")).status, 200);
    assert_eq!(b.round_trip(get("/limited")).status, 200);
    assert_eq!(b.round_trip(get("/limited")).status, 429);
    // A refill: the next token comes within a second.
    assert_eventually("a token refilled", || {
        std::thread::sleep(Duration::from_millis(100));
        a.round_trip(get("/limited")).status == 200
    });
}

#[test]
fn a_refused_request_with_a_body_closes_without_reading_it() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = rate_limited(up.addr, 1, 1, false);
    let mut c = proxy.client();
    assert_eq!(c.round_trip(get("/limited")).status, 200);
    // The body is a request of its own: never parsed as one.
    let smuggled = "GET /other HTTP/1.1\r\nHost: a\r\n\r\n";
    let post = format!(
        "POST /limited HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    );
    let r = c.round_trip(post);
    assert_eq!(r.status, 429);
    assert!(r.says_close());
    c.assert_closed();
    assert_eq!(up.requests().len(), 1);
}

/// A proxy with `max_connections_per_client = 2` (PROXY headers from
/// 127.0.0.1 if `pp`).
fn conn_limited(up: SocketAddr, pp: bool) -> Proxy {
    start_forward_proxy(up, move |c| {
        c.max_connections_per_client = 2;
        if pp {
            c.accept_proxy_protocol = vec!["127.0.0.1".parse::<Cidr>().unwrap()];
        }
    })
}

/// The connection was closed without an answer (EOF or reset).
#[track_caller]
fn assert_refused(c: &mut Client) {
    let got = c.read_what_arrives(CLIENT_TIMEOUT);
    assert!(got.is_empty(), "no answer expected, got {}", preview(&got));
}

#[test]
fn a_client_over_its_connection_limit_is_closed_at_accept() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let proxy = conn_limited(up.addr, false);
    let mut a = proxy.client();
    let mut b = proxy.client();
    assert_eq!(a.round_trip(get("/")).status, 200);
    assert_eq!(b.round_trip(get("/")).status, 200);
    let mut third = proxy.client();
    third.send(get("/"));
    assert_refused(&mut third);
    assert_eq!(proxy.stats.snapshot().downstream_refused_per_client, 1);
    // The two keep working; once one closes, a new one is taken.
    assert_eq!(a.round_trip(get("/")).status, 200);
    drop(b);
    assert_eventually("a new connection once one closed", || {
        let mut c = proxy.client();
        c.send(get("/"));
        c.try_read_response(false).is_ok_and(|r| r.status == 200)
    });
    assert_eq!(up.requests().len(), 4);
}

#[test]
fn the_connection_limit_counts_the_address_the_proxy_header_gives() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let proxy = conn_limited(up.addr, true);
    let mut kept = Vec::new();
    for client in ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"] {
        let mut c = client_as(&proxy, client);
        assert_eq!(c.round_trip(get("/")).status, 200, "{client}");
        kept.push(c);
    }
    // Five connections from 127.0.0.1 so far: only the header's address
    // counts.
    let mut over = client_as(&proxy, "10.0.0.1");
    over.send(get("/"));
    assert_refused(&mut over);
    let mut other = client_as(&proxy, "10.0.0.3");
    assert_eq!(other.round_trip(get("/")).status, 200);
    assert_eq!(proxy.stats.snapshot().downstream_refused_per_client, 1);
    assert_eq!(up.requests().len(), 5);
}

#[test]
fn check_config_takes_the_keys_and_refuses_empty_buckets() {
    let good = TempFile::new(
        "upstream = \"127.0.0.1:9\"\nmax_connections_per_client = 100\n[[route]]\nupstream = \"default\"\npath_prefix = \"/api\"\nrate_limit = { requests_per_second = 10, burst = 20 }\nupstream_read_timeout = \"1h\"\nupstream_connect_timeout = \"500ms\"\nclient_body_timeout = \"2m\"\n",
    );
    let out = run_sluice(&["--check-config", good.path()]);
    assert!(out.status.success(), "{}", out.stderr);
    for (bad, why) in [
        (
            "rate_limit = { requests_per_second = 0, burst = 20 }",
            "at least 1",
        ),
        (
            "rate_limit = { requests_per_second = 1, burst = 0 }",
            "at least 1",
        ),
        ("rate_limit = { requests_per_second = 1 }", "burst"),
        (
            "rate_limit = { requests_per_second = 1, burst = 1, rate = 2 }",
            "rate",
        ),
        ("upstream_read_timeout = \"0s\"", "more than 0"),
        ("client_body_timeout = 5", "duration"),
    ] {
        let f = TempFile::new(&format!(
            "upstream = \"127.0.0.1:9\"\n[[route]]\nupstream = \"default\"\n{bad}\n"
        ));
        let out = run_sluice(&["--check-config", f.path()]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{bad}: {}", out.stderr);
        assert!(
            out.stderr.contains(":3:") || out.stderr.contains(":4:"),
            "{bad}: {}",
            out.stderr
        );
    }
}

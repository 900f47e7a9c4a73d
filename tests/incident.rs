//! The upstream tier during an incident (issue 27), over real sockets:
//! every server down answers 503 with `Retry-After` at once, panic mode
//! spends one connect timeout in all and never tries a server active
//! checks hold down, and the access record lists every server tried.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::{AccessLogFormat, AccessLogTarget, ByRoutes};
use util::*;

fn group(name: &str, servers: &[SocketAddr], tweak: impl FnOnce(&mut GroupSpec)) -> GroupSpec {
    let mut g = GroupSpec::new(name, servers.iter().map(|&a| ServerSpec::from(a)).collect());
    tweak(&mut g);
    g
}

/// One request on a new connection: the response and how long it took.
fn timed(proxy: SocketAddr, target: &str) -> (Response, Duration) {
    let began = Instant::now();
    let r = Client::connect(proxy).round_trip(get(target));
    (r, began.elapsed())
}

#[test]
fn every_server_checked_down_and_hanging_answers_503_with_retry_after_at_once() {
    // Both servers hang on connect (full accept queues) and the checks
    // marked both down: the old code spent a full connect timeout on each
    // (2 s here) and answered 504.
    let (a, b) = (Blackhole::start(), Blackhole::start());
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group("app", &[a.addr, b.addr], checked(100, 100))];
            c.upstream_connect_timeout = Duration::from_secs(1);
        },
        ByRoutes,
    );
    assert_eventually("both servers checked down", || {
        proxy.stats.snapshot().servers_marked_down >= 2
    });
    let connects = proxy.stats.snapshot().upstream_connects;
    for _ in 0..3 {
        let (r, took) = timed(proxy.addr, "/");
        println!("503 in {took:?}");
        assert_eq!(r.status, 503, "{}", r.body_str());
        let after: u64 = r.header("Retry-After").unwrap().parse().unwrap();
        assert!((1..=2).contains(&after), "Retry-After {after}");
    }
    // Answered without a connect, so without waiting for one: no
    // connect started and none timed out (the old code's took 1 s each).
    let s = proxy.stats.snapshot();
    assert_eq!((s.upstream_connects, s.timeouts_connect), (connects, 0));
}

#[test]
fn a_server_checks_hold_down_is_never_tried_even_in_panic_mode() {
    // The check path fails (500) while every other path would answer: the
    // server is down by checks, and traffic never reaches it.
    let traffic = Arc::new(AtomicUsize::new(0));
    let seen = traffic.clone();
    let up = Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let resp = if req.target == "/" {
                b"HTTP/1.1 500 No\r\nContent-Length: 0\r\n\r\n".to_vec()
            } else {
                seen.fetch_add(1, Ordering::SeqCst);
                ok_response("served")
            };
            if !conn.send(resp) {
                return;
            }
        }
    });
    let proxy = start_proxy(
        |c| c.upstream = vec![group("app", &[up.addr], checked(50, 500))],
        ByRoutes,
    );
    assert_eventually("the server checked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    let (r, took) = timed(proxy.addr, "/app");
    println!("503 in {took:?}");
    assert_eq!(r.status, 503);
    assert_eq!(traffic.load(Ordering::SeqCst), 0);
}

#[test]
fn panic_mode_spends_one_connect_timeout_in_all() {
    // Two hanging servers, no active checks: both ejected after their
    // first failure, so the next request is in panic mode. It may try
    // them, but within one connect timeout (1 s) in all; the old code
    // waited a full timeout on each (2 s).
    let (a, b) = (Blackhole::start(), Blackhole::start());
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group("app", &[a.addr, b.addr], |g| g.max_fails = 1)];
            c.upstream_connect_timeout = Duration::from_secs(1);
        },
        ByRoutes,
    );
    let (first, _) = timed(proxy.addr, "/");
    assert_eq!(first.status, 504);
    assert_eventually("both ejected", || proxy.stats.snapshot().ejections >= 2);
    let before = proxy.stats.snapshot();
    let (r, took) = timed(proxy.addr, "/");
    println!("panic-mode 504 in {took:?}");
    assert_eq!(r.status, 504);
    // One connect timed out and none was tried after it: one timeout in
    // all (the old code timed out on each server, 2 s).
    let after = proxy.stats.snapshot();
    assert_eq!(after.timeouts_connect - before.timeouts_connect, 1);
    assert_eq!(after.retries - before.retries, 0);
}

#[test]
fn the_access_record_lists_every_server_tried_with_its_outcome() {
    let good = Upstream::start(respond_forever(ok_response("good")));
    let refused = refused_addr();
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group("app", &[refused, good.addr], |_| {})];
            c.access_log = AccessLogTarget::File(path.into());
            c.access_log_format = AccessLogFormat::Json;
        },
        ByRoutes,
    );
    // Round-robin starts with the refused server.
    assert_eq!(proxy.client().round_trip(get("/")).status, 200);
    let mut lines = Vec::new();
    assert!(wait_until(WAIT, || {
        lines = access_lines(log.path());
        !lines.is_empty()
    }));
    let rec: Value = serde_json::from_str(&lines[0]).unwrap();
    let tries = rec["upstreams"].as_array().unwrap();
    assert_eq!(tries.len(), 2, "{rec}");
    assert_eq!(tries[0]["addr"], refused.to_string());
    assert_eq!(tries[0]["status"], 502);
    assert_eq!(tries[0]["outcome"], "refused");
    assert!(tries[0]["connect_ms"].is_number(), "{rec}");
    assert_eq!(tries[1]["addr"], good.addr.to_string());
    assert_eq!(tries[1]["status"], 200);
    assert_eq!(tries[1]["outcome"], "ok");
}

/// An upstream answering with `name` while `alive`; once not alive it
/// closes each connection on its next request (checks included).
fn switchable(name: &'static str, alive: Arc<AtomicBool>) -> Upstream {
    Upstream::start(move |mut conn: UpConn| {
        while let Some(_req) = conn.read_request() {
            if !alive.load(Ordering::SeqCst) || !conn.send(ok_response(name)) {
                return;
            }
        }
    })
}

/// Bodies of `n` sequential GETs on one connection.
fn bodies(proxy: SocketAddr, n: usize) -> Vec<String> {
    let mut c = Client::connect(proxy);
    (0..n)
        .map(|_| {
            let r = c.round_trip(get("/"));
            assert_eq!(r.status, 200);
            r.body_str()
        })
        .collect()
}

#[test]
fn a_backup_server_takes_over_while_the_primary_is_down_and_hands_back() {
    let primary_alive = Arc::new(AtomicBool::new(true));
    let primary = switchable("primary", primary_alive.clone());
    let spare = switchable("spare", Arc::new(AtomicBool::new(true)));
    let mut g = group("app", &[primary.addr], checked(40, 300));
    g.servers
        .get_mut()
        .push(format!("{} backup", spare.addr).parse().unwrap());
    let proxy = start_proxy(|c| c.upstream = vec![g], ByRoutes);
    assert!(bodies(proxy.addr, 6).iter().all(|b| b == "primary"));
    primary_alive.store(false, Ordering::SeqCst);
    assert_eventually("the primary checked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    assert!(bodies(proxy.addr, 6).iter().all(|b| b == "spare"));
    primary_alive.store(true, Ordering::SeqCst);
    assert_eventually("the primary back", || bodies(proxy.addr, 1) == ["primary"]);
    assert!(bodies(proxy.addr, 6).iter().all(|b| b == "primary"));
}

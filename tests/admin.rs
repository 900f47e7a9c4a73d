//! The admin listener (issue 13, deliverable 2): `/healthz`, `/readyz`
//! (503 once a drain starts), `/status`, `/metrics` whose counters move as
//! requests go through, and a non-loopback address refused unless allowed.

mod util;

use std::net::SocketAddr;
use std::time::Duration;

use util::*;

fn admin_proxy(upstream: SocketAddr) -> (Proxy, SocketAddr) {
    let admin = loopback(free_port());
    let proxy = start_forward_proxy(upstream, move |c| c.admin = Some(admin));
    (proxy, admin)
}

/// Up to `n` connections to `addr` that send nothing (as many as connect).
fn idle_connections(addr: SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect()
}

/// The value of the sample line `series` (name and labels, exactly).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn healthz_and_readyz_answer_and_readyz_turns_503_when_the_drain_starts() {
    let up = Upstream::start(never_answer());
    let (proxy, admin) = admin_proxy(up.addr);
    assert_eq!(http_get(admin, "/healthz"), (200, b"ok\n".to_vec()));
    assert_eq!(http_get(admin, "/readyz").0, 200);
    // An exchange in flight keeps the drain going.
    let mut c = proxy.client();
    c.send(get("/hold"));
    up.wait_requests(1);
    proxy.handle.drain();
    assert_eventually("readyz says 503", || http_get(admin, "/readyz").0 == 503);
    assert_eq!(http_get(admin, "/healthz").0, 200);
    assert_eq!(http_get(admin, "/nothing").0, 404);
}

#[test]
fn metrics_counters_move_as_requests_go_through() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (proxy, admin) = admin_proxy(up.addr);
    let ok = r#"sluice_requests_total{worker="0",code_class="2xx",termination="complete"}"#;
    let (status, body) = http_get(admin, "/metrics");
    assert_eq!(status, 200);
    let before = sample(&String::from_utf8_lossy(&body), ok).unwrap();
    let mut c = proxy.client();
    for _ in 0..3 {
        assert_eq!(c.round_trip(get("/")).status, 200);
    }
    assert_eventually("3 more complete 2xx requests", || {
        let text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
        sample(&text, ok) == Some(before + 3.0)
            && sample(
                &text,
                r#"sluice_request_duration_seconds_count{worker="0"}"#,
            ) == Some(before + 3.0)
            && sample(&text, r#"sluice_upstream_reuses_total{worker="0"}"#) == Some(2.0)
    });
}

#[test]
fn status_names_version_digest_uptime_and_workers() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (_proxy, admin) = admin_proxy(up.addr);
    let (status, body) = http_get(admin, "/status");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["config_digest"].as_str().unwrap().len(), 16);
    assert!(v["uptime_seconds"].as_f64().unwrap() >= 0.0);
    let workers = v["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0]["pid"], std::process::id());
}

#[test]
fn a_non_loopback_admin_address_is_refused_unless_admin_public() {
    let out = run_sluice(&["--admin", "0.0.0.0:9901", "--check-config", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--admin-public"), "{}", out.stderr);
    assert!(out.stderr.contains("admin_public = true"), "{}", out.stderr);
    let out = run_sluice(&[
        "--admin",
        "0.0.0.0:9901",
        "--admin-public",
        "--check-config",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
}

#[test]
fn an_invalid_rust_log_falls_back_to_warn_and_says_so() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let port = free_port();
    let listen = loopback(port).to_string();
    let upstream = up.addr.to_string();
    let mut p = SluiceProcess::start_with_env(
        &["--listen", &listen, "--upstream", &upstream],
        &[("RUST_LOG", "inf")],
    );
    p.wait_line(Duration::from_secs(5), |l| {
        l.contains("RUST_LOG=\"inf\" is invalid") && l.contains("WARN")
    });
    p.signal(libc::SIGTERM);
    // The drain keeps the listener 1.5 s for deferred connections: the
    // bound leaves room for a loaded machine.
    p.wait_exit(Duration::from_secs(15));
}

#[test]
fn metrics_show_each_upstream_servers_health() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let dead = refused_addr();
    let admin = loopback(free_port());
    let (live_s, dead_s) = (up.addr.to_string(), dead.to_string());
    let proxy = start_proxy(
        |c| {
            c.admin = Some(admin);
            let mut g = GroupSpec::new(
                "app",
                vec![live_s.parse().unwrap(), dead_s.parse().unwrap()],
            );
            g.max_fails = 1;
            c.upstream = vec![g];
        },
        ByRoutes,
    );
    let series = |addr: &str| {
        format!(r#"sluice_upstream_server_up{{worker="0",group="app",server="{addr}"}}"#)
    };
    let text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
    assert_eq!(sample(&text, &series(&live_s)), Some(1.0), "{text}");
    assert_eq!(sample(&text, &series(&dead_s)), Some(1.0), "{text}");
    // Requests reach the refusing server (round-robin), fail once and are
    // retried on the live one: it is ejected.
    let mut c = proxy.client();
    for _ in 0..4 {
        assert_eq!(c.round_trip(get("/")).status, 200);
    }
    assert_eventually("the refusing server shows as down", || {
        let text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
        sample(&text, &series(&dead_s)) == Some(0.0) && sample(&text, &series(&live_s)) == Some(1.0)
    });
}

/// A flood of connections that never send anything (a port scan, a stuck
/// scraper) fills the admin side's slots and its accept queue; a health
/// probe must still be answered (the oldest idle connection makes room),
/// while they are open and after they close.
#[test]
fn idle_admin_connections_cannot_shut_out_healthz() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (_proxy, admin) = admin_proxy(up.addr);
    let idle = idle_connections(admin, 250);
    assert!(idle.len() > 200, "only {} connections", idle.len());
    assert_eventually("healthz answers during the flood", || {
        http_get(admin, "/healthz").0 == 200
    });
    drop(idle);
    assert_eventually("healthz answers after the flood", || {
        http_get(admin, "/healthz").0 == 200
    });
}

/// Starts the binary with `--admin`, `RLIMIT_NOFILE` 64 and `eaten`
/// descriptors it does not know about; waits until it listens.
fn start_small(up: &Upstream, eaten: usize) -> (SluiceProcess, u16, SocketAddr) {
    let (port, admin) = (free_port(), loopback(free_port()));
    let (listen, upstream, admin_s) = (
        loopback(port).to_string(),
        up.addr.to_string(),
        admin.to_string(),
    );
    let args = [
        "--listen",
        &listen,
        "--upstream",
        &upstream,
        "--admin",
        &admin_s,
        "--access-log",
        "off",
    ];
    let p = SluiceProcess::start_with_nofile(&args, Some(64), eaten);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    (p, port, admin)
}

/// Out of descriptors, the admin listener pauses and accepts again (it is
/// edge-triggered: connections left in its queue bring no new event).
/// Here more idle connections come than descriptors are left; once they
/// closed, the connections still queued are taken in turns, and a health
/// probe queued behind them is answered.
#[test]
fn the_admin_listener_accepts_again_after_running_out_of_descriptors() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (mut p, _port, admin) = start_small(&up, 40);
    let idle = idle_connections(admin, 30);
    assert_eq!(idle.len(), 30);
    p.wait_line(WAIT, |l| {
        l.contains("WARN") && l.contains("admin accept") && l.contains("pausing admin accepts")
    });
    drop(idle);
    assert_eq!(http_get(admin, "/healthz").0, 200, "{}", p.log());
    p.signal(libc::SIGTERM);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// Admin connections are capped within the descriptors kept aside: with
/// the open-file limit at 64 (16 proxy clients), a flood of idle admin
/// connections leaves every one of the 16 clients its two descriptors.
#[test]
fn an_admin_flood_leaves_the_proxy_its_descriptors() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (mut p, port, admin) = start_small(&up, 0);
    let idle = idle_connections(admin, 60);
    assert_eventually("the admin side answers during the flood", || {
        http_get(admin, "/healthz").0 == 200
    });
    let mut clients: Vec<Client> = (0..16).map(|_| Client::connect(loopback(port))).collect();
    for c in &mut clients {
        assert_eq!(c.round_trip(get("/")).status, 200, "{}", p.log());
    }
    assert_eq!(
        p.count(|l| l.contains("EMFILE") || l.contains("Too many open files")),
        0,
        "{}",
        p.log()
    );
    drop(idle);
    p.signal(libc::SIGTERM);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// Every answer the proxy writes itself is counted in
/// `sluice_proxy_responses_total` (414, 505, 508 and the no-route 404
/// too), and the no-route 404 is the proxy refusing the request
/// (`proxy_error`), not a `request_filter` reply (`proxy_reply`).
#[test]
fn proxy_responses_count_414_505_508_and_the_no_route_404_as_proxy_errors() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let admin = loopback(free_port());
    let server = up.addr.to_string();
    let proxy = start_proxy(
        |c| {
            c.admin = Some(admin);
            c.via_name = "me".into();
            c.upstream = vec![GroupSpec::new("g", vec![server.parse().unwrap()])];
            c.route = vec![RouteSpec {
                host: None,
                path_prefix: Some("/r".into()),
                ..RouteSpec::to("g")
            }];
        },
        ByRoutes,
    );
    let long = format!("GET /r{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let sent: [(u16, Vec<u8>); 4] = [
        (414, long.into_bytes()),
        (505, b"GET /r HTTP/2.0\r\nHost: x\r\n\r\n".to_vec()),
        (
            508,
            b"GET /r HTTP/1.1\r\nHost: x\r\nVia: 1.1 me\r\n\r\n".to_vec(),
        ),
        (404, get_close("/nope")),
    ];
    for (code, bytes) in &sent {
        let mut c = proxy.client();
        c.send_lossy(bytes);
        assert_eq!(c.read_response().status, *code);
    }
    assert_eventually("every answer counted", || {
        let text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
        sent.iter().all(|(code, _)| {
            sample(
                &text,
                &format!(r#"sluice_proxy_responses_total{{worker="0",code="{code}"}}"#),
            ) == Some(1.0)
        }) && sample(
            &text,
            r#"sluice_requests_total{worker="0",code_class="4xx",termination="proxy_error"}"#,
        )
        .is_some_and(|n| n >= 1.0)
            && !text.contains(r#"termination="proxy_reply""#)
    });
}

/// Writes `bytes` to the admin port, closes the sending side, and returns
/// everything it answers until it closes.
fn admin_answer(admin: SocketAddr, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .expect("the answer, then an orderly close (not a reset)");
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn an_admin_head_over_8_kib_gets_a_whole_431_not_a_reset() {
    let up = Upstream::start(never_answer());
    let (_proxy, admin) = admin_proxy(up.addr);
    let mut head = b"GET /healthz HTTP/1.1\r\nX-Big: ".to_vec();
    head.resize(64 * 1024, b'a');
    let answer = admin_answer(admin, &head);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(answer.ends_with("request head too large\n"), "{answer}");
    // A whole head of 9,000 bytes, in one write, is over the limit too.
    let mut head = b"GET /healthz HTTP/1.1\r\nX-Big: ".to_vec();
    head.resize(9000 - 4, b'a');
    head.extend_from_slice(b"\r\n\r\n");
    let answer = admin_answer(admin, &head);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

#[test]
fn an_admin_request_with_a_body_gets_its_whole_answer() {
    let up = Upstream::start(never_answer());
    let (_proxy, admin) = admin_proxy(up.addr);
    let mut req = b"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 40000\r\n\r\n".to_vec();
    req.resize(req.len() + 40000, b'b');
    let answer = admin_answer(admin, &req);
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert!(answer.ends_with("only GET and HEAD\n"), "{answer}");
}

#[test]
fn bytes_that_cannot_start_a_request_get_400_from_the_admin_port_at_once() {
    let up = Upstream::start(never_answer());
    let (_proxy, admin) = admin_proxy(up.addr);
    // The start of a TLS ClientHello, then the end of what the client
    // sends: a proxy that waits for a head closes without an answer.
    let answer = admin_answer(admin, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
}

#[test]
fn forty_scrapes_at_once_are_all_answered() {
    let up = Upstream::start(never_answer());
    let (_proxy, admin) = admin_proxy(up.addr);
    let start = std::sync::Arc::new(std::sync::Barrier::new(40));
    let scrapes: Vec<_> = (0..40)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                http_get(admin, "/metrics").0
            })
        })
        .collect();
    let statuses: Vec<u16> = scrapes.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
}

#[test]
fn an_idle_admin_connection_does_not_hold_the_drain_past_its_timeout() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (listen, admin) = (loopback(free_port()), loopback(free_port()));
    let (listen_s, upstream, admin_s) =
        (listen.to_string(), up.addr.to_string(), admin.to_string());
    let mut p = SluiceProcess::start_listening(&[
        "--listen",
        &listen_s,
        "--upstream",
        &upstream,
        "--admin",
        &admin_s,
        "--no-defer-accept",
        "--drain-timeout",
        "1s",
    ]);
    // Its own 5 s to send a head would end long after the drain timeout.
    let _idle = idle_connections(admin, 1);
    assert_eq!(http_get(admin, "/healthz").0, 200);
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(4));
    assert!(status.success(), "{status:?}\n{}", p.log());
}

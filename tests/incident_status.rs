//! `/status` and the admin write endpoint during an incident (issue 27
//! items 3 and 5): each server's state with the reason behind it, and
//! `POST /servers/GROUP/ADDR/state` to drain a server, put it in
//! maintenance and back, refused unless `admin_write` is on.

mod util;

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use serde_json::Value;
use sluice::ByRoutes;
use util::*;

fn status(admin: SocketAddr) -> Value {
    let (code, body) = http_get(admin, "/status");
    assert_eq!(code, 200);
    serde_json::from_slice(&body).unwrap()
}

/// The `/status` entry of server `addr` in the first group.
fn server(admin: SocketAddr, addr: SocketAddr) -> Value {
    let s = status(admin);
    s["groups"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["addr"] == addr.to_string())
        .cloned()
        .unwrap_or(Value::Null)
}

fn path(g: &str, addr: SocketAddr) -> String {
    format!("/servers/{g}/{addr}/state")
}

#[test]
fn writes_are_refused_unless_admin_write_is_on() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let admin = loopback(free_port());
    let addr = up.addr;
    let _proxy = start_proxy(
        move |c| {
            c.upstream = vec![GroupSpec::new("app", vec![ServerSpec::from(addr)])];
            c.admin = Some(admin);
        },
        ByRoutes,
    );
    let (code, body) = http_post(admin, &path("app", up.addr), "drain");
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    assert_eq!(server(admin, up.addr)["state"], "up");
}

#[test]
fn status_shows_ejected_checked_down_and_maintenance_with_their_reasons() {
    let refused = refused_addr();
    let dead = Upstream::start(close_on_request());
    let (good, spare) = (
        Upstream::start(respond_forever(ok_response("good"))),
        Upstream::start(respond_forever(ok_response("spare"))),
    );
    let admin = loopback(free_port());
    // Group "app": a refused server (ejected by traffic), a live one set
    // to maintenance, the good one. Group "api": a server its checks
    // hold down.
    let app = GroupSpec::new(
        "app",
        [refused, spare.addr, good.addr]
            .into_iter()
            .map(ServerSpec::from)
            .collect(),
    );
    let mut api = GroupSpec::new("api", vec![ServerSpec::from(dead.addr)]);
    checked(50, 300)(&mut api);
    let proxy = start_proxy(
        move |c| {
            let mut app = app;
            app.max_fails = 1;
            c.upstream = vec![app, api];
            c.admin = Some(admin);
            c.admin_write = true;
        },
        ByRoutes,
    );
    let (code, _) = http_post(admin, &path("app", spare.addr), "maintenance");
    assert_eq!(code, 200);
    assert_eq!(proxy.client().round_trip(get("/")).status, 200);
    assert_eventually("the api server checked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    let s = status(admin);
    let app = &s["groups"][0];
    assert_eq!(app["name"], "app");
    let states: Vec<&str> = app["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["ejected", "maintenance", "up"], "{s:#}");
    let ej = &app["servers"][0];
    assert!(ej["ejected_for_ms"].as_u64().unwrap() > 0, "{ej}");
    assert_eq!(ej["last_error"]["reason"], "traffic: connect refused");
    assert!(
        ej["ejected_because"]
            .as_str()
            .unwrap()
            .contains("connect refused"),
        "{ej}"
    );
    let down = &s["groups"][1]["servers"][0];
    assert_eq!(down["state"], "checked_down", "{s:#}");
    assert_eq!(down["last_check"], "closed before a status line");
    println!("{s:#}");
    // Per-server metrics: the good server's 200, the refused one's try.
    let (_, m) = http_get(admin, "/metrics");
    let m = String::from_utf8_lossy(&m);
    for (addr, class) in [(good.addr, "2xx"), (refused, "none")] {
        let want = format!(
            "sluice_upstream_server_responses_total{{worker=\"0\",group=\"app\",\
             server=\"{addr}\",code_class=\"{class}\"}} 1"
        );
        assert!(m.contains(&want), "{want}\n{m}");
    }
    assert!(
        m.contains("sluice_upstream_server_first_byte_seconds_count{"),
        "{m}"
    );
    // Per-bucket counts made cumulative once: +Inf is the count.
    assert!(assert_histograms_whole(&m) >= 3, "{m}");
}

#[test]
fn drain_lets_in_flight_finish_sends_new_ones_elsewhere_and_closes_idle() {
    let slow = Upstream::start(serve(|_| {
        thread::sleep(Duration::from_millis(300));
        ok_response("slow")
    }));
    let other = Upstream::start(respond_forever(ok_response("other")));
    let admin = loopback(free_port());
    let servers = vec![ServerSpec::from(slow.addr), ServerSpec::from(other.addr)];
    let proxy = start_proxy(
        move |c| {
            c.upstream = vec![GroupSpec::new("app", servers)];
            c.admin = Some(admin);
            c.admin_write = true;
        },
        ByRoutes,
    );
    // Round-robin: the first request goes to the slow server; while it is
    // in flight, the slow server is drained.
    let mut inflight = proxy.client();
    inflight.send(get("/"));
    assert_eventually("the request in flight", || {
        server(admin, slow.addr)["in_flight"] == 1
    });
    let (code, _) = http_post(admin, &path("app", slow.addr), "drain");
    assert_eq!(code, 200);
    assert_eq!(server(admin, slow.addr)["state"], "draining");
    for _ in 0..4 {
        assert_eq!(proxy.client().round_trip(get("/")).body_str(), "other");
    }
    let r = inflight.read_response();
    assert_eq!((r.status, r.body_str()), (200, "slow".to_string()));
    // Its connection was closed, not parked.
    assert_eventually("no idle connection to the drained server", || {
        server(admin, slow.addr)["idle"] == 0
    });
    // Ready again: it takes requests.
    let (code, _) = http_post(admin, &path("app", slow.addr), "state=ready");
    assert_eq!(code, 200);
    let bodies: Vec<String> = (0..2)
        .map(|_| proxy.client().round_trip(get("/")).body_str())
        .collect();
    assert!(bodies.contains(&"slow".to_string()), "{bodies:?}");
}

#[test]
fn a_connect_timeout_is_not_retried_when_the_only_other_server_is_in_maintenance() {
    // The hanging server is tried once; the other one is in maintenance,
    // so there is nowhere else to go: 504 after one connect timeout, not
    // a second wait on the same hanging server.
    let hole = Blackhole::start();
    let spare = Upstream::start(respond_forever(ok_response("spare")));
    let admin = loopback(free_port());
    let servers = vec![ServerSpec::from(hole.addr), ServerSpec::from(spare.addr)];
    let proxy = start_proxy(
        move |c| {
            let mut g = GroupSpec::new("app", servers);
            g.max_fails = 0;
            c.upstream = vec![g];
            c.upstream_connect_timeout = Duration::from_millis(400);
            c.admin = Some(admin);
            c.admin_write = true;
        },
        ByRoutes,
    );
    assert_eq!(
        http_post(admin, &path("app", spare.addr), "maintenance").0,
        200
    );
    let r = proxy.client().round_trip(get("/"));
    assert_eq!(r.status, 504);
    // One connect timeout, no second try on the same hanging server.
    let s = proxy.stats.snapshot();
    assert_eq!((s.timeouts_connect, s.retries), (1, 0));
    assert_eq!(spare.accepted(), 0);
}

#[test]
fn malformed_and_cut_answers_show_on_their_server_without_ejecting_it() {
    // A head HTTP does not allow (502 to the client), a 200 whose body
    // stalls past the read timeout, then a 200 cut after its head: each an error of the server's last minute, in its
    // answer's class, with the reason in `last_error`; neither ejects it
    // (nginx's max_fails counts neither by default).
    let up = Upstream::start(|mut conn: UpConn| {
        if let Some(req) = conn.read_request() {
            if req.target == "/bad" {
                conn.send(b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok");
            } else if req.target == "/stall" {
                // Part of the body, then nothing: the read timeout cuts it.
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart");
                conn.hold_until_closed();
            } else {
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart");
            }
        }
        conn.close();
    });
    let admin = loopback(free_port());
    let addr = up.addr;
    let proxy = start_proxy(
        move |c| {
            let mut g = GroupSpec::new("app", vec![ServerSpec::from(addr)]);
            g.max_fails = 1;
            c.upstream = vec![g];
            c.admin = Some(admin);
            c.upstream_read_timeout = Duration::from_millis(300);
        },
        ByRoutes,
    );
    assert_eq!(proxy.client().round_trip(get("/bad")).status, 502);
    let mut stalled = proxy.client();
    stalled.send(get("/stall"));
    assert_eq!(stalled.read_response_head().status, 200);
    let _ = stalled.read_what_arrives(CLIENT_TIMEOUT);
    let mut c = proxy.client();
    c.send(get("/cut"));
    assert_eq!(c.read_response_head().status, 200);
    let _ = c.read_what_arrives(CLIENT_TIMEOUT);
    let settled = wait_until(WAIT, || server(admin, addr)["errors_last_minute"] == 3);
    let s = server(admin, addr);
    assert!(settled, "{s:#}");
    assert_eq!(s["state"], "up", "{s:#}");
    let why = s["last_error"]["reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("traffic: closed"), "{s:#}");
    let (_, m) = http_get(admin, "/metrics");
    let m = String::from_utf8_lossy(&m);
    for (class, n) in [("none", 1), ("2xx", 2)] {
        let want = format!(
            "sluice_upstream_server_responses_total{{worker=\"0\",group=\"app\",\
             server=\"{addr}\",code_class=\"{class}\"}} {n}"
        );
        assert!(m.contains(&want), "{want}\n{m}");
    }
}

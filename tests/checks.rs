//! Active health checks' requests and their limits (issue 27 items 7 and
//! 8): the check's `host`, `headers`, `method` and `expect_body`; a check
//! the proxy cannot start for want of descriptors is no result, never the
//! server's failure.

mod util;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice::{ByRoutes, CheckMethod};
use util::*;

/// An upstream that keeps every request to `/health` and answers it with
/// `body` (200); other paths get "app".
fn health_page(body: &'static str) -> (Upstream, Arc<Mutex<Vec<Request>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let up = Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let resp = if req.target == "/health" {
                let r = ok_response(body);
                keep.lock().unwrap().push(req);
                r
            } else {
                ok_response("app")
            };
            if !conn.send(resp) {
                return;
            }
        }
    });
    (up, seen)
}

fn one_server(addr: SocketAddr, tweak: impl FnOnce(&mut sluice::HealthCheck)) -> GroupSpec {
    let mut g = GroupSpec::new("app", vec![ServerSpec::from(addr)]);
    checked(30, 500)(&mut g);
    if let Some(hc) = g.health_check.as_mut() {
        hc.path = "/health".into();
        tweak(hc);
    }
    g
}

#[test]
fn a_check_sends_the_configured_host_headers_and_method() {
    let (up, seen) = health_page("fine");
    let g = one_server(up.addr, |hc| {
        hc.host = Some("app.example".into());
        hc.headers = BTreeMap::from([("X-Check".to_string(), "1".to_string())]);
        hc.method = CheckMethod::Head;
    });
    let proxy = start_proxy(|c| c.upstream = vec![g], ByRoutes);
    assert_eventually("two checks", || proxy.stats.snapshot().health_checks >= 2);
    let reqs = seen.lock().unwrap().clone();
    let r = &reqs[0];
    assert_eq!(r.method, "HEAD");
    assert_eq!(r.header("host"), Some("app.example"));
    assert_eq!(r.header("x-check"), Some("1"));
    assert_eq!(proxy.stats.snapshot().health_checks_failed, 0);
}

#[test]
fn a_check_of_an_ip_server_sends_its_address_as_host_by_default() {
    let (up, seen) = health_page("fine");
    let proxy = start_proxy(|c| c.upstream = vec![one_server(up.addr, |_| {})], ByRoutes);
    assert_eventually("a check", || proxy.stats.snapshot().health_checks >= 1);
    let host = seen.lock().unwrap()[0].header("host").map(str::to_string);
    assert_eq!(host, Some(up.addr.to_string()));
}

#[test]
fn expect_body_fails_a_page_without_the_text_and_passes_one_with_it() {
    let (bad, _) = health_page("status: degraded");
    let (good, _) = health_page("status: OK");
    let mut g = one_server(bad.addr, |hc| hc.expect_body = Some("OK".into()));
    g.servers.get_mut().push(ServerSpec::from(good.addr));
    let proxy = start_proxy(|c| c.upstream = vec![g], ByRoutes);
    assert_eventually("the degraded server checked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    for _ in 0..6 {
        let r = proxy.client().round_trip(get("/"));
        assert_eq!(r.status, 200);
    }
    assert_eq!(proxy.stats.snapshot().servers_marked_down, 1);
    // Only the degraded one: a request count of the good one suffices.
    assert!(good.requests().iter().filter(|r| r.target == "/").count() >= 6);
}

#[test]
fn a_check_with_no_descriptor_left_is_no_result_and_ejects_no_server() {
    // 64 descriptors, 45 eaten behind the proxy's back, and idle clients
    // hold the rest: every check's connect finds EMFILE. The old code
    // counted each as the server's failure and marked both healthy
    // servers down within two intervals.
    let (a, _) = health_page("ok");
    let (b, _) = health_page("ok");
    let port = free_port();
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\", \"{}\"]\n\
         [upstream.health_check]\npath = \"/health\"\ninterval = \"50ms\"\n\
         timeout = \"500ms\"\nfall = 2\n",
        a.addr, b.addr
    ));
    let p = SluiceProcess::start_with_nofile(&["--config", cfg.path()], Some(64), 45);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    let pid = p.pid();
    let open = || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let mut clients = Vec::new();
    let full = wait_until(WAIT, || {
        if open() < 64
            && clients.len() < 32
            && let Ok(c) = Client::try_connect(loopback(port))
        {
            clients.push(c);
        }
        open() >= 64
    });
    assert!(full, "{} fds open", open());
    p.wait_line(WAIT, |l| l.contains("no result"));
    // Many intervals at the limit: no server went down.
    std::thread::sleep(Duration::from_millis(400));
    let log = p.log();
    assert!(
        !log.contains("checked_down") && !log.contains("down after"),
        "{log}"
    );
    drop(clients);
}

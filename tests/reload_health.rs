//! Health survives a reload (issue 27 item 4) and the workers share their
//! view of the tier (item 3): a server the checks took down is still down
//! in the new loop after SIGHUP with the file unchanged, so no request is
//! sent to it (the old code forgot, and the next requests failed over
//! with `retry 1 … connection refused` until the checks took it out
//! again); with `--workers 2` the new worker processes take over their
//! predecessors' health (checks, ejections with their time left, modes)
//! through the tier board; `/status` shows the group-wide view and the
//! workers that disagree; a drain reaches every worker; the pool's
//! learned idle limits survive a reload too.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use util::*;

#[test]
fn a_server_checked_down_is_still_down_after_a_reload() {
    let a = Upstream::start(respond_forever(ok_response("a")));
    let b = Upstream::start(respond_forever(ok_response("b")));
    let b_addr = b.addr;
    let port = free_port();
    // A long interval: after the reload, the new loop's first check of b
    // comes late, so only carried health keeps it out.
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\", \"{b_addr}\"]\n\
         [upstream.health_check]\ninterval = \"150ms\"\ntimeout = \"100ms\"\n\
         fall = 2\nrise = 2\n",
        a.addr
    ));
    let p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    drop(b);
    p.wait_line(WAIT, |l| l.contains("-> checked_down"));
    p.signal(libc::SIGHUP);
    let kept = p.wait_line(WAIT, |l| l.contains("reload: kept the health"));
    assert!(
        kept.contains(&format!("app {b_addr} checked_down")),
        "{kept}"
    );
    // Until the old loop drained (its listener stays open 1.5 s for the
    // connections the kernel defers), a new connection may reach it and
    // be served one request with `Connection: close`: ten requests on one
    // connection need the new loop.
    p.wait_reloaded_and_drained(1);
    let mut c = Client::connect(loopback(port));
    for i in 0..10 {
        let r = c.round_trip(get("/"));
        assert_eq!((r.status, r.body_str()), (200, "a".to_string()), "{i}");
    }
    // Wait a little for a retry line the old code would have written.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.count(|l| l.contains("retry ")), 0, "{}", p.log());
}

/// An application server: `/health` answers 500 while `sick`, else 200;
/// other paths are counted in `traffic` and answered with `name`, or,
/// if `close`, closed without an answer.
fn app(name: &'static str, sick: Arc<AtomicBool>, close: bool) -> (Upstream, Arc<AtomicUsize>) {
    let traffic = Arc::new(AtomicUsize::new(0));
    let seen = traffic.clone();
    let up = Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let resp = if req.target == "/health" {
                if sick.load(Ordering::SeqCst) {
                    b"HTTP/1.1 500 Sick\r\nContent-Length: 0\r\n\r\n".to_vec()
                } else {
                    ok_response("fine")
                }
            } else {
                seen.fetch_add(1, Ordering::SeqCst);
                if close {
                    return;
                }
                ok_response(name)
            };
            if !conn.send(resp) {
                return;
            }
        }
    });
    (up, traffic)
}

fn status(admin: SocketAddr) -> Value {
    let (code, body) = http_get(admin, "/status");
    assert_eq!(code, 200);
    serde_json::from_slice(&body).unwrap()
}

/// The group-wide entry of server `addr` in the first group.
fn server(s: &Value, addr: SocketAddr) -> Value {
    s["groups"][0]["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["addr"] == addr.to_string())
        .cloned()
        .unwrap_or(Value::Null)
}

/// Per worker index, `addr`'s entry in `per_worker` (the workers that
/// disagree), with the worker's pid.
fn per_worker(s: &Value, addr: SocketAddr) -> Vec<(u64, u64, Value)> {
    s["per_worker"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| {
            let e = w["servers"]
                .as_array()?
                .iter()
                .find(|v| v["addr"] == addr.to_string())?
                .clone();
            Some((w["worker"].as_u64()?, w["pid"].as_u64()?, e))
        })
        .collect()
}

/// Starts a supervisor on `cfg` and waits until its workers serve; they
/// are adopted (killed with it).
fn start_workers(cfg: &TempFile) -> SluiceProcess {
    let mut p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("all workers ready"));
    p.adopt_workers();
    p
}

/// Reloads the supervisor `p` (SIGHUP, the file unchanged) and waits
/// until it says so: the new workers' pids (adopted).
fn reload(p: &mut SluiceProcess) -> Vec<u64> {
    let started = p.count(|l| l.contains("started pid="));
    p.signal(libc::SIGHUP);
    p.wait_line(Duration::from_secs(10), |l| l.contains("SIGHUP: reloaded"));
    p.adopt_workers();
    let new_pids: Vec<u64> = p
        .log()
        .lines()
        .filter(|l| l.contains("started pid="))
        .skip(started)
        .map(|l| pid_after(l, "pid=") as u64)
        .collect();
    assert_eq!(new_pids.len(), 2, "{}", p.log());
    new_pids
}

#[test]
fn with_workers_a_reload_keeps_checks_ejections_and_modes() {
    let sick = Arc::new(AtomicBool::new(true));
    let well = Arc::new(AtomicBool::new(false));
    let (a, _) = app("a", well.clone(), false);
    let (b, b_traffic) = app("b", sick.clone(), false);
    let (c, c_traffic) = app("c", well.clone(), false);
    let (d, _) = app("d", well.clone(), true);
    let (port, admin) = (free_port(), loopback(free_port()));
    // b fails its checks (fall 1) until just before the reload, then
    // passes them; it comes back only after rise = 5 passing checks a
    // second apart. A new worker that started fresh would count it up at
    // once; one that kept the health holds it down for seconds. d passes
    // its checks and fails every request: one try ejects it for 60 s in
    // the worker that made it.
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"{admin}\"\nadmin_write = true\n\
         workers = 2\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nmax_fails = 1\nfail_timeout = \"60s\"\n\
         servers = [\"{}\", \"{}\", \"{}\", \"{}\"]\n\
         [upstream.health_check]\npath = \"/health\"\ninterval = \"1s\"\n\
         timeout = \"500ms\"\nfall = 1\nrise = 5\n",
        d.addr, a.addr, b.addr, c.addr
    ));
    let mut p = start_workers(&cfg);
    let (code, body) = http_post(
        admin,
        &format!("/servers/app/{}/state", c.addr),
        "maintenance",
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        wait_until(Duration::from_secs(5), || {
            let s = status(admin);
            server(&s, b.addr)["state"] == "checked_down"
                && server(&s, b.addr)["agreed"] == true
                && server(&s, c.addr)["state"] == "maintenance"
                && server(&s, c.addr)["agreed"] == true
        }),
        "{:#}",
        status(admin)
    );
    // Requests until a worker tried d (each worker's first pick).
    let mut ejected: Vec<(u64, u64)> = Vec::new();
    for _ in 0..20 {
        let r = Client::connect(loopback(port)).round_trip(get("/"));
        assert_eq!((r.status, r.body_str()), (200, "a".to_string()));
        wait_until(WAIT, || {
            let s = status(admin);
            let e = server(&s, d.addr);
            ejected = if e["agreed"] == true && e["state"] == "ejected" {
                vec![(0, e["ejected_for_ms"].as_u64().unwrap_or(0))]
            } else {
                per_worker(&s, d.addr)
                    .into_iter()
                    .filter(|(_, _, v)| v["state"] == "ejected")
                    .map(|(w, _, v)| (w, v["ejected_for_ms"].as_u64().unwrap_or(0)))
                    .collect()
            };
            !ejected.is_empty() || e["requests_last_minute"] == 0
        });
        if !ejected.is_empty() {
            break;
        }
    }
    assert!(!ejected.is_empty(), "{:#}", status(admin));
    let before = ejected.iter().map(|e| e.1).max().unwrap_or(0);
    sick.store(false, Ordering::SeqCst);
    let new_pids = reload(&mut p);
    // Each new worker took over its predecessor's health.
    let kept: Vec<String> = p
        .log()
        .lines()
        .filter(|l| l.contains("reload: kept the health of 4 servers"))
        .map(String::from)
        .collect();
    assert_eq!(kept.len(), 2, "{}", p.log());
    for line in &kept {
        assert!(line.contains(" from worker "), "{line}");
        assert!(
            line.contains(&format!("app {} checked_down", b.addr)),
            "{line}"
        );
        assert!(
            line.contains(&format!("app {} maintenance", c.addr)),
            "{line}"
        );
    }
    assert!(
        kept.iter()
            .any(|l| l.contains(&format!("app {} ejected", d.addr))),
        "{kept:#?}"
    );
    // The new workers' view: b still down (rise 5 not yet passed), c in
    // maintenance, d ejected with less time left than before.
    let s = status(admin);
    assert_eq!(server(&s, b.addr)["state"], "checked_down", "{s:#}");
    assert_eq!(server(&s, b.addr)["agreed"], true, "{s:#}");
    assert_eq!(server(&s, c.addr)["state"], "maintenance", "{s:#}");
    let e = server(&s, d.addr);
    assert_eq!(e["state"], "ejected", "{s:#}");
    let left = e["ejected_for_ms"].as_u64().unwrap_or(0);
    assert!(left > 0 && left <= before, "{left} vs {before}: {s:#}");
    for (_, pid, _) in per_worker(&s, d.addr) {
        assert!(new_pids.contains(&pid), "{pid} not a new worker: {s:#}");
    }
    // No request reaches b or c.
    for _ in 0..10 {
        let r = Client::connect(loopback(port)).round_trip(get("/"));
        assert_eq!(r.status, 200);
        assert_ne!(r.body_str(), "b");
    }
    assert_eq!(b_traffic.load(Ordering::SeqCst), 0);
    assert_eq!(c_traffic.load(Ordering::SeqCst), 0);
}

#[test]
fn with_workers_status_shows_the_group_view_then_the_workers_that_disagree() {
    let well = Arc::new(AtomicBool::new(false));
    let (d, _) = app("d", well.clone(), true);
    let (a, _) = app("a", well.clone(), false);
    let (m, m_traffic) = app("m", well.clone(), false);
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"{admin}\"\nadmin_write = true\n\
         workers = 2\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nmax_fails = 1\nfail_timeout = \"60s\"\n\
         servers = [\"{}\", \"{}\", \"{}\"]\n",
        d.addr, a.addr, m.addr
    ));
    let _p = start_workers(&cfg);
    // The write reaches one worker; the mode reaches both.
    let (code, _) = http_post(
        admin,
        &format!("/servers/app/{}/state", m.addr),
        "maintenance",
    );
    assert_eq!(code, 200);
    assert!(
        wait_until(WAIT, || {
            let e = server(&status(admin), m.addr);
            e["state"] == "maintenance" && e["agreed"] == true
        }),
        "{:#}",
        status(admin)
    );
    // One request: its worker tries d first (round-robin starts at the
    // first server), which closes: ejected there, retried on a. The other
    // worker never tried d.
    let r = Client::connect(loopback(port)).round_trip(get("/"));
    assert_eq!((r.status, r.body_str()), (200, "a".to_string()));
    let mut s = Value::Null;
    assert!(
        wait_until(WAIT, || {
            s = status(admin);
            per_worker(&s, d.addr).len() == 2
        }),
        "{s:#}"
    );
    let e = server(&s, d.addr);
    assert_eq!(
        (e["state"].as_str(), e["agreed"].as_bool()),
        (Some("ejected"), Some(false))
    );
    let per = per_worker(&s, d.addr);
    let states: Vec<&str> = per
        .iter()
        .map(|(_, _, v)| v["state"].as_str().unwrap())
        .collect();
    assert!(
        states.contains(&"ejected") && states.contains(&"up"),
        "{s:#}"
    );
    let (x, _, ej) = per
        .iter()
        .find(|(_, _, v)| v["state"] == "ejected")
        .unwrap();
    assert!(
        ej["ejected_because"]
            .as_str()
            .unwrap()
            .contains("1 failure"),
        "{ej}"
    );
    // Servers every worker agrees on are not listed per worker.
    assert!(per_worker(&s, a.addr).is_empty(), "{s:#}");
    assert_eq!(server(&s, a.addr)["agreed"], true);
    // /metrics: each worker's series, whichever answered.
    let want: Vec<String> = (0..2u64)
        .map(|w| {
            format!(
                "sluice_upstream_server_ejected{{worker=\"{w}\",group=\"app\",server=\"{}\"}} {}",
                d.addr,
                u8::from(w == *x)
            )
        })
        .collect();
    let mut m_text = String::new();
    assert!(
        wait_until(WAIT, || {
            m_text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
            want.iter().all(|w| m_text.contains(w))
        }),
        "{want:?}\n{m_text}"
    );
    // The table: d marked, then one line per worker.
    let out = run_sluice(&["status", "--admin", &admin.to_string()]);
    assert!(out.status.success(), "{}", out.stderr);
    println!("{}", out.stdout);
    let t = &out.stdout;
    assert!(t.contains("ejected*"), "{t}");
    let below = t.split("the workers disagree").nth(1).unwrap_or("");
    assert_eq!(below.matches(&d.addr.to_string()).count(), 2, "{t}");
    assert_eq!(m_traffic.load(Ordering::SeqCst), 0);
}

#[test]
fn after_a_reload_status_shows_each_new_worker_as_soon_as_it_is_ready() {
    // No health checks, and no request after the reload: nothing wakes a
    // new worker's loop, so its view must be on the board from the time
    // it said it was ready (it was posted only in its first loop turn, and
    // /status answered over the other workers: d `agreed`, or an old
    // worker's view in the new one's place).
    let well = Arc::new(AtomicBool::new(false));
    let (d, _) = app("d", well.clone(), true);
    let (a, _) = app("a", well, false);
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"{admin}\"\n\
         workers = 2\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nmax_fails = 1\nfail_timeout = \"60s\"\n\
         servers = [\"{}\", \"{}\"]\n",
        d.addr, a.addr
    ));
    let mut p = start_workers(&cfg);
    // One request: its worker tries d first and ejects it; the other
    // never tried d.
    let r = Client::connect(loopback(port)).round_trip(get("/"));
    assert_eq!((r.status, r.body_str()), (200, "a".to_string()));
    assert!(
        wait_until(WAIT, || per_worker(&status(admin), d.addr).len() == 2),
        "{:#}",
        status(admin)
    );
    let new_pids = reload(&mut p);
    // Each new worker took over its predecessor's view; every /status,
    // the first one too, shows both, and only them.
    for _ in 0..5 {
        let s = status(admin);
        assert_eq!(server(&s, d.addr)["agreed"], false, "{s:#}");
        let pids: Vec<u64> = per_worker(&s, d.addr)
            .into_iter()
            .map(|(_, pid, _)| pid)
            .collect();
        assert_eq!(pids.len(), 2, "{s:#}");
        for pid in pids {
            assert!(new_pids.contains(&pid), "{pid} not a new worker: {s:#}");
        }
    }
}

#[test]
fn a_worker_that_replaces_one_that_died_starts_from_a_siblings_health() {
    let sick = Arc::new(AtomicBool::new(true));
    let well = Arc::new(AtomicBool::new(false));
    let (a, _) = app("a", well, false);
    let (b, _) = app("b", sick, false);
    let port = free_port();
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nworkers = 2\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\", \"{}\"]\n\
         [upstream.health_check]\npath = \"/health\"\ninterval = \"200ms\"\n\
         timeout = \"150ms\"\nfall = 1\n",
        a.addr, b.addr
    ));
    let mut p = start_workers(&cfg);
    // Both workers' checks took b down.
    assert!(
        wait_until(WAIT, || p.count(|l| l.contains("-> checked_down")) >= 2),
        "{}",
        p.log()
    );
    let victim = p
        .log()
        .lines()
        .find(|l| l.contains("worker 0 started pid="))
        .map(|l| pid_after(l, "pid="))
        .unwrap();
    send_signal(victim, libc::SIGKILL);
    let line = p.wait_line(Duration::from_secs(10), |l| {
        l.contains("restart: kept the health of 2 servers")
    });
    p.adopt_workers();
    assert!(line.contains("from worker 1"), "{line}");
    assert!(
        line.contains(&format!("app {} checked_down", b.addr)),
        "{line}"
    );
}

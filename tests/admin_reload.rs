//! The admin endpoints of the built binary across reloads (break-it pass
//! on the operations surface): `/readyz` stays 200 while a reload's old side
//! drains and turns 503 only on a shutdown drain; counters never go down
//! across a reload (single process and supervisor); `/status` and
//! `/metrics` name the running workers only, also when a reload changes
//! `workers`.
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use util::*;

/// An upstream that answers each request only while `open` is set (it
/// waits, bounded, for it): an exchange in flight keeps a drain going.
fn gated() -> (Upstream, Arc<AtomicBool>) {
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    let up = Upstream::start(move |mut c| {
        while let Some(req) = c.read_request() {
            c.record(req);
            wait_until(UPSTREAM_TIMEOUT, || gate.load(Ordering::SeqCst));
            if !c.send(ok_response("done")) {
                return;
            }
        }
    });
    (up, open)
}

fn config(port: u16, admin: SocketAddr, upstream: SocketAddr, workers: usize) -> String {
    format!(
        "listen = \"127.0.0.1:{port}\"\nupstream = \"{upstream}\"\nadmin = \"{admin}\"\n\
         workers = {workers}\naccess_log = \"off\"\ndrain_timeout = \"10s\"\n"
    )
}

/// Starts sluice on `cfg` and waits until it serves; a supervisor's
/// workers are adopted (killed with it).
fn start(cfg: &TempFile, workers: usize) -> SluiceProcess {
    let mut p = SluiceProcess::start(&["--config", cfg.path()]);
    if workers == 1 {
        p.wait_line(STARTUP, |l| l.contains("listening on"));
    } else {
        p.wait_line(STARTUP, |l| l.contains("all workers ready"));
        p.adopt_workers();
    }
    p
}

/// SIGHUP, then waits until the reload finished and `draining` old loops
/// logged that they drain.
fn reload(p: &mut SluiceProcess, draining: usize) {
    let reloads = p.count(|l| l.contains("SIGHUP: reloaded"));
    let drains = p.count(|l| l.contains("draining: "));
    p.signal(libc::SIGHUP);
    wait_until(Duration::from_secs(10), || {
        p.count(|l| l.contains("SIGHUP: reloaded")) > reloads
            && p.count(|l| l.contains("draining: ")) >= drains + draining
    });
    assert!(
        p.count(|l| l.contains("draining: ")) >= drains + draining,
        "reload did not finish:\n{}",
        p.log()
    );
    p.adopt_workers();
}

/// Waits until `n` loops in all logged `drained`.
fn wait_drained(p: &SluiceProcess, n: usize) {
    assert!(
        wait_until(Duration::from_secs(10), || p
            .count(|l| l.ends_with("drained"))
            >= n),
        "not drained:\n{}",
        p.log()
    );
}

/// The sum of every `name{...}` sample of a `/metrics` body.
fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn metrics(admin: SocketAddr) -> String {
    let (status, body) = http_get(admin, "/metrics");
    assert_eq!(status, 200);
    String::from_utf8_lossy(&body).into_owned()
}

/// Waits until `/metrics` counts `n` requests over all workers.
#[track_caller]
fn wait_counted(admin: SocketAddr, n: u32) {
    assert_eventually(&format!("{n} requests counted"), || {
        sum(&metrics(admin), "sluice_requests_total") == f64::from(n)
    });
}

/// `(worker, pid, draining)` of every `/status` entry.
fn status(admin: SocketAddr) -> Vec<(u64, u64, bool)> {
    let v: serde_json::Value = serde_json::from_slice(&http_get(admin, "/status").1).unwrap();
    v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["worker"].as_u64().unwrap(),
                w["pid"].as_u64().unwrap(),
                w["draining"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The `worker` labels of `sluice_worker_draining`, with their values.
fn draining_gauges(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("sluice_worker_draining{"))
        .map(str::to_string)
        .collect()
}

fn readyz_stays_ready_during_a_reload_and_not_during_a_shutdown(workers: usize) {
    let (up, open) = gated();
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&config(port, admin, up.addr, workers));
    let mut p = start(&cfg, workers);
    // An exchange in flight keeps the old side draining.
    let mut held = Client::connect(loopback(port));
    held.send(get("/held"));
    up.wait_requests(1);
    reload(&mut p, 1);
    // Whichever loop the kernel hands a probe (the draining old one or
    // the new one), the group is ready.
    for i in 0..60 {
        assert_eq!(http_get(admin, "/readyz").0, 200, "probe {i}:\n{}", p.log());
    }
    assert!(status(admin).iter().any(|w| w.2), "the old side drains");
    open.store(true, Ordering::SeqCst);
    assert_eq!(held.read_response().status, 200);
    wait_drained(&p, workers);
    // A shutdown drain is not a reload: 503 while it lasts.
    open.store(false, Ordering::SeqCst);
    let mut held = Client::connect(loopback(port));
    held.send(get("/held"));
    up.wait_requests(2);
    p.signal(libc::SIGTERM);
    assert_eventually("readyz says 503 in a shutdown drain", || {
        http_get(admin, "/readyz").0 == 503
    });
    assert_eq!(http_get(admin, "/healthz").0, 200);
    open.store(true, Ordering::SeqCst);
    assert_eq!(held.read_response().status, 200);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn readyz_stays_200_through_a_reload_of_a_single_process_and_503_on_sigterm() {
    readyz_stays_ready_during_a_reload_and_not_during_a_shutdown(1);
}

#[test]
fn readyz_stays_200_through_a_supervisor_reload_and_503_on_sigterm() {
    readyz_stays_ready_during_a_reload_and_not_during_a_shutdown(2);
}

/// `n` requests through the proxy on `port`, each on its own connection.
fn requests(port: u16, n: usize) {
    for _ in 0..n {
        let resp = Client::connect(loopback(port)).round_trip(get_close("/"));
        assert_eq!(resp.status, 200);
    }
}

#[test]
fn counters_continue_across_a_single_process_reload() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&config(port, admin, up.addr, 1));
    let mut p = start(&cfg, 1);
    requests(port, 5);
    wait_counted(admin, 5);
    reload(&mut p, 1);
    wait_drained(&p, 1);
    let text = metrics(admin);
    assert_eq!(sum(&text, "sluice_requests_total"), 5.0, "{text}");
    assert_eq!(sum(&text, "sluice_request_duration_seconds_count"), 5.0);
    requests(port, 3);
    wait_counted(admin, 8);
    let st = status(admin);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!((st[0].0, st[0].1, st[0].2), (0, p.pid() as u64, false));
    p.signal(libc::SIGTERM);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn supervisor_reloads_keep_counters_and_show_only_running_workers_when_workers_change() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&config(port, admin, up.addr, 2));
    let mut p = start(&cfg, 2);
    requests(port, 10);
    wait_counted(admin, 10);
    // 2 → 3 workers: the third appears, nothing is lost.
    std::fs::write(cfg.path(), config(port, admin, up.addr, 3)).unwrap();
    reload(&mut p, 2);
    wait_drained(&p, 2);
    // The new third worker shows once it started, which a loaded
    // machine may take a moment after the old ones drained.
    assert_eventually("workers 0, 1 and 2 are shown", || {
        status(admin).iter().map(|w| w.0).collect::<Vec<u64>>() == [0, 1, 2]
    });
    let text = metrics(admin);
    assert_eq!(sum(&text, "sluice_requests_total"), 10.0, "{text}");
    assert_eq!(draining_gauges(&text).len(), 3, "{text}");
    requests(port, 6);
    wait_counted(admin, 16);
    // 3 → 1: workers 1 and 2 leave /status and /metrics once they exited.
    std::fs::write(cfg.path(), config(port, admin, up.addr, 1)).unwrap();
    reload(&mut p, 3);
    wait_drained(&p, 5);
    assert_eventually("only worker 0 is shown", || {
        let st = status(admin);
        st.len() == 1 && st[0].0 == 0 && !st[0].2
    });
    let text = metrics(admin);
    assert_eq!(
        draining_gauges(&text),
        [r#"sluice_worker_draining{worker="0"} 0"#],
        "{text}"
    );
    let pid = status(admin)[0].1 as i32;
    assert!(alive(pid));
    // Worker 0's totals kept every request it ever counted; workers 1 and
    // 2 (gone) are no longer series.
    let w0 = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("sluice_requests_total{worker=\"0\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = w0(&text);
    assert!(before >= 1.0, "{text}");
    requests(port, 4);
    assert_eventually("worker 0 counts on from its total", || {
        w0(&metrics(admin)) == before + 4.0
    });
    p.signal(libc::SIGTERM);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// The admin listener is bound once, at start: a reload that changes
/// `admin` says (WARN) that it takes a restart, and the running address
/// keeps answering — single process and supervisor.
#[test]
fn a_reload_that_changes_the_admin_address_warns_and_keeps_the_running_one() {
    for workers in [1, 2] {
        let up = Upstream::start(respond_forever(ok_response("hello")));
        let (port, admin, other) = (free_port(), loopback(free_port()), loopback(free_port()));
        let cfg = TempFile::new(&config(port, admin, up.addr, workers));
        let mut p = start(&cfg, workers);
        std::fs::write(cfg.path(), config(port, other, up.addr, workers)).unwrap();
        reload(&mut p, workers);
        let warn = p.wait_line(WAIT, |l| l.contains("WARN") && l.contains("admin changed"));
        assert!(warn.contains("restart"), "{warn}");
        wait_drained(&p, workers);
        assert_eq!(http_get(admin, "/healthz").0, 200);
        assert!(std::net::TcpStream::connect(other).is_err());
        // The next reload (same file) still warns: the address is unchanged.
        reload(&mut p, workers);
        assert_eventually("warned again", || {
            p.count(|l| l.contains("admin changed")) >= 2
        });
        p.signal(libc::SIGTERM);
        assert!(p.wait_exit(Duration::from_secs(10)).success());
    }
}

/// An admin connection the old side accepted before a reload is answered
/// before that side ends: its drain stops accepting admin connections
/// last, then answers what it holds (a probe or scrape is never dropped
/// unanswered by a reload).
fn admin_connection_accepted_before_a_reload_is_answered(workers: usize) {
    use std::io::{Read as _, Write as _};
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&config(port, admin, up.addr, workers));
    let mut p = start(&cfg, workers);
    // Opened, and accepted by an old loop: the answer to a later probe
    // means the queue before it was accepted too (accepts run in order
    // until the queue is empty).
    let mut early = std::net::TcpStream::connect(admin).unwrap();
    early
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(http_get(admin, "/healthz").0, 200);
    reload(&mut p, workers);
    early
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = early.read_to_end(&mut got);
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}\n{}",
        String::from_utf8_lossy(&got),
        p.log()
    );
    wait_drained(&p, workers);
}

#[test]
fn an_admin_connection_accepted_before_a_single_process_reload_is_answered() {
    admin_connection_accepted_before_a_reload_is_answered(1);
}

#[test]
fn an_admin_connection_accepted_before_a_supervisor_reload_is_answered() {
    admin_connection_accepted_before_a_reload_is_answered(2);
}

/// Every `sluice_upstream_server_responses_total` sample of a `/metrics`
/// body, by its labels.
fn server_responses(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|l| l.starts_with("sluice_upstream_server_responses_total{"))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn per_server_counters_never_go_down_between_scrapes_answered_by_different_workers() {
    // Found by a break-it pass: with two workers, a scrape answered by
    // worker 1 showed its live counts and one answered by worker 0 its
    // last post on the tier board (up to 100 ms older), so a series could
    // go down from one scrape to the next (Prometheus reads a reset).
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&config(port, admin, up.addr, 2));
    let mut p = start(&cfg, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for _ in 0..20_000 {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let mut c = Client::connect(loopback(port));
                for _ in 0..20 {
                    if c.round_trip(get("/")).status != 200 {
                        return;
                    }
                }
            }
        })
    };
    let mut last = std::collections::HashMap::new();
    let mut downs = Vec::new();
    for _ in 0..60 {
        let now = server_responses(&metrics(admin));
        for (k, v) in &now {
            if let Some(before) = last.get(k)
                && v < before
            {
                downs.push(format!("{k}: {before} -> {v}"));
            }
        }
        last = now;
        std::thread::sleep(Duration::from_millis(30));
    }
    stop.store(true, Ordering::SeqCst);
    let _ = load.join();
    assert!(!last.is_empty(), "no per-server series");
    assert!(downs.is_empty(), "counters went down: {downs:?}");
    p.signal(libc::SIGTERM);
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

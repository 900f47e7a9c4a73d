//! The descriptor budget (issue 14, docs/operations.md, "Descriptor budget"): every
//! client is budgeted two descriptors, clients beyond the budget wait in
//! the accept queue instead of getting 502s, a request that truly finds no
//! descriptor gets 503 with `Retry-After` (never a retry into the same
//! `EMFILE`), and at the connection cap the longest-idle keep-alive client
//! makes room for a new one. The proxy runs as the built binary with a low
//! `RLIMIT_NOFILE`.

mod util;

use std::thread;
use std::time::Duration;

use util::*;

/// An upstream answering each request after `delay` (keep-alive).
fn slow_upstream(delay: Duration) -> Upstream {
    Upstream::start(serve(move |_| {
        // Pacing, not synchronisation: requests overlap on purpose.
        thread::sleep(delay);
        ok_response("ok")
    }))
}

/// Starts the binary in front of `upstream` with `RLIMIT_NOFILE = nofile`
/// and `eaten` descriptors it does not know about.
fn sluice_with_nofile(upstream: &Upstream, nofile: u64, eaten: usize) -> (SluiceProcess, u16) {
    let port = free_port();
    let listen = loopback(port).to_string();
    let up = upstream.addr.to_string();
    let p = SluiceProcess::start_with_nofile(
        &["--listen", &listen, "--upstream", &up],
        Some(nofile),
        eaten,
    );
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    (p, port)
}

/// `n` clients at once, one GET each; their statuses (0: no answer) and
/// whether each 503 carried `Retry-After`.
fn get_concurrently(port: u16, n: usize) -> Vec<(u16, bool)> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            thread::spawn(move || {
                let Ok(mut c) = Client::try_connect(loopback(port)) else {
                    return (0, false);
                };
                c.send_lossy(get("/"));
                match c.try_read_response(false) {
                    Ok(r) => (r.status, r.header("retry-after").is_some()),
                    Err(_) => (0, false),
                }
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn clients_beyond_the_descriptor_budget_wait_and_all_get_200() {
    let upstream = slow_upstream(Duration::from_millis(50));
    // 64 descriptors: 32 for sockets, 16 clients at once; 48 clients come.
    let (p, port) = sluice_with_nofile(&upstream, 64, 0);
    assert!(p.log().contains("lowered to 16"), "{}", p.log());
    let got = get_concurrently(port, 48);
    let not_ok: Vec<_> = got.iter().filter(|(s, _)| *s != 200).collect();
    assert!(not_ok.is_empty(), "statuses other than 200: {not_ok:?}");
    assert_eq!(p.count(|l| l.contains("Too many open files")), 0);
}

/// Descriptors the process `pid` has open.
fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn request_finding_no_descriptor_gets_503_with_retry_after_and_the_proxy_recovers() {
    let began = std::time::Instant::now();
    let upstream = slow_upstream(Duration::from_millis(100));
    // The budget says 16 clients, but 45 descriptors are taken behind the
    // proxy's back: fewer than 16 clients fill the limit (with the
    // process's own, among them standard error's non-blocking description),
    // and their upstream connects find no descriptor.
    let (p, port) = sluice_with_nofile(&upstream, 64, 45);
    let mut clients: Vec<Client> = (0..16).map(|_| Client::connect(loopback(port))).collect();
    let full = wait_until(WAIT, || open_fds(p.pid()) >= 64);
    assert!(full, "{} fds open", open_fds(p.pid()));
    for c in clients.iter_mut() {
        c.send(get("/"));
    }
    let got: Vec<(u16, bool)> = clients
        .iter_mut()
        .map(|c| match c.try_read_response(false) {
            Ok(r) => (r.status, r.header("retry-after") == Some("1")),
            Err(_) => (0, false),
        })
        .collect();
    let statuses: Vec<u16> = got.iter().map(|(s, _)| *s).collect();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&503),
        "{statuses:?} fds={}\n{}",
        open_fds(p.pid()),
        p.log()
    );
    assert!(got.iter().filter(|(s, _)| *s == 503).all(|(_, ra)| *ra));
    // Never retried into the same EMFILE.
    assert_eq!(p.count(|l| l.contains("retry ")), 0, "{}", p.log());
    // Each EMFILE line at most once a second (docs/observability.md, "Logs"): a bound the
    // limiter guarantees, however slow the machine.
    let seconds = began.elapsed().as_secs() as usize + 1;
    for class in ["closing an idle pooled connection", "connect failed"] {
        let n = p.count(|l| l.contains(class));
        assert!(n <= seconds, "{n} lines in {seconds} s: {}", p.log());
    }
    // Afterwards the descriptors are back.
    drop(clients);
    let mut c = Client::connect(loopback(port));
    assert_eq!(c.round_trip(get("/")).status, 200);
}

#[test]
fn at_the_connection_cap_the_longest_idle_keepalive_client_makes_room() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_connections = 1);
    let mut idle = proxy.client();
    assert_eq!(idle.round_trip(get("/")).status, 200);
    assert_eventually("the first client idle", || {
        proxy.stats.snapshot().downstream_idle == 1
    });
    let mut fresh = proxy.client();
    assert_eq!(fresh.round_trip(get("/")).status, 200);
    assert!(idle.read_until_closed(WAIT).is_empty());
    assert_eq!(proxy.stats.snapshot().downstream_closed_for_room, 1);
}

/// Clients that each send `GET /` on a new connection, one after another,
/// until `stop` (or 2,000 requests each); `done` counts the answers.
/// Returns every status seen (0: no answer, e.g. a reset).
fn steady_load(
    port: u16,
    clients: usize,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<thread::JoinHandle<Vec<u16>>> {
    use std::sync::atomic::Ordering;
    (0..clients)
        .map(|_| {
            let (stop, done) = (stop.clone(), done.clone());
            thread::spawn(move || {
                let mut seen = Vec::new();
                for _ in 0..2000 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let status = match Client::try_connect(loopback(port)) {
                        Ok(mut c) => {
                            c.send_lossy(get_close("/"));
                            c.try_read_response(false).map_or(0, |r| r.status)
                        }
                        Err(_) => 0,
                    };
                    seen.push(status);
                    done.fetch_add(1, Ordering::SeqCst);
                }
                seen
            })
        })
        .collect()
}

#[test]
fn reloads_under_load_at_the_descriptor_budget_answer_every_request_200() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let upstream = slow_upstream(Duration::from_millis(50));
    let port = free_port();
    let config = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nupstream = \"{}\"\nworkers = 1\n",
        upstream.addr
    ));
    // 64 descriptors: 16 clients at once for the whole process, however
    // many loops a reload runs side by side; 48 clients keep coming.
    let p = SluiceProcess::start_with_nofile(&["--config", config.path()], Some(64), 0);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let load = steady_load(port, 48, &stop, &done);
    let progress = |by: usize| {
        let from = done.load(Ordering::SeqCst);
        assert_eventually("requests answered", || {
            done.load(Ordering::SeqCst) >= from + by
        });
    };
    progress(32);
    for i in 1..=6 {
        p.signal(libc::SIGHUP);
        let reloaded = wait_until(STARTUP, || p.count(|l| l.contains("SIGHUP: reload")) >= i);
        assert!(reloaded, "{}", p.log());
        // The new loop serves while the old one drains.
        progress(16);
    }
    stop.store(true, Ordering::SeqCst);
    let statuses: Vec<u16> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let not_ok: Vec<_> = statuses.iter().filter(|s| **s != 200).collect();
    assert!(
        not_ok.is_empty(),
        "{} of {} not 200 (0: reset or no answer): {not_ok:?}\n{}",
        not_ok.len(),
        statuses.len(),
        p.log()
    );
    assert_eq!(
        p.count(|l| l.contains("SIGHUP: reloaded")),
        6,
        "{}",
        p.log()
    );
    assert_eq!(
        p.count(|l| l.contains("Too many open files")),
        0,
        "{}",
        p.log()
    );
}

#[test]
fn the_default_cap_fitted_to_the_limit_is_info_and_a_chosen_one_lowered_is_a_warning() {
    let upstream = slow_upstream(Duration::ZERO);
    let up = upstream.addr.to_string();
    for (extra, level) in [(None, "INFO"), (Some("500"), "WARN")] {
        let listen = loopback(free_port()).to_string();
        let mut args = vec!["--listen", listen.as_str(), "--upstream", up.as_str()];
        if let Some(n) = extra {
            args.extend(["--max-connections", n]);
        }
        let p = SluiceProcess::start_with_nofile(&args, Some(64), 0);
        let line = p.wait_line(STARTUP, |l| l.contains("lowered to 16"));
        assert!(line.contains(level), "{extra:?}: {line}");
    }
}

#[test]
fn http2_streams_never_take_the_descriptors_accepting_needs() {
    // An HTTP/2 client holds one upstream socket per stream in flight:
    // upstream sockets may use only what one socket per client leaves, so
    // another client is still accepted and answered at once (503 here,
    // every upstream socket being in use), not left in the accept queue
    // until the streams end.
    let upstream = slow_upstream(Duration::from_secs(8));
    let port = free_port();
    let (listen, up) = (loopback(port).to_string(), upstream.addr.to_string());
    let p = SluiceProcess::start_with_nofile(
        &["--listen", &listen, "--upstream", &up, "--http2-cleartext"],
        Some(64),
        0,
    );
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    // 64 descriptors: 16 clients, 16 upstream sockets; 30 streams ask.
    let mut h2 = H2Client::connect(loopback(port));
    for _ in 0..30 {
        h2.send_get("/held");
    }
    let held = wait_until(WAIT, || upstream.accepted() >= 16);
    assert!(held, "{} upstream connections", upstream.accepted());
    let mut probe = Client::connect(loopback(port));
    let r = probe.round_trip(get("/probe"));
    assert_eq!(r.status, 503, "{}", preview(&r.head));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        p.count(|l| l.contains("their share of the descriptor budget")) >= 1,
        "{}",
        p.log()
    );
    // 15 refusals so far (14 streams, the probe), one line logged: a
    // refusal a second later logs again with the count of those held
    // back, each refusal counted once (not once per line it could have
    // made).
    std::thread::sleep(Duration::from_millis(1100));
    let r = Client::connect(loopback(port)).round_trip(get("/later"));
    assert_eq!(r.status, 503, "{}", preview(&r.head));
    let line = p.wait_line(WAIT, |l| {
        l.contains("their share of the descriptor budget") && l.contains("more since the last one")
    });
    let held: u32 = line
        .rsplit_once(" (")
        .and_then(|(_, t)| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!((1..=15).contains(&held), "{held} held back: {line}");
}

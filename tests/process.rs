//! The process model, with the built binary: several processes on one port
//! (SO_REUSEPORT, with `--takeover`), `--workers N` restarting a killed worker, and the
//! graceful drain on SIGTERM (a second signal stops at once).
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops (workers of a supervisor too).

mod util;

use std::io::{self, Read};
use std::thread;
use std::time::{Duration, Instant};

use util::*;

// --- helpers of this file ----------------------------------------------------

/// Body of `/slow/MS`: `SLOW_CHUNKS` chunks of `SLOW_CHUNK` bytes spread
/// over MS milliseconds.
const SLOW_CHUNKS: usize = 10;
const SLOW_CHUNK: usize = 1000;

fn slow_body() -> Vec<u8> {
    (0..SLOW_CHUNKS * SLOW_CHUNK)
        .map(|i| b'a' + (i % 26) as u8)
        .collect()
}

/// A keep-alive HTTP/1.1 upstream. `/slow/MS` sends its body slowly; any
/// other path answers `hello` at once.
fn upstream() -> Upstream {
    Upstream::start(|mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let Some(ms) = req.target.strip_prefix("/slow/") else {
                if !conn.send(ok_response("hello\n")) {
                    return;
                }
                continue;
            };
            let total: u64 = ms.parse().unwrap_or(1000);
            let body = slow_body();
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            if !conn.send(head) {
                return;
            }
            for chunk in body.chunks(SLOW_CHUNK) {
                if !conn.send(chunk) {
                    return;
                }
                // Pacing, not synchronisation: this response is slow on purpose.
                thread::sleep(Duration::from_millis(total / SLOW_CHUNKS as u64));
            }
        }
    })
}

/// One GET of `/` on a new connection with `Connection: close`: 200 `hello`.
#[track_caller]
fn get_ok(port: u16) {
    let resp = Client::connect(loopback(port)).round_trip(get_close("/"));
    assert_eq!(
        (resp.status, &resp.body[..]),
        (200, &b"hello\n"[..]),
        "GET / through 127.0.0.1:{port}"
    );
}

/// One sluice process on `port` forwarding to `up`, listening.
#[track_caller]
fn start_single(port: u16, up: &Upstream, more: &[&str]) -> SluiceProcess {
    let listen = format!("127.0.0.1:{port}");
    let up = up.addr.to_string();
    let mut args = vec!["--listen", &listen, "--upstream", &up];
    args.extend_from_slice(more);
    SluiceProcess::start_listening(&args)
}

// --- tests -------------------------------------------------------------------

/// A second sluice started with `--takeover` shares the port of a running
/// one (SO_REUSEPORT) and the kernel hands new connections to both: each
/// logs access lines under its own pid (the zero-downtime swap's first
/// step).
#[test]
fn takeover_shares_the_port_and_both_serve() {
    let up = upstream();
    let port = free_port();
    let (log_a, log_b) = (TempFile::new(""), TempFile::new(""));
    let a = start_single(port, &up, &["--access-log", log_a.path()]);
    let b = start_single(port, &up, &["--takeover", "--access-log", log_b.path()]);
    let lines = |f: &TempFile| access_lines(f.path()).len();
    let end = Instant::now() + Duration::from_secs(10);
    let mut sent = 0;
    while lines(&log_a) == 0 || lines(&log_b) == 0 {
        assert!(
            Instant::now() < end,
            "after {sent} connections not both served;\nA:\n{}\nB:\n{}",
            a.log(),
            b.log()
        );
        for _ in 0..20 {
            get_ok(port);
            sent += 1;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (na, nb) = (lines(&log_a), lines(&log_b));
    assert!(
        na + nb <= sent,
        "{na} + {nb} access lines for {sent} requests"
    );
}

/// `--workers 2`: SIGKILL one worker; the supervisor logs it, starts a new
/// one (which serves), the port answers throughout, and SIGTERM to the
/// supervisor drains both workers and exits 0.
#[test]
fn workers_killed_worker_is_restarted() {
    let upstream = upstream();
    let up = upstream.addr.to_string();
    let admin = loopback(free_port());
    let admin_arg = admin.to_string();
    let mut sup = SluiceProcess::start(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &up,
        "--workers",
        "2",
        "--admin",
        &admin_arg,
    ]);
    let first = sup.wait_line(Duration::from_secs(5), |l| {
        l.contains("workers on 127.0.0.1:")
    });
    assert!(first.contains(&format!("[sup {}]", sup.pid())), "{first}");
    let port = pid_after(&first, "workers on 127.0.0.1:") as u16;
    let w0 = pid_after(
        &sup.wait_line(Duration::from_secs(5), |l| {
            l.contains("worker 0 started pid=")
        }),
        "pid=",
    );
    let w1 = pid_after(
        &sup.wait_line(Duration::from_secs(5), |l| {
            l.contains("worker 1 started pid=")
        }),
        "pid=",
    );
    sup.adopt(w0);
    sup.adopt(w1);
    for w in [(0, w0), (1, w1)] {
        let tag = format!("[w{} {}] listening on", w.0, w.1);
        sup.wait_line(Duration::from_secs(5), |l| l.contains(&tag));
    }
    for _ in 0..10 {
        get_ok(port);
    }

    send_signal(w1, libc::SIGKILL);
    let died = format!("worker 1 pid={w1} died unexpectedly");
    sup.wait_line(Duration::from_secs(5), |l| l.contains(&died));
    for _ in 0..20 {
        get_ok(port); // worker 0 answers while worker 1 is away
    }
    let again = sup.wait_line(Duration::from_secs(5), |l| {
        l.contains("worker 1 started pid=") && !l.contains(&format!("pid={w1}"))
    });
    let w1b = pid_after(&again, "pid=");
    sup.adopt(w1b);
    assert!(alive(w0), "worker 0 must not be touched");

    // The new worker 1 serves too: /status (any worker answers for all)
    // shows requests under its pid.
    let served =
        |pid: i32| {
            let (_, body) = http_get(admin, "/status");
            let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
            status["workers"].as_array().unwrap().iter().any(|w| {
                w["pid"].as_i64() == Some(i64::from(pid)) && w["requests"].as_u64() > Some(0)
            })
        };
    let end = Instant::now() + Duration::from_secs(10);
    while !served(w1b) {
        assert!(
            Instant::now() < end,
            "restarted worker never served:\n{}",
            sup.log()
        );
        for _ in 0..10 {
            get_ok(port);
        }
    }

    sup.signal(libc::SIGTERM);
    let status = sup.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "supervisor: {status:?}\n{}", sup.log());
    assert!(
        sup.count(|l| l.contains("exited: exit status 0")) == 2,
        "{}",
        sup.log()
    );
    assert!(!alive(w0) && !alive(w1b), "workers left behind");
}

/// SIGTERM while a response streams slowly (~1 s): it completes in full,
/// the listener is closed (new connections fail), an idle keep-alive
/// client is closed by the proxy, and the process exits 0 afterwards.
#[test]
fn sigterm_drains_in_flight_response_then_exits_0() {
    let up = upstream();
    let port = free_port();
    let mut p = start_single(port, &up, &["--drain-timeout", "10s"]);

    // An idle keep-alive client (one request done, connection kept).
    let mut idle = Client::connect(loopback(port));
    let resp = idle.round_trip(get("/"));
    let (status, body) = (resp.status, resp.body);
    assert_eq!((status, &body[..]), (200, &b"hello\n"[..]));

    // A slow in-flight exchange: wait until its first bytes arrived.
    let mut slow = Client::connect(loopback(port));
    slow.send(get("/slow/1000"));
    let first = slow.read_bytes(1);
    let t0 = Instant::now();

    p.signal(libc::SIGTERM);
    p.wait_line(Duration::from_secs(5), |l| l.contains("draining"));

    // A new connection is refused (listener closed), closed without an
    // answer, or, in the first 1.5 s (the listener stays open for
    // connections the kernel held under TCP_DEFER_ACCEPT), served as the
    // last request of its connection.
    match Client::try_connect(loopback(port)) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(mut s) => {
            s.send_lossy(get("/"));
            let got = s.read_what_arrives(Duration::from_secs(5));
            let text = String::from_utf8_lossy(&got);
            assert!(
                got.is_empty()
                    || text.starts_with("HTTP/1.1 200") && text.contains("Connection: close"),
                "served after drain began without Connection: close: {text}"
            );
        }
    }

    // The idle keep-alive connection is closed by the proxy.
    assert!(idle.wire.buffered().is_empty());
    let idle = &mut idle.wire.stream;
    idle.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut b = [0u8; 64];
    match idle.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("idle keep-alive connection not closed: {other:?}"),
    }

    // The in-flight response arrives whole.
    let rest = slow.read_until_closed(Duration::from_secs(5));
    let mut all = first.to_vec();
    all.extend_from_slice(&rest);
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..split]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(&all[split..], &slow_body()[..], "slow body incomplete");
    assert!(t0.elapsed() >= Duration::from_millis(500));

    let status = p.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "exit {status:?}\n{}", p.log());
    assert!(p.log().contains("drained"), "{}", p.log());
}

/// A second SIGTERM during a drain stops the process at once: a 5 s
/// response is cut short and the process is gone within a second.
#[test]
fn second_sigterm_stops_at_once() {
    let up = upstream();
    let port = free_port();
    let mut p = start_single(port, &up, &["--drain-timeout", "20s"]);
    let mut slow = Client::connect(loopback(port));
    slow.send(get("/slow/5000"));
    slow.read_bytes(1); // the response has begun

    p.signal(libc::SIGTERM);
    p.wait_line(Duration::from_secs(5), |l| l.contains("draining"));
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "drain must wait for the exchange"
    );
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    p.wait_exit(Duration::from_secs(2));
    assert!(t0.elapsed() < Duration::from_secs(2));

    let rest = slow.read_what_arrives(Duration::from_secs(5));
    assert!(
        rest.len() + 1 < SLOW_CHUNKS * SLOW_CHUNK,
        "the slow response should have been cut"
    );
}

/// The drain deadline cuts a slow response: the client got part of it,
/// and the access log still has its record, saying `drain_cut` with the
/// body bytes that went out (issue 13, seen problem 1).
#[test]
fn a_response_cut_by_the_drain_deadline_is_logged_as_drain_cut() {
    let up = upstream();
    let port = free_port();
    let log = TempFile::new("");
    let mut p = start_single(
        port,
        &up,
        &[
            "--drain-timeout",
            "300ms",
            "--access-log",
            log.path(),
            "--access-log-format",
            "json",
        ],
    );
    let mut slow = Client::connect(loopback(port));
    slow.send(get("/slow/5000"));
    slow.read_bytes(1);
    p.signal(libc::SIGTERM);
    let got = slow.read_until_closed(Duration::from_secs(5));
    assert!(got.len() + 1 < SLOW_CHUNKS * SLOW_CHUNK, "not cut");
    p.wait_exit(Duration::from_secs(5));
    let lines = access_lines(log.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    let rec: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(rec["termination"], "drain_cut", "{rec}");
    assert_eq!(rec["status"], 200, "{rec}");
    let out = rec["bytes_out"].as_u64().unwrap();
    assert!(out > 0 && out < (SLOW_CHUNKS * SLOW_CHUNK) as u64, "{rec}");
}

/// Two workers with a graceful drain of 20 s, and a client whose slow
/// download (`/slow/1500`) has begun: `(supervisor, client, first byte)`.
/// The upstream is kept alive by the caller.
fn two_workers_with_a_download_in_flight(up: &str) -> (SluiceProcess, Client, Vec<u8>) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let sup = SluiceProcess::start(&[
        "--listen",
        &listen,
        "--upstream",
        up,
        "--workers",
        "2",
        "--drain-timeout",
        "20s",
    ]);
    sup.wait_line(STARTUP, |l| l.contains("all workers ready"));
    let mut slow = Client::connect(loopback(port));
    slow.send(get("/slow/1500"));
    let first = slow.read_bytes(1);
    (sup, slow, first)
}

/// The download arrives whole, the supervisor exits 0, and no worker was
/// stopped at once.
fn assert_drained_gracefully(sup: &mut SluiceProcess, slow: &mut Client, first: &[u8]) {
    let rest = slow.read_until_closed(Duration::from_secs(10));
    let mut all = first.to_vec();
    all.extend_from_slice(&rest);
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(&all[split..], &slow_body()[..], "cut:\n{}", sup.log());
    let status = sup.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", sup.log());
    assert_eq!(
        sup.count(|l| l.contains("stopping now")),
        0,
        "{}",
        sup.log()
    );
}

/// `killall -TERM sluice` (or systemd's default `KillMode=control-group`):
/// SIGTERM reaches the supervisor and every worker at once, and each worker
/// gets it again forwarded by the supervisor. That is one graceful drain,
/// not "a second SIGTERM: stop at once": the response in flight arrives
/// whole and the supervisor exits 0.
#[test]
fn sigterm_to_the_supervisor_and_its_workers_at_once_is_one_drain() {
    let upstream = upstream();
    let (mut sup, mut slow, first) =
        two_workers_with_a_download_in_flight(&upstream.addr.to_string());
    let workers = sup.adopt_workers();
    for &w in &workers {
        send_signal(w, libc::SIGTERM);
    }
    sup.signal(libc::SIGTERM);
    assert_drained_gracefully(&mut sup, &mut slow, &first);
}

/// `--workers 2`: SIGTERM to the supervisor while a reload's old
/// generation still drains (it got the supervisor's SIGTERM) is that
/// generation's *first* stop from the user: its exchange finishes, it is
/// not stopped at once.
#[test]
fn sigterm_during_a_reloads_drain_lets_the_old_workers_finish() {
    let upstream = upstream();
    let (mut sup, mut slow, first) =
        two_workers_with_a_download_in_flight(&upstream.addr.to_string());
    sup.signal(libc::SIGHUP);
    sup.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
    for line in sup.log().lines().filter(|l| l.contains("started pid=")) {
        sup.adopt(pid_after(line, "pid="));
    }
    sup.signal(libc::SIGTERM);
    assert_drained_gracefully(&mut sup, &mut slow, &first);
}

//! Operating the built binary (issue 13): safe binds (a busy address is
//! refused, naming it; `--takeover` shares it on purpose), signals that
//! never kill it (SIGUSR1, SIGUSR2 turning /readyz 503, others), reload on SIGHUP (single
//! process and supervisor), `--pid-file`, the `sd_notify` readiness and
//! stop messages the systemd unit relies on, and the packaging files'
//! assumptions (`packaging/`, `deploy/kubernetes/`).
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops.

mod util;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use util::*;

// --- helpers of this file ----------------------------------------------------

/// An upstream whose every answer is `body`.
fn answering(body: &str) -> Upstream {
    Upstream::start(respond_forever(ok_response(body)))
}

/// The body of one `GET /` on a new connection to `port`.
#[track_caller]
fn body_via(port: u16) -> String {
    let resp = Client::connect(loopback(port)).round_trip(get_close("/"));
    assert_eq!(resp.status, 200);
    String::from_utf8_lossy(&resp.body).into_owned()
}

/// A config file: `listen` on `port`, `upstream` as given.
fn config_text(port: u16, upstream: &Upstream) -> String {
    format!(
        "listen = \"127.0.0.1:{port}\"\nupstream = \"{}\"\ndrain_timeout = \"5s\"\n",
        upstream.addr
    )
}

/// Starts sluice with `args` plus `--workers N` and waits until it serves:
/// the single process's `listening on`, or the supervisor's `all workers
/// ready` (its workers are adopted, to be killed with it).
#[track_caller]
fn start_ready(args: &[&str], workers: &str, env: &[(&str, &str)]) -> SluiceProcess {
    let mut all = args.to_vec();
    all.extend(["--workers", workers]);
    let mut p = SluiceProcess::start_env(&all, env);
    if workers == "1" {
        p.wait_line(STARTUP, |l| l.contains("listening on"));
    } else {
        p.wait_line(STARTUP, |l| l.contains("all workers ready"));
        for line in p.log().lines().filter(|l| l.contains("started pid=")) {
            let pid = pid_after(line, "pid=");
            p.adopt(pid);
        }
    }
    p
}

/// SIGTERM, then exit 0 within 10 s.
#[track_caller]
fn stop_cleanly(mut p: SluiceProcess) {
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", p.log());
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-ops-{}-{name}", std::process::id()))
}

fn repo_file(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// --- safe binds (seen problems 4 and 5) -----------------------------------------

#[test]
fn second_instance_on_a_busy_address_exits_1_naming_the_address() {
    let a_up = answering("a");
    let b_up = answering("b").addr.to_string();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let a = start_ready(
        &["--listen", &listen, "--upstream", &a_up.addr.to_string()],
        "1",
        &[],
    );
    let want = format!("bind() to {listen} failed: Address already in use (os error 98)");
    for workers in ["1", "2"] {
        let o = run_sluice(&[
            "--listen",
            &listen,
            "--upstream",
            &b_up,
            "--workers",
            workers,
        ]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "--workers {workers}: {}",
            o.stderr
        );
        assert_eq!(o.stderr.matches(&want).count(), 1, "{}", o.stderr);
    }
    // The first one alone serves.
    for _ in 0..10 {
        assert_eq!(body_via(port), "a");
    }
    stop_cleanly(a);
}

#[test]
fn an_address_another_program_listens_on_is_refused() {
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = other.local_addr().unwrap().to_string();
    let o = run_sluice(&["--listen", &addr, "--upstream", "127.0.0.1:9"]);
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "sluice: cannot start: bind() to {addr} failed: Address already in use"
        )),
        "{}",
        o.stderr
    );
}

#[test]
fn an_address_that_cannot_be_bound_is_named_with_the_os_error() {
    // 192.0.2.1 (TEST-NET-1) is on no interface of this host.
    let o = run_sluice(&["--listen", "192.0.2.1:8080", "--upstream", "127.0.0.1:9"]);
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "bind() to 192.0.2.1:8080 failed: Cannot assign requested address (os error 99)"
        ),
        "{}",
        o.stderr
    );
}

// --- signals (seen problem 3) ------------------------------------------------------

#[test]
fn usr1_and_other_signals_are_logged_and_never_fatal() {
    let up = answering("a");
    for workers in ["1", "2"] {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let p = start_ready(
            &["--listen", &listen, "--upstream", &up.addr.to_string()],
            workers,
            &[],
        );
        p.signal(libc::SIGUSR1);
        p.wait_line(WAIT, |l| l.contains("SIGUSR1: ") && l.contains("reopen"));
        for (sig, name) in [
            (libc::SIGALRM, "SIGALRM"),
            (libc::SIGVTALRM, "SIGVTALRM"),
            (libc::SIGPROF, "SIGPROF"),
            (libc::SIGIO, "SIGIO"),
            (libc::SIGPWR, "SIGPWR"),
        ] {
            p.signal(sig);
            p.wait_line(WAIT, |l| l.contains(&format!("{name} ignored")));
        }
        for _ in 0..5 {
            assert_eq!(body_via(port), "a", "--workers {workers}");
        }
        assert!(alive(p.pid()));
        stop_cleanly(p);
    }
}

/// A loop that a reload drained and that ended is not asked to reopen the
/// logs: SIGUSR1 after a reload logged "reopening logs" once for the
/// running loop and once for the ended one (its handle was kept until the
/// next reload). Seen by a new-user pass reading the log after logrotate.
#[test]
fn usr1_after_a_reload_reaches_only_the_running_loop() {
    let up = answering("a");
    let port = free_port();
    let path = temp_path("usr1-after-reload.toml");
    std::fs::write(&path, config_text(port, &up)).unwrap();
    let p = start_ready(&["--config", path.to_str().unwrap()], "1", &[]);
    p.signal(libc::SIGHUP);
    p.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
    // The old loop's last line, written as its `run` returns.
    p.wait_line(STARTUP, |l| l.contains("stopped: requests="));
    std::thread::sleep(Duration::from_millis(200));
    p.signal(libc::SIGUSR1);
    p.wait_line(WAIT, |l| l.contains("SIGUSR1: reopening logs"));
    std::thread::sleep(Duration::from_millis(300));
    let asked = p.count(|l| l.ends_with("] reopening logs"));
    assert_eq!(asked, 1, "{}", p.log());
    assert_eq!(body_via(port), "a");
    stop_cleanly(p);
    let _ = std::fs::remove_file(&path);
}

/// SIGUSR2 (the Kubernetes `preStop`'s first step, docs/edge.md): `/readyz`
/// turns 503 while the proxy goes on serving, new connections included;
/// a SIGTERM then drains as usual.
#[test]
fn usr2_turns_readyz_503_and_serving_goes_on() {
    let up = answering("a");
    for workers in ["1", "2"] {
        let port = free_port();
        let admin_port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let admin = format!("127.0.0.1:{admin_port}");
        let p = start_ready(
            &[
                "--listen",
                &listen,
                "--upstream",
                &up.addr.to_string(),
                "--admin",
                &admin,
            ],
            workers,
            &[],
        );
        let admin_addr = loopback(admin_port);
        assert_eq!(
            http_get(admin_addr, "/readyz").0,
            200,
            "--workers {workers}"
        );
        p.signal(libc::SIGUSR2);
        p.wait_line(WAIT, |l| {
            l.contains("SIGUSR2") && l.contains("still serving")
        });
        assert_eventually("readyz says 503", || {
            http_get(admin_addr, "/readyz").0 == 503
        });
        for _ in 0..5 {
            assert_eq!(body_via(port), "a", "--workers {workers}: still serving");
        }
        assert_eq!(http_get(admin_addr, "/healthz").0, 200);
        stop_cleanly(p);
    }
}

/// logrotate's recipe: the access log file is moved away, SIGUSR1 makes
/// every worker reopen its path, and the next records land in the new file
/// (nothing is lost: the moved file keeps the earlier ones).
#[test]
fn sigusr1_reopens_the_access_log_after_it_was_moved() {
    let up = answering("a");
    for workers in ["1", "2"] {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let log = temp_path(&format!("access-{workers}.log"));
        let moved = temp_path(&format!("access-{workers}.log.1"));
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&moved);
        let log_s = log.to_str().unwrap().to_string();
        let p = start_ready(
            &[
                "--listen",
                &listen,
                "--upstream",
                &up.addr.to_string(),
                "--access-log",
                &log_s,
            ],
            workers,
            &[],
        );
        assert_eq!(body_via(port), "a");
        assert_eventually("the first record is written", || {
            !access_lines(&log_s).is_empty()
        });
        std::fs::rename(&log, &moved).unwrap();
        p.signal(libc::SIGUSR1);
        // Each worker that reopened has made the file anew: requests until
        // a record shows up in it (bounded).
        assert_eventually("records reach the reopened file", || {
            body_via(port) == "a" && !access_lines(&log_s).is_empty()
        });
        assert!(!access_lines(moved.to_str().unwrap()).is_empty());
        stop_cleanly(p);
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&moved);
    }
}

// --- reload (deliverable 3) -----------------------------------------------------------

#[test]
fn sighup_reloads_the_config_file_and_keeps_the_running_one_if_invalid() {
    let (a, b) = (answering("a"), answering("b"));
    for workers in ["1", "2"] {
        let port = free_port();
        let path = temp_path(&format!("reload-{workers}.toml"));
        std::fs::write(&path, config_text(port, &a)).unwrap();
        let p = start_ready(&["--config", path.to_str().unwrap()], workers, &[]);
        assert_eq!(body_via(port), "a");

        std::fs::write(&path, config_text(port, &b)).unwrap();
        p.signal(libc::SIGHUP);
        p.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
        // The old loop's listener stays open 1.5 s into its drain (for
        // connections the kernel still held under TCP_DEFER_ACCEPT): until
        // its drain ends a new connection may still reach the old
        // configuration. Every old worker drains on its own: wait for
        // each one's line, not the first.
        let n: usize = workers.parse().unwrap();
        let all_drained = wait_until(STARTUP, || p.count(|l| l.contains("drained")) >= n);
        assert!(all_drained, "not every old worker drained: {}", p.log());
        for _ in 0..10 {
            assert_eq!(body_via(port), "b", "--workers {workers}");
        }

        std::fs::write(&path, "listen = \"127.0.0.1:1\"\nfrobnicate = 1\n").unwrap();
        p.signal(libc::SIGHUP);
        let line = p.wait_line(WAIT, |l| l.contains("reload failed"));
        assert!(line.contains("frobnicate"), "{line}");
        for _ in 0..5 {
            assert_eq!(body_via(port), "b");
        }
        stop_cleanly(p);
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn reloads_leave_no_descriptor_behind() {
    let a = answering("a");
    let port = free_port();
    let path = temp_path("reload-fds.toml");
    std::fs::write(&path, config_text(port, &a)).unwrap();
    let p = start_ready(&["--config", path.to_str().unwrap()], "1", &[]);
    assert_eq!(body_via(port), "a");
    let fds = || std::fs::read_dir(format!("/proc/{}/fd", p.pid())).map_or(0, |d| d.count());
    let before = fds();
    for i in 1..=5 {
        p.signal(libc::SIGHUP);
        // The loop this reload drained has ended (each drain logs once).
        assert_eventually("the old loop drained", || {
            p.count(|l| l.contains("SIGHUP: reloaded")) == i
                && p.count(|l| l.contains("drained")) >= i
        });
        assert_eq!(body_via(port), "a");
    }
    // The newest loop's handle of the last drained one goes at the next
    // reload: at most one loop's descriptors beyond the start.
    assert_eventually("descriptors back near the start", || fds() <= before + 1);
    stop_cleanly(p);
    let _ = std::fs::remove_file(&path);
}

// --- pid file ---------------------------------------------------------------------------

#[test]
fn pid_file_holds_the_pid_to_signal_once_listening_and_goes_at_exit() {
    let up = answering("a");
    for workers in ["1", "2"] {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let path = temp_path(&format!("pid-{workers}"));
        let file = path.to_str().unwrap();
        let p = start_ready(
            &[
                "--listen",
                &listen,
                "--upstream",
                &up.addr.to_string(),
                "--pid-file",
                file,
            ],
            workers,
            &[],
        );
        let mut text = String::new();
        assert_eventually("pid file written", || {
            text = std::fs::read_to_string(&path).unwrap_or_default();
            text.ends_with('\n')
        });
        assert_eq!(text, format!("{}\n", p.pid()), "the supervisor's pid");
        assert_eq!(body_via(port), "a");
        stop_cleanly(p);
        assert!(!path.exists(), "pid file left behind");
    }
}

// --- systemd readiness (deliverable 6) ------------------------------------------------

/// The next datagram on `sock` (within 5 s), as text.
#[track_caller]
fn next_message(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 1024];
    let n = sock.recv(&mut buf).expect("a notification within 5 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn notify_socket_gets_ready_when_listening_reloading_and_stopping() {
    let up = answering("a");
    for workers in ["1", "2"] {
        let sock_path = temp_path(&format!("notify-{workers}"));
        let _ = std::fs::remove_file(&sock_path);
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let port = free_port();
        let path = temp_path(&format!("notify-{workers}.toml"));
        std::fs::write(&path, config_text(port, &up)).unwrap();
        let args = ["--config", path.to_str().unwrap(), "--workers", workers];
        let mut p =
            SluiceProcess::start_env(&args, &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())]);
        let ready = next_message(&sock);
        assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
        assert!(
            !ready.contains("X_SLUICE_PID"),
            "a worker's message leaked: {ready:?}"
        );
        // Ready means serving (every worker, for a supervisor).
        assert_eq!(body_via(port), "a");
        for line in p.log().lines().filter(|l| l.contains("started pid=")) {
            let pid = pid_after(line, "pid=");
            p.adopt(pid);
        }

        p.signal(libc::SIGHUP);
        let reloading = next_message(&sock);
        assert!(reloading.contains("RELOADING=1\n"), "{reloading:?}");
        assert!(reloading.contains("MONOTONIC_USEC="), "{reloading:?}");
        let again = next_message(&sock);
        assert!(again.lines().any(|l| l == "READY=1"), "{again:?}");
        assert!(again.contains("STATUS=reloaded"), "{again:?}");

        p.signal(libc::SIGTERM);
        assert_eq!(next_message(&sock), "STOPPING=1\n");
        let status = p.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status:?}\n{}", p.log());
        let _ = std::fs::remove_file(&sock_path);
        let _ = std::fs::remove_file(&path);
    }
}

/// The numbers in `text` after `key` (`TimeoutStopSec=45` → 45).
fn number_after(text: &str, key: &str) -> u64 {
    let rest = &text[text.find(key).unwrap_or_else(|| panic!("{key} missing")) + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key}"))
}

#[test]
fn packaging_files_agree_with_the_binary() {
    let drain = Config::default().drain_timeout.as_secs();
    let unit = repo_file("packaging/sluice.service");
    for line in [
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "KillSignal=SIGTERM",
        "NoNewPrivileges=yes",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "{line} missing in the unit"
        );
    }
    assert!(number_after(&unit, "TimeoutStopSec=") > drain);
    // Writable places under ProtectSystem=strict, and a reload that fails
    // visibly on an invalid file: the check runs before the SIGHUP.
    for line in ["LogsDirectory=sluice", "RuntimeDirectory=sluice"] {
        assert!(
            unit.lines().any(|l| l == line),
            "{line} missing in the unit"
        );
    }
    let reloads: Vec<&str> = unit
        .lines()
        .filter(|l| l.starts_with("ExecReload="))
        .collect();
    assert_eq!(reloads.len(), 2, "{reloads:?}");
    assert!(
        reloads[0].contains("--check-config /etc/sluice/sluice.toml"),
        "{reloads:?}"
    );
    assert_eq!(reloads[1], "ExecReload=/bin/kill -HUP $MAINPID");

    let docker = repo_file("Dockerfile");
    assert!(docker.lines().any(|l| l == "STOPSIGNAL SIGTERM"));
    assert!(
        docker
            .lines()
            .any(|l| l.starts_with("USER ") && !l.contains("root"))
    );

    let deploy = repo_file("deploy/kubernetes/deployment.yaml");
    let config = repo_file("deploy/kubernetes/configmap.yaml");
    let grace = number_after(&deploy, "terminationGracePeriodSeconds: ");
    let drain_in_map = number_after(&config, "drain_timeout = \"");
    assert!(
        grace > drain_in_map,
        "grace {grace} s ≤ drain {drain_in_map} s"
    );
    for probe in ["path: /healthz", "path: /readyz"] {
        assert!(deploy.contains(probe), "{probe} missing");
    }
    // The preStop turns /readyz 503 (SIGUSR2) before it starts the drain.
    let usr2 = deploy.find("kill -USR2 1").expect("preStop sends SIGUSR2");
    let term = deploy.find("kill -TERM 1").expect("preStop sends SIGTERM");
    assert!(usr2 < term, "SIGUSR2 before SIGTERM");
    // The ConfigMap's TOML is a valid configuration.
    let toml_text: String = config
        .lines()
        .skip_while(|l| !l.contains("sluice.toml: |"))
        .skip(1)
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let f = TempFile::new(&toml_text);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}\n{toml_text}", o.stderr);
}

// --- values (seen problem 6) ---------------------------------------------------------------

#[test]
fn invalid_values_exit_2_naming_the_flag() {
    for (args, needle) in [
        (vec!["--workers", "0"], "--workers: \"0\""),
        (vec!["--keepalive-timeout", "10"], "a unit is required"),
        (vec!["--upstream", "127.0.0.1:0"], "port 0"),
        (
            vec!["--admin", "127.0.0.1:1", "--admin", "127.0.0.1:2"],
            "--admin: given more than once",
        ),
        // `--listen` is repeatable; one address twice is not.
        (
            vec!["--listen", "127.0.0.1:18090", "--listen", "127.0.0.1:18090"],
            "127.0.0.1:18090 overlaps 127.0.0.1:18090",
        ),
    ] {
        let o = run_sluice(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
    }
}

#[test]
fn more_workers_than_cpus_is_warned() {
    let up = answering("a");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = (cpus + 1).to_string();
    let listen = format!("127.0.0.1:{}", free_port());
    let p = start_ready(
        &["--listen", &listen, "--upstream", &up.addr.to_string()],
        &n,
        &[],
    );
    let line = p.wait_line(WAIT, |l| l.contains("workers on the"));
    assert!(
        line.contains(&format!("workers: {n} workers on the {cpus} CPU")),
        "{line}"
    );
    stop_cleanly(p);
}

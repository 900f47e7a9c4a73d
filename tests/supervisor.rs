//! The supervisor of `--workers N` and the process's own files, with the
//! built binary: workers that cannot start end the start with their exit
//! status (2 for an invalid configuration, 1 otherwise) instead of being
//! restarted forever; `--check-config` checks the access log and pid file
//! paths; the pid file of a zero-downtime swap survives the old process;
//! a reload whose executable is gone fails at once and the workers stay.
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops (workers of a supervisor too).

mod util;

use std::path::PathBuf;
use std::time::Duration;

use util::*;

/// A path in the temporary directory, unique to this test process.
fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-sup-{}-{name}", std::process::id()))
}

/// An upstream whose every answer is `body`.
fn answering(body: &str) -> Upstream {
    Upstream::start(respond_forever(ok_response(body)))
}

/// `--workers 2` with an upstream host that does not resolve: the workers
/// exit 2 before they are ready, and the supervisor stops and exits 2 (the
/// unit's `RestartPreventExitStatus=2`), saying why; an access log that
/// cannot be opened: exit 1. As the single process does.
#[test]
fn workers_that_cannot_start_end_the_start_with_their_exit_status() {
    let dir = temp_path("no-such-dir");
    let log = dir.join("access.log");
    let cases: [(&[&str], i32, &str); 2] = [
        (
            &["--upstream", "no-such-host.invalid:80"],
            2,
            "does not resolve",
        ),
        (
            &[
                "--upstream",
                "127.0.0.1:1",
                "--access-log",
                log.to_str().unwrap(),
            ],
            1,
            "access log",
        ),
    ];
    for (extra, code, why) in cases {
        for workers in ["1", "2"] {
            let mut args = vec!["--listen", "127.0.0.1:0", "--workers", workers];
            args.extend_from_slice(extra);
            let out = run_sluice(&args);
            assert_eq!(out.status.code(), Some(code), "{args:?}\n{}", out.stderr);
            assert!(out.stderr.contains(why), "{args:?}\n{}", out.stderr);
            if workers == "2" {
                assert!(
                    out.stderr.contains("exited before it was ready")
                        && out.stderr.contains(&format!("exits with status {code}"))
                        && !out.stderr.contains("restarting"),
                    "{}",
                    out.stderr
                );
                assert!(!out.stderr.contains("all workers ready"), "{}", out.stderr);
                // Each worker's error is a line of its own.
                let errors = out.stderr.matches("sluice: cannot start").count();
                let lines = out
                    .stderr
                    .lines()
                    .filter(|l| l.starts_with("sluice: cannot start"))
                    .count();
                assert_eq!(errors, lines, "{}", out.stderr);
            }
        }
    }
}

/// `--check-config` (the unit's `ExecStartPre`) fails, naming the path, for
/// an access log or pid file the start could not write; for writable ones
/// it passes, leaves no file behind and does not truncate an existing log.
#[test]
fn check_config_checks_the_access_log_and_pid_file_paths() {
    let missing = temp_path("missing-dir");
    for (flag, path) in [
        ("--access-log", missing.join("a.log")),
        ("--pid-file", missing.join("sluice.pid")),
    ] {
        let p = path.to_str().unwrap();
        let out = run_sluice(&["--check-config", "/dev/null", flag, p]);
        assert_eq!(out.status.code(), Some(1), "{flag}\n{}", out.stderr);
        assert!(out.stderr.contains(p), "{}", out.stderr);
    }

    let log = temp_path("kept.log");
    std::fs::write(&log, "earlier record\n").unwrap();
    let new_log = temp_path("new.log");
    let pid = temp_path("check.pid");
    let out = run_sluice(&[
        "--check-config",
        "/dev/null",
        "--access-log",
        new_log.to_str().unwrap(),
        "--pid-file",
        pid.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    let out = run_sluice(&[
        "--check-config",
        "/dev/null",
        "--access-log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(!new_log.exists(), "the check left the access log file");
    assert!(!pid.exists(), "the check left the pid file");
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&format!("sluice-sup-{}-check.", std::process::id()))
        })
        .count();
    assert_eq!(leftovers, 0, "a temporary pid file was left");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "earlier record\n",
        "the check truncated the access log"
    );
    let _ = std::fs::remove_file(&log);
}

/// The zero-downtime swap (docs/operations.md) with one `--pid-file`: the new process
/// (`--takeover`) writes its pid; the old one's exit leaves the file (it
/// holds the new pid, which logrotate's `kill -USR1 $(cat …)` needs); the
/// new one's exit removes it.
#[test]
fn the_old_process_of_a_swap_leaves_the_new_ones_pid_file() {
    let up = answering("a");
    let listen = loopback(free_port()).to_string();
    let pid = temp_path("swap.pid");
    let file = pid.to_str().unwrap();
    let args = [
        "--listen",
        &listen,
        "--upstream",
        &up.addr.to_string(),
        "--pid-file",
        file,
    ];
    let mut old = SluiceProcess::start_listening(&args);
    let mut with_takeover = args.to_vec();
    with_takeover.push("--takeover");
    let mut new = SluiceProcess::start_listening(&with_takeover);
    let holds = |p: &SluiceProcess| {
        std::fs::read_to_string(&pid).unwrap_or_default() == format!("{}\n", p.pid())
    };
    assert_eventually("the new pid in the file", || holds(&new));

    old.signal(libc::SIGTERM);
    assert!(
        old.wait_exit(Duration::from_secs(10)).success(),
        "{}",
        old.log()
    );
    assert!(holds(&new), "the old process's exit took the new pid file");

    new.signal(libc::SIGTERM);
    assert!(
        new.wait_exit(Duration::from_secs(10)).success(),
        "{}",
        new.log()
    );
    assert!(!pid.exists(), "pid file left behind");
}

/// A package upgrade removed the executable: a SIGHUP to `--workers 2`
/// fails the reload at once, with an `ERROR` naming the path, instead of
/// retrying; the running workers stay and serve.
#[test]
fn a_reload_whose_executable_is_gone_fails_and_the_workers_stay() {
    let up = answering("a");
    // A hard link next to the binary: removing it leaves the binary.
    let exe = PathBuf::from(format!("{SLUICE}-reload-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&exe);
    std::fs::hard_link(SLUICE, &exe).unwrap();
    let exe_s = exe.to_str().unwrap();
    let port = free_port();
    let listen = loopback(port).to_string();
    let mut p = SluiceProcess::start_exe(
        exe_s,
        &[
            "--listen",
            &listen,
            "--upstream",
            &up.addr.to_string(),
            "--workers",
            "2",
        ],
    );
    p.wait_line(STARTUP, |l| l.contains("all workers ready"));
    for line in p.log().lines().filter(|l| l.contains("started pid=")) {
        p.adopt(pid_after(line, "pid="));
    }
    std::fs::remove_file(&exe).unwrap();

    p.signal(libc::SIGHUP);
    let failed = p.wait_line(WAIT, |l| l.contains("reload failed"));
    assert!(
        failed.contains("ERROR") && failed.contains(exe_s),
        "{failed}"
    );
    assert!(failed.contains("the running workers stay"), "{failed}");
    assert_eq!(
        p.count(|l| l.contains("cannot start worker")),
        1,
        "{}",
        p.log()
    );
    serves_then_stops(&mut p, port);
}

#[test]
fn a_reload_whose_admin_token_file_is_gone_fails_with_its_reason_and_the_workers_stay() {
    // The new workers died one by one and the supervisor said only
    // "exited before it was ready" (found by a break-it pass).
    let up = answering("a");
    let token = TempFile::new("s3cret\n");
    let (port, admin) = (free_port(), free_port());
    let config = |token: &str| {
        format!(
            "listen = \"127.0.0.1:{port}\"\nadmin = \"127.0.0.1:{admin}\"\nworkers = 2\n\
             admin_token_file = \"{token}\"\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n",
            up.addr
        )
    };
    let cfg = TempFile::new(&config(token.path()));
    let mut p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("all workers ready"));
    p.adopt_workers();
    let gone = format!("{}.gone", token.path());
    std::fs::write(cfg.path(), config(&gone)).unwrap();
    p.signal(libc::SIGHUP);
    let failed = p.wait_line(WAIT, |l| l.contains("reload failed"));
    assert!(
        failed.contains(&format!("admin_token_file {gone}")),
        "{failed}"
    );
    serves_then_stops(&mut p, port);
}

/// The workers still answer `/` (the upstream's `a`), then SIGTERM ends
/// the supervisor with success.
#[track_caller]
fn serves_then_stops(p: &mut SluiceProcess, port: u16) {
    let (status, body) = http_get(loopback(port), "/");
    assert_eq!((status, &body[..]), (200, &b"a"[..]));
    p.signal(libc::SIGTERM);
    assert!(
        p.wait_exit(Duration::from_secs(10)).success(),
        "{}",
        p.log()
    );
}

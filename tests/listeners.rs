//! Several listen addresses (issue 23 item 2): `--listen` and
//! `--listen-tls` repeated (`listen` / `listen_tls` arrays in the file),
//! in one loop and under `--workers 2`; a reload keeps them and refuses a
//! change of the set; `--takeover` and the drain apply to every one; the
//! admin address may overlap none.
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops.

mod util;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use sluice::{DEFAULT_GROUP, Forward, GroupSpec};
use util::*;

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// An in-process proxy on two plain and two TLS addresses (port 0 each).
fn start_four(upstream: SocketAddr, cert: &TestCert, drain: Duration) -> (Server, ServerHandle) {
    let config = Config {
        listen: vec![any_port(), any_port()],
        listen_tls: vec![any_port(), any_port()],
        certificate: vec![cert.spec()],
        access_log: sluice::AccessLogTarget::Off,
        drain_timeout: drain,
        upstream: vec![GroupSpec::new(DEFAULT_GROUP, vec![upstream.into()])],
        ..Config::default()
    };
    let server = Server::bind(config, Forward::new(upstream)).expect("Server::bind");
    let handle = server.handle();
    (server, handle)
}

#[test]
fn two_plain_and_two_tls_addresses_in_one_loop_each_serve_with_its_scheme() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("four");
    let (server, handle) = start_four(upstream.addr, &cert, Duration::from_secs(5));
    let (plain, tls) = (server.plain_addrs(), server.tls_addrs());
    assert_eq!((plain.len(), tls.len()), (2, 2));
    let mut ports: Vec<u16> = plain.iter().chain(&tls).map(|a| a.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 4, "four ports: {plain:?} {tls:?}");
    assert_eq!(server.local_addr(), plain[0]);
    assert_eq!(server.tls_addr(), Some(tls[0]));
    thread::spawn(move || server.run());

    let cfg = cert.client();
    for round in 0..2 {
        for (i, a) in plain.iter().enumerate() {
            let target = format!("/plain{i}-{round}");
            let resp = Client::connect(*a).round_trip(get_close(&target));
            assert_eq!((resp.status, resp.body), (200, target.into_bytes()), "{a}");
        }
        for (i, a) in tls.iter().enumerate() {
            let target = format!("/tls{i}-{round}");
            assert_eq!(
                tls_get(*a, &cfg, &target),
                (200, target.into_bytes()),
                "{a}"
            );
        }
    }
    // Each listener says what it is: X-Forwarded-Proto upstream, and the
    // plaintext 400 naming HTTPS on every TLS port.
    for r in upstream.wait_requests(8) {
        let want = if r.target.starts_with("/tls") {
            "https"
        } else {
            "http"
        };
        assert_eq!(r.header("X-Forwarded-Proto"), Some(want), "{}", r.target);
    }
    for a in &tls {
        let resp = Client::connect(*a).round_trip(get_close("/"));
        assert_eq!(resp.status, 400, "plain HTTP on TLS port {a}");
        assert!(resp.body_str().contains("HTTPS"), "{}", resp.body_str());
    }
    handle.shutdown();
}

/// The drain keeps every listener open a moment, without
/// `TCP_DEFER_ACCEPT`, for the connections the kernel holds until their
/// first bytes: one silent connection on each of the four addresses is
/// served, not reset (ARCHITECTURE.md §12).
#[test]
fn the_drain_serves_a_silent_connection_on_every_listener() {
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let cert = TestCert::new("fourdrain");
    let (server, handle) = start_four(upstream.addr, &cert, Duration::from_secs(10));
    let (plain, tls) = (server.plain_addrs(), server.tls_addrs());
    thread::spawn(move || server.run());
    let silent_plain: Vec<Client> = plain.iter().map(|a| Client::connect(*a)).collect();
    let silent_tls: Vec<TcpStream> = tls.iter().map(|a| TcpStream::connect(a).unwrap()).collect();
    handle.drain();
    thread::sleep(Duration::from_millis(300)); // pacing: the drain has begun
    for mut c in silent_plain {
        let resp = c.round_trip(get("/1"));
        assert_eq!((resp.status, &resp.body[..]), (200, &b"hello"[..]));
        assert_eq!(resp.header("connection"), Some("close"));
    }
    let cfg = cert.client();
    for sock in silent_tls {
        let mut s = tls_over(sock, &cfg);
        s.write_all(b"GET /1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let (status, head, body) = read_length_response(&mut s);
        assert_eq!((status, &body[..]), (200, &b"hello"[..]), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{head}"
        );
    }
}

/// The config file of [`reload_keeps_every_listener_and_refuses_a_changed_set`].
fn config_text(plain: &[u16], tls: &[u16], upstream: SocketAddr, cert: &TestCert) -> String {
    let list = |ports: &[u16]| {
        ports
            .iter()
            .map(|p| format!("\"127.0.0.1:{p}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "listen = [{}]\nlisten_tls = [{}]\nupstream = \"{upstream}\"\ndrain_timeout = \"5s\"\n{}",
        list(plain),
        list(tls),
        cert.toml()
    )
}

/// A GET on each port: plain on `plain`, TLS on `tls`.
#[track_caller]
fn all_answer(plain: &[u16], tls: &[u16], cfg: &std::sync::Arc<rustls::ClientConfig>, tag: &str) {
    for p in plain {
        let resp = Client::connect(loopback(*p)).round_trip(get_close("/p"));
        assert_eq!(resp.status, 200, "plain :{p} {tag}");
    }
    for p in tls {
        assert_eq!(tls_get(loopback(*p), cfg, "/t").0, 200, "TLS :{p} {tag}");
    }
}

#[test]
fn reload_keeps_every_listener_and_refuses_a_changed_set() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("fourreload");
    let cfg = cert.client();
    for workers in ["1", "2"] {
        let plain = [free_port(), free_port()];
        let tls = [free_port(), free_port()];
        let file = TempFile::new(&config_text(&plain, &tls, upstream.addr, &cert));
        let mut p = SluiceProcess::start(&["--config", file.path(), "--workers", workers]);
        if workers == "1" {
            p.wait_line(STARTUP, |l| l.contains("listening on"));
        } else {
            let line = p.wait_line(STARTUP, |l| l.contains("all workers ready on"));
            let want = format!(
                "127.0.0.1:{}, 127.0.0.1:{} and TLS 127.0.0.1:{}, 127.0.0.1:{}",
                plain[0], plain[1], tls[0], tls[1]
            );
            assert!(line.contains(&want), "{line}");
            for line in p.log().lines().filter(|l| l.contains("started pid=")) {
                p.adopt(pid_after(line, "pid="));
            }
            // Each worker listens on all four.
            for port in tls {
                let n = p.count(|l| l.contains(&format!("listening for TLS on 127.0.0.1:{port}")));
                assert_eq!(n, 2, "{}", p.log());
            }
            for port in plain {
                let n = p.count(|l| l.contains(&format!("listening on 127.0.0.1:{port}")));
                assert_eq!(n, 2, "{}", p.log());
            }
        }
        all_answer(&plain, &tls, &cfg, &format!("--workers {workers}"));

        // One plain address less: refused, all four still served.
        std::fs::write(
            file.path(),
            config_text(&plain[..1], &tls, upstream.addr, &cert),
        )
        .unwrap();
        p.signal(libc::SIGHUP);
        let line = p.wait_line(WAIT, |l| l.contains("reload failed"));
        assert!(
            line.contains("the listeners cannot change on reload (listen ["),
            "{line}"
        );
        assert!(
            !line.contains("listen_tls"),
            "only the list that changed: {line}"
        );
        // A TLS address less: refused too.
        std::fs::write(
            file.path(),
            config_text(&plain, &tls[1..], upstream.addr, &cert),
        )
        .unwrap();
        p.signal(libc::SIGHUP);
        assert!(
            wait_until(WAIT, || p.count(|l| l.contains("reload failed")) == 2),
            "{}",
            p.log()
        );
        assert!(
            p.count(|l| l.contains("reload failed") && l.contains("(listen_tls [")) == 1,
            "the TLS list named: {}",
            p.log()
        );
        all_answer(&plain, &tls, &cfg, "after the refused reloads");

        // The same set: reloaded; the new loop (or generation) serves all
        // four once the old one drained.
        std::fs::write(file.path(), config_text(&plain, &tls, upstream.addr, &cert)).unwrap();
        p.signal(libc::SIGHUP);
        p.wait_reloaded_and_drained(workers.parse().unwrap());
        all_answer(&plain, &tls, &cfg, "after the reload");
        p.signal(libc::SIGTERM);
        let status = p.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status:?}\n{}", p.log());
    }
}

/// Without `--takeover` a second process is refused on the first address
/// already taken (whichever of its listeners it is); with it, it shares
/// every one of them.
#[test]
fn takeover_applies_to_every_listener_and_a_taken_second_address_is_refused() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let up = upstream.addr.to_string();
    let (a, b, c) = (free_port(), free_port(), free_port());
    let (la, lb, lc) = (
        format!("127.0.0.1:{a}"),
        format!("127.0.0.1:{b}"),
        format!("127.0.0.1:{c}"),
    );
    let first =
        SluiceProcess::start_listening(&["--listen", &la, "--listen", &lb, "--upstream", &up]);
    assert!(
        wait_until(STARTUP, || first.count(|l| l.contains("listening on")) == 2),
        "{}",
        first.log()
    );
    let refused = run_sluice(&["--listen", &lc, "--listen", &lb, "--upstream", &up]);
    assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!("bind() to {lb} failed")),
        "{}",
        refused.stderr
    );
    let second = SluiceProcess::start_listening(&[
        "--listen",
        &la,
        "--listen",
        &lb,
        "--upstream",
        &up,
        "--takeover",
    ]);
    for l in [&la, &lb] {
        let line = format!("listening on {l}");
        assert!(
            wait_until(STARTUP, || second.count(|x| x.contains(&line)) == 1),
            "{}",
            second.log()
        );
    }
    for p in [a, b] {
        let resp = Client::connect(loopback(p)).round_trip(get_close("/"));
        assert_eq!(resp.status, 200);
    }
    drop(first);
    // The first process is gone: the second one alone answers on both.
    for p in [a, b] {
        let resp = Client::connect(loopback(p)).round_trip(get_close("/"));
        assert_eq!(resp.status, 200);
    }
}

#[test]
fn the_admin_address_may_overlap_no_listener_and_listeners_none_another() {
    let up = "127.0.0.1:9";
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--listen",
                "127.0.0.1:18081",
                "--listen",
                "127.0.0.1:18082",
                "--admin",
                "127.0.0.1:18082",
            ],
            "overlaps the proxy's own listen address 127.0.0.1:18082",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:18081",
                "--listen-tls",
                "127.0.0.1:18443",
                "--listen-tls",
                "127.0.0.1:18444",
                "--admin",
                "0.0.0.0:18444",
                "--admin-public",
            ],
            "overlaps the proxy's own listen address 127.0.0.1:18444",
        ),
        (
            &["--listen", "127.0.0.1:18081", "--listen", "0.0.0.0:18081"],
            "0.0.0.0:18081 overlaps 127.0.0.1:18081",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:18081",
                "--listen-tls",
                "127.0.0.1:18081",
            ],
            "127.0.0.1:18081 overlaps 127.0.0.1:18081",
        ),
    ];
    let cert = TestCert::new("overlap");
    let (c, k) = (cert.cert_path(), cert.key_path());
    let empty = TempFile::new("");
    for (args, want) in cases {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--upstream", up, "--tls-cert", &c, "--tls-key", &k]);
        all.extend_from_slice(&["--check-config", empty.path()]);
        let out = run_sluice(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
    // Several of each, none overlapping: the check passes and prints
    // them as arrays.
    let out = run_sluice(&[
        "--listen",
        "127.0.0.1:18081",
        "--listen",
        "127.0.0.1:18082",
        "--listen-tls",
        "127.0.0.1:18443",
        "--listen-tls",
        "127.0.0.1:18444",
        "--upstream",
        up,
        "--tls-cert",
        &c,
        "--tls-key",
        &k,
        "--check-config",
        empty.path(),
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("listen = [\"127.0.0.1:18081\", \"127.0.0.1:18082\"]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("listen_tls = [\"127.0.0.1:18443\", \"127.0.0.1:18444\"]"),
        "{}",
        out.stdout
    );
}

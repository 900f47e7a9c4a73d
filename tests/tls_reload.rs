//! Certificate reload (issue 23 item 6), on the built binary: SIGHUP
//! re-reads every certificate and key from the same paths (certbot's
//! renewal writes new files there and its deploy hook reloads); new
//! handshakes get the new certificate; a session open across the reload
//! keeps its certificate and its request in flight is answered; a broken
//! new key refuses the reload (the error names the file) and the last
//! good certificate stays; under a load of new connections the reload
//! fails no request, and every full handshake begun after the old side
//! drained gets the new certificate. Single process (`--workers 1`: a
//! successor loop in the same process) and a supervisor with two workers.
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops.

mod util;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use util::*;

/// A new certificate for `localhost` installed in `dir` (`cert.pem`,
/// `key.pem`, over what was there, as a renewal writes them); its DER.
fn write_cert(dir: &Path) -> Vec<u8> {
    let cert = TestCert::new("renewal");
    install(&cert, dir);
    cert.der.clone()
}

fn connect(port: u16, cfg: &Arc<rustls::ClientConfig>) -> TlsStream {
    tls_connect(loopback(port), cfg)
}

/// Sends `GET target` on `s` and reads the answer: (status, body).
fn get_on(s: &mut TlsStream, target: &str) -> (u16, Vec<u8>) {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    read_answer(s)
}

/// One response with a `Content-Length` body: (status, body).
fn read_answer(s: &mut TlsStream) -> (u16, Vec<u8>) {
    let (status, _, body) = read_length_response(s);
    (status, body)
}

/// The leaf a new connection to `port` is served, after one request.
fn served_to_new(port: u16, cfg: &Arc<rustls::ClientConfig>) -> Vec<u8> {
    let mut s = connect(port, cfg);
    assert_eq!(get_on(&mut s, "/new").0, 200);
    served_leaf(&s)
}

fn start_ready(config: &Path, workers: &str) -> SluiceProcess {
    let path = config.to_str().unwrap();
    let mut p = SluiceProcess::start(&["--config", path, "--workers", workers]);
    if workers == "1" {
        p.wait_line(STARTUP, |l| l.contains("listening for TLS on"));
    } else {
        p.wait_line(STARTUP, |l| l.contains("all workers ready"));
        for line in p.log().lines().filter(|l| l.contains("started pid=")) {
            let pid = pid_after(line, "pid=");
            p.adopt(pid);
        }
    }
    p
}

#[test]
fn sighup_serves_the_new_certificate_to_new_handshakes_and_keeps_open_sessions() {
    // `/slow` is answered after 600 ms: a request in flight across the
    // reload.
    let upstream = Upstream::start(serve(|req| {
        if req.target == "/slow" {
            std::thread::sleep(Duration::from_millis(600));
        }
        ok_response(&req.target)
    }));
    for workers in ["1", "2"] {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("sluice-tlsreload-{}-{workers}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let old = write_cert(&dir);
        let (plain, tls) = (free_port(), free_port());
        let config = dir.join("sluice.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{plain}\"\nlisten_tls = \"127.0.0.1:{tls}\"\n\
                 upstream = \"{}\"\ndrain_timeout = \"5s\"\n\
                 [[certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
                upstream.addr,
                dir.join("cert.pem").display(),
                dir.join("key.pem").display()
            ),
        )
        .unwrap();
        let p = start_ready(&config, workers);
        let before = trusting(&[&old]);
        let mut open = connect(tls, &before);
        assert_eq!(get_on(&mut open, "/1"), (200, b"/1".to_vec()));
        assert_eq!(served_leaf(&open), old);

        // Renewal: new files at the same paths, then the reload, with a
        // request in flight on the open session.
        let new = write_cert(&dir);
        open.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        p.signal(libc::SIGHUP);
        // Old loops keep their listener a moment into their drain (for
        // connections the kernel held under TCP_DEFER_ACCEPT): wait for
        // each to drain (the request in flight answered first), then
        // every new handshake is the new certificate's.
        p.wait_reloaded_and_drained(workers.parse().unwrap());
        assert_eq!(
            read_answer(&mut open),
            (200, b"/slow".to_vec()),
            "--workers {workers}"
        );
        assert_eq!(
            served_leaf(&open),
            old,
            "the open session keeps its certificate"
        );
        let both = trusting(&[&old, &new]);
        for _ in 0..5 {
            assert_eq!(served_to_new(tls, &both), new, "--workers {workers}");
        }

        // A broken key: the reload is refused, naming the file; the last
        // good certificate stays.
        std::fs::write(dir.join("key.pem"), "-----BEGIN PRIVATE KEY-----\nbroken\n").unwrap();
        p.signal(libc::SIGHUP);
        let line = p.wait_line(WAIT, |l| l.contains("reload failed"));
        assert!(line.contains("key.pem"), "{line}");
        for _ in 0..3 {
            assert_eq!(served_to_new(tls, &both), new);
        }
        drop(open);
        let mut p = p;
        p.signal(libc::SIGTERM);
        let status = p.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status:?}\n{}", p.log());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn tls_alone_on_port_0_is_one_port_for_every_worker_and_their_tickets_resume_on_any() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let dir: PathBuf = std::env::temp_dir().join(format!("sluice-tlsonly-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cert = write_cert(&dir);
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "listen_tls = \"127.0.0.1:0\"\nupstream = \"{}\"\n\
             [[certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
            upstream.addr,
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
        ),
    )
    .unwrap();
    let mut p = start_ready(&config, "2");
    let line = p.wait_line(STARTUP, |l| l.contains("all workers ready on"));
    let port: u16 = line
        .rsplit(':')
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(line.contains("on TLS 127.0.0.1:"), "TLS only: {line}");
    // One client configuration, so one ticket store: every connection
    // after the first offers a ticket, and whichever worker the kernel
    // gives it to takes it.
    let cfg = trusting(&[&cert]);
    let mut resumed = 0;
    for i in 0..12 {
        let mut s = connect(port, &cfg);
        assert_eq!(get_on(&mut s, &format!("/{i}")).0, 200);
        s.conn.send_close_notify();
        let _ = s.flush();
        if s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            resumed += 1;
        }
    }
    assert_eq!(resumed, 11, "every attempt after the first resumed");
    // Both workers served: each logged its TLS listener on the one port.
    let bound = p.count(|l| l.contains(&format!("listening for TLS on 127.0.0.1:{port}")));
    assert_eq!(bound, 2, "{}", p.log());
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", p.log());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Copies `cert`'s files to `cert.pem` and `key.pem` in `live` (over what
/// was there), as a renewal writes them.
fn install(cert: &TestCert, live: &Path) {
    std::fs::copy(cert.cert_path(), live.join("cert.pem")).unwrap();
    std::fs::copy(cert.key_path(), live.join("key.pem")).unwrap();
}

/// What the load of [`a_reload_under_load_fails_no_request_and_new_handshakes_get_the_new_certificate`]
/// saw: requests answered 200, failures (with the first error), and
/// handshakes begun after the reload's drain that got the old certificate.
#[derive(Default)]
struct Load {
    ok: usize,
    failed: usize,
    first_failure: Option<String>,
    old_after_drain: usize,
}

/// New connections, one request each, until `stop` (or 20,000 of them).
fn load(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    old: Vec<u8>,
    drained: Arc<std::sync::atomic::AtomicBool>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Load {
    use std::sync::atomic::Ordering::SeqCst;
    let mut seen = Load::default();
    for i in 0..20_000 {
        if stop.load(SeqCst) {
            break;
        }
        let after_drain = drained.load(SeqCst);
        let target = format!("/load{i}");
        let mut s = connect(port, &cfg);
        let sent = s.write_all(
            format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        let mut all = Vec::new();
        let got = sent.and_then(|_| s.read_to_end(&mut all));
        let answered = all.starts_with(b"HTTP/1.1 200 ") && all.ends_with(target.as_bytes());
        match got {
            Ok(_) if answered => seen.ok += 1,
            other => {
                seen.failed += 1;
                seen.first_failure
                    .get_or_insert(format!("{other:?}: {}", String::from_utf8_lossy(&all)));
            }
        }
        if after_drain && s.conn.peer_certificates().is_some() && served_leaf(&s) == old {
            seen.old_after_drain += 1;
        }
    }
    seen
}

#[test]
fn a_reload_under_load_fails_no_request_and_new_handshakes_get_the_new_certificate() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let (old, new) = (TestCert::new("load-old"), TestCert::new("load-new"));
    let both = trusting(&[&old.der, &new.der]);
    // Full handshakes only: a resumed one shows the certificate of the
    // session it resumes (tickets stay good across a reload).
    let mut full = (*both).clone();
    full.resumption = rustls::client::Resumption::disabled();
    let full = Arc::new(full);
    for workers in ["1", "2"] {
        let live = TestCert::new(&format!("load-live-{workers}"));
        install(&old, &live.dir);
        let tls = free_port();
        let config = TempFile::new(&format!(
            "listen_tls = \"127.0.0.1:{tls}\"\nupstream = \"{}\"\ndrain_timeout = \"5s\"\n{}",
            upstream.addr,
            live.toml()
        ));
        let p = start_ready(Path::new(config.path()), workers);
        let (drained, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let clients: Vec<_> = (0..3)
            .map(|_| {
                let (cfg, old) = (full.clone(), old.der.clone());
                let (drained, stop) = (drained.clone(), stop.clone());
                std::thread::spawn(move || load(tls, cfg, old, drained, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300)); // pacing: the load runs
        install(&new, &live.dir);
        p.signal(libc::SIGHUP);
        p.wait_reloaded_and_drained(workers.parse().unwrap());
        drained.store(true, SeqCst);
        std::thread::sleep(Duration::from_millis(300)); // pacing: load after the drain
        stop.store(true, SeqCst);
        let mut total = Load::default();
        for c in clients {
            let l = c.join().unwrap();
            total.ok += l.ok;
            total.failed += l.failed;
            total.old_after_drain += l.old_after_drain;
            total.first_failure = total.first_failure.or(l.first_failure);
        }
        println!(
            "--workers {workers}: {} requests across the reload",
            total.ok
        );
        assert_eq!(
            total.failed, 0,
            "--workers {workers}: {} ok; first failure: {:?}",
            total.ok, total.first_failure
        );
        assert!(total.ok >= 10, "--workers {workers}: {} requests", total.ok);
        assert_eq!(total.old_after_drain, 0, "--workers {workers}");
        assert_eq!(served_to_new(tls, &both), new.der);
        let mut p = p;
        p.signal(libc::SIGTERM);
        let status = p.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status:?}\n{}", p.log());
    }
}

/// A self-signed certificate for `localhost` whose notAfter is `secs`
/// seconds from now (negative: in the past), written to `dir` as
/// `NAME.pem` and `NAME.key`.
fn cert_ending_in(dir: &Path, name: &str, secs: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let end = u64::try_from(now + secs).unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(end);
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

#[test]
fn a_certificate_ending_within_14_days_or_ended_is_warned_at_start_at_reload_and_in_status() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let live = TestCert::new("expiry");
    cert_ending_in(&live.dir, "soon", 3 * 86_400 + 3_600);
    cert_ending_in(&live.dir, "past", -86_400);
    let (tls, admin) = (free_port(), free_port());
    let certs: String = ["soon", "past"]
        .iter()
        .map(|n| {
            let d = live.dir.display();
            format!("[[certificate]]\ncert = \"{d}/{n}.pem\"\nkey = \"{d}/{n}.key\"\n")
        })
        .collect();
    let config = TempFile::new(&format!(
        "listen_tls = \"127.0.0.1:{tls}\"\nadmin = \"127.0.0.1:{admin}\"\nupstream = \"{}\"\n{certs}",
        upstream.addr
    ));
    let soon =
        |l: &str| l.contains("WARN") && l.contains("soon.pem") && l.contains("expires in 3 days");
    let past = |l: &str| l.contains("WARN") && l.contains("past.pem") && l.contains("has expired");
    // The check says so too, and passes: a warning, not a refusal.
    let o = run_sluice(&["--check-config", config.path()]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(
        o.stderr.contains("warning: config file")
            && o.stderr.contains("certificate[0].cert: certificate")
            && o.stderr.contains("expires in 3 days"),
        "{}",
        o.stderr
    );
    for workers in ["1", "2"] {
        let mut p = start_ready(Path::new(config.path()), workers);
        assert_eq!(
            p.count(soon),
            1,
            "at start, --workers {workers}:\n{}",
            p.log()
        );
        assert_eq!(p.count(past), 1, "{}", p.log());
        let (code, body) = http_get(loopback(admin), "/status");
        assert_eq!(code, 200);
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let warnings: Vec<&str> = status["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["warning"].as_str().unwrap_or("none"))
            .collect();
        assert!(warnings[0].contains("expires in 3 days"), "{status:#}");
        assert!(warnings[1].contains("has expired"), "{status:#}");
        let left = status["certificates"][1]["seconds_left"].as_i64().unwrap();
        assert!(left < 0, "{status:#}");
        p.signal(libc::SIGHUP);
        p.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
        assert_eq!(
            p.count(soon),
            2,
            "at reload, --workers {workers}:\n{}",
            p.log()
        );
        assert_eq!(p.count(past), 2, "{}", p.log());
        p.signal(libc::SIGTERM);
        let status = p.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status:?}\n{}", p.log());
    }
}

//! Certificate reload (issue 23 item 6), on the built binary: SIGHUP
//! re-reads every certificate and key from the same paths (certbot's
//! renewal writes new files there and its deploy hook reloads); new
//! handshakes get the new certificate; a session open across the reload
//! keeps its certificate and its request in flight is answered; a broken
//! new key refuses the reload (the error names the file) and the last
//! good certificate stays. Single process (`--workers 1`: a successor
//! loop in the same process) and a supervisor with two workers.
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use util::*;

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A self-signed P-256 certificate for `localhost` written to `dir`'s
/// `cert.pem` and `key.pem` (over what was there); its DER.
fn write_cert(dir: &Path) -> Vec<u8> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    cert.der().to_vec()
}

/// A client configuration that trusts each of `certs`.
fn trusting(certs: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(rustls::pki_types::CertificateDer::from(c.to_vec()))
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn connect(port: u16, cfg: &Arc<rustls::ClientConfig>) -> TlsStream {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let sock = TcpStream::connect(loopback(port)).unwrap();
    sock.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// Sends `GET target` on `s` and reads the answer: (status, body).
fn get_on(s: &mut TlsStream, target: &str) -> (u16, Vec<u8>) {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    read_answer(s)
}

/// One response with a `Content-Length` body.
fn read_answer(s: &mut TlsStream) -> (u16, Vec<u8>) {
    let (status, _, body) = read_length_response(s);
    (status, body)
}

/// The leaf certificate the server presented on `s`.
fn served(s: &TlsStream) -> Vec<u8> {
    s.conn.peer_certificates().unwrap()[0].as_ref().to_vec()
}

/// The leaf a new connection to `port` is served, after one request.
fn served_to_new(port: u16, cfg: &Arc<rustls::ClientConfig>) -> Vec<u8> {
    let mut s = connect(port, cfg);
    assert_eq!(get_on(&mut s, "/new").0, 200);
    served(&s)
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
        assert_eq!(served(&open), old);

        // Renewal: new files at the same paths, then the reload, with a
        // request in flight on the open session.
        let new = write_cert(&dir);
        open.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        p.signal(libc::SIGHUP);
        p.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
        assert_eq!(
            read_answer(&mut open),
            (200, b"/slow".to_vec()),
            "--workers {workers}"
        );
        assert_eq!(served(&open), old, "the open session keeps its certificate");
        // Old loops keep their listener a moment into their drain (for
        // connections the kernel held under TCP_DEFER_ACCEPT): wait for
        // each to drain, then every new handshake is the new certificate's.
        let n: usize = workers.parse().unwrap();
        assert!(
            wait_until(STARTUP, || p.count(|l| l.contains("drained")) >= n),
            "{}",
            p.log()
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

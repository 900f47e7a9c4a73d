//! TLS to upstreams (issue 23, item 7): a group with `tls = true` is
//! reached through a rustls client session in the loop; the handshake is
//! part of the connect (its failure is a connect failure, so a bad
//! certificate gets 502 after the retry rules); a pooled TLS connection is
//! reused; a record that is not data arriving while it is idle (a TLS 1.3
//! `KeyUpdate`, a `NewSessionTicket`) keeps it pooled, `close_notify` (with
//! or without a FIN) evicts it before any request takes it; a failed
//! verification is a 502 and the error log names the name that did not
//! match. The upstream is a rustls server in the test, on
//! 127.0.0.1:0; certificates are made here (rcgen).

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sluice::{Config, DEFAULT_GROUP, GroupSpec, Server, ServerHandle, Stats};
use util::*;

/// A self-signed certificate for `name` (and the PEM file the proxy
/// trusts it by: `ca()`).
struct Cert(TestCert);

impl Cert {
    fn new(tag: &str, name: &str) -> Cert {
        Cert(TestCert::for_names(tag, &[name]))
    }

    fn ca(&self) -> PathBuf {
        self.0.dir.join("cert.pem")
    }
}

type Session = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// What the test tells an idle upstream session to do.
enum Poke {
    KeyUpdate,
    /// `close_notify`, then the FIN.
    CloseNotify,
    /// `close_notify` alone: the TCP connection stays open.
    CloseNotifyOnly,
}

/// A TLS upstream: answers every request on a session with `200` and the
/// target; counts the sessions it accepted; while a session is idle,
/// obeys a poke.
struct TlsUpstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    pokes: mpsc::Sender<Poke>,
    /// Sessions the proxy ended with `close_notify` (a read of 0 bytes:
    /// rustls says `UnexpectedEof` for a close without it).
    clean_closes: Arc<AtomicUsize>,
}

fn tls_upstream(cert: &Cert) -> TlsUpstream {
    tls_upstream_on("127.0.0.1:0", cert)
}

/// [`tls_upstream`] listening on `bind`.
fn tls_upstream_on(bind: &str, cert: &Cert) -> TlsUpstream {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(cert.0.chain(), cert.0.key())
        .unwrap();
    let cfg = Arc::new(cfg);
    let listener = TcpListener::bind(bind).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<Poke>();
    let rx = Arc::new(Mutex::new(rx));
    let count = accepted.clone();
    let clean_closes = Arc::new(AtomicUsize::new(0));
    let clean = clean_closes.clone();
    thread::spawn(move || {
        for sock in listener.incoming().take(16) {
            let Ok(sock) = sock else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
            let rx = rx.clone();
            let clean = clean.clone();
            thread::spawn(move || {
                if serve(Session::new(conn, sock), rx) {
                    clean.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    TlsUpstream {
        addr,
        accepted,
        pokes: tx,
        clean_closes,
    }
}

/// The response [`serve`] gives to a request for `target`.
fn answer(target: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{target}",
        target.len()
    )
}

/// A TLS 1.3 upstream for one session whose `NewSessionTicket`s arrive
/// only while the proxy's connection idles in the pool. rustls writes a
/// server's tickets when it reads the client's Finished; this server
/// answers the first request (for `first`, known in advance) as half-RTT
/// data right behind its own Finished, before reading anything more, and
/// reads the client's Finished (and that request) only when poked; then
/// it serves on as [`tls_upstream`]'s sessions do. Returns its address,
/// the poke, and the ticket bytes it wrote when poked.
fn ticket_upstream(
    cert: &Cert,
    first: &'static str,
) -> (SocketAddr, mpsc::Sender<Poke>, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(cert.0.chain(), cert.0.key())
        .unwrap();
    cfg.send_half_rtt_data = true;
    cfg.send_tls13_tickets = 2;
    let cfg = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel::<Poke>();
    let written = Arc::new(AtomicUsize::new(0));
    let tickets = written.clone();
    thread::spawn(move || {
        let Ok((mut sock, _)) = listener.accept() else {
            return;
        };
        sock.set_read_timeout(Some(UPSTREAM_TIMEOUT)).unwrap();
        let mut conn = rustls::ServerConnection::new(cfg).unwrap();
        // The ClientHello, then this server's flight and the half-RTT
        // answer.
        while !conn.wants_write() {
            if conn.read_tls(&mut sock).unwrap_or(0) == 0 || conn.process_new_packets().is_err() {
                return;
            }
        }
        conn.writer().write_all(answer(first).as_bytes()).unwrap();
        while conn.wants_write() {
            if conn.write_tls(&mut sock).is_err() {
                return;
            }
        }
        assert!(
            conn.is_handshaking(),
            "the client's Finished is not read yet"
        );
        if rx.recv_timeout(UPSTREAM_TIMEOUT).is_err() {
            return;
        }
        // Poked: the client's Finished and the first request; the tickets
        // go out now, while the proxy's connection is parked.
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if conn.read_tls(&mut sock).unwrap_or(0) == 0 || conn.process_new_packets().is_err() {
                return;
            }
            let mut chunk = [0u8; 4096];
            if let Ok(n) = conn.reader().read(&mut chunk) {
                head.extend_from_slice(&chunk[..n]);
            }
        }
        let mut n = 0;
        while conn.wants_write() {
            match conn.write_tls(&mut sock) {
                Ok(k) => n += k,
                Err(_) => return,
            }
        }
        written.store(n, Ordering::SeqCst);
        serve(Session::new(conn, sock), Arc::new(Mutex::new(rx)));
    });
    (addr, tx, tickets)
}

/// Serves requests (heads only) until the proxy closes; between requests
/// it waits up to 50 ms at a time for a poke. True if the proxy ended the
/// session with `close_notify`.
fn serve(mut s: Session, pokes: Arc<Mutex<mpsc::Receiver<Poke>>>) -> bool {
    let _ = s.sock.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = Vec::new();
    for _ in 0..2000 {
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if let Ok(p) = pokes.lock().unwrap().try_recv() {
                    match p {
                        Poke::KeyUpdate => {
                            let _ = s.conn.refresh_traffic_keys();
                            let _ = s.flush();
                        }
                        Poke::CloseNotify | Poke::CloseNotifyOnly => {
                            s.conn.send_close_notify();
                            let _ = s.flush();
                            if matches!(p, Poke::CloseNotify) {
                                let _ = s.sock.shutdown(std::net::Shutdown::Write);
                            }
                        }
                    }
                }
                continue;
            }
            Err(_) => return false,
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            buf.drain(..end + 4);
            let target = head.split(' ').nth(1).unwrap_or("?").to_string();
            if s.write_all(answer(&target).as_bytes()).is_err() {
                return false;
            }
        }
    }
    false
}

struct Proxy {
    addr: SocketAddr,
    stats: Arc<Stats>,
    handle: ServerHandle,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

fn proxy_to(up: SocketAddr, ca: PathBuf, server_name: &str) -> Proxy {
    proxy_to_group(up, ca, server_name, |_| {})
}

/// [`proxy_to`] with the group changed by `tweak`.
fn proxy_to_group(
    up: SocketAddr,
    ca: PathBuf,
    server_name: &str,
    tweak: impl FnOnce(&mut GroupSpec),
) -> Proxy {
    let mut group = GroupSpec::new(DEFAULT_GROUP, vec![up.into()]);
    group.tls = true;
    group.tls_ca = Some(ca);
    group.tls_server_name = Some(server_name.to_string());
    tweak(&mut group);
    let config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        access_log: sluice::AccessLogTarget::Off,
        upstream: vec![group],
        ..Config::default()
    };
    let server = Server::bind(config, sluice::ByRoutes).expect("Server::bind");
    let p = Proxy {
        addr: server.local_addr(),
        stats: server.stats(),
        handle: server.handle(),
    };
    thread::spawn(move || server.run());
    p
}

#[test]
fn a_tls_group_is_reached_over_tls_and_its_connection_is_pooled() {
    let cert = Cert::new("basic", "api.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to(up.addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    for i in 0..3 {
        let r = c.round_trip(get(&format!("/{i}")));
        assert_eq!(r.status, 200, "{}", preview(&r.head));
        assert_eq!(r.body, format!("/{i}").as_bytes());
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "one TLS session, reused"
    );
    let s = proxy.stats.snapshot();
    assert_eq!((s.upstream_connects, s.upstream_reuses), (1, 2), "{s:?}");
}

#[test]
fn a_certificate_for_another_name_is_a_connect_failure_answered_502() {
    let cert = Cert::new("name", "other.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to(up.addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    let r = c.round_trip(get("/"));
    assert_eq!(r.status, 502, "{}", preview(&r.head));
}

#[test]
fn a_key_update_while_idle_keeps_the_connection_pooled() {
    let cert = Cert::new("ku", "api.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to(up.addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    assert_eq!(c.round_trip(get("/1")).status, 200);
    assert!(wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1));
    up.pokes.send(Poke::KeyUpdate).unwrap();
    // The record arrives while the connection is parked: the proxy reads
    // it through the session (an event on a parked socket) and keeps it.
    thread::sleep(Duration::from_millis(300));
    let s = proxy.stats.snapshot();
    assert_eq!(s.pool_idle, 1, "still pooled: {s:?}");
    assert_eq!(s.pool_evicted_unexpected_data, 0, "{s:?}");
    let r = c.round_trip(get("/2"));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"/2");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1, "the same session");
}

#[test]
fn a_session_ticket_arriving_while_idle_keeps_the_connection_pooled() {
    let cert = Cert::new("ticket", "api.internal");
    let (addr, poke, tickets) = ticket_upstream(&cert, "/1");
    let proxy = proxy_to(addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    let r = c.round_trip(get("/1"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"/1"[..]));
    assert!(wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1));
    poke.send(Poke::KeyUpdate).unwrap();
    assert!(wait_until(WAIT, || tickets.load(Ordering::SeqCst) > 0));
    // The tickets arrive while the connection is parked: the proxy reads
    // them through the session (an event on a parked socket), stores
    // them, and keeps the connection.
    thread::sleep(Duration::from_millis(300));
    let s = proxy.stats.snapshot();
    assert_eq!(s.pool_idle, 1, "still pooled: {s:?}");
    assert_eq!(
        (s.pool_evicted_unexpected_data, s.pool_evicted_peer_closed),
        (0, 0),
        "{s:?}"
    );
    let r = c.round_trip(get("/2"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"/2"[..]));
    let s = proxy.stats.snapshot();
    assert_eq!((s.upstream_connects, s.upstream_reuses), (1, 1), "{s:?}");
}

#[test]
fn close_notify_alone_while_idle_evicts_the_connection_before_any_request_takes_it() {
    let cert = Cert::new("cnonly", "api.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to(up.addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    assert_eq!(c.round_trip(get("/1")).status, 200);
    assert!(wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1));
    // close_notify with no FIN behind it: the TCP connection stays open,
    // the session is over.
    up.pokes.send(Poke::CloseNotifyOnly).unwrap();
    assert!(
        wait_until(WAIT, || proxy.stats.snapshot().pool_evicted_peer_closed
            == 1),
        "{:?}",
        proxy.stats.snapshot()
    );
    assert_eq!(proxy.stats.snapshot().pool_idle, 0);
    let r = c.round_trip(get("/2"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"/2"[..]));
    let s = proxy.stats.snapshot();
    assert_eq!((s.retries, s.status_502), (0, 0), "{s:?}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2, "a new session");
}

#[test]
fn close_notify_while_idle_evicts_the_connection_before_any_request_takes_it() {
    let cert = Cert::new("cn", "api.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to(up.addr, cert.ca(), "api.internal");
    let mut c = Client::connect(proxy.addr);
    assert_eq!(c.round_trip(get("/1")).status, 200);
    assert!(wait_until(WAIT, || proxy.stats.snapshot().pool_idle == 1));
    up.pokes.send(Poke::CloseNotify).unwrap();
    assert!(
        wait_until(WAIT, || proxy.stats.snapshot().pool_evicted_peer_closed
            == 1),
        "{:?}",
        proxy.stats.snapshot()
    );
    // The proxy answers the upstream's close_notify with its own before
    // it closes (RFC 8446 §6.1).
    assert!(
        wait_until(WAIT, || up.clean_closes.load(Ordering::SeqCst) == 1),
        "the upstream saw no close_notify from the proxy"
    );
    let r = c.round_trip(get("/2"));
    assert_eq!(r.status, 200);
    let s = proxy.stats.snapshot();
    assert_eq!((s.retries, s.status_502), (0, 0), "{s:?}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2, "a new session");
}

#[test]
fn health_checks_of_a_tls_group_speak_its_tls() {
    let cert = Cert::new("check", "api.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to_group(up.addr, cert.ca(), "api.internal", checked(50, 1000));
    assert_eventually("two checks", || proxy.stats.snapshot().health_checks >= 2);
    let s = proxy.stats.snapshot();
    assert_eq!(s.health_checks_failed, 0, "{s:?}");
    assert!(
        up.accepted.load(Ordering::SeqCst) >= 2,
        "each check a TLS session"
    );
}

#[test]
fn a_health_check_against_a_certificate_for_another_name_fails() {
    let cert = Cert::new("checkname", "other.internal");
    let up = tls_upstream(&cert);
    let proxy = proxy_to_group(up.addr, cert.ca(), "api.internal", checked(50, 1000));
    assert_eventually("two failed checks", || {
        proxy.stats.snapshot().health_checks_failed >= 2
    });
    let s = proxy.stats.snapshot();
    assert_eq!(s.health_checks, s.health_checks_failed, "{s:?}");
    assert_eq!(s.servers_marked_down, 1, "{s:?}");
}

#[test]
fn each_server_of_a_tls_group_is_verified_by_its_own_name() {
    // Two servers, each with a certificate for its own address only.
    let (one, two) = (
        Cert::new("srv1", "127.0.0.1"),
        Cert::new("srv2", "127.0.0.2"),
    );
    let (up1, up2) = (tls_upstream(&one), tls_upstream_on("127.0.0.2:0", &two));
    let both = one.0.dir.join("both.pem");
    let pem = |c: &Cert| std::fs::read_to_string(c.ca()).unwrap();
    std::fs::write(&both, pem(&one) + &pem(&two)).unwrap();
    let mut group = GroupSpec::new(DEFAULT_GROUP, vec![up1.addr.into(), up2.addr.into()]);
    group.tls = true;
    group.tls_ca = Some(both);
    let config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        access_log: sluice::AccessLogTarget::Off,
        upstream: vec![group],
        ..Config::default()
    };
    let server = Server::bind(config, sluice::ByRoutes).expect("Server::bind");
    let proxy = Proxy {
        addr: server.local_addr(),
        stats: server.stats(),
        handle: server.handle(),
    };
    thread::spawn(move || server.run());
    for i in 0..4 {
        let r = Client::connect(proxy.addr).round_trip(get_close(&format!("/{i}")));
        assert_eq!(r.status, 200, "{}", preview(&r.head));
    }
    let s = proxy.stats.snapshot();
    assert_eq!((s.retries, s.status_502), (0, 0), "{s:?}");
    assert!(up1.accepted.load(Ordering::SeqCst) >= 1);
    assert!(up2.accepted.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_failed_upstream_handshake_is_logged_as_upstream_tls_error() {
    let cert = Cert::new("tlserr", "other.internal");
    let up = tls_upstream(&cert);
    let log = TempFile::new("");
    let mut group = GroupSpec::new(DEFAULT_GROUP, vec![up.addr.into()]);
    group.tls = true;
    group.tls_ca = Some(cert.ca());
    group.tls_server_name = Some("api.internal".to_string());
    let config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        access_log: sluice::AccessLogTarget::File(log.path().into()),
        access_log_format: sluice::AccessLogFormat::Json,
        upstream: vec![group],
        ..Config::default()
    };
    let server = Server::bind(config, sluice::ByRoutes).expect("Server::bind");
    let proxy = Proxy {
        addr: server.local_addr(),
        stats: server.stats(),
        handle: server.handle(),
    };
    thread::spawn(move || server.run());
    let r = Client::connect(proxy.addr).round_trip(get_close("/"));
    assert_eq!(r.status, 502);
    let line = &wait_access_lines(log.path(), 1)[0];
    let record: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(record["termination"], "upstream_tls_error", "{record}");
    assert_eq!(record["upstreams"][0]["outcome"], "tls_error", "{record}");
}

#[test]
fn a_verification_failure_is_a_502_and_the_error_log_says_why() {
    let cert = Cert::new("why", "other.internal");
    let up = tls_upstream(&cert);
    let port = free_port();
    let file = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\n[[upstream]]\nname = \"api\"\nservers = [\"{}\"]\n\
         tls = true\ntls_server_name = \"api.internal\"\ntls_ca = \"{}\"\n",
        up.addr,
        cert.ca().display()
    ));
    let p = SluiceProcess::start_listening(&["--config", file.path()]);
    let started = std::time::Instant::now();
    // A misconfigured group fails every request: the reason is logged
    // once a second at most, not once a try (each request tries twice).
    for _ in 0..10 {
        let r = Client::connect(loopback(port)).round_trip(get_close("/"));
        assert_eq!(r.status, 502, "{}", preview(&r.head));
    }
    let line = p.wait_line(WAIT, |l| l.contains("TLS handshake failed"));
    assert!(line.contains(&up.addr.to_string()), "{line}");
    assert!(
        line.contains("api.internal"),
        "the name that did not match: {line}"
    );
    let secs = started.elapsed().as_secs() as usize;
    let lines = p.count(|l| l.contains("TLS handshake failed:"));
    assert!(
        lines <= secs + 1,
        "{lines} lines in {secs}+ s:\n{}",
        p.log()
    );
}

//! PROXY protocol in on a TLS listener (docs/edge.md, "PROXY protocol
//! in"): a TCP balancer that passes TLS through (HAProxy `mode tcp` with
//! `send-proxy-v2`, a cloud network balancer) writes the header before the
//! client's ClientHello. A connection from a source in
//! `accept_proxy_protocol` is read as header, then TLS: the header's
//! source is the client's address in `X-Forwarded-For` and the access
//! record, on every request of the connection. A listed source whose
//! connection does not start with a valid header is closed before any TLS
//! byte is answered.

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sluice::{AccessLogFormat, AccessLogTarget, Cidr};
use util::tls::*;
use util::wire::read_length_response;
use util::*;

const V1: &[u8] = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n";

/// A proxy with a TLS listener that expects PROXY headers from
/// `sources`, logging JSON records to a file of its own.
fn pp_tls_proxy(up: SocketAddr, cert: &TestCert, sources: &[&str]) -> (TlsProxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let sources: Vec<Cidr> = sources.iter().map(|s| s.parse().unwrap()).collect();
    let proxy = start_tls_proxy(up, cert, move |c| {
        c.accept_proxy_protocol = sources;
        c.access_log = AccessLogTarget::File(path.into());
        c.access_log_format = AccessLogFormat::Json;
        c.request_head_timeout = Duration::from_millis(500);
    });
    (proxy, log)
}

/// A client session for `localhost` whose ClientHello is taken out and
/// handed back, unsent: the caller puts it on the wire behind a header.
fn session_and_hello(cfg: &Arc<rustls::ClientConfig>) -> (rustls::ClientConnection, Vec<u8>) {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    (conn, hello)
}

/// Sends `wire` (a header and what follows it) in pieces cut at `cuts`,
/// a few milliseconds apart, then the ClientHello: the TLS session.
fn connect_behind(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    pieces: &[&[u8]],
) -> TlsStream {
    let mut sock = opened(addr);
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 {
            thread::sleep(Duration::from_millis(3));
        }
        sock.write_all(p).unwrap();
    }
    tls_over(sock, cfg)
}

/// A connection to `addr` whose reads give up after 5 s.
fn opened(addr: SocketAddr) -> TcpStream {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock
}

/// Everything `addr` sends back until it closes, after `bytes` (a write
/// the proxy may refuse half-way).
fn answer_to(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut sock = opened(addr);
    let _ = sock.write_all(bytes);
    let mut got = Vec::new();
    let _ = sock.read_to_end(&mut got);
    got
}

fn request(s: &mut TlsStream, target: &str) -> u16 {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    read_length_response(s).0
}

#[test]
fn v1_header_before_the_client_hello_sets_the_client_address() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-v1");
    let (proxy, log) = pp_tls_proxy(up.addr, &cert, &["127.0.0.1/32"]);
    let mut s = connect_behind(proxy.tls, &cert.client(), &[V1]);
    assert_eq!(request(&mut s, "/one"), 200);
    // The header came once; the next request on the connection keeps it.
    assert_eq!(request(&mut s, "/two"), 200);
    for r in up.wait_requests(2) {
        assert_eq!(r.header("x-forwarded-for"), Some("192.0.2.7"), "{r:?}");
    }
    for rec in wait_access_json(log.path(), 2) {
        assert_eq!(rec["client"], "192.0.2.7:51000", "{rec}");
        assert_eq!(rec["tls_version"], "TLSv1.3", "{rec}");
    }
    let stats = proxy.stats.snapshot();
    assert_eq!(stats.proxy_headers, 1);
    assert_eq!(stats.tls_handshakes, 1);
}

#[test]
fn v2_header_split_anywhere_or_sent_with_the_client_hello() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-v2");
    let (proxy, _log) = pp_tls_proxy(up.addr, &cert, &["127.0.0.0/8"]);
    let cfg = cert.client();
    let header = proxy_v2_with_tlvs(443);
    // The header alone, cut at every byte, then the ClientHello.
    for cut in 1..header.len() {
        let (a, b) = header.split_at(cut);
        let mut s = connect_behind(proxy.tls, &cfg, &[a, b]);
        assert_eq!(request(&mut s, "/"), 200, "split at {cut}");
    }
    // The header and the ClientHello in one write, and cut inside the
    // hello: the bytes after the header are the session's.
    let (conn, hello) = session_and_hello(&cfg);
    let mut wire = header.clone();
    wire.extend_from_slice(&hello);
    let mut sock = opened(proxy.tls);
    sock.write_all(&wire).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    assert_eq!(request(&mut s, "/together"), 200);
    let (conn, hello) = session_and_hello(&cfg);
    let mut wire = header.clone();
    wire.extend_from_slice(&hello);
    let (a, b) = wire.split_at(header.len() + 3);
    let mut sock = opened(proxy.tls);
    sock.write_all(a).unwrap();
    thread::sleep(Duration::from_millis(3));
    sock.write_all(b).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    assert_eq!(request(&mut s, "/cut-in-hello"), 200);
    let n = header.len() + 1;
    let reqs = up.wait_requests(n);
    assert!(
        reqs.iter()
            .all(|r| r.header("x-forwarded-for") == Some("198.51.100.9")),
        "{reqs:?}"
    );
    assert_eq!(proxy.stats.snapshot().proxy_headers, n as u64);
}

#[test]
fn listed_source_without_a_valid_header_is_closed_before_tls() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-bad");
    let (proxy, _log) = pp_tls_proxy(up.addr, &cert, &["127.0.0.1/32"]);
    let cfg = cert.client();
    let (_, hello) = session_and_hello(&cfg);
    let oversized = proxy_v2(0x21, 0x11, &[0; 5000]);
    // Each row: what the connection opens with, and why it is refused.
    let rows: [(&[u8], &str); 4] = [
        (&hello, "a ClientHello, no header"),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 51000\r\n",
            "a v1 field missing",
        ),
        (&oversized, "a v2 header over 4 KiB"),
        (b"PROXY TCP4 300.0.0.1 10.0.0.1 1 2\r\n", "not an address"),
    ];
    for (bytes, why) in rows {
        // Closed with nothing sent: no ServerHello, no alert, no 400.
        let got = answer_to(proxy.tls, bytes);
        assert!(got.is_empty(), "{why}: got {got:?}");
    }
    assert_eq!(up.accepted(), 0, "nothing may reach the upstream");
    let stats = proxy.stats.snapshot();
    assert_eq!(stats.proxy_headers_refused, 4);
    assert_eq!(stats.proxy_headers, 0);
}

#[test]
fn unlisted_source_gets_plain_tls_and_a_header_from_it_is_refused() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-unlisted");
    // 127.0.0.1 is not in the list.
    let (proxy, _log) = pp_tls_proxy(up.addr, &cert, &["10.0.0.0/8"]);
    let cfg = cert.client();
    let mut s = tls_connect(proxy.tls, &cfg);
    assert_eq!(request(&mut s, "/"), 200);
    assert_eq!(
        up.single_request().header("x-forwarded-for"),
        Some("127.0.0.1")
    );
    // A v2 header from it is never trusted: closed, counted as refused.
    let got = answer_to(proxy.tls, &proxy_v2_with_tlvs(443));
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(proxy.stats.snapshot().proxy_headers_refused, 1);
    // A v1 header from it is never trusted: a plaintext 400, close.
    let got = answer_to(proxy.tls, V1);
    assert!(
        got.starts_with(b"HTTP/1.1 400 "),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(proxy.stats.snapshot().proxy_headers, 0);
}

#[test]
fn plaintext_behind_a_header_gets_the_https_400_under_the_header_address() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-plain");
    let (proxy, log) = pp_tls_proxy(up.addr, &cert, &["127.0.0.1/32"]);
    let mut wire = V1.to_vec();
    wire.extend_from_slice(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let got = answer_to(proxy.tls, &wire);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(text.contains("HTTPS"), "{text}");
    assert_eq!(up.accepted(), 0);
    let rec = wait_access_json(log.path(), 1);
    assert_eq!(rec[0]["client"], "192.0.2.7:51000", "{:?}", rec[0]);
}

#[test]
fn connections_are_counted_per_client_by_the_header_address() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-limit");
    let proxy = start_tls_proxy(up.addr, &cert, |c| {
        c.accept_proxy_protocol = vec!["127.0.0.1/32".parse().unwrap()];
        c.max_connections_per_client = 1;
    });
    let cfg = cert.client();
    // One connection for 192.0.2.7, held open.
    let mut first = connect_behind(proxy.tls, &cfg, &[V1]);
    assert_eq!(request(&mut first, "/a"), 200);
    // Another client behind the same balancer is its own client.
    let other = b"PROXY TCP4 192.0.2.8 10.0.0.1 51001 443\r\n";
    let mut second = connect_behind(proxy.tls, &cfg, &[other]);
    assert_eq!(request(&mut second, "/b"), 200);
    // A second connection for 192.0.2.7 is over its limit: closed, with
    // the header alone and with the ClientHello in the same write (as a
    // balancer that looked at the hello sends them) — before the session
    // answers anything: no handshake for a refused client.
    let (_, hello) = session_and_hello(&cfg);
    let mut together = V1.to_vec();
    together.extend_from_slice(&hello);
    for wire in [V1.to_vec(), together] {
        let mut sock = opened(proxy.tls);
        sock.write_all(&wire).unwrap();
        if wire.len() == V1.len() {
            thread::sleep(Duration::from_millis(20));
            let _ = sock.write_all(&hello);
        }
        let mut got = Vec::new();
        let _ = sock.read_to_end(&mut got);
        assert!(got.is_empty(), "over the limit, got {} bytes", got.len());
    }
    assert_eq!(proxy.stats.snapshot().downstream_refused_per_client, 2);
    assert_eq!(up.wait_requests(2).len(), 2);
}

#[test]
fn a_second_header_after_the_first_is_a_malformed_request() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new("pp-tls-twice");
    let (proxy, _log) = pp_tls_proxy(up.addr, &cert, &["127.0.0.1/32"]);
    let mut wire = V1.to_vec();
    wire.extend_from_slice(V1);
    let got = answer_to(proxy.tls, &wire);
    assert!(
        got.starts_with(b"HTTP/1.1 400 "),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    // One header accepted; the second is not "from an unlisted source".
    let stats = proxy.stats.snapshot();
    assert_eq!(stats.proxy_headers, 1);
    assert_eq!(stats.proxy_headers_refused, 0);
    assert_eq!(up.accepted(), 0);
}

/// A proxy whose drain waits 20 s, and a client behind a PROXY header
/// whose handshake is slow: the header and 20 bytes of its ClientHello
/// are sent, the rest 1.3 s later (past the drain's idle grace of 1 s from
/// the accept); `drain_mid` drains the proxy just before it. Returns the
/// upstream, the proxy and the session, handshaken.
fn slow_handshake(tag: &str, drain_mid: bool) -> (Upstream, TlsProxy, TlsStream) {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let cert = TestCert::new(tag);
    let proxy = start_tls_proxy(up.addr, &cert, |c| {
        c.accept_proxy_protocol = vec!["127.0.0.1/32".parse().unwrap()];
        c.drain_timeout = Duration::from_secs(20);
    });
    let (conn, hello) = session_and_hello(&cert.client());
    let (a, b) = hello.split_at(20);
    let mut sock = opened(proxy.tls);
    let mut first = V1.to_vec();
    first.extend_from_slice(a);
    sock.write_all(&first).unwrap();
    thread::sleep(Duration::from_millis(1300));
    if drain_mid {
        proxy.handle.drain();
        thread::sleep(Duration::from_millis(200));
    }
    sock.write_all(b).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    (up, proxy, s)
}

#[test]
fn a_drain_lets_a_handshake_under_way_end_and_its_request_be_served() {
    // A slow client with its handshake under way, not an idle one.
    let (up, _proxy, mut s) = slow_handshake("pp-tls-drain", true);
    // The request may take a moment after the handshake, too.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(request(&mut s, "/late"), 200);
    assert_eq!(
        up.single_request().header("x-forwarded-for"),
        Some("192.0.2.7")
    );
}

#[test]
fn a_drain_gives_a_slow_handshake_s_first_request_its_grace_when_parked() {
    let (_up, proxy, mut s) = slow_handshake("pp-tls-drain-parked", false);
    // Idle past the park delay (50 ms), then a drain: the grace runs from
    // the handshake's end (1.3 s after the accept), not from the accept.
    thread::sleep(Duration::from_millis(300));
    proxy.handle.drain();
    thread::sleep(Duration::from_millis(200));
    // The request in two pieces: the first wakes the parked connection.
    let wire = b"GET /parked HTTP/1.1\r\nHost: localhost\r\n\r\n";
    s.write_all(&wire[..5]).unwrap();
    s.flush().unwrap();
    thread::sleep(Duration::from_millis(50));
    s.write_all(&wire[5..]).unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
}

//! A close-delimited response over TLS is whole only if the close came
//! with `close_notify` (RFC 9112 §9.8, RFC 8446 §6.1). A TLS upstream that
//! ends such a response with a bare FIN has cut it (or an attacker on the
//! path did): the proxy treats it as cut, not complete, and a TLS client
//! then sees the proxy's side end without `close_notify` too, so it can
//! tell. With `close_notify` from the upstream the response is complete and
//! the client gets `close_notify`. An HTTP/1.1 client also gets the body
//! chunk-encoded, so the last chunk says the same (and only a whole body
//! has one). The upstream is a rustls server in the
//! test, on 127.0.0.1:0; the client a rustls client; certificates are made
//! here (rcgen).

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sluice::{Config, DEFAULT_GROUP, GroupSpec, Server, ServerHandle};
use util::*;

/// The close-delimited body the upstream sends (no `Content-Length`, no
/// chunked coding: its end is the close).
const BODY_LEN: usize = 50_000;

fn body() -> Vec<u8> {
    (0..BODY_LEN).map(|i| b'a' + (i % 26) as u8).collect()
}

/// A TLS upstream for one session: reads a request head, answers `200`
/// with a close-delimited body, then closes: with `close_notify` first if
/// `notify`, else with a bare FIN.
fn one_shot_upstream(cert: &TestCert, notify: bool) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(cert.chain(), cert.key())
        .unwrap();
    let cfg = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        let Ok((sock, _)) = listener.accept() else {
            return;
        };
        let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
        let conn = rustls::ServerConnection::new(cfg).unwrap();
        let mut s = rustls::StreamOwned::new(conn, sock);
        let mut head = Vec::new();
        let mut chunk = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65_536 {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        let mut answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec();
        answer.extend_from_slice(&body());
        if s.write_all(&answer).is_err() {
            return;
        }
        if notify {
            s.conn.send_close_notify();
        }
        let _ = s.flush();
        let _ = s.sock.shutdown(std::net::Shutdown::Write);
        // Hold the socket until the proxy closes it.
        let _ = s.sock.read(&mut chunk);
    });
    addr
}

struct Proxy {
    tls: SocketAddr,
    handle: ServerHandle,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// The proxy in process: a TLS listener serving `cert`, one group reached
/// over TLS (trusting `up_cert`, by the name `api.internal`).
fn proxy(up: SocketAddr, cert: &TestCert, up_cert: &TestCert) -> Proxy {
    let mut group = GroupSpec::new(DEFAULT_GROUP, vec![up.into()]);
    group.tls = true;
    group.tls_ca = Some(up_cert.dir.join("cert.pem"));
    group.tls_server_name = Some("api.internal".to_string());
    let config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        listen_tls: vec!["127.0.0.1:0".parse().unwrap()],
        certificate: vec![cert.spec()],
        access_log: sluice::AccessLogTarget::Off,
        upstream: vec![group],
        ..Config::default()
    };
    let server = Server::bind(config, sluice::ByRoutes).expect("Server::bind");
    let p = Proxy {
        tls: server.tls_addr().expect("a TLS listener"),
        handle: server.handle(),
    };
    thread::spawn(move || server.run());
    p
}

/// `GET /` over TLS through the proxy (`Connection: close`, so the proxy
/// closes after it), read to the end: the bytes, and whether the proxy's
/// side ended with `close_notify` (`Ok`) or without (`UnexpectedEof`,
/// rustls' word for an incomplete close).
fn fetch(tls: SocketAddr, cert: &TestCert) -> (Vec<u8>, Result<(), ErrorKind>) {
    let cfg = trusting_with(&[&cert.der], rustls::DEFAULT_VERSIONS, &[b"http/1.1"]);
    let mut s = tls_connect(tls, &cfg);
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let end = s.read_to_end(&mut got).map(|_| ()).map_err(|e| e.kind());
    (got, end)
}

fn split(raw: &[u8]) -> (String, &[u8]) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    (
        String::from_utf8_lossy(&raw[..end]).to_string(),
        &raw[end + 4..],
    )
}

/// The chunk data of a chunked body as far as it came, and whether its
/// last chunk came.
fn chunks(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    while let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap(), 16)
            .expect("a hex chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            return (data, raw == b"\r\n");
        }
        let take = size.min(raw.len());
        data.extend_from_slice(&raw[..take]);
        raw = &raw[(take + 2).min(raw.len())..];
    }
    (data, false)
}

/// What a TLS client of the proxy gets (its bytes, how its session ended)
/// from a one-shot TLS upstream that ends its close-delimited body with
/// `close_notify` if `notify`, else with a bare FIN; `tag` names the
/// certificates.
fn through_proxy(tag: &str, notify: bool) -> (Vec<u8>, Result<(), ErrorKind>) {
    let up_cert = TestCert::for_names(&format!("{tag}-up"), &["api.internal"]);
    let cert = TestCert::new(tag);
    let up = one_shot_upstream(&up_cert, notify);
    let p = proxy(up, &cert, &up_cert);
    fetch(p.tls, &cert)
}

#[test]
fn a_close_delimited_body_ended_with_close_notify_is_complete_and_the_client_gets_close_notify() {
    let (raw, end) = through_proxy("trunc-ok", true);
    let (head, got) = split(&raw);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    let (got, last_chunk) = chunks(got);
    assert!(last_chunk, "a whole body ends with the last chunk");
    assert!(
        got == body().as_slice(),
        "{} of {BODY_LEN} bytes",
        got.len()
    );
    assert_eq!(end, Ok(()), "the proxy's side ends with close_notify");
}

#[test]
fn a_close_delimited_body_cut_by_a_bare_fin_reaches_the_client_without_close_notify() {
    let (raw, end) = through_proxy("trunc-cut", false);
    let (head, got) = split(&raw);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    // Every byte that came is passed on; only the ending differs.
    let (got, last_chunk) = chunks(got);
    assert!(!last_chunk, "a cut body has no last chunk");
    assert!(
        got == body().as_slice(),
        "{} of {BODY_LEN} bytes",
        got.len()
    );
    assert_eq!(
        end,
        Err(ErrorKind::UnexpectedEof),
        "an incomplete close from the upstream must reach the client as one"
    );
}

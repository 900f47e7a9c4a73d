//! The syscall floor of a keep-alive request (issue 22), counted without
//! timing: the proxy's own counters of socket reads, writes and liveness
//! peeks on the data path (`Stats::socket_reads`, `socket_writes`,
//! `socket_peeks`). One keep-alive request in front of an upstream that
//! answers with a head like nginx's (about 240 bytes) and a body of 200 B,
//! 1 KiB or 16 KiB takes four: the request read, the write upstream, the
//! response read, the write to the client. `epoll_wait` is the loop's and
//! is measured by `scripts/bench.sh`, not here.
//!
//! The same floor holds on a keep-alive TLS connection (issue 23): one
//! socket read takes the request's record, and the response head and
//! body, encrypted together, leave in one write (for 16 KiB too: two
//! records, one `send`).

mod util;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use util::*;

/// Requests measured per body size, after one that opens the upstream
/// connection.
const MEASURED: u64 = 20;

/// A response head like stock nginx's for a static file.
fn nginx_like(body_len: usize) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {body_len}\r\n\
         Last-Modified: Tue, 01 Dec 2026 19:00:00 GMT\r\nConnection: keep-alive\r\n\
         ETag: \"674c7e10-{body_len:x}\"\r\nAccept-Ranges: bytes\r\n\r\n"
    )
    .into_bytes();
    r.extend((0..body_len).map(|i| b'a' + (i % 26) as u8));
    r
}

/// Socket calls of the data path so far.
fn calls(stats: &Arc<sluice::Stats>) -> (u64, u64, u64) {
    let s = stats.snapshot();
    (s.socket_reads, s.socket_writes, s.socket_peeks)
}

/// Socket calls per keep-alive request for `body_len`-byte responses:
/// (reads, writes, peeks), each summed over `MEASURED` requests.
fn per_request(body_len: usize) -> (u64, u64, u64) {
    let upstream = Upstream::start(respond_forever(nginx_like(body_len)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    // The first request connects upstream (connect, SO_ERROR): not counted.
    let first = client.round_trip(get("/warm"));
    assert_eq!(first.status, 200);
    let before = calls(&proxy.stats);
    for i in 0..MEASURED {
        let resp = client.round_trip(get(&format!("/{i}")));
        assert_eq!(resp.status, 200, "{}", preview(&resp.head));
        assert_eq!(resp.body.len(), body_len);
    }
    let after = calls(&proxy.stats);
    assert_eq!(upstream.accepted(), 1, "one upstream connection, reused");
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

/// [`per_request`] over a keep-alive TLS connection (a rustls client,
/// TLS 1.3); the handshake and the first request are not counted.
fn per_tls_request(body_len: usize) -> (u64, u64, u64) {
    let upstream = Upstream::start(respond_forever(nginx_like(body_len)));
    let tls = TestTls::new();
    let proxy = start_forward_proxy(upstream.addr, |c| tls.configure(c));
    let mut client = tls.connect(proxy.tls.expect("a TLS listener"));
    assert_eq!(tls_round_trip(&mut client, "/warm").0, 200);
    let before = calls(&proxy.stats);
    for i in 0..MEASURED {
        let (status, body) = tls_round_trip(&mut client, &format!("/{i}"));
        assert_eq!(status, 200);
        assert_eq!(body, body_len);
    }
    let after = calls(&proxy.stats);
    assert_eq!(upstream.accepted(), 1, "one upstream connection, reused");
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

fn assert_floor(body_len: usize) {
    check_floor(body_len, per_request(body_len));
}

fn check_floor(body_len: usize, counts: (u64, u64, u64)) {
    let (reads, writes, peeks) = counts;
    let total = reads + writes + peeks;
    assert!(
        total <= 4 * MEASURED,
        "{body_len}-byte body: {reads} reads + {writes} writes + {peeks} peeks \
         over {MEASURED} requests ({:.2} per request, the floor is 4)",
        total as f64 / MEASURED as f64
    );
    assert_eq!(peeks, 0, "no liveness peek on a hot connection");
}

#[test]
fn a_keep_alive_request_with_a_200_byte_body_takes_four_socket_calls() {
    assert_floor(200);
}

#[test]
fn a_keep_alive_request_with_a_1_kib_body_takes_four_socket_calls() {
    assert_floor(1024);
}

#[test]
fn a_keep_alive_request_with_a_16_kib_body_takes_four_socket_calls() {
    assert_floor(16 * 1024);
}

#[test]
fn a_keep_alive_tls_request_with_a_200_byte_body_takes_four_socket_calls() {
    check_floor(200, per_tls_request(200));
}

#[test]
fn a_keep_alive_tls_request_with_a_1_kib_body_takes_four_socket_calls() {
    check_floor(1024, per_tls_request(1024));
}

#[test]
fn a_keep_alive_tls_request_with_a_16_kib_body_takes_four_socket_calls() {
    check_floor(16 * 1024, per_tls_request(16 * 1024));
}

/// A self-signed P-256 certificate for `localhost` (made here, in
/// temporary files) and a rustls client that trusts it.
struct TestTls {
    cert: TempFile,
    key: TempFile,
    client: Arc<rustls::ClientConfig>,
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

impl TestTls {
    fn new() -> TestTls {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(cert.der().to_vec()))
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        TestTls {
            cert: TempFile::new(&cert.pem()),
            key: TempFile::new(&key.serialize_pem()),
            client: Arc::new(client),
        }
    }

    /// A TLS listener on 127.0.0.1:0 with this certificate.
    fn configure(&self, c: &mut Config) {
        c.listen_tls = vec!["127.0.0.1:0".parse().unwrap()];
        c.certificate = vec![sluice::CertificateSpec::new(
            self.cert.path().into(),
            self.key.path().into(),
        )];
    }

    fn connect(&self, addr: SocketAddr) -> TlsStream {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(self.client.clone(), name).unwrap();
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        sock.set_nodelay(true).unwrap();
        rustls::StreamOwned::new(conn, sock)
    }
}

/// One GET on `s` (one record, one segment) and its response read:
/// (status, body length).
fn tls_round_trip(s: &mut TlsStream, path: &str) -> (u16, usize) {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let (status, _, body) = read_length_response(s);
    (status, body.len())
}

/// Body bytes of the HTTP/2 download below: past the 8 MiB a body buffer
/// must relay at 16 KiB before it may grow (`buffer::sizing::PROBATION`).
const H2_BODY: usize = 24 * 1024 * 1024;

/// Socket calls (reads + writes) of one `H2_BODY`-byte response on one
/// h2c stream whose windows (the stream's and the connection's) are
/// opened to 2^30 − 1 at the start, so flow control never holds it.
fn h2_download_calls() -> u64 {
    let upstream = Upstream::start(respond_forever(nginx_like(H2_BODY)));
    let proxy = start_forward_proxy(upstream.addr, |c| c.http2_cleartext = true);
    let wide: u32 = (1 << 30) - 1;
    // SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.5.2).
    let mut c = h2::H2Client::connect_with(proxy.addr, &[(0x4, wide)]);
    c.auto_window = false;
    c.send_frame(
        h2::kind::WINDOW_UPDATE,
        0,
        0,
        &(wide - 65_535).to_be_bytes(),
    );
    let before = calls(&proxy.stats);
    let id = c.send_get("/big");
    let (mut body, mut ended) = (0usize, false);
    // Bounded: at least one byte per frame, and the socket's read timeout.
    for _ in 0..(H2_BODY / 1024) {
        let f = c.read_frame().expect("a frame of the download");
        if f.stream == id && f.kind == h2::kind::DATA {
            body += f.payload.len();
            if f.flags & h2::flag::END_STREAM != 0 {
                ended = true;
                break;
            }
        }
    }
    assert!(ended, "the download ended ({body} of {H2_BODY} bytes)");
    assert_eq!(body, H2_BODY);
    let after = calls(&proxy.stats);
    (after.0 - before.0) + (after.1 - before.1)
}

/// A stream keeps its body buffer while its response is still coming, so
/// the buffer's streak carries on and it grows to the high watermark
/// (32 KiB) for a sink that keeps up: after the first 8 MiB, one read and
/// one write per 32 KiB (two 16 KiB DATA frames) instead of per 16 KiB.
/// 2,050–2,210 calls for 24 MiB (release and debug builds, a loaded
/// machine); a buffer given back after every drain stays at 16 KiB and
/// takes about 3,200.
#[test]
fn an_h2_download_reads_and_writes_32_kib_at_a_time_once_its_buffer_has_grown() {
    let total = h2_download_calls();
    eprintln!("h2 download: {total} socket calls");
    assert!(
        total <= 2_600,
        "{total} socket calls for a {} MiB download on one stream",
        H2_BODY >> 20
    );
}

//! HTTPS on a TLS listener (issue 23, the served part): the rustls session
//! in the loop under the client machine. A rustls client in the test talks
//! to `--listen-tls` over real sockets; certificates are made here (rcgen),
//! no key is checked in. What a user observes: statuses and bytes through
//! TLS, keep-alive on one session, `X-Forwarded-Proto: https` upstream,
//! a plaintext 400 naming HTTPS for plain HTTP on the TLS port, and the
//! alerts for a client whose ALPN has nothing in common.

mod util;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use util::*;

/// A rustls client configuration trusting `cert`, offering `alpn`.
fn client_config(cert: &TestCert, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    trusting_with(&[&cert.der], rustls::DEFAULT_VERSIONS, alpn)
}

/// `count` ALPN names of 62 bytes that no server speaks, then
/// `http/1.1`: a ClientHello 63 bytes longer per name.
fn padded_alpn(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("x-padding-{i:03}-{}", "p".repeat(48)).into_bytes())
        .chain([b"http/1.1".to_vec()])
        .collect()
}

/// The proxy's handshakes with clients: (completed full, resumed, failed).
fn handshakes(proxy: &TlsProxy) -> (u64, u64, u64) {
    let st = proxy.stats.snapshot();
    (
        st.tls_handshakes,
        st.tls_handshakes_resumed,
        st.tls_handshakes_failed,
    )
}

/// `GET /0` and `GET /1`, each on a new session of `cfg` (whose session
/// cache keeps the first one's ticket), each answered with its target,
/// each closed with `close_notify`: the second session is resumed.
#[track_caller]
fn two_sessions_the_second_resumed(addr: std::net::SocketAddr, cfg: &Arc<rustls::ClientConfig>) {
    for i in 0..2 {
        let mut s = tls_connect(addr, cfg);
        s.write_all(format!("GET /{i} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        let (status, _, body) = read_length_response(&mut s);
        assert_eq!((status, body), (200, format!("/{i}").into_bytes()));
        s.conn.send_close_notify();
        let _ = s.flush();
        if i == 1 {
            assert_eq!(
                s.conn.handshake_kind(),
                Some(rustls::HandshakeKind::Resumed)
            );
        }
    }
}

#[test]
fn a_request_over_tls_is_answered_and_the_upstream_sees_https() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("basic");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    for i in 0..3 {
        s.write_all(format!("GET /{i} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        let (status, head, body) = read_length_response(&mut s);
        assert_eq!(status, 200, "{head}");
        assert_eq!(body, format!("/{i}").as_bytes());
    }
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let reqs = upstream.requests();
    assert_eq!(reqs.len(), 3, "three requests on one TLS session");
    assert!(
        reqs.iter()
            .all(|r| r.header("X-Forwarded-Proto") == Some("https")),
        "{:?}",
        reqs.iter()
            .map(|r| r.header("X-Forwarded-Proto"))
            .collect::<Vec<_>>()
    );
    // The plain listener beside it still says http.
    let mut c = Client::connect(proxy.plain);
    assert_eq!(c.round_trip(get("/plain")).status, 200);
    let last = upstream.wait_requests(4).pop().unwrap();
    assert_eq!(last.header("X-Forwarded-Proto"), Some("http"));
}

#[test]
fn a_client_offering_no_alpn_speaks_http_1_1() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("noalpn");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[]));
    s.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
}

#[test]
fn large_bodies_cross_tls_byte_for_byte_both_ways() {
    let size = 3 * 1024 * 1024 + 17;
    let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let down = body.clone();
    let upstream = Upstream::start(serve(move |req| {
        if req.method == "POST" {
            // Echo the upload's length and a checksum.
            let sum: u64 = req.body.iter().map(|&b| b as u64).sum();
            ok_response(&format!("{} {sum}", req.body.len()))
        } else {
            let mut r =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", down.len()).into_bytes();
            r.extend_from_slice(&down);
            r
        }
    }));
    let cert = TestCert::new("large");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    s.write_all(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let (status, _, got) = read_length_response(&mut s);
    assert_eq!(status, 200);
    assert!(got == body, "the download arrived changed");
    let mut req = format!("POST /up HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\n\r\n")
        .into_bytes();
    req.extend_from_slice(&body);
    s.write_all(&req).unwrap();
    let (status, _, answer) = read_length_response(&mut s);
    assert_eq!(status, 200);
    let sum: u64 = body.iter().map(|&b| b as u64).sum();
    assert_eq!(String::from_utf8_lossy(&answer), format!("{size} {sum}"));
}

#[test]
fn plain_http_on_the_tls_port_gets_a_plaintext_400_naming_https() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("plain");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut c = Client::connect(proxy.tls);
    c.send(get("/"));
    let raw = c.read_until_closed(CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(text.contains("HTTPS"), "{text}");
    assert_eq!(upstream.accepted(), 0, "nothing reached the upstream");
}

#[test]
fn the_http2_preface_in_plaintext_on_the_tls_port_gets_the_400_even_with_http2_cleartext() {
    // h2c is for plain listeners only: on a TLS port it would skip the
    // handshake and its client-certificate check (found by a break-it
    // pass: with `http2_cleartext` on, the preface was served as h2c).
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("h2c-on-tls");
    let pki = client_pki(&cert.dir);
    let ca_file = pki.ca_file.clone();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.http2_cleartext = true;
        c.tls_client_auth = sluice::ClientAuth::Required;
        c.tls_client_ca = Some(ca_file);
    });
    let mut c = Client::connect(proxy.tls);
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // An empty SETTINGS frame, as a prior-knowledge client sends it.
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    c.send(&preface);
    let raw = c.read_until_closed(CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(text.contains("HTTPS"), "{text}");
    assert_eq!(upstream.accepted(), 0, "nothing reached the upstream");
    // The plain port still speaks h2c.
    let mut c = Client::connect(proxy.plain);
    c.send(&preface);
    let mut head = [0u8; 9];
    c.wire.stream.read_exact(&mut head).unwrap();
    assert_eq!(head[3], 4, "the server's first frame is SETTINGS: {head:?}");
}

#[test]
fn bytes_that_are_neither_tls_nor_http_on_the_tls_port_are_closed() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("junk");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut c = Client::connect(proxy.tls);
    c.send(b"\x00\x01\x02 junk\r\n\r\n");
    let raw = c.read_until_closed(CLIENT_TIMEOUT);
    assert!(raw.is_empty(), "{}", preview(&raw));
}

#[test]
fn a_client_whose_alpn_has_nothing_in_common_gets_an_alert() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("alpn");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"spdy/3"]));
    let r = s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut buf = [0u8; 64];
    let read = s.read(&mut buf);
    let err = r.err().or(read.err()).expect("the handshake fails");
    assert!(err.to_string().contains("NoApplicationProtocol"), "{err}");
}

#[test]
fn a_silent_connection_to_the_tls_port_is_closed_at_the_handshake_timeout() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("slow");
    let proxy = start_tls_proxy(upstream.addr, &cert, |c| {
        c.tls_handshake_timeout = Duration::from_millis(300);
        c.defer_accept = false;
    });
    // The first bytes of a ClientHello, then nothing.
    let mut c = Client::connect(proxy.tls);
    c.send(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03");
    let started = std::time::Instant::now();
    let rest = c.read_until_closed(Duration::from_secs(5));
    assert!(rest.is_empty(), "{}", preview(&rest));
    // Well before the 10 s head timeout that would otherwise apply.
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(proxy.stats.snapshot().tls_handshakes_timeout, 1);
}

#[test]
fn a_request_and_close_notify_in_one_segment_get_the_answer_then_a_prompt_clean_close() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("cn1");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    // The handshake first (a request on it is answered).
    s.write_all(b"GET /first HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
    // Then a request and close_notify as one write of the socket.
    s.conn
        .writer()
        .write_all(b"GET /last HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    s.conn.send_close_notify();
    let mut wire = Vec::new();
    while s.conn.wants_write() {
        s.conn.write_tls(&mut wire).unwrap();
    }
    s.sock.write_all(&wire).unwrap();
    let started = std::time::Instant::now();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!((status, body.as_slice()), (200, &b"/last"[..]));
    // Then the proxy's close_notify (a clean end, not a bare FIN), at once
    // rather than at the 60 s keep-alive timeout.
    let mut rest = Vec::new();
    let r = s.read_to_end(&mut rest);
    assert!(r.is_ok(), "a clean TLS close: {r:?}");
    assert!(rest.is_empty(), "{}", preview(&rest));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn an_idle_session_closed_by_the_client_gets_close_notify_back() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("cn2");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    s.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
    s.conn.send_close_notify();
    s.flush().unwrap();
    let mut rest = Vec::new();
    let r = s.read_to_end(&mut rest);
    assert!(r.is_ok(), "close_notify before the FIN: {r:?}");
}

#[test]
fn a_client_offering_only_http_1_0_in_alpn_is_served() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("h10");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.0"]));
    s.write_all(b"GET /old HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!((status, body.as_slice()), (200, &b"/old"[..]));
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.0"[..]));
}

#[test]
fn a_lower_case_request_line_on_the_tls_port_gets_the_400_too() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("lower");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let mut c = Client::connect(proxy.tls);
    c.send(b"get / HTTP/1.1\r\nHost: x\r\n\r\n");
    let text = String::from_utf8_lossy(&c.read_until_closed(CLIENT_TIMEOUT)).to_string();
    assert!(
        text.starts_with("HTTP/1.1 400 ") && text.contains("HTTPS"),
        "{text}"
    );
}

#[test]
fn with_reject_an_unknown_name_or_none_gets_unrecognized_name_and_a_known_one_is_served() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("reject");
    let proxy = start_tls_proxy(upstream.addr, &cert, |c| {
        c.tls_unknown_sni = sluice::UnknownSni::Reject;
    });
    let cfg = client_config(&cert, &[b"http/1.1"]);
    let err = first_error(&mut tls_connect_as(proxy.tls, &cfg, "other.test"));
    assert!(err.contains("UnrecognisedName"), "{err}");
    // An IP address: the ClientHello carries no SNI at all.
    let err = first_error(&mut tls_connect_as(proxy.tls, &cfg, "127.0.0.1"));
    assert!(err.contains("UnrecognisedName"), "{err}");
    // The name the certificate covers, in another case.
    let mut s = tls_connect_as(proxy.tls, &cfg, "LOCALHOST");
    s.write_all(b"GET /known HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!((status, body.as_slice()), (200, &b"/known"[..]));
    let st = proxy.stats.snapshot();
    assert_eq!(
        (st.tls_handshakes, st.tls_handshakes_failed),
        (1, 2),
        "{st:?}"
    );
}

#[test]
fn access_records_carry_the_tls_fields_and_a_second_session_is_resumed() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("record");
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.access_log = sluice::AccessLogTarget::File(path.into());
        c.access_log_format = sluice::AccessLogFormat::Json;
    });
    // One client configuration: its session cache keeps the ticket.
    two_sessions_the_second_resumed(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    let mut c = Client::connect(proxy.plain);
    assert_eq!(c.round_trip(get("/plain")).status, 200);
    let records: Vec<serde_json::Value> = wait_access_lines(log.path(), 3)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_target = |t: &str| {
        records
            .iter()
            .find(|r| r["target"] == t)
            .unwrap_or_else(|| panic!("{t}: {records:#?}"))
    };
    for (target, resumed) in [("/0", false), ("/1", true)] {
        let r = by_target(target);
        assert_eq!(r["tls_version"], "TLSv1.3", "{r}");
        assert!(
            r["tls_cipher"].as_str().unwrap().starts_with("TLS13_"),
            "{r}"
        );
        assert_eq!(r["sni"], "localhost", "{r}");
        assert_eq!(r["tls_resumed"], resumed, "{r}");
    }
    let plain = by_target("/plain");
    for field in ["tls_version", "tls_cipher", "sni", "tls_resumed"] {
        assert!(plain[field].is_null(), "{field}: {plain}");
    }
    assert_eq!(handshakes(&proxy), (1, 1, 0));
}

/// A CA and a client certificate it signed (CN `client one`, DNS
/// `client.test` or the names given), with the CA's PEM file written
/// into `dir`.
struct ClientPki {
    ca_file: PathBuf,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

fn client_pki(dir: &std::path::Path) -> ClientPki {
    client_pki_for(dir, &["client.test".to_string()])
}

fn client_pki_for(dir: &std::path::Path, names: &[String]) -> ClientPki {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "client CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let ca_file = dir.join("client-ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(names.to_vec()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "client one");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    ClientPki {
        ca_file,
        chain: vec![cert.der().clone()],
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    }
}

impl ClientPki {
    /// The `X-Forwarded-Client-Cert` value the proxy makes for this
    /// client certificate.
    fn forwarded(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, self.chain[0].as_ref());
        let hash: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("Hash={hash};Subject=\"CN=client one\";DNS=client.test")
    }
}

/// A client configuration trusting `cert` that presents `pki`'s client
/// certificate.
fn with_client_cert(cert: &TestCert, pki: &ClientPki) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(cert.der.clone()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(pki.chain.clone(), pki.key.clone_key())
        .unwrap();
    Arc::new(cfg)
}

/// A request carrying a forged `X-Forwarded-Client-Cert`.
const FORGED: &str =
    "GET / HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-Client-Cert: Hash=forged\r\n\r\n";

/// An upstream that answers with every `X-Forwarded-Client-Cert` it got.
fn xfcc_echo() -> Upstream {
    Upstream::start(serve(|req| {
        ok_response(&req.header_all("x-forwarded-client-cert").join("|"))
    }))
}

#[test]
fn a_verified_client_certificate_goes_upstream_and_a_forged_field_never_does() {
    let upstream = xfcc_echo();
    let cert = TestCert::new("mtls");
    let pki = client_pki(&cert.dir);
    let ca_file = pki.ca_file.clone();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.tls_client_auth = sluice::ClientAuth::Optional;
        c.tls_client_ca = Some(ca_file);
    });
    let mut s = tls_connect(proxy.tls, &with_client_cert(&cert, &pki));
    s.write_all(FORGED.as_bytes()).unwrap();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8_lossy(&body),
        pki.forwarded(),
        "one field, the proxy's"
    );
    // Optional: a client without a certificate is served, without the
    // field, and so is one on the plain port.
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    s.write_all(FORGED.as_bytes()).unwrap();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!((status, body.as_slice()), (200, &b""[..]));
    let mut c = Client::connect(proxy.plain);
    let r = c.round_trip(FORGED.as_bytes());
    assert_eq!((r.status, r.body.as_slice()), (200, &b""[..]));
}

#[test]
fn with_client_auth_required_a_client_without_a_certificate_is_refused() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("mtls-req");
    let pki = client_pki(&cert.dir);
    let ca_file = pki.ca_file.clone();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.tls_client_auth = sluice::ClientAuth::Required;
        c.tls_client_ca = Some(ca_file);
    });
    let err = first_error(&mut tls_connect(
        proxy.tls,
        &client_config(&cert, &[b"http/1.1"]),
    ));
    assert!(err.contains("CertificateRequired"), "{err}");
    assert_eq!(proxy.stats.snapshot().tls_handshakes_failed, 1);
}

#[test]
fn with_client_auth_required_a_verified_client_is_served_and_a_forged_field_never_goes_upstream() {
    let upstream = xfcc_echo();
    let cert = TestCert::new("mtls-req-ok");
    let pki = client_pki(&cert.dir);
    let ca_file = pki.ca_file.clone();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.tls_client_auth = sluice::ClientAuth::Required;
        c.tls_client_ca = Some(ca_file);
    });
    let mut s = tls_connect(proxy.tls, &with_client_cert(&cert, &pki));
    for _ in 0..2 {
        s.write_all(FORGED.as_bytes()).unwrap();
        let (status, _, body) = read_length_response(&mut s);
        assert_eq!(status, 200);
        assert_eq!(String::from_utf8_lossy(&body), pki.forwarded());
    }
    // The plain listener beside it: no client certificate there, and the
    // forged field is removed all the same.
    let r = Client::connect(proxy.plain).round_trip(FORGED.as_bytes());
    assert_eq!((r.status, r.body.as_slice()), (200, &b""[..]));
    let st = proxy.stats.snapshot();
    assert_eq!(
        (st.tls_handshakes, st.tls_handshakes_failed),
        (1, 0),
        "{st:?}"
    );
}

#[test]
fn a_client_certificate_chain_over_8_kib_is_served_and_its_session_resumed() {
    // The handshake's 8 KiB bound makes room for a client's chain when
    // the listener asks for one, and for the ClientHello that resumes
    // such a session (rustls' ticket carries the chain).
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("mtls-big");
    let names: Vec<String> = (0..400)
        .map(|i| format!("client-{i:03}.example.com"))
        .collect();
    let pki = client_pki_for(&cert.dir, &names);
    assert!(pki.chain[0].len() > 8 * 1024, "{}", pki.chain[0].len());
    let ca_file = pki.ca_file.clone();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.tls_client_auth = sluice::ClientAuth::Required;
        c.tls_client_ca = Some(ca_file);
    });
    two_sessions_the_second_resumed(proxy.tls, &with_client_cert(&cert, &pki));
    assert_eq!(handshakes(&proxy), (1, 1, 0));
}

#[test]
fn a_client_hello_over_8_kib_is_refused_with_decode_error_and_counted() {
    // 10 KB of ALPN names: past the 8 KiB a handshake may send (a
    // browser's hello is about 2 KB).
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("hello-8k");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    let names = padded_alpn(160);
    let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let err = first_error(&mut tls_connect(proxy.tls, &client_config(&cert, &names)));
    assert!(err.contains("DecodeError"), "{err}");
    assert_eq!(handshakes(&proxy), (0, 0, 1));
    // The same client with its usual ALPN is served.
    let (status, body) = tls_get(proxy.tls, &client_config(&cert, &[b"http/1.1"]), "/after");
    assert_eq!((status, body.as_slice()), (200, &b"/after"[..]));
}

#[test]
fn a_client_hello_in_one_byte_records_is_answered() {
    // Legal framing (RFC 8446 §5.1: a handshake message may span
    // records), and the handshake's bound hands the records to rustls
    // one at a time: all of them in one pass, however many, else the
    // handshake would wait for an event its client never sends.
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("tiny-records");
    let proxy = start_tls_proxy(upstream.addr, &cert, |_| {});
    // About 1 KB of hello: more records than a pass' bound on rustls'
    // states (256).
    let names = padded_alpn(12);
    let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut c = rustls::ClientConnection::new(client_config(&cert, &names), name).unwrap();
    let mut hello = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut hello).unwrap();
    }
    assert_eq!(
        usize::from(u16::from_be_bytes([hello[3], hello[4]])) + 5,
        hello.len()
    );
    assert!(
        (600..1300).contains(&hello.len()),
        "six bytes per byte fit the 8 KiB bound: {}",
        hello.len()
    );
    let mut tiny = Vec::new();
    for b in &hello[5..] {
        tiny.extend_from_slice(&[22, 3, 1, 0, 1, *b]);
    }
    let mut sock = std::net::TcpStream::connect(proxy.tls).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.write_all(&tiny).unwrap();
    let mut s = rustls::StreamOwned::new(c, sock);
    s.write_all(b"GET /tiny HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_length_response(&mut s);
    assert_eq!((status, body.as_slice()), (200, &b"/tiny"[..]));
}

#[test]
fn status_lists_the_certificates_and_metrics_have_their_expiry_and_the_handshakes() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("status");
    let admin = loopback(free_port());
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| c.admin = Some(admin));
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
    let (code, body) = http_get(admin, "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let certs = status["certificates"].as_array().expect("certificates");
    assert_eq!(certs.len(), 1, "{status}");
    assert_eq!(certs[0]["names"], serde_json::json!(["localhost"]));
    assert!(certs[0]["file"].as_str().unwrap().ends_with("cert.pem"));
    assert!(certs[0]["not_after"].is_string());
    // rcgen's default validity ends in 4096: no warning.
    assert!(certs[0]["seconds_left"].as_i64().unwrap() > 14 * 86_400);
    assert!(certs[0].get("warning").is_none(), "{status}");
    let (_, metrics) = http_get(admin, "/metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("sluice_tls_certificate_expiry_seconds{worker=\"0\",file="),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_tls_handshakes_total{worker=\"0\",result=\"ok\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_client_hello_larger_than_the_head_buffer_completes() {
    // Post-quantum key shares make a browser's ClientHello about 1.8 KB;
    // this one carries 4 KiB of ALPN names, more than the 1 KiB head
    // buffer a new connection is read into, so it takes several reads
    // with no new readiness event between them.
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    for reject in [false, true] {
        let cert = TestCert::new(&format!("bighello-{reject}"));
        let proxy = start_tls_proxy(upstream.addr, &cert, |c| {
            if reject {
                c.tls_unknown_sni = sluice::UnknownSni::Reject;
            }
        });
        let names = padded_alpn(64);
        let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        let mut s = tls_connect(proxy.tls, &client_config(&cert, &names));
        s.write_all(b"GET /big-hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let (status, _, body) = read_length_response(&mut s);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"/big-hello"[..]),
            "reject {reject}"
        );
    }
}

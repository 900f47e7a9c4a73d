//! Client certificates (mTLS): optional or required, X-Forwarded-Client-Cert never forged.

use super::*;

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

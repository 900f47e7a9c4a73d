//! Bytes that are not TLS on the TLS port: plain HTTP gets a 400 naming HTTPS, others a close.

use super::*;

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

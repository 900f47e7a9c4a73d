//! What the ClientHello names: ALPN (none, http/1.0, nothing in common) and SNI under reject.

use super::*;

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

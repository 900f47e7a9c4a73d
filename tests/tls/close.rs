//! close_notify: the proxy answers, then closes cleanly and at once.

use super::*;

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

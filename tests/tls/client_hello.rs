//! ClientHellos that are slow, over 8 KiB, in one-byte records or over the head buffer.

use super::*;

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

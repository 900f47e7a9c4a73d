//! Requests and bodies over TLS: keep-alive on one session, https upstream, 3 MiB each way.

use super::*;

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

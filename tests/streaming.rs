//! Bodies in both directions at once, and backpressure (ARCHITECTURE.md §1, §4):
//! an upstream may answer before the request body is complete, a client may
//! send the rest only after it saw the start of the answer, and a slow
//! reader sets the pace without the proxy buffering everything.

mod util;

use std::time::Duration;

use util::*;

#[test]
fn bodies_flow_both_ways_at_once() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        let Some(mut req) = conn.read_request_head() else {
            return;
        };
        let Ok(first) = conn.wire.read_exact_bytes(5) else {
            return;
        };
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcde");
        let Ok(rest) = conn.wire.read_exact_bytes(5) else {
            return;
        };
        req.body = [first, rest].concat();
        conn.record(req);
        conn.send(b"fghij");
        conn.hold_until_closed();
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"POST /both HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n01234");

    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("10"));
    assert_eq!(client.read_bytes(5), b"abcde", "first part of the response");

    // Only now the rest of the request body.
    client.send(b"56789");
    assert_eq!(client.read_bytes(5), b"fghij", "rest of the response");
    assert_eq!(upstream.single_request().body, b"0123456789");
}

#[test]
fn early_upstream_answer_reaches_client_before_request_body_is_complete() {
    let upstream = Upstream::start(answer_early(ok_response("early")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"POST /early HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n01234");

    // Half the body is still missing.
    let resp = client.read_response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"early");
}

/// An early answer from an upstream that keeps its connection: the client
/// is told the connection closes after it (`Connection: close`, RFC 9112
/// §9.6), and it does.
#[test]
fn early_answer_says_connection_close_and_the_connection_closes() {
    let upstream = Upstream::start(answer_early(ok_response("early")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(
        b"POST /early HTTP/1.1\r\nHost: example.test\r\nContent-Length: 1000000\r\n\r\n01234",
    );
    let resp = client.read_response();
    assert_eq!(resp.body, b"early");
    assert!(resp.says_close(), "{}", preview(&resp.raw()));
    client.assert_closed();
}

#[test]
fn rest_of_body_after_early_answer_is_never_parsed_as_a_request() {
    let upstream = Upstream::start(answer_early(ok_response("early")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"POST /early HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n01234");
    assert_eq!(client.read_response().body, b"early");

    // ARCHITECTURE.md leaves it open whether the proxy forwards the rest or gives
    // up the connection; either way the rest is body, never a request.
    client.send_lossy(b"56789");
    client.send_lossy(get("/next"));
    match client.try_read_response(false) {
        Ok(next) => assert_eq!(
            next.status,
            200,
            "after the early answer: {}",
            preview(&next.raw())
        ),
        Err(e) => assert_eq!(
            e.kind(),
            std::io::ErrorKind::UnexpectedEof,
            "neither an answer nor a close: {e}"
        ),
    }
    for req in upstream.requests() {
        assert!(
            req.target == "/early" || req.target == "/next",
            "body bytes reached the upstream as a request: {}",
            preview(&req.head)
        );
    }
}

#[test]
fn large_bodies_pass_byte_for_byte_both_ways() {
    const SIZE: usize = 1024 * 1024;
    let response_body: Vec<u8> = (0..SIZE).map(|i| (i * 7 % 251) as u8).collect();
    let mut response = format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n").into_bytes();
    response.extend_from_slice(&response_body);
    let upstream = Upstream::start(respond_forever(response));
    let proxy = start_forward_proxy(upstream.addr, |_| {});

    let request_body: Vec<u8> = (0..SIZE).map(|i| (i * 13 % 241) as u8).collect();
    let mut request =
        format!("POST /big HTTP/1.1\r\nHost: example.test\r\nContent-Length: {SIZE}\r\n\r\n")
            .into_bytes();
    request.extend_from_slice(&request_body);

    let mut client = proxy.client();
    let resp = client.round_trip(&request);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body.len(), SIZE);
    assert!(
        resp.body == response_body,
        "response body changed on the way"
    );
    let req = upstream.single_request();
    assert_eq!(req.body.len(), SIZE);
    assert!(req.body == request_body, "request body changed on the way");
}

#[test]
fn slow_upstream_reader_keeps_proxy_buffering_bounded() {
    // Larger than what the kernel's socket buffers absorb on loopback.
    const SIZE: usize = 4 * 1024 * 1024;
    const HIGH: usize = 32 * 1024;
    let upstream = Upstream::start(read_slowly(
        16 * 1024,
        Duration::from_millis(1),
        ok_response("done"),
    ));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.high_watermark = HIGH;
        c.low_watermark = 8 * 1024;
    });
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 253) as u8).collect();
    let mut request =
        format!("POST /slow HTTP/1.1\r\nHost: example.test\r\nContent-Length: {SIZE}\r\n\r\n")
            .into_bytes();
    request.extend_from_slice(&body);

    let mut client = proxy.client();
    let resp = client.round_trip(&request);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"done");
    assert!(
        upstream.single_request().body == body,
        "request body changed on the way"
    );

    let stats = proxy.stats.snapshot();
    // ARCHITECTURE.md §4: at most the high watermark plus one read chunk per
    // direction; 64 KiB is a generous read chunk.
    assert!(
        stats.buffered_bytes_peak <= (HIGH + 64 * 1024) as u64,
        "proxy buffered {} bytes at peak with a {HIGH}-byte high watermark",
        stats.buffered_bytes_peak
    );
    assert!(
        stats.read_pauses >= 1,
        "the slow upstream never paused the client: {stats:?}"
    );
}

/// An early answer of 1 MiB while the client keeps uploading and reads the
/// answer slowly (about 250 KiB/s, 4 s): the proxy lingers, dropping the
/// upload, for as long as the client goes on taking the response, and
/// closes only once it left. Closing at a fixed 2 s reset the connection
/// and the kernel dropped the rest (RFC 9112 §9.6; a break-it pass got
/// 224 KB of 300 KB).
#[test]
fn an_early_answer_reaches_a_slow_reader_whole_while_it_keeps_uploading() {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    const N: usize = 1 << 20;
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request_head().is_none() {
            return;
        }
        let body = "y".repeat(N);
        if !conn.send(ok_response(&body)) {
            return;
        }
        // Takes and drops the upload until the proxy closes.
        let _ = std::io::copy(&mut conn.wire.stream, &mut std::io::sink());
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut stream = std::net::TcpStream::connect(proxy.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(
            b"POST /early HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100000000000\r\n\r\n",
        )
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let mut up = stream.try_clone().unwrap();
    let stop = done.clone();
    let uploader = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let end = Instant::now() + Duration::from_secs(15);
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            if up.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let mut piece = vec![0u8; 16 * 1024];
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end {
        match stream.read(&mut piece) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&piece[..n]),
        }
        std::thread::sleep(Duration::from_millis(60)); // pacing: a slow reader
    }
    done.store(true, Ordering::Relaxed);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = uploader.join();
    let split = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    let head = String::from_utf8_lossy(&got[..split]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(got.len() - split, N, "response body cut short; head {head}");
}

//! Upstream failures and what the client sees (ARCHITECTURE.md §8): 502 and 504
//! written by the proxy before a response began, a cut-short body after it
//! began.

mod util;

use std::time::Duration;

use util::*;

/// Sends one GET through `proxy` and expects the proxy's own `status`
/// error, then the connection closed.
#[track_caller]
fn assert_error_for_get(proxy: &Proxy, status: u16) {
    let mut client = proxy.client();
    let resp = client.round_trip(get("/"));
    assert_proxy_error(&resp, status);
    client.assert_closed();
}

#[test]
fn refused_upstream_gets_502() {
    let proxy = start_forward_proxy(refused_addr(), |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn upstream_closing_on_request_without_answer_gets_502() {
    let upstream = Upstream::start(close_on_request());
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 0);
    assert_error_for_get(&proxy, 502);
    assert_eq!(upstream.accepted(), 1);
}

#[test]
fn malformed_upstream_response_head_gets_502() {
    let upstream = Upstream::start(send_raw_and_hold(b"HTTP/1.1 OK maybe\r\n\r\n".to_vec()));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn garbage_from_upstream_gets_502() {
    let upstream = Upstream::start(send_raw_and_hold(
        b"\x00\x01 not http at all\r\n\r\n".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn silent_upstream_gets_504_at_read_timeout() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = Duration::from_millis(300);
    });
    assert_error_for_get(&proxy, 504);
}

#[test]
fn upstream_failure_after_chunked_response_began_cuts_client_off_without_last_chunk() {
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let rest = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(
        String::from_utf8_lossy(&rest),
        "5\r\nhello\r\n",
        "the client gets the chunk that came and no terminating chunk"
    );
}

#[test]
fn upstream_failure_inside_content_length_body_closes_client_early() {
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    let rest = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(String::from_utf8_lossy(&rest), "hello");
}

#[test]
fn oversized_upstream_response_head_gets_502() {
    let big = "h".repeat(70 * 1024);
    let upstream = Upstream::start(send_raw_and_hold(
        format!("HTTP/1.1 200 OK\r\nX-Big: {big}\r\nContent-Length: 2\r\n\r\nok").into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    assert_error_for_get(&proxy, 502);
}

#[test]
fn upstream_connect_timeout_gets_504_and_is_counted() {
    let blackhole = Blackhole::start();
    let proxy = start_forward_proxy(blackhole.addr, |c| {
        c.upstream_connect_timeout = Duration::from_millis(300);
    });
    assert_error_for_get(&proxy, 504);
    let stats = proxy.stats.snapshot();
    assert_eq!(stats.timeouts_connect, 1, "{stats:?}");
    assert_eq!(stats.status_504, 1, "{stats:?}");
}

#[test]
fn client_reset_while_waiting_for_the_upstream_frees_both_connections_at_once() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = Duration::from_secs(30);
    });
    let mut stream = std::net::TcpStream::connect(proxy.addr).unwrap();
    std::io::Write::write_all(&mut stream, &get("/slow")).unwrap();
    upstream.wait_requests(1);
    reset_stream(stream);
    assert_eventually("the proxy closes the client and its upstream", || {
        let s = proxy.stats.snapshot();
        s.downstream_active == 0 && s.upstream_connects == 1 && s.status_504 == 0
    });
}

#[test]
fn early_answer_then_upstream_reset_reaches_the_client() {
    // The upstream answers 413 without reading the body and closes with
    // body bytes unread, so its kernel resets the connection: the answer
    // is already in the proxy's receive queue and must not become a 502.
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request_head().is_some() {
            conn.send(
                b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbig",
            );
            std::thread::sleep(Duration::from_millis(50));
            drop(conn);
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let body_len = 8 * 1024 * 1024;
    client.send(format!(
        "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: {body_len}\r\n\r\n"
    ));
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..body_len / chunk.len() {
        client.send_lossy(&chunk);
    }
    let resp = client.read_response();
    assert_eq!(resp.status, 413);
    assert_eq!(resp.body, b"big");
}

#[test]
fn client_reset_after_half_close_while_waiting_frees_both_connections() {
    let upstream = Upstream::start(never_answer());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.upstream_read_timeout = Duration::from_secs(30);
    });
    let mut stream = std::net::TcpStream::connect(proxy.addr).unwrap();
    std::io::Write::write_all(&mut stream, &get("/slow")).unwrap();
    upstream.wait_requests(1);
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    reset_stream(stream);
    assert_eventually("the proxy closes the client and its upstream", || {
        proxy.stats.snapshot().downstream_active == 0
    });
}

#[test]
fn a_head_request_gets_the_proxys_error_answer_without_a_body() {
    let proxy = start_forward_proxy(refused_addr(), |_| {});
    let mut client = proxy.client();
    client.send(b"HEAD /dead HTTP/1.1\r\nHost: example.test\r\n\r\n");
    let resp = client.read_head_response();
    assert_eq!(resp.status, 502);
    // RFC 9110 §9.3.2: the length of the body a GET would get, no body.
    assert_eq!(resp.header("content-length"), Some("16"));
    assert!(client.read_until_closed(Duration::from_secs(3)).is_empty());
}

//! Issue 10's seven kinds of RFC gaps on real sockets: each example input
//! and what the client and the upstream observe (ARCHITECTURE.md §5, §6,
//! §8). The decisions themselves are unit-tested in
//! `src/http/tests/hardening.rs`, `chunked.rs`, `chunked_rejects.rs`,
//! `chunked_zeros.rs` and `response_interim.rs`.

mod util;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use util::*;

/// A proxy whose upstream is `up`, and a request sent raw through it.
fn one_exchange(up: &Upstream, request: &[u8]) -> Response {
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    client.send(request);
    client.read_response()
}

/// Sends `request` raw and expects the proxy's own `status`, the
/// connection closed, and nothing at the upstream.
#[track_caller]
fn refused_before_upstream(request: &[u8], status: u16) {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(request);
    assert_proxy_error(&resp, status);
    assert!(resp.has("date"), "the proxy's own answers carry Date");
    client.assert_closed();
    assert_eq!(up.accepted(), 0, "nothing reached the upstream");
}

// ---- Kind 1 ----------------------------------------------------------------

#[test]
fn targets_and_authorities_outside_rfc3986_get_400_and_never_reach_the_upstream() {
    for req in [
        "GET /public#/../admin HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /a\\..\\admin HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /a<b>|{}^`\" HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://a<b>/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://exa\tmple.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://exa mple.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n",
        // No host (RFC 9110 §4.2.1): `https://$host$request_uri` would
        // make `https:///evil.example/x`, which browsers read as
        // `https://evil.example/x`.
        "GET /evil.example/x HTTP/1.1\r\nHost: \r\n\r\n",
        "GET /evil.example/x HTTP/1.1\r\nHost: :80\r\n\r\n",
        "GET /evil.example/x HTTP/1.1\r\nHost: .\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [:]\r\n\r\n",
        "GET http://:80/x HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        refused_before_upstream(req.as_bytes(), 400);
    }
}

// ---- Kind 2 ----------------------------------------------------------------

#[test]
fn chunk_sizes_other_parsers_read_differently_are_refused_in_requests() {
    for body in [
        "5 \r\nhello\r\n0\r\n\r\n",
        "5\t\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0 \r\n\r\n",
        // 2^63: over the Content-Length bound, a signed 64-bit next hop
        // (nginx's off_t, curl) could not count it; leading zeros or not
        // (the bound is on the value).
        "8000000000000000\r\nabc",
        "00000000000000000000000000000000008000000000000000\r\nabc",
    ] {
        let req = format!("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
        let up = Upstream::start(respond_forever(ok_response("ok")));
        let proxy = start_forward_proxy(up.addr, |_| {});
        let mut client = proxy.client();
        let resp = client.round_trip(req.as_bytes());
        assert_proxy_error(&resp, 400);
        client.assert_closed();
        assert!(
            up.requests().is_empty(),
            "no request reached the upstream whole"
        );
    }
}

#[test]
fn chunk_size_with_whitespace_or_over_2_63_from_the_upstream_cuts_the_response() {
    for body in [
        b"5 \r\nhello\r\n0\r\n\r\n".as_slice(),
        b"8000000000000000\r\nabc",
    ] {
        let raw = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice(),
            body,
        ]
        .concat();
        let up = Upstream::start(send_raw_and_hold(raw));
        let proxy = start_forward_proxy(up.addr, |_| {});
        let mut client = proxy.client();
        client.send(get("/"));
        let head = client.read_response_head();
        assert_eq!(head.status, 200);
        let rest = client.read_until_closed(CLIENT_TIMEOUT);
        assert!(
            !rest.ends_with(b"0\r\n\r\n") && !rest.starts_with(b"8000"),
            "the body is cut, not relayed: {}",
            preview(&rest)
        );
    }
}

// ---- Kind 3 ----------------------------------------------------------------

#[test]
fn seventeen_early_hints_then_200_all_reach_the_client() {
    let mut raw = Vec::new();
    for _ in 0..17 {
        raw.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
    }
    raw.extend_from_slice(&ok_response("done"));
    let up = Upstream::start(send_raw_and_hold(raw));
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    for i in 0..17 {
        assert_eq!(client.read_response_head().status, 103, "interim {i}");
    }
    let resp = client.read_response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"done");
}

#[test]
fn switching_protocols_without_upgrade_field_gets_502() {
    let up = Upstream::start(send_raw_and_hold(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\r\n".to_vec(),
    ));
    let resp = one_exchange(
        &up,
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    assert_proxy_error(&resp, 502);
}

// ---- Kind 4 ----------------------------------------------------------------

#[test]
fn response_without_date_gets_one() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let resp = one_exchange(&up, &get("/"));
    assert_eq!(resp.status, 200);
    let date = resp.header("date").expect("Date added");
    assert_eq!(date.len(), 29, "IMF-fixdate: {date}");
    assert!(date.ends_with(" GMT"), "{date}");
}

#[test]
fn options_with_max_forwards_zero_is_answered_by_the_proxy() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(b"OPTIONS * HTTP/1.1\r\nHost: h\r\nMax-Forwards: 0\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert!(resp.header("allow").is_some_and(|a| a.contains("GET")));
    let resp = client.round_trip(b"TRACE / HTTP/1.1\r\nHost: h\r\nMax-Forwards: 0\r\n\r\n");
    assert_eq!(resp.status, 405, "keep-alive after the first answer");
    assert_eq!(up.accepted(), 0);
    // The 405 is the proxy's own answer: counted (the 200 is not an error).
    assert_eq!(proxy.stats.snapshot().status_405, 1);
    let mut client = proxy.client();
    let resp = client.round_trip(b"OPTIONS /a HTTP/1.1\r\nHost: h\r\nMax-Forwards: 3\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(up.single_request().header("max-forwards"), Some("2"));
}

#[test]
fn the_proxys_max_forwards_answer_to_an_http10_keep_alive_request_says_keep_alive() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    let request =
        b"OPTIONS * HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\nMax-Forwards: 0\r\n\r\n";
    for _ in 0..2 {
        let resp = client.round_trip(request);
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.header("connection"),
            Some("keep-alive"),
            "{}",
            preview(&resp.head)
        );
    }
    assert_eq!(up.accepted(), 0);
}

#[test]
fn the_proxys_max_forwards_answer_closes_when_the_request_asks_it_to() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(up.addr, |_| {});
    for request in [
        &b"OPTIONS * HTTP/1.1\r\nHost: h\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n"[..],
        b"TRACE / HTTP/1.1\r\nHost: h\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n",
        b"OPTIONS /a HTTP/1.0\r\nHost: h\r\nMax-Forwards: 0\r\n\r\n",
    ] {
        let mut client = proxy.client();
        let resp = client.round_trip(request);
        assert!(
            resp.status == 200 || resp.status == 405,
            "{}",
            preview(&resp.head)
        );
        assert!(resp.says_close(), "{}", preview(&resp.head));
        client.assert_closed();
    }
    assert_eq!(up.accepted(), 0);
}

/// Sends every request to an address known only once the proxy started:
/// its own.
struct ToItself(Arc<OnceLock<SocketAddr>>);

impl Filter for ToItself {
    fn upstream_peer(&self, _req: &RequestHead) -> Target {
        Peer::new(*self.0.get().expect("address set")).into()
    }
}

#[test]
fn a_proxy_forwarding_to_itself_answers_508_at_the_second_hop() {
    let own = Arc::new(OnceLock::new());
    let proxy = start_proxy(|_| {}, ToItself(own.clone()));
    own.set(proxy.addr).unwrap();
    let mut client = proxy.client();
    let resp = client.round_trip(get("/"));
    assert_eq!(resp.status, 508, "{}", preview(&resp.raw()));
}

// ---- Kind 5 ----------------------------------------------------------------

#[test]
fn response_with_120_set_cookie_fields_is_forwarded() {
    let mut raw = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
    for i in 0..120 {
        raw.push_str(&format!("Set-Cookie: c{i}=v\r\n"));
    }
    raw.push_str("\r\nok");
    let up = Upstream::start(respond_forever(raw.into_bytes()));
    let resp = one_exchange(&up, &get("/"));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header_all("set-cookie").len(), 120);
}

// ---- Kind 6 ----------------------------------------------------------------

#[test]
fn duplicate_content_length_goes_on_as_one_and_204_loses_it() {
    let up = Upstream::start(respond_forever(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
    ));
    let resp = one_exchange(&up, &get("/"));
    assert_eq!(resp.header_all("content-length"), vec!["5"]);
    assert_eq!(resp.body, b"hello");
    let up = Upstream::start(respond_forever(
        b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n".to_vec(),
    ));
    let resp = one_exchange(&up, &get("/"));
    assert_eq!(resp.status, 204);
    assert!(!resp.has("content-length"), "{}", preview(&resp.head));
}

// ---- Kind 7 ----------------------------------------------------------------

#[test]
fn tls_client_hello_gets_400_at_once_and_http2_preface_or_other_versions_505() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    // A head timeout far beyond the client's wait: the answer cannot come
    // from it.
    let proxy = start_forward_proxy(up.addr, |c| {
        c.request_head_timeout = Duration::from_secs(60)
    });
    for (bytes, status) in [
        (&b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..], 400),
        (&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], 505),
        // A whole head in another major version: 505 too (RFC 9110
        // §15.6.6), not 400.
        (&b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"[..], 505),
        (&b"GET / HTTP/3.0\r\nHost: h\r\n\r\n"[..], 505),
    ] {
        let mut client = proxy.client();
        client.send(bytes);
        let resp = client.read_response();
        assert_proxy_error(&resp, status);
        client.assert_closed();
    }
    assert_eq!(up.accepted(), 0);
}

// ---- Small, same area --------------------------------------------------------

#[test]
fn request_content_length_beyond_i63_gets_400() {
    refused_before_upstream(
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n",
        400,
    );
}

// ---- Siblings ----------------------------------------------------------------

#[test]
fn http10_upgrade_request_goes_upstream_without_upgrade() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let resp = one_exchange(
        &up,
        b"GET /ws HTTP/1.0\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let req = up.single_request();
    assert!(!req.has("upgrade"), "RFC 9110 §7.8: ignored in HTTP/1.0");
}

#[test]
fn gzip_until_close_to_an_http10_client_gets_502() {
    let up = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b coded".to_vec(),
    ));
    let resp = one_exchange(&up, b"GET / HTTP/1.0\r\n\r\n");
    assert_proxy_error(&resp, 502);
}

#[test]
fn interim_heads_over_the_response_head_size_in_sum_get_502() {
    let mut raw = Vec::new();
    for _ in 0..40 {
        raw.extend_from_slice(b"HTTP/1.1 102 Processing\r\n\r\n");
    }
    raw.extend_from_slice(&ok_response("late"));
    let up = Upstream::start(send_raw_and_hold(raw));
    let proxy = start_forward_proxy(up.addr, |c| c.max_response_head_size = 512);
    let mut client = proxy.client();
    client.send(get("/"));
    let all = client.read_until_closed(CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("HTTP/1.1 502 "), "{text}");
    assert!(!text.contains("late"), "{text}");
}

#[test]
fn own_replies_get_date_unless_the_filter_set_one() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_proxy(
        |_| {},
        ReplyFilter {
            upstream: up.addr,
            on_request: |req: &mut RequestHead| {
                let mut r = Reply::new(200, "mine");
                if req.target == "/dated" {
                    r.headers.append("Date", b"Sun, 06 Nov 1994 08:49:37 GMT");
                }
                Some(r)
            },
        },
    );
    let mut client = proxy.client();
    let resp = client.round_trip(get("/"));
    assert_eq!(resp.header_all("date").len(), 1);
    let resp = client.round_trip(get("/dated"));
    assert_eq!(
        resp.header_all("date"),
        vec!["Sun, 06 Nov 1994 08:49:37 GMT"]
    );
}

/// Odd spellings of the framing fields (TE list tricks, a Content-Length
/// with leading zeros) reach the upstream in the one spelling every parser
/// reads alike, with the body byte for byte.
#[test]
fn framing_fields_reach_the_upstream_in_canonical_form() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let rows: [(&[u8], &str, &str, &[u8]); 3] = [
        (
            b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ,chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            "transfer-encoding",
            "chunked",
            b"3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            "transfer-encoding",
            "chunked",
            b"3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0003\r\n\r\nabc",
            "content-length",
            "3",
            b"abc",
        ),
    ];
    for (n, (request, field, value, body)) in rows.into_iter().enumerate() {
        assert_eq!(one_exchange(&up, request).status, 200);
        let got = up.wait_requests(n + 1).pop().unwrap();
        assert_eq!(
            got.header_all(field),
            vec![value.to_string()],
            "{}",
            preview(&got.head)
        );
        assert_eq!(got.body, body);
    }
}

/// A chunked body whose sizes carry hundreds of leading zeros (legal:
/// RFC 9112 §7.1 `chunk-size = 1*HEXDIG`, HTTPWookiee's test 2030 sends
/// 33) is served, and goes on with each size as its first digit and its
/// significant ones, both ways: the request to the upstream, the response
/// to the client. Sent whole and in pieces, so the zeros cross reads.
#[test]
fn chunk_sizes_with_leading_zeros_go_on_without_them() {
    let zeros = "0".repeat(300);
    let body = format!("{zeros}3\r\nabc\r\n{zeros}0\r\n\r\n");
    let resp_body = format!("{zeros}5\r\nhello\r\n{zeros}0\r\n\r\n");
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_string();
    let (h, rb) = (head.clone(), resp_body.clone());
    let up = Upstream::start(move |mut conn: UpConn| {
        while conn.read_request().is_some() {
            // The head with the first zeros, then the rest in two writes.
            let (a, b) = rb.split_at(150);
            let (b, c) = b.split_at(200);
            if !(conn.send(format!("{h}{a}")) && conn.send(b) && conn.send(c)) {
                return;
            }
        }
    });
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut client = proxy.client();
    let req_head = "POST /z HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    // Whole, then the head alone and the body in two pieces.
    client.send(format!("{req_head}{body}"));
    let whole = client.read_response();
    client.send(req_head);
    let (a, b) = body.split_at(120);
    client.send(a);
    client.send(b);
    let pieces = client.read_response();
    for resp in [whole, pieces] {
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.body,
            b"05\r\nhello\r\n0\r\n\r\n",
            "{}",
            preview(&resp.body)
        );
    }
    for got in up.wait_requests(2) {
        assert_eq!(
            got.body,
            b"03\r\nabc\r\n0\r\n\r\n",
            "{}",
            preview(&got.body)
        );
    }
}

/// An absolute-form request whose `Host` is not the target's authority
/// (RFC 9112 §3.2: a client sends one identical to it), an empty or
/// whitespace-only `Host` included, gets 400 and reaches no upstream; one
/// that agrees (any case, the default port) is served with the
/// authority as `Host`.
#[test]
fn absolute_form_with_another_host_is_refused() {
    for host in ["\t", " ", "", "b.example", "a.example:8080"] {
        let req = format!("GET http://a.example/ HTTP/1.1\r\nHost: {host}\r\n\r\n");
        refused_before_upstream(req.as_bytes(), 400);
    }
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let resp = one_exchange(
        &up,
        b"GET http://a.example/p HTTP/1.1\r\nHost: A.example:80\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let got = up.single_request();
    assert_eq!(got.header_all("host"), vec!["a.example".to_string()]);
}

/// An upstream that would take the h2c upgrade (Tomcat, Jetty, Apache
/// with `Protocols h2c`).
const SWITCH_TO_H2C: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

#[test]
fn an_h2c_upgrade_is_not_offered_to_the_upstream() {
    // h2c smuggling: through a tunnel to an h2c upstream the client would
    // send HTTP/2 requests the proxy never sees (routes, allow/deny,
    // header rules, access log). RFC 9113 §3.1 deprecates the upgrade;
    // HTTP2-Settings is connection-specific (RFC 7540 §3.2.1).
    for connection in ["Upgrade", "Upgrade, HTTP2-Settings"] {
        let up = Upstream::start(send_raw_and_hold(SWITCH_TO_H2C.to_vec()));
        let request = format!(
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: {connection}\r\nUpgrade: h2c\r\n\
             HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
        );
        let resp = one_exchange(&up, request.as_bytes());
        assert_proxy_error(&resp, 502);
        let req = up.single_request();
        assert!(
            !req.has("upgrade"),
            "{connection}: Upgrade: h2c went upstream"
        );
        assert!(!req.has("http2-settings"), "{connection}");
        assert_ne!(req.header("connection"), Some("upgrade"), "{connection}");
    }
    // Offered beside another protocol, h2c (and h2, RFC 9113 §3.2) alone
    // is dropped.
    let up = Upstream::start(send_raw_and_hold(SWITCH_TO_H2C.to_vec()));
    let resp = one_exchange(
        &up,
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: H2C, h2, websocket\r\n\r\n",
    );
    assert_proxy_error(&resp, 502);
    assert_eq!(up.single_request().header("upgrade"), Some("websocket"));
}

#[test]
fn underscore_spellings_of_the_forwarding_fields_do_not_reach_the_upstream() {
    // CGI-style servers (WSGI, Rack, PHP) read `X_Forwarded_Proto` and
    // `X-Forwarded-Proto` as one variable: a client's underscore spelling
    // would stand in for the field the proxy set (Puma CVE-2024-45614).
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let resp = one_exchange(
        &up,
        b"GET / HTTP/1.1\r\nHost: h\r\nX_Forwarded_Proto: https\r\n\
          X-Forwarded_For: 6.6.6.6\r\nx-forwarded-client_cert: Hash=evil\r\n\
          X_Custom: kept\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let req = up.single_request();
    for name in [
        "X_Forwarded_Proto",
        "X-Forwarded_For",
        "x-forwarded-client_cert",
    ] {
        assert!(!req.has(name), "{name} went upstream");
    }
    assert_eq!(req.header("x-forwarded-proto"), Some("http"));
    assert_eq!(req.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(req.header("x_custom"), Some("kept"));
}

//! Body framing (ARCHITECTURE.md §5): bad request framing is refused before any
//! upstream is contacted, bodiless responses stay bodiless, and chunked or
//! until-close bodies pass byte for byte.

mod util;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use util::*;

/// Sends `request` through a proxy and expects the proxy's own `status`
/// error, the connection closed, and no upstream connection at all.
#[track_caller]
fn assert_refused(request: &[u8], status: u16) {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send_lossy(request);
    let resp = client.read_response();
    assert_proxy_error(&resp, status);
    client.assert_closed();
    assert_stays(Duration::from_millis(100), "no upstream connection", || {
        upstream.accepted() == 0
    });
}

#[test]
fn content_length_with_transfer_encoding_gets_400() {
    assert_refused(
        b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn differing_content_length_values_get_400() {
    assert_refused(
        b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\
          Content-Length: 6\r\n\r\nhello!",
        400,
    );
}

#[test]
fn transfer_encoding_not_ending_in_chunked_gets_400() {
    assert_refused(
        b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: gzip\r\n\r\nxxxx",
        400,
    );
}

#[test]
fn garbage_request_line_gets_400() {
    assert_refused(b"this is not an http request line\r\n\r\n", 400);
}

#[test]
fn request_head_over_max_size_gets_431() {
    let mut request = b"GET / HTTP/1.1\r\nHost: example.test\r\nX-Big: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', 70 * 1024));
    request.extend_from_slice(b"\r\n\r\n");
    assert_refused(&request, 431);
}

/// An upstream that answers `/empty` (or any HEAD) with `empty_head` and
/// everything else with 200 "hello".
fn bodiless_upstream(empty_head: &'static str) -> Upstream {
    Upstream::start(serve(move |req| {
        if req.method == "HEAD" || req.target == "/empty" {
            empty_head.as_bytes().to_vec()
        } else {
            ok_response("hello")
        }
    }))
}

#[test]
fn head_response_with_content_length_has_no_body_and_next_request_works() {
    let upstream = bodiless_upstream("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"HEAD /thing HTTP/1.1\r\nHost: example.test\r\n\r\n");
    let head = client.read_head_response();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("5"));
    let next = client.round_trip(get("/thing"));
    assert_eq!(next.status, 200, "{}", preview(&next.raw()));
    assert_eq!(next.body, b"hello");
}

#[test]
fn status_204_with_content_length_has_no_body_and_next_request_works() {
    let upstream = bodiless_upstream("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n");
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let empty = client.round_trip(get("/empty"));
    assert_eq!(empty.status, 204);
    let next = client.round_trip(get("/full"));
    assert_eq!(next.status, 200, "{}", preview(&next.raw()));
    assert_eq!(next.body, b"hello");
}

#[test]
fn status_304_with_content_length_has_no_body_and_next_request_works() {
    let upstream = bodiless_upstream("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n");
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let empty = client.round_trip(get("/empty"));
    assert_eq!(empty.status, 304);
    let next = client.round_trip(get("/full"));
    assert_eq!(next.status, 200, "{}", preview(&next.raw()));
    assert_eq!(next.body, b"hello");
}

#[test]
fn head_response_with_both_framing_fields_gets_502_and_its_connection_is_not_reused() {
    // RFC 9112 §6.3 step 3: a head with Transfer-Encoding and Content-Length
    // is an error whatever the method; it was forwarded with both to a HEAD
    // and its connection pooled (found by a break-it pass).
    let upstream = bodiless_upstream(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n",
    );
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"HEAD /thing HTTP/1.1\r\nHost: example.test\r\n\r\n");
    let head = client.read_head_response();
    assert_eq!(head.status, 502);
    let mut client = proxy.client();
    let next = client.round_trip(get("/thing"));
    assert_eq!(next.status, 200, "{}", preview(&next.raw()));
    assert_eq!(next.body, b"hello");
    assert_eq!(
        upstream.accepted(),
        2,
        "the HEAD's connection was not reused"
    );
}

const CHUNKED_REQUEST_BODY: &str = "5;ext=1\r\nhello\r\n\
     7;name=\"quoted value\"\r\n, world\r\n\
     0;last=yes\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n";

#[test]
fn chunked_request_with_extensions_and_trailers_arrives_byte_for_byte() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(format!(
        "POST /up HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\
         Trailer: X-Checksum, X-More\r\n\r\n{CHUNKED_REQUEST_BODY}"
    ));
    assert_eq!(resp.status, 200);
    let req = upstream.single_request();
    assert_eq!(req.header("transfer-encoding"), Some("chunked"));
    assert_eq!(req.header("trailer"), Some("X-Checksum, X-More"));
    assert_eq!(
        String::from_utf8_lossy(&req.body),
        CHUNKED_REQUEST_BODY,
        "chunked body upstream"
    );
}

#[test]
fn chunked_request_sent_in_small_pieces_arrives_byte_for_byte() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"POST /up HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in CHUNKED_REQUEST_BODY.as_bytes().chunks(3) {
        client.send(piece);
        // Pacing so the pieces arrive as separate segments.
        thread::sleep(Duration::from_millis(1));
    }
    let resp = client.read_response();
    assert_eq!(resp.status, 200);
    let req = upstream.single_request();
    assert_eq!(String::from_utf8_lossy(&req.body), CHUNKED_REQUEST_BODY);
}

#[test]
fn chunked_response_with_extensions_and_trailers_arrives_byte_for_byte() {
    let body = "4;a=b\r\nwiki\r\n5\r\npedia\r\nE; note=\"x y\"\r\n in\r\n\r\nchunks.\r\n\
                0\r\nX-Sum: 42\r\n\r\n";
    let upstream = Upstream::start(respond_forever(
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n{body}")
            .into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(get("/chunks"));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    assert_eq!(resp.header("trailer"), Some("X-Sum"));
    assert_eq!(String::from_utf8_lossy(&resp.body), body);
    // The proxy found the end of the body: the connection still works.
    let again = client.round_trip(get("/chunks"));
    assert_eq!(String::from_utf8_lossy(&again.body), body);
}

#[test]
fn content_length_request_body_arrives_byte_for_byte() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let mut request = format!(
        "PUT /blob HTTP/1.1\r\nHost: example.test\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let resp = proxy.client().round_trip(&request);
    assert_eq!(resp.status, 200);
    assert!(
        upstream.single_request().body == body,
        "request body changed on the way"
    );
}

#[test]
fn response_until_close_reaches_an_http11_client_chunk_encoded_and_its_connection_stays() {
    // nginx (`chunked_transfer_encoding on`) and HAProxy do the same: the
    // client keeps its connection, and the last chunk says the body is
    // whole.
    let body: String = "0123456789abcdef".repeat(1024);
    let upstream = Upstream::start(send_raw_and_close(
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}").into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for round in 0..2 {
        let resp = client.round_trip(get("/stream"));
        assert_eq!(resp.status, 200, "{round}");
        assert_eq!(resp.header("transfer-encoding"), Some("chunked"), "{round}");
        assert!(!resp.has("content-length") && !resp.says_close(), "{round}");
        let (data, trailers) = dechunk(&resp.body);
        assert!(data == body.as_bytes(), "body changed on the way");
        assert!(trailers.is_empty());
    }
    assert_eq!(
        upstream.accepted(),
        2,
        "the upstream's closed connection is not reused"
    );
}

#[test]
fn response_until_close_cut_by_a_reset_ends_without_the_last_chunk() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(b"HTTP/1.1 200 OK\r\n\r\nthe first part");
            thread::sleep(Duration::from_millis(50));
        }
        conn.reset();
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/cut"));
    let head = client.read_response_head();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let rest = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(
        rest, b"e\r\nthe first part\r\n",
        "no last chunk after a cut"
    );
}

#[test]
fn response_until_close_reaches_an_http10_client_until_close() {
    let body: String = "0123456789abcdef".repeat(1024);
    let upstream = Upstream::start(send_raw_and_close(
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}").into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET /stream HTTP/1.0\r\nHost: example.test\r\n\r\n");
    let resp = client.read_response_head();
    assert_eq!(resp.status, 200);
    assert!(
        !resp.has("content-length") && !resp.has("transfer-encoding"),
        "{}",
        preview(&resp.head)
    );
    let got = client.read_until_closed(CLIENT_TIMEOUT);
    assert_eq!(got.len(), body.len(), "until-close body length");
    assert!(
        got == body.as_bytes(),
        "until-close body changed on the way"
    );
}

#[test]
fn interim_100_continue_and_final_response_arrive_in_order() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(b"HTTP/1.1 100 Continue\r\n\r\n");
            conn.send(ok_response("final"));
        }
        conn.hold_until_closed();
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let interim = client.read_response();
    assert_eq!(interim.status, 100, "{}", preview(&interim.raw()));
    let last = client.read_response();
    assert_eq!(last.status, 200);
    assert_eq!(last.body, b"final");
}

#[test]
fn interim_heads_final_response_and_close_in_one_read_all_reach_the_client() {
    // Two 1xx heads, the final response and the upstream's FIN arrive
    // together: every head is forwarded and the response completes (RFC
    // 9110 §15.2). Taking one head per round left the final head buffered
    // while the next read saw only the FIN: 502 in a third of the tries.
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n\
          HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
            .to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    for i in 0..20 {
        let mut client = proxy.client();
        client.send(get_close("/"));
        let statuses: Vec<u16> = (0..3).map(|_| client.read_response().status).collect();
        assert_eq!(statuses, [102, 103, 200], "try {i}");
    }
    assert_eq!(proxy.stats.snapshot().status_502, 0);
}

#[test]
fn content_length_not_digits_gets_400() {
    assert_refused(
        b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5x\r\n\r\nhello",
        400,
    );
}

#[test]
fn too_many_header_fields_get_431() {
    let mut request = b"GET / HTTP/1.1\r\nHost: example.test\r\n".to_vec();
    for i in 0..150 {
        request.extend_from_slice(format!("X-Field-{i}: v\r\n").as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    assert_refused(&request, 431);
}

#[test]
fn request_head_just_under_max_size_passes() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let big = "b".repeat(60 * 1024);
    let resp = proxy.client().round_trip(format!(
        "GET / HTTP/1.1\r\nHost: example.test\r\nX-Big: {big}\r\n\r\n"
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(
        upstream.single_request().header("x-big"),
        Some(big.as_str())
    );
}

#[test]
fn response_with_transfer_encoding_and_content_length_never_reaches_client_with_both() {
    let body = "5\r\nhello\r\n0\r\n\r\n";
    let upstream = Upstream::start(respond_forever(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n{body}"
        )
        .into_bytes(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(get("/"));
    if resp.status == 502 {
        // Refusing it as a smuggling attempt is allowed (RFC 9112 §6.3).
        return;
    }
    // Forwarding it is allowed only without Content-Length (RFC 9112 §6.3).
    assert_eq!(resp.status, 200);
    assert!(
        !resp.has("content-length"),
        "forwarded with both fields: {}",
        preview(&resp.head)
    );
    assert_eq!(String::from_utf8_lossy(&resp.body), body);
    assert_eq!(client.round_trip(get("/")).status, 200);
}

#[test]
fn response_with_chunked_applied_twice_gets_502() {
    // RFC 9112 §6.1: chunked must not be applied more than once. The head
    // went on as it came ("chunked" twice, in two fields or one) while the
    // proxy decoded it once; a downstream parser may frame it otherwise.
    for fields in [
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        // A parameter on the first does not make it another coding (curl:
        // "Unrecognized transfer encoding" for the head as it went on).
        "Transfer-Encoding: chunked;x=1, chunked\r\n",
        "Transfer-Encoding: chunked ;x=1\r\nTransfer-Encoding: chunked\r\n",
    ] {
        let upstream = Upstream::start(respond_forever(
            format!("HTTP/1.1 200 OK\r\n{fields}\r\n5\r\nhello\r\n0\r\n\r\n").into_bytes(),
        ));
        let proxy = start_forward_proxy(upstream.addr, |_| {});
        let mut client = proxy.client();
        let resp = client.round_trip(get("/"));
        assert_proxy_error(&resp, 502);
    }
}

#[test]
fn invalid_host_and_target_forms_get_400_and_reach_no_upstream() {
    // (request, status, why)
    let rows: &[(&[u8], u16, &str)] = &[
        (
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            400,
            "space in Host (RFC 9112 §3.2)",
        ),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "slash in Host"),
        (
            b"GET / HTTP/1.1\r\nHost: ..example.com\r\n\r\n",
            400,
            "an empty label in Host (it matched *.example.com routes)",
        ),
        (
            b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
            400,
            "asterisk form is for OPTIONS only",
        ),
        (
            b"GET foo HTTP/1.1\r\nHost: a\r\n\r\n",
            400,
            "no form at all",
        ),
        (
            b"GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
            400,
            "absolute form of another scheme",
        ),
        (
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
            501,
            "authority form: CONNECT is not done",
        ),
    ];
    for (request, status, why) in rows {
        let upstream = Upstream::start(respond_forever(ok_response("x")));
        let proxy = start_forward_proxy(upstream.addr, |_| {});
        let resp = proxy.client().round_trip(request);
        assert_eq!(resp.status, *status, "{why}");
        assert_eq!(
            upstream.accepted(),
            0,
            "{why}: nothing reaches the upstream"
        );
    }
}

#[test]
fn options_asterisk_and_bracketed_host_pass() {
    let upstream = Upstream::start(respond_forever(ok_response("x")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(b"OPTIONS * HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
    assert_eq!(resp.status, 200);
}

#[test]
fn request_line_over_the_head_limit_gets_414() {
    let mut request = b"GET /".to_vec();
    request.extend(std::iter::repeat_n(b'a', 70 * 1024));
    assert_refused(&request, 414);
}

#[test]
fn invalid_chunk_framing_in_a_later_read_never_reaches_the_client() {
    // The first chunk went on; the bytes that break the framing (here
    // followed by what a lenient client would read as a second response)
    // are dropped with the read they came in, and the response is cut.
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
            thread::sleep(Duration::from_millis(100));
            conn.send(b"zz\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON");
        }
        conn.hold_until_closed();
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/"));
    let got = client.read_until_closed(CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&got);
    assert!(
        !text.contains("zz") && !text.contains("POISON"),
        "refused bytes reached the client: {}",
        preview(&got)
    );
    // Either the head and the first chunk went before the bad read came
    // (the usual case), or both came in one read and the client got 502.
    assert!(
        text.ends_with("\r\n\r\n5\r\nhello\r\n") || text.starts_with("HTTP/1.1 502 "),
        "{}",
        preview(&got)
    );
}

/// An upstream that answers with a chunked head and `pieces`, one write
/// each with a pause between (so each is its own read at the proxy), then
/// closes.
fn chunked_in_pieces(pieces: Vec<&'static [u8]>) -> Upstream {
    Upstream::start(move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            for p in &pieces {
                conn.send(p);
                thread::sleep(Duration::from_millis(60));
            }
        }
        conn.close();
    })
}

const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

#[test]
fn a_response_cut_inside_its_last_chunk_or_trailers_never_gets_the_last_chunk() {
    // The last-chunk line (`0`) is what tells a client the body is whole;
    // lenient clients (Python's http.client, urllib3) take `0\r\n` and a
    // close, or even `0` and a close, for the end of the message. So the
    // last chunk and the trailer section go on only once the final CRLF
    // came: a cut before it reaches the client with no `0` line (DESIGN.md
    // §8). Whether the cut bytes came with the head (one read) or later.
    let cuts: [&[&[u8]]; 6] = [
        &[b"5\r\nhello\r\n", b"0"],
        &[b"5\r\nhello\r\n", b"00"],
        &[b"5\r\nhello\r\n", b"0;ext=1"],
        &[b"5\r\nhello\r\n", b"0\r\n"],
        &[b"5\r\nhello\r\n", b"0\r\n", b"X-Sum: 42\r\n"],
        &[b"5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r"],
    ];
    for (i, cut) in cuts.iter().enumerate() {
        for with_head in [false, true] {
            let mut pieces: Vec<&'static [u8]> = cut.to_vec();
            if with_head {
                let first: &'static [u8] = [CHUNKED_HEAD, pieces[0]].concat().leak();
                pieces[0] = first;
            } else {
                pieces.insert(0, CHUNKED_HEAD);
            }
            let upstream = chunked_in_pieces(pieces);
            let proxy = start_forward_proxy(upstream.addr, |_| {});
            let mut client = proxy.client();
            client.send(get("/cut"));
            let got = client.read_until_closed(CLIENT_TIMEOUT);
            let text = String::from_utf8_lossy(&got);
            assert!(
                text.starts_with("HTTP/1.1 200 ") && text.ends_with("\r\n\r\n5\r\nhello\r\n"),
                "cut {i} (with the head: {with_head}): {}",
                preview(&got)
            );
        }
    }
}

#[test]
fn a_last_chunk_and_trailers_split_across_reads_arrive_byte_for_byte() {
    // What the cut above holds back goes on once the body is whole.
    let splits: [&[&[u8]]; 3] = [
        &[b"5\r\nhello\r\n0", b"0", b"\r\n", b"X-Sum: 42\r\n", b"\r\n"],
        &[
            b"5\r\nhello\r\n00",
            b"0a\r\n0123456789\r\n0;x=y\r\nX-S",
            b"um: 1\r\n\r\n",
        ],
        &[b"5\r\nhello\r\n", b"0", b"\r\n\r\n"],
    ];
    for (i, split) in splits.iter().enumerate() {
        let mut pieces: Vec<&'static [u8]> = vec![CHUNKED_HEAD];
        pieces.extend_from_slice(split);
        let upstream = Upstream::start(move |mut conn: UpConn| {
            while conn.read_request().is_some() {
                for p in &pieces {
                    if !conn.send(p) {
                        return;
                    }
                    thread::sleep(Duration::from_millis(40));
                }
            }
        });
        let proxy = start_forward_proxy(upstream.addr, |_| {});
        let mut client = proxy.client();
        let resp = client.round_trip(get("/split"));
        let sent: Vec<u8> = split.concat();
        // Leading zeros of a size go on as one zero (ARCHITECTURE.md §5).
        let expected = String::from_utf8_lossy(&sent).replace("\r\n000a\r\n", "\r\n0a\r\n");
        let expected = expected.replace("\r\n00\r\n", "\r\n0\r\n");
        assert_eq!(String::from_utf8_lossy(&resp.body), expected, "split {i}");
        // The body's end was found: the connection goes on.
        let again = client.round_trip(get("/split"));
        assert_eq!(String::from_utf8_lossy(&again.body), expected, "split {i}");
    }
}

#[test]
fn a_request_body_cut_inside_its_last_chunk_never_gives_the_upstream_the_last_chunk() {
    // The request side of the hold above: a client that closes after the
    // start of its last chunk (`0`, `0\r\n`, trailers without the final
    // CRLF) must not hand the upstream a `0` line, which a lenient server
    // takes, with the close, for a whole body (DESIGN.md §8). Whether the
    // cut bytes came with the head (one read) or later.
    let cuts: [&[u8]; 5] = [b"0", b"00", b"0;ext=1", b"0\r\n", b"0\r\nX-Sum: 42\r\n\r"];
    for (i, cut) in cuts.iter().enumerate() {
        for with_head in [false, true] {
            let got: Arc<Mutex<Option<Vec<u8>>>> = Arc::new(Mutex::new(None));
            let sink = Arc::clone(&got);
            let upstream = Upstream::start(move |mut conn: UpConn| {
                if conn.read_request_head().is_some() {
                    let body = conn.wire.read_to_eof().unwrap_or_default();
                    *sink.lock().unwrap() = Some(body);
                }
            });
            let proxy = start_forward_proxy(upstream.addr, |_| {});
            let mut client = proxy.client();
            let head = b"POST /cut HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
            if with_head {
                client.send([&head[..], b"5\r\nhello\r\n", cut].concat());
            } else {
                client.send([&head[..], b"5\r\nhello\r\n"].concat());
                thread::sleep(Duration::from_millis(60));
                client.send(cut);
            }
            thread::sleep(Duration::from_millis(60));
            client.shutdown_write();
            let _ = client.read_until_closed(CLIENT_TIMEOUT);
            // The upstream's view once the proxy closed its connection.
            let deadline = Instant::now() + CLIENT_TIMEOUT;
            while got.lock().unwrap().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            let body = got.lock().unwrap().clone().unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&body),
                "5\r\nhello\r\n",
                "cut {i} (with the head: {with_head})"
            );
        }
    }
}

#[test]
fn a_request_last_chunk_split_across_reads_reaches_the_upstream_byte_for_byte() {
    // What the cut above holds back goes upstream once the body is whole.
    let pieces: [&[u8]; 5] = [b"5\r\nhello\r\n0", b"0", b"\r\n", b"X-Sum: 42\r\n", b"\r\n"];
    let upstream = Upstream::start(respond_forever(ok_response("done")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"POST /split HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for p in pieces {
        thread::sleep(Duration::from_millis(40));
        client.send(p);
    }
    let resp = client.read_response();
    assert_eq!(resp.status, 200);
    let req = upstream.single_request();
    assert_eq!(
        String::from_utf8_lossy(&req.body),
        "5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n"
    );
}

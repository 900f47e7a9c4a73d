//! Streams, request and response mapping (RFC 9113 §8), flow control,
//! the lifecycle (drain, ALPN, closes) and what is logged.

use super::*;

#[test]
fn rfc9113_3_4_the_server_preface_is_settings_with_the_stream_limit() {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |c| c.h2_max_concurrent_streams = 7);
    let mut c = H2Client::handshake_only(proxy.addr, &[]);
    let f = c.read_frame().expect("a frame");
    assert_eq!(f.kind, kind::SETTINGS);
    assert_eq!(f.flags & flag::ACK, 0);
    let params: HashMap<u16, u32> = f
        .payload
        .chunks(6)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    assert_eq!(params.get(&SETTINGS_MAX_CONCURRENT_STREAMS), Some(&7));
    assert_eq!(params.get(&0x2), Some(&0), "push off");
    // Our SETTINGS is acknowledged.
    let ack = c.read_until(Duration::from_secs(2), |f| {
        f.kind == kind::SETTINGS && f.flags & flag::ACK != 0
    });
    assert!(ack.is_some(), "SETTINGS ACK");
}

#[test]
fn many_streams_on_one_connection_each_get_their_answer() {
    let up = Upstream::start(|mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let body = format!("for {}", req.target);
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if !conn.send(resp) {
                return;
            }
        }
    });
    let (proxy, log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let ids: Vec<u32> = (0..60).map(|i| c.send_get(&format!("/s/{i}"))).collect();
    let got = c.responses(&ids, Duration::from_secs(10));
    for (i, id) in ids.iter().enumerate() {
        let r = &got[id];
        assert_eq!(r.status, 200, "stream {id}");
        assert_eq!(r.body, format!("for /s/{i}").as_bytes(), "stream {id}");
    }
    let recs = records(&log, 60);
    assert!(recs.iter().all(|r| r["protocol"] == "HTTP/2.0"));
    assert!(recs.iter().all(|r| r["stream_id"].is_u64()));
    // Requests went upstream as HTTP/1.1 with the authority as Host.
    let reqs = up.requests();
    assert_eq!(reqs.len(), 60);
    assert!(
        reqs.iter()
            .all(|r| r.header("host") == Some("test.example"))
    );
    // Via names the version the client spoke (RFC 9110 §7.6.3).
    assert!(
        reqs.iter()
            .all(|r| r.header("via").is_some_and(|v| v.starts_with("2 "))),
        "{:?}",
        reqs.first().map(|r| r.header("via"))
    );
}

#[test]
fn rfc9113_8_1_request_bodies_go_upstream_by_content_length_or_chunked_with_trailers() {
    let up = Upstream::start(|mut conn: UpConn| {
        while conn.read_request().is_some() {
            if !conn.send(ok_response("ok")) {
                return;
            }
        }
    });
    let (proxy, log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    // With content-length: as it is.
    let a = c.send_headers(
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "test.example"),
            (":path", "/cl"),
            ("content-length", "100000"),
        ],
        false,
    );
    c.send_data(a, &body, true);
    let r = c.responses(&[a], Duration::from_secs(5));
    assert_eq!(r[&a].status, 200);
    // Without: chunked, and a trailer section after the body.
    let b = c.send_headers(&request_fields("POST", "/chunked"), false);
    c.send_data(b, &body, false);
    let trailers = c.block(&[("x-checksum", "abc")]);
    c.send_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        b,
        &trailers,
    );
    let r = c.responses(&[b], Duration::from_secs(5));
    assert_eq!(r[&b].status, 200);
    let reqs = up.wait_requests(2);
    let cl = reqs.iter().find(|r| r.target == "/cl").unwrap();
    assert_eq!(cl.header("content-length"), Some("100000"));
    assert!(cl.body == body, "{} bytes came", cl.body.len());
    let ch = reqs.iter().find(|r| r.target == "/chunked").unwrap();
    assert_eq!(ch.header("transfer-encoding"), Some("chunked"));
    let (data, trailer) = dechunk(&ch.body);
    assert!(data == body, "{} bytes came", data.len());
    assert_eq!(trailer, b"x-checksum: abc\r\n");
    let recs = records(&log, 2);
    assert!(recs.iter().all(|r| r["bytes_in"] == 100_000));
}

#[test]
fn a_trailer_section_that_comes_in_the_same_read_as_the_head_goes_upstream() {
    // Found by a break-it pass: HEADERS, DATA and the trailing HEADERS in
    // one write (a small gRPC request) lost the trailers, which came
    // before the exchange started.
    let up = Upstream::start(|mut conn: UpConn| {
        while conn.read_request().is_some() {
            if !conn.send(ok_response("ok")) {
                return;
            }
        }
    });
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let id = c.next_stream();
    let head = c.block(&request_fields("POST", "/grpc"));
    let trailers = c.block(&[("grpc-status", "0"), ("x-checksum", "abc")]);
    let mut wire = H2Client::frame_bytes(kind::HEADERS, flag::END_HEADERS, id, &head);
    wire.extend(H2Client::frame_bytes(kind::DATA, 0, id, b"abc"));
    wire.extend(H2Client::frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &trailers,
    ));
    c.write(&wire);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 200);
    let req = up.single_request();
    let (data, trailer) = dechunk(&req.body);
    assert_eq!(data, b"abc");
    assert_eq!(trailer, b"grpc-status: 0\r\nx-checksum: abc\r\n");
}

#[test]
fn rfc9113_8_1_a_chunked_response_becomes_data_and_its_trailers_a_final_headers() {
    let up = Upstream::start(respond_forever(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n\
          5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-sum: 42\r\n\r\n"
            .to_vec(),
    ));
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let r = c.get("/t");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello, world");
    assert_eq!(r.trailers, vec![("x-sum".to_string(), "42".to_string())]);
    assert!(r.header("transfer-encoding").is_none(), "{:?}", r.headers);
}

#[test]
fn a_body_chunked_then_coded_again_is_refused_with_502_not_sent_as_its_content() {
    // `chunked, identity` (or `chunked` and `identity` in two fields):
    // chunked is not the final coding, so the body runs until close
    // (RFC 9112 §6.3 step 4) and is still chunk-coded. HTTP/2 cannot
    // announce the coding; sent as DATA, the chunk framing became the
    // content (`5\r\nhello\r\n0\r\n\r\n`). As for `chunked, gzip`: 502.
    for te in [
        "Transfer-Encoding: chunked, identity\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
    ] {
        let up = Upstream::start(send_raw_and_close(
            format!("HTTP/1.1 200 OK\r\n{te}\r\n5\r\nhello\r\n0\r\n\r\n").into_bytes(),
        ));
        let (proxy, _log) = h2_proxy(up.addr, |_| {});
        let mut c = H2Client::connect(proxy.addr);
        let r = c.get("/coded");
        assert_eq!(
            r.status,
            502,
            "{te:?}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
    }
    // `identity, chunked` ends in chunked: the body is de-chunked.
    let up = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            .to_vec(),
    ));
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let r = H2Client::connect(proxy.addr).get("/plain");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
}

#[test]
fn head_and_204_end_with_their_headers_and_a_100_goes_first() {
    let up = Upstream::start(|mut conn: UpConn| {
        while let Some(req) = conn.read_request_head() {
            let resp: &[u8] = match req.target.as_str() {
                "/head" => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                "/204" => b"HTTP/1.1 204 No Content\r\n\r\n",
                _ => {
                    // The 100 first; the body only then.
                    conn.send(b"HTTP/1.1 100 Continue\r\n\r\n");
                    let _ = conn.wire.read_exact_bytes(3);
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                }
            };
            if !conn.send(resp) {
                return;
            }
        }
    });
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let head = c.send_headers(&request_fields("HEAD", "/head"), true);
    let r = c.responses(&[head], Duration::from_secs(3));
    assert_eq!(r[&head].status, 200);
    assert!(r[&head].body.is_empty());
    let r = c.get("/204");
    assert_eq!(r.status, 204);
    let id = c.send_headers(
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "test.example"),
            (":path", "/continue"),
            ("expect", "100-continue"),
        ],
        false,
    );
    // The 100 comes before the body is sent.
    let interim = c.read_until(Duration::from_secs(3), |f| {
        f.kind == kind::HEADERS && f.stream == id
    });
    assert!(interim.is_some(), "an interim HEADERS");
    c.send_data(id, b"abc", true);
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].interim, vec![100]);
    assert_eq!(r[&id].status, 200);
    assert_eq!(r[&id].body, b"ok");
}

#[test]
fn a_stream_whose_window_is_closed_does_not_hold_the_others() {
    let big = vec![b'b'; 300_000];
    let big_resp = [
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", big.len()).into_bytes(),
        big.clone(),
    ]
    .concat();
    let up = Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            let resp = if req.target == "/big" {
                big_resp.clone()
            } else {
                ok_response("small")
            };
            if !conn.send(resp) {
                return;
            }
        }
    });
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    // Streams open with a 16 KiB window, and nothing is given back.
    let mut c = H2Client::connect_with(proxy.addr, &[(SETTINGS_INITIAL_WINDOW_SIZE, 16_384)]);
    c.auto_window = false;
    let slow = c.send_get("/big");
    let fast = c.send_get("/small");
    let r = c.responses(&[fast], Duration::from_secs(5));
    assert_eq!(r[&fast].body, b"small", "the fast stream finished");
    // The slow one got its window's worth, no more.
    let got: usize = c
        .backlog
        .iter()
        .filter(|f| f.kind == kind::DATA && f.stream == slow)
        .map(|f| f.payload.len())
        .sum();
    assert!(got <= 16_384, "{got} bytes past a 16 KiB window");
    // The rest waits in the stream's buffer, under its high watermark: the
    // upstream is not read past it (plus one read, as for HTTP/1).
    let high = Config::default().high_watermark as u64;
    assert_stays(
        Duration::from_millis(300),
        "the held stream stays under its watermark",
        || proxy.stats.snapshot().buffered_bytes <= high + 64 * 1024,
    );
    // Opening the windows lets it finish, byte for byte (the bytes read
    // already are in the backlog, which `responses` takes first).
    c.auto_window = true;
    let open = (1u32 << 30).to_be_bytes();
    c.send_frame(kind::WINDOW_UPDATE, 0, 0, &open);
    c.send_frame(kind::WINDOW_UPDATE, 0, slow, &open);
    let r = c.responses(&[slow], Duration::from_secs(10));
    assert!(r[&slow].body == big, "{} bytes", r[&slow].body.len());
}

#[test]
fn a_slow_upstream_on_one_stream_does_not_pause_another() {
    let up = Upstream::start(|mut conn: UpConn| {
        if let Some(req) = conn.read_request() {
            if req.target == "/slow" {
                conn.hold_until_closed();
                return;
            }
            conn.send(ok_response("quick"));
            conn.hold_until_closed();
        }
    });
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let _slow = c.send_get("/slow");
    let quick = c.send_get("/quick");
    let r = c.responses(&[quick], Duration::from_secs(5));
    assert_eq!(r[&quick].body, b"quick");
}

#[test]
fn without_http2_cleartext_the_preface_gets_505() {
    let up = answering("x");
    let proxy = start_forward_proxy(up.addr, |_| {});
    let mut c = proxy.client();
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let resp = c.read_response();
    assert_eq!(resp.status, 505);
}

#[test]
fn rfc9113_3_2_tls_offers_h2_first_and_no_http2_offers_http_1_1() {
    use std::io::{Read, Write};
    let up = answering("over tls");
    let cert = TestCert::new("h2alpn");
    let proxy = start_tls_proxy(up.addr, &cert, |_| {});
    let cfg = trusting_with(
        &[&cert.der],
        rustls::DEFAULT_VERSIONS,
        &[b"h2", b"http/1.1"],
    );
    let mut s = tls_connect(proxy.tls, &cfg);
    // The preface, an empty SETTINGS and a GET, then the answer's frames.
    let mut c = H2Client::frame_bytes(kind::SETTINGS, 0, 0, &[]);
    let mut enc = hpack::Encoder::new();
    let block = enc.encode(
        get_fields("/tls")
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    );
    c.extend(H2Client::frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &block,
    ));
    s.write_all(&[PREFACE, c.as_slice()].concat()).unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(8).any(|w| w == b"over tls") {
        let n = s.read(&mut buf).expect("frames over TLS");
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    // With --no-http2 the same client gets HTTP/1.1.
    let proxy = start_tls_proxy(up.addr, &cert, |c| c.http2 = false);
    let mut s = tls_connect(proxy.tls, &cfg);
    s.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(read_length_response(&mut s).0, 200);
}

#[test]
fn proxy_made_answers_end_their_streams_and_free_the_stream_limit() {
    // Every request gets the proxy's own 502 (nothing listens upstream).
    let (proxy, log) = h2_proxy(refused_addr(), |c| c.h2_max_concurrent_streams = 4);
    let mut c = H2Client::connect(proxy.addr);
    // More streams than the limit, four at a time: each answer must end
    // its stream, or the fifth batch is refused.
    for batch in 0..5 {
        let ids: Vec<u32> = (0..4)
            .map(|i| c.send_get(&format!("/b{batch}/{i}")))
            .collect();
        let got = c.responses(&ids, Duration::from_secs(5));
        for id in &ids {
            assert_eq!(
                got[id].status, 502,
                "batch {batch} stream {id}: {:?}",
                got[id]
            );
            assert!(got[id].body.starts_with(b"502"), "{:?}", got[id]);
        }
    }
    let recs = records(&log, 20);
    assert!(recs.iter().all(|r| r["status"] == 502));
}

#[test]
fn a_client_that_closes_its_socket_ends_its_streams_and_their_upstreams() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let closed = Arc::new(AtomicBool::new(false));
    let seen = closed.clone();
    let up = Upstream::start(move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.hold_until_closed();
            seen.store(true, Ordering::SeqCst);
        }
    });
    let (proxy, log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    c.send_get("/hang");
    assert_eventually("the upstream got the request", || up.requests().len() == 1);
    // Everything the proxy sent is read, then a clean close (a FIN, not a
    // reset): the stream must not keep the connection in CLOSE-WAIT.
    c.read_until(Duration::from_millis(200), |_| false);
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let recs = records(&log, 1);
    assert_eq!(recs[0]["termination"], "client_aborted");
    // Nothing of the connection is left: its upstream socket closed, the
    // client connection freed (not left in CLOSE-WAIT).
    assert_eventually("the upstream connection closed", || {
        closed.load(Ordering::SeqCst)
    });
    assert_eventually("the client connection is gone", || {
        proxy.stats.snapshot().downstream_active == 0
    });
    assert!(
        c.read_to_close(Duration::from_secs(3)).len() <= 1,
        "the proxy closed its side"
    );
}

#[test]
fn a_head_request_to_a_dead_upstream_gets_a_502_without_data() {
    let (proxy, _log) = h2_proxy(refused_addr(), |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let id = c.send_headers(&request_fields("HEAD", "/dead"), true);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 502);
    assert!(r[&id].body.is_empty(), "{:?}", r[&id]);
}

#[test]
fn rfc9113_8_2_3_cookie_crumbs_count_as_one_field() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let (proxy, _log) = h2_proxy(up.addr, |c| c.max_header_count = 20);
    let mut c = H2Client::connect(proxy.addr);
    let crumbs: Vec<String> = (0..50).map(|i| format!("c{i}=v{i}")).collect();
    let mut fields = get_fields("/cookies");
    fields.extend(crumbs.iter().map(|c| ("cookie", c.as_str())));
    let id = c.send_headers(&fields, true);
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].status, 200);
    let req = up.single_request();
    assert_eq!(req.header_all("cookie").len(), 1);
    assert!(req.header("cookie").unwrap().starts_with("c0=v0; c1=v1; "));
}

/// `n` bytes of DATA on `id` as raw frames of at most 16,384 bytes, the
/// last with END_STREAM if `end`.
fn raw_data(id: u32, n: usize, end: bool) -> Vec<u8> {
    let body = patterned(n);
    let mut wire = Vec::new();
    let chunks: Vec<&[u8]> = body.chunks(16_384).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let last = end && i + 1 == chunks.len();
        let flags = if last { flag::END_STREAM } else { 0 };
        wire.extend(H2Client::frame_bytes(kind::DATA, flags, id, chunk));
    }
    wire
}

/// A client that sends a POST of `len` bytes to `path` and its first
/// `sent` bytes (END_STREAM if that is all) before it reads anything.
fn post_before_settings(
    addr: std::net::SocketAddr,
    path: &str,
    len: usize,
    sent: usize,
) -> (H2Client, u32) {
    let mut c = H2Client::handshake_only(addr, &[]);
    let id = c.next_stream();
    let len_text = len.to_string();
    let head = c.block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "test.example"),
        (":path", path),
        ("content-length", &len_text),
    ]);
    let mut wire = H2Client::frame_bytes(kind::HEADERS, flag::END_HEADERS, id, &head);
    wire.extend(raw_data(id, sent, sent == len));
    c.write(&wire);
    (c, id)
}

#[test]
fn rfc9113_6_9_3_a_body_sent_before_our_settings_arrive_may_use_the_default_window() {
    // h2_initial_window_size under 65,535: a client that sends its body
    // before it read our SETTINGS (nghttp does) still has the default
    // window until it acknowledges them; it was reset with
    // FLOW_CONTROL_ERROR after 1,024 bytes (found by a break-it pass).
    let up = Upstream::start(|mut conn: UpConn| {
        while conn.read_request().is_some() {
            if !conn.send(ok_response("ok")) {
                return;
            }
        }
    });
    let (proxy, _log) = h2_proxy(up.addr, |c| c.h2_initial_window_size = 1024);
    // A whole 40,000-byte body before reading anything.
    let (mut c, id) = post_before_settings(proxy.addr, "/whole", 40_000, 40_000);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 200, "{:?}", r[&id]);
    assert_eq!(up.single_request().body, patterned(40_000));
    // 30,000 bytes before, the rest after the SETTINGS: the stream's
    // window shrinks to 1,024 less what was not yet granted back (negative
    // if the acknowledgement comes first) and is granted back as the
    // upstream takes the body.
    let (mut c, id) = post_before_settings(proxy.addr, "/split", 31_024, 30_000);
    let mut granted = 0_u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while granted < 30_000 {
        assert!(std::time::Instant::now() < deadline, "granted {granted}");
        let f = c.read_frame().expect("a frame");
        if f.kind == kind::SETTINGS && f.flags & flag::ACK == 0 {
            c.send_frame(kind::SETTINGS, flag::ACK, 0, &[]);
        }
        assert_ne!(f.kind, kind::RST_STREAM, "{f:?}");
        if f.kind == kind::WINDOW_UPDATE && f.stream == id {
            let b: [u8; 4] = f.payload[..4].try_into().unwrap();
            granted += u64::from(u32::from_be_bytes(b) & 0x7fff_ffff);
        }
    }
    let body = patterned(31_024);
    c.send_frame(kind::DATA, flag::END_STREAM, id, &body[30_000..]);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 200, "{:?}", r[&id]);
    let reqs = up.wait_requests(2);
    let split = reqs.iter().find(|r| r.target == "/split").unwrap();
    assert!(split.body == body, "{} bytes came", split.body.len());
}

#[test]
fn a_request_refused_for_its_fields_is_logged_with_them() {
    // A 400 for a :path that is no request-target was logged with an
    // empty method and target and no host (found by a break-it pass).
    let up = answering("x");
    let (proxy, log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let id = c.send_headers(&request_fields("GET", "/public%ZZ/x"), true);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 400);
    let rec = &records(&log, 1)[0];
    assert_eq!(rec["status"], 400, "{rec}");
    assert_eq!(rec["method"], "GET", "{rec}");
    assert_eq!(rec["target"], "/public%ZZ/x", "{rec}");
    assert_eq!(rec["host"], "test.example", "{rec}");
    assert_eq!(up.accepted(), 0);
}

//! The known attacks and malformed input: resets, rapid reset, CONTINUATION
//! and HPACK floods, ping floods, closed windows, malformed requests; each
//! with the answer the RFC or the peers give.

use super::*;

#[test]
fn rfc9113_6_4_a_client_reset_ends_the_exchange_and_closes_its_upstream() {
    let up = Upstream::start(|mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            if req.target == "/hang" {
                conn.hold_until_closed();
                return;
            }
            conn.send(ok_response("next"));
        }
    });
    let (proxy, log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let id = c.send_get("/hang");
    assert_eventually("the upstream got the request", || up.requests().len() == 1);
    c.send_frame(kind::RST_STREAM, 0, id, &0x8u32.to_be_bytes());
    let recs = records(&log, 1);
    assert_eq!(recs[0]["termination"], "client_aborted");
    assert_eq!(recs[0]["status"], 499);
    // The connection goes on.
    assert_eq!(c.get("/next").body, b"next");
}

/// 300 streams in one write, each HEADERS with END_STREAM then `second`'s
/// frame for it, to a fresh proxy allowing 100 streams; returns the
/// GOAWAY's error code (if one came before the close) and the upstream's
/// accepted connections.
fn burst_of_streams(second: &dyn Fn(u32) -> Vec<u8>) -> (Option<u32>, Vec<H2Frame>, usize) {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |c| c.h2_max_concurrent_streams = 100);
    let mut c = H2Client::connect(proxy.addr);
    let mut burst = Vec::new();
    for _ in 0..300 {
        let id = c.next_stream();
        let block = c.block(&get_fields("/r"));
        burst.extend(H2Client::frame_bytes(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            id,
            &block,
        ));
        burst.extend(second(id));
    }
    c.write_lossy(&burst);
    let frames = c.read_to_close(Duration::from_secs(3));
    let code = goaway(&frames).and_then(|f| f.error_code());
    (code, frames, up.accepted())
}

#[test]
fn rapid_reset_gets_goaway_enhance_your_calm_and_opens_no_upstream_for_reset_streams() {
    // HEADERS then RST_STREAM (CANCEL), 300 times, in one write.
    let (code, frames, accepted) = burst_of_streams(&|id| {
        H2Client::frame_bytes(kind::RST_STREAM, 0, id, &0x8u32.to_be_bytes())
    });
    assert_eq!(code, Some(ENHANCE_YOUR_CALM), "{frames:?}");
    // Streams reset in the read that opened them never reach an upstream
    // (a read boundary inside the burst may let one through).
    assert!(accepted <= 1, "{accepted} upstream connections");
}

#[test]
fn stream_errors_the_client_causes_count_as_resets_too() {
    // Not only its RST_STREAM: a stream the proxy must reset because of
    // the client's frames (a window overflow, DATA after END_STREAM) costs
    // the same, so a loop of them is rapid reset too (CVE-2023-44487).
    let overflow =
        |id: u32| H2Client::frame_bytes(kind::WINDOW_UPDATE, 0, id, &0x7fff_ffffu32.to_be_bytes());
    let data_after_end = |id: u32| H2Client::frame_bytes(kind::DATA, 0, id, b"x");
    for (name, second) in [
        (
            "WINDOW_UPDATE overflow",
            &overflow as &dyn Fn(u32) -> Vec<u8>,
        ),
        ("DATA after END_STREAM", &data_after_end),
    ] {
        let (code, frames, _) = burst_of_streams(second);
        assert_eq!(code, Some(ENHANCE_YOUR_CALM), "{name}: {frames:?}");
    }
}

#[test]
fn a_continuation_flood_is_bounded_and_ends_the_connection() {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |c| c.max_head_size = 16 * 1024);
    let mut c = H2Client::connect(proxy.addr);
    let id = c.next_stream();
    let block = c.block(&get_fields("/c"));
    c.send_frame(kind::HEADERS, 0, id, &block);
    let junk = vec![b'a'; 8 * 1024];
    let mut sent = 0;
    for _ in 0..1000 {
        if !c.write_lossy(&H2Client::frame_bytes(kind::CONTINUATION, 0, id, &junk)) {
            break;
        }
        sent += 1;
    }
    let frames = c.read_to_close(Duration::from_secs(3));
    let goaway = goaway(&frames);
    assert!(goaway.is_some(), "GOAWAY after {sent} CONTINUATION frames");
    assert_eq!(up.accepted(), 0);
}

#[test]
fn a_header_block_left_half_way_is_cut_by_the_request_head_timeout() {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |c| {
        c.request_head_timeout = Duration::from_millis(300);
    });
    let mut c = H2Client::connect(proxy.addr);
    // A first request, so the connection is past its first head.
    assert_eq!(c.get("/first").status, 200);
    let id = c.next_stream();
    let block = c.block(&get_fields("/half"));
    c.send_frame(kind::HEADERS, 0, id, &block);
    c.send_frame(kind::CONTINUATION, 0, id, &[0; 1000]);
    let frames = c.read_to_close(Duration::from_secs(5));
    let goaway = goaway(&frames);
    assert!(goaway.is_some(), "GOAWAY for the open block: {frames:?}");
    assert_eq!(up.accepted(), 1);
}

#[test]
fn an_hpack_bomb_gets_431_and_the_connection_goes_on() {
    let up = answering("fine");
    let (proxy, _log) = h2_proxy(up.addr, |c| c.max_head_size = 16 * 1024);
    let mut c = H2Client::connect(proxy.addr);
    // A 3,000-byte field added to the dynamic table once, then named by
    // its index 50 times: 150 KB decoded from a block of about 3 KB.
    let big = "v".repeat(3000);
    let mut block = c.block(&get_fields("/bomb"));
    // Literal with incremental indexing, new name (RFC 7541 §6.2.1).
    block.push(0x40);
    block.push(4);
    block.extend_from_slice(b"x-aa");
    block.push(0x7f);
    let mut n = 3000 - 127;
    while n >= 128 {
        block.push((n % 128 + 128) as u8);
        n /= 128;
    }
    block.push(n as u8);
    block.extend_from_slice(big.as_bytes());
    for _ in 0..50 {
        block.push(0x80 | 62); // the newest dynamic entry
    }
    let id = c.next_stream();
    c.send_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &block,
    );
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].status, 431);
    assert_eq!(up.accepted(), 0);
    let r = c.get("/after");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"fine");
}

#[test]
fn a_ping_flood_gets_goaway_enhance_your_calm() {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let mut burst = Vec::new();
    for i in 0..2000u64 {
        burst.extend(H2Client::frame_bytes(kind::PING, 0, 0, &i.to_be_bytes()));
    }
    c.write_lossy(&burst);
    let frames = c.read_to_close(Duration::from_secs(3));
    let goaway = goaway(&frames);
    assert_eq!(goaway.and_then(|f| f.error_code()), Some(ENHANCE_YOUR_CALM));
    let pongs = frames.iter().filter(|f| f.kind == kind::PING).count();
    assert!(pongs <= 1000, "{pongs} PING answers");
}

#[test]
fn a_client_that_never_opens_its_window_is_cut_by_the_send_timeout() {
    let body = "z".repeat(50_000);
    let up = Upstream::start(respond_forever(ok_response(&body)));
    let (proxy, log) = h2_proxy(up.addr, |c| {
        c.client_send_timeout = Duration::from_millis(300);
    });
    let mut c = H2Client::connect_with(proxy.addr, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    c.auto_window = false;
    let id = c.send_get("/held");
    let reset = c.read_until(Duration::from_secs(3), |f| {
        f.kind == kind::RST_STREAM && f.stream == id
    });
    assert!(reset.is_some(), "RST_STREAM after the send timeout");
    let recs = records(&log, 1);
    assert_eq!(recs[0]["termination"], "client_timeout");
}

#[test]
fn rfc9113_8_2_malformed_requests_are_reset_and_reach_no_upstream() {
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let cases: Vec<Vec<(&str, &str)>> = vec![
        // §8.2.2: a connection-specific field.
        [get_fields("/a"), vec![("connection", "keep-alive")]].concat(),
        // §8.2.2: TE other than trailers.
        [get_fields("/b"), vec![("te", "gzip")]].concat(),
        // §8.3.1: :path missing.
        vec![(":method", "GET"), (":scheme", "http"), (":authority", "a")],
    ];
    for fields in cases {
        let id = c.send_headers(&fields, true);
        let r = c.responses(&[id], Duration::from_secs(3));
        assert_eq!(r[&id].reset, Some(PROTOCOL_ERROR), "{fields:?}");
    }
    // §8.2.1: an upper-case field name (written raw: HPACK literal).
    let id = c.next_stream();
    let mut block = c.block(&get_fields("/c"));
    block.extend_from_slice(&[0x00, 5]);
    block.extend_from_slice(b"X-Bad");
    block.extend_from_slice(&[1, b'1']);
    c.send_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &block,
    );
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].reset, Some(PROTOCOL_ERROR));
    // §8.1.1: content-length that the DATA does not add up to.
    let id = c.send_headers(
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "test.example"),
            (":path", "/d"),
            ("content-length", "10"),
        ],
        false,
    );
    c.send_data(id, b"12345", true);
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].reset, Some(PROTOCOL_ERROR));
    // §8.3.1: :authority and Host naming different hosts: 400.
    let id = c.send_headers(
        &[get_fields("/e"), vec![("host", "other.example")]].concat(),
        true,
    );
    let r = c.responses(&[id], Duration::from_secs(3));
    assert_eq!(r[&id].status, 400);
    // The connection is still good.
    assert_eq!(c.get("/ok").status, 200);
    assert!(up.requests().iter().all(|r| r.target == "/ok"));
}

#[test]
fn rfc9110_8_6_repeated_content_length_fields_get_400_as_a_list_does() {
    // As for HTTP/1.1 (ARCHITECTURE.md §5, as nginx): several
    // `content-length` values, even equal ones, are refused, whether they
    // come as a list or as separate fields.
    let up = answering("x");
    let (proxy, _log) = h2_proxy(up.addr, |_| {});
    let mut c = H2Client::connect(proxy.addr);
    let cases: [&[(&str, &str)]; 2] = [
        &[("content-length", "5"), ("content-length", "5")],
        &[("content-length", "5, 5")],
    ];
    for cl in cases {
        let id = c.send_headers(
            &[request_fields("POST", "/cl"), cl.to_vec()].concat(),
            false,
        );
        c.send_data(id, b"12345", true);
        let r = c.responses(&[id], Duration::from_secs(3));
        assert_eq!(r[&id].status, 400, "{cl:?}");
    }
    assert_eq!(c.get("/ok").status, 200);
    assert!(up.requests().iter().all(|r| r.target == "/ok"));
}

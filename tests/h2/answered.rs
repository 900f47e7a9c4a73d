//! A stream answered in full while the client still sends its request
//! body (RFC 9113 §8.1): the rest of a body that fits the stream's
//! window is read and dropped, and the stream ends cleanly with the
//! client's END_STREAM, not RST_STREAM; a body the window cannot hold,
//! or a client that stops sending, still gets RST_STREAM(NO_ERROR).

use super::*;

/// A POST to `path` declaring `len` body bytes, HEADERS only.
fn post_head(c: &mut H2Client, len: usize) -> u32 {
    let len = len.to_string();
    let mut fields = request_fields("POST", "/up");
    fields.push(("content-length", &len));
    c.send_headers(&fields, false)
}

/// Frames read for up to `within` after the answer (the connection stays
/// open: read errors from the timeout end the wait).
fn frames_for(c: &mut H2Client, within: Duration) -> Vec<H2Frame> {
    let mut seen = Vec::new();
    c.read_until(within, |f| {
        seen.push(f.clone());
        false
    });
    seen
}

/// A proxy with `max_body_size = 100` (its upstream kept alive beside
/// it), a client, and a POST declaring `declared` bytes already answered
/// `413` (HEADERS only sent, no reset with the answer).
fn answered_413(declared: usize) -> (Upstream, Proxy, TempFile, H2Client, u32) {
    let up = answering("never");
    let (proxy, log) = h2_proxy(up.addr, |c| c.max_body_size = 100);
    let mut c = H2Client::connect(proxy.addr);
    let id = post_head(&mut c, declared);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 413);
    (up, proxy, log, c, id)
}

#[test]
fn an_early_413_waits_for_the_body_in_the_window_and_sends_no_reset() {
    // The answer comes before any DATA (the declared length is over the
    // limit), with no reset; then the client sends its body, as curl does.
    let (up, _proxy, _log, mut c, id) = answered_413(3000);
    c.send_data(id, &patterned(3000), true);
    let after = frames_for(&mut c, Duration::from_millis(2500));
    assert!(
        !after
            .iter()
            .any(|f| f.kind == kind::RST_STREAM || f.kind == kind::GOAWAY),
        "the stream ended cleanly: {after:?}"
    );
    // The connection goes on.
    assert_eq!(c.get("/next").status, 200);
    assert_eq!(up.requests().len(), 1, "only the GET went upstream");
}

#[test]
fn an_early_answer_to_a_body_larger_than_the_window_is_reset_after_it() {
    // 1 MiB declared: more than the stream's 65,535-byte window, so the
    // client could not finish without a WINDOW_UPDATE.
    let (_up, _proxy, _log, mut c, id) = answered_413(1 << 20);
    let reset = c
        .read_until(Duration::from_secs(3), |f| {
            f.kind == kind::RST_STREAM && f.stream == id
        })
        .and_then(|f| f.error_code());
    assert_eq!(reset, Some(NO_ERROR));
    assert_eq!(c.get("/next").status, 200);
}

#[test]
fn an_answered_stream_whose_client_stops_sending_is_reset_after_the_linger() {
    let (_up, _proxy, _log, mut c, id) = answered_413(3000);
    c.send_data(id, &patterned(1000), false);
    let reset = c
        .read_until(Duration::from_secs(6), |f| {
            f.kind == kind::RST_STREAM && f.stream == id
        })
        .expect("RST_STREAM once the linger ran out");
    assert_eq!(reset.error_code(), Some(NO_ERROR));
    // What the client sent before it saw the reset is ignored.
    c.send_data(id, &patterned(2000), true);
    assert_eq!(c.get("/next").status, 200);
}

#[test]
fn an_answered_stream_ended_by_trailers_or_reset_by_the_client_is_forgotten() {
    let up = answering("never");
    let (proxy, _log) = h2_proxy(up.addr, |c| {
        c.max_body_size = 100;
        c.h2_max_concurrent_streams = 2;
    });
    let mut c = H2Client::connect(proxy.addr);
    let a = post_head(&mut c, 3000);
    let b = post_head(&mut c, 3000);
    let r = c.responses(&[a, b], Duration::from_secs(5));
    assert_eq!((r[&a].status, r[&b].status), (413, 413));
    c.send_data(a, &patterned(500), false);
    let trailers = c.block(&[("x-checksum", "1")]);
    c.send_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        a,
        &trailers,
    );
    c.send_frame(kind::RST_STREAM, 0, b, &0x8u32.to_be_bytes());
    // Both slots are free again: two new streams are served.
    let x = c.send_get("/x");
    let y = c.send_get("/y");
    let r = c.responses(&[x, y], Duration::from_secs(5));
    assert_eq!((r[&x].status, r[&y].status), (200, 200));
    assert_eq!((r[&x].reset, r[&y].reset), (None, None));
    assert_eq!(c.get("/z").status, 200);
}

#[test]
fn the_last_request_of_a_connection_answered_early_gets_no_reset_with_its_answer() {
    // max_requests_per_connection = 1: the final GOAWAY goes with the
    // first request, and the early 413 was followed by RST_STREAM in the
    // same write (curl 7.88 over TLS: '(92) Stream error', 4/10 for 3 KB,
    // 10/10 for 200 KB). The stream is among those the GOAWAY serves: its
    // body is dropped as on any connection, then the connection closes.
    let up = answering("never");
    let (proxy, _log) = h2_proxy(up.addr, |c| {
        c.max_body_size = 100;
        c.max_requests_per_connection = 1;
    });
    let mut c = H2Client::connect(proxy.addr);
    let id = post_head(&mut c, 3000);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 413);
    assert_eq!(r[&id].reset, None, "no reset with the answer");
    c.send_data(id, &patterned(3000), true);
    let after = frames_for(&mut c, Duration::from_millis(2500));
    assert!(
        !after.iter().any(|f| f.kind == kind::RST_STREAM),
        "the stream ended cleanly: {after:?}"
    );
    // A body the window cannot hold: the reset comes, after the answer.
    let mut c = H2Client::connect(proxy.addr);
    let id = post_head(&mut c, 1 << 20);
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 413);
    assert_eq!(r[&id].reset, None, "no reset with the answer");
    let reset = c
        .read_until(Duration::from_secs(3), |f| {
            f.kind == kind::RST_STREAM && f.stream == id
        })
        .and_then(|f| f.error_code());
    assert_eq!(reset, Some(NO_ERROR));
    assert!(up.requests().is_empty(), "nothing went upstream");
}

#[test]
fn rfc9113_6_9_1_data_past_an_answered_streams_window_is_a_flow_control_error() {
    let (_up, _proxy, _log, mut c, id) = answered_413(200_000);
    // Five frames of 16,000 bytes: 80,000 past the stream's 65,535.
    for _ in 0..5 {
        c.send_frame(kind::DATA, 0, id, &patterned(16_000));
    }
    let reset = c
        .read_until(Duration::from_secs(3), |f| {
            f.kind == kind::RST_STREAM && f.stream == id
        })
        .expect("a reset of the stream");
    assert_eq!(reset.error_code(), Some(0x3), "FLOW_CONTROL_ERROR");
    assert_eq!(c.get("/next").status, 200);
}

#[test]
fn a_drain_keeps_an_answered_stream_until_its_linger_ends() {
    // A drain begins while the 413's body still comes (it fits the
    // window): the connection's idle grace (1 s) must not cut the 2 s
    // linger short. The stream still ends with RST_STREAM(NO_ERROR) once
    // the linger is over, then the connection closes; before, it closed
    // 1 s after the answer with no reset, while the client was sending.
    let (_up, proxy, _log, mut c, id) = answered_413(3000);
    let answered = std::time::Instant::now();
    c.send_data(id, &patterned(1000), false);
    proxy.handle.drain();
    let frames = c.read_to_close(Duration::from_secs(6));
    let reset = frames
        .iter()
        .find(|f| f.kind == kind::RST_STREAM && f.stream == id);
    assert_eq!(
        reset.and_then(|f| f.error_code()),
        Some(NO_ERROR),
        "the linger ran out before the close: {frames:?}"
    );
    assert!(
        answered.elapsed() >= Duration::from_millis(1800),
        "closed {:?} after the answer",
        answered.elapsed()
    );
}

//! Unit tests for `crate::conn::exchange`, without sockets: the request
//! half (body framing, EOF, abandon), the two verdicts it shares with the
//! response half — may the upstream connection be parked (ARCHITECTURE.md
//! §6), may a failed request be sent again (ARCHITECTURE.md §7) — one rule
//! per table row, and `rewind`.

use std::net::SocketAddr;
use std::time::Instant;

use crate::buffer::WatermarkBuffer;
use crate::conn::exchange::{Exchange, Resp};
use crate::filter::Peer;
use crate::http::request::is_idempotent;
use crate::http::{BodyDecoder, BodyKind, ParseError, ParseHead, RequestHead};

const MAX_RETRIES: u32 = 2;

const GET: &str = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
const GET_WITH_BODY: &str = "GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
const POST: &str = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
const POST_CHUNKED: &str = "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

fn buffer() -> WatermarkBuffer {
    WatermarkBuffer::new(vec![0; 1024], 1024, 256)
}

/// An exchange started for the request head `head` (framing and retry
/// class from the head, no upgrade), with empty buffers both ways.
#[track_caller]
fn started(head: &str) -> Exchange {
    let (req, len) = RequestHead::parse(head.as_bytes(), 100).unwrap().unwrap();
    assert_eq!(len, head.len());
    let framing = req.body_kind().unwrap();
    let idempotent = is_idempotent(&req.method);
    let mut ex = Exchange::blank(Instant::now());
    ex.req = req;
    let peer = Peer::new(SocketAddr::from(([127, 0, 0, 1], 8080)));
    ex.start(peer, framing, false, idempotent, Instant::now());
    ex.to_upstream = Some(buffer());
    ex.upin = Some(buffer());
    ex
}

/// The exchange's request head was written whole to a pooled connection
/// and nothing of the response came: the retry base case.
fn head_written_on_reused(ex: &mut Exchange) {
    ex.reused = true;
    ex.up_written = ex.head_bytes.len() as u64;
}

/// A complete keep-alive response to a request sent whole: the reuse base
/// case.
fn response_done(ex: &mut Exchange) {
    ex.resp = Resp::Done;
    ex.resp_keep_alive = true;
    ex.up_written = ex.head_bytes.len() as u64;
}

/// One situation and what a verdict must say about it.
struct Row {
    why: &'static str,
    head: &'static str,
    set: fn(&mut Exchange),
    expect: bool,
}

// ---- may_retry (§7) --------------------------------------------------------

#[test]
fn may_retry_rules() {
    let rows = [
        Row {
            why: "GET on a reused connection, nothing of the response: retry",
            head: GET,
            set: head_written_on_reused,
            expect: true,
        },
        Row {
            why: "a response byte arrived (in upin): the upstream answered",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.upin.as_mut().unwrap().extend_from_slice(b"H");
            },
            expect: false,
        },
        Row {
            why: "the response head was parsed: the upstream answered",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.resp = Resp::Body(BodyDecoder::new(BodyKind::Length(3)));
            },
            expect: false,
        },
        Row {
            why: "the whole response came",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.resp = Resp::Done;
            },
            expect: false,
        },
        Row {
            why: "an interim head went downstream: the client saw an answer",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.interim_sent = true;
            },
            expect: false,
        },
        Row {
            why: "POST whose head was written on a reused connection: not idempotent",
            head: POST,
            set: head_written_on_reused,
            expect: false,
        },
        Row {
            why: "POST with nothing written on a reused connection: the upstream saw nothing",
            head: POST,
            set: |ex| ex.reused = true,
            expect: true,
        },
        Row {
            why: "POST with nothing written on a new connection (connect failed)",
            head: POST,
            set: |_| {},
            expect: true,
        },
        Row {
            why: "GET written on a new connection to the only server: nowhere else to go",
            head: GET,
            set: |ex| ex.up_written = ex.head_bytes.len() as u64,
            expect: false,
        },
        Row {
            why: "GET whose head was half written on a reused connection",
            head: GET,
            set: |ex| {
                ex.reused = true;
                ex.up_written = 1;
            },
            expect: true,
        },
        Row {
            why: "GET with a body: the head alone written, no body byte",
            head: GET_WITH_BODY,
            set: head_written_on_reused,
            expect: true,
        },
        Row {
            why: "GET with a body: one body byte written",
            head: GET_WITH_BODY,
            set: |ex| {
                head_written_on_reused(ex);
                ex.up_written += 1;
            },
            expect: false,
        },
        Row {
            why: "PUT is idempotent: its head alone written on a reused connection",
            head: "PUT /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
            set: head_written_on_reused,
            expect: true,
        },
        Row {
            why: "one retry left",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.retries = MAX_RETRIES - 1;
            },
            expect: true,
        },
        Row {
            why: "retries exhausted",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.retries = MAX_RETRIES;
            },
            expect: false,
        },
        Row {
            why: "retries exhausted, even with nothing written",
            head: GET,
            set: |ex| ex.retries = MAX_RETRIES,
            expect: false,
        },
        Row {
            why: "abandoned request: its client connection is closing",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.abandon_request();
            },
            expect: false,
        },
        Row {
            why: "abandoned request, even with nothing written",
            head: GET,
            set: Exchange::abandon_request,
            expect: false,
        },
        Row {
            why: "no buffers attached counts as nothing of the response",
            head: GET,
            set: |ex| {
                head_written_on_reused(ex);
                ex.upin = None;
                ex.to_upstream = None;
            },
            expect: true,
        },
    ];
    for row in rows {
        let mut ex = started(row.head);
        (row.set)(&mut ex);
        assert_eq!(ex.may_retry(MAX_RETRIES, false), row.expect, "{}", row.why);
    }
}

#[test]
fn no_retry_when_none_are_allowed() {
    let ex = started(GET);
    assert!(!ex.may_retry(0, true));
}

#[test]
fn a_request_written_on_a_new_connection_is_retried_only_if_idempotent_at_another_server() {
    let written_on_new = |head| {
        let mut ex = started(head);
        ex.up_written = ex.head_bytes.len() as u64;
        ex
    };
    assert!(written_on_new(GET).may_retry(MAX_RETRIES, true));
    assert!(!written_on_new(GET).may_retry(MAX_RETRIES, false));
    assert!(!written_on_new(POST).may_retry(MAX_RETRIES, true));
    let mut body_streamed = written_on_new(GET_WITH_BODY);
    body_streamed.up_written += 1;
    assert!(!body_streamed.may_retry(MAX_RETRIES, true));
}

// ---- reusable (§6) ---------------------------------------------------------

#[test]
fn reusable_rules() {
    let rows = [
        Row {
            why: "complete keep-alive response to a request sent whole",
            head: GET,
            set: response_done,
            expect: true,
        },
        Row {
            why: "no buffer toward the upstream counts as all sent",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.to_upstream = None;
            },
            expect: true,
        },
        Row {
            why: "bytes arrived after the response body",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.extra_bytes = true;
            },
            expect: false,
        },
        Row {
            why: "HTTP/1.0 or Connection: close response (resp_keep_alive false)",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.resp_keep_alive = false;
            },
            expect: false,
        },
        Row {
            why: "request bytes still wait in to_upstream",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.to_upstream.as_mut().unwrap().extend_from_slice(b"x");
            },
            expect: false,
        },
        Row {
            why: "request body not all taken from the client",
            head: POST,
            set: response_done,
            expect: false,
        },
        Row {
            why: "request body taken and sent",
            head: POST,
            set: |ex| {
                assert_eq!(ex.scan_request(b"hello").unwrap(), 5);
                response_done(ex);
            },
            expect: true,
        },
        Row {
            why: "a tunnel is never parked",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.tunnel = true;
            },
            expect: false,
        },
        Row {
            why: "waiting for the response head",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.resp = Resp::AwaitHead;
            },
            expect: false,
        },
        Row {
            why: "response body still coming",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.resp = Resp::Body(BodyDecoder::new(BodyKind::Length(3)));
            },
            expect: false,
        },
        Row {
            why: "request abandoned: the upstream may still expect its rest",
            head: POST,
            set: |ex| {
                response_done(ex);
                ex.abandon_request();
            },
            expect: false,
        },
        Row {
            why: "request abandoned even with no body",
            head: GET,
            set: |ex| {
                response_done(ex);
                ex.abandon_request();
            },
            expect: false,
        },
    ];
    for row in rows {
        let mut ex = started(row.head);
        (row.set)(&mut ex);
        assert_eq!(ex.reusable(), row.expect, "{}", row.why);
    }
}

// ---- rewind ----------------------------------------------------------------

/// Fills `to_upstream` as the relay would after `written` bytes of the head
/// went out: the rest of the head, then `body`.
fn unwritten(ex: &mut Exchange, written: usize, body: &[u8]) {
    let head = ex.head_bytes.clone();
    let buf = ex.to_upstream.as_mut().unwrap();
    buf.extend_from_slice(&head[written..]);
    buf.extend_from_slice(body);
    ex.up_written = written as u64;
}

#[test]
fn rewind_puts_the_head_back_in_front_of_the_unwritten_body() {
    let len = started(POST).head_bytes.len();
    for written in 0..=len {
        let mut ex = started(POST);
        unwritten(&mut ex, written, b"hel");
        ex.rewind();
        let mut want = ex.head_bytes.clone();
        want.extend_from_slice(b"hel");
        let buf = ex.to_upstream.as_ref().unwrap();
        assert_eq!(buf.as_slice(), &want[..], "{written} head bytes written");
        assert_eq!(ex.up_written, 0);
    }
}

#[test]
fn rewind_without_a_body() {
    let mut ex = started(GET);
    let len = ex.head_bytes.len();
    unwritten(&mut ex, len, b"");
    ex.rewind();
    assert_eq!(
        ex.to_upstream.as_ref().unwrap().as_slice(),
        &ex.head_bytes[..]
    );
    assert_eq!(ex.up_written, 0);
}

#[test]
fn start_encodes_the_head_and_resets_the_rest() {
    let mut ex = started(GET);
    ex.retries = 1;
    ex.reused = true;
    ex.tunnel = true;
    ex.resp = Resp::Done;
    ex.abandon_request();
    let (req, _) = RequestHead::parse(POST.as_bytes(), 100).unwrap().unwrap();
    ex.req = req;
    ex.start(
        Peer::new(SocketAddr::from(([127, 0, 0, 1], 1))),
        BodyKind::Length(5),
        false,
        false,
        Instant::now(),
    );
    assert_eq!(ex.head_bytes, POST.as_bytes());
    assert_eq!((ex.retries, ex.reused, ex.tunnel), (0, false, false));
    assert!(matches!(ex.resp, Resp::AwaitHead));
    assert!(!ex.request_abandoned() && !ex.request_taken());
}

// ---- the request half ------------------------------------------------------

/// Feeds `pieces` to the request half; returns the body bytes counted.
#[track_caller]
fn scan_all(ex: &mut Exchange, pieces: &[&[u8]]) -> usize {
    pieces
        .iter()
        .map(|piece| ex.scan_request(piece).unwrap())
        .sum()
}

#[test]
fn chunked_body_ends_taken_however_it_is_split() {
    let body: &[u8] = b"5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n";
    let mut input = body.to_vec();
    input.extend_from_slice(GET.as_bytes());
    for at in 0..=input.len() {
        let mut ex = started(POST_CHUNKED);
        assert!(!ex.request_taken());
        let (a, b) = input.split_at(at);
        assert_eq!(scan_all(&mut ex, &[a, b]), body.len(), "split at {at}");
        assert!(
            ex.request_body_done() && ex.request_taken(),
            "split at {at}"
        );
        assert_eq!(ex.scan_request(b"more").unwrap(), 0, "after the end");
    }
    let mut ex = started(POST_CHUNKED);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(scan_all(&mut ex, &bytes), body.len(), "byte by byte");
    assert!(ex.request_body_done());
}

#[test]
fn invalid_chunk_syntax_is_an_error() {
    let mut ex = started(POST_CHUNKED);
    assert!(matches!(
        ex.scan_request(b"zz\r\n"),
        Err(ParseError::Chunk(_))
    ));
}

#[test]
fn request_without_a_body_starts_taken() {
    let mut ex = started(GET);
    assert!(ex.request_body_done() && ex.request_taken() && ex.request_sent());
    assert_eq!(ex.request_remaining(), Some(0));
    assert_eq!(ex.scan_request(b"GET").unwrap(), 0);
    assert_eq!(ex.request_eof(), Ok(()));
}

#[test]
fn eof_in_a_content_length_body_is_truncated() {
    let mut ex = started(POST);
    assert_eq!(ex.scan_request(b"hel").unwrap(), 3);
    assert_eq!(ex.request_remaining(), Some(2));
    assert_eq!(ex.request_eof(), Err(ParseError::Truncated));
    assert!(!ex.request_taken());
}

#[test]
fn eof_in_a_chunked_body_is_truncated() {
    let mut ex = started(POST_CHUNKED);
    assert_eq!(scan_all(&mut ex, &[b"5\r\nhel"]), 6);
    assert_eq!(ex.request_eof(), Err(ParseError::Truncated));
}

#[test]
fn eof_ends_an_until_close_body() {
    let mut ex = started(GET);
    ex.set_request_body(BodyDecoder::new(BodyKind::UntilClose));
    assert!(!ex.request_taken());
    assert_eq!(ex.scan_request(b"raw tunnel bytes").unwrap(), 16);
    assert!(!ex.request_taken());
    assert_eq!(ex.request_eof(), Ok(()));
    assert!(ex.request_body_done() && ex.request_taken());
}

#[test]
fn abandon_ends_the_half_without_taking_it() {
    let mut ex = started(POST);
    ex.abandon_request();
    assert!(ex.request_abandoned() && ex.request_taken());
    assert!(!ex.request_body_done() && !ex.request_sent());
    assert_eq!(ex.scan_request(b"hello").unwrap(), 0);
    assert_eq!(ex.request_eof(), Ok(()));
    assert!(ex.request_abandoned());
}

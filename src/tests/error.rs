//! The error table of ARCHITECTURE.md §8 (`ProxyError::answer`), one row
//! per side × kind with its reason, before and after the response head
//! went downstream.

use std::io;

use crate::error::{Answer, ErrorKind, ProxyError, Timeout};
use crate::http::ParseError;

/// The timers, for rows that hold for any of them.
const TIMEOUTS: [Timeout; 10] = [
    Timeout::KeepAlive,
    Timeout::Head,
    Timeout::Connect,
    Timeout::UpstreamRead,
    Timeout::UpstreamWrite,
    Timeout::ClientBody,
    Timeout::ClientSend,
    Timeout::Linger,
    Timeout::TunnelIdle,
    Timeout::DrainIdle,
];

/// One row of the table: the error, whether a request-head byte was seen,
/// and what the client gets while no response head was sent.
struct Row {
    why: &'static str,
    error: ProxyError,
    head_bytes_seen: bool,
    answer: Answer,
}

fn down(why: &'static str, kind: ErrorKind, seen: bool, answer: Answer) -> Row {
    Row {
        why,
        error: ProxyError::downstream(kind),
        head_bytes_seen: seen,
        answer,
    }
}

fn up(why: &'static str, kind: ErrorKind, answer: Answer) -> Row {
    Row {
        why,
        error: ProxyError::upstream(kind),
        head_bytes_seen: true,
        answer,
    }
}

fn rows() -> Vec<Row> {
    use Answer::{Close, Status};
    use ErrorKind as K;
    let parse = |e| K::Parse(e);
    let mut rows = vec![
        down(
            "malformed request head",
            parse(ParseError::Malformed("x")),
            true,
            Status(400),
        ),
        down(
            "invalid request framing",
            parse(ParseError::Framing("x")),
            true,
            Status(400),
        ),
        down(
            "invalid chunked request body",
            parse(ParseError::Chunk("x")),
            true,
            Status(400),
        ),
        down(
            "request body truncated",
            parse(ParseError::Truncated),
            true,
            Status(400),
        ),
        down(
            "request line longer than the head limit",
            parse(ParseError::RequestLineTooLong),
            true,
            Status(414),
        ),
        down(
            "request head too large",
            parse(ParseError::HeadTooLarge),
            true,
            Status(431),
        ),
        down(
            "too many request fields",
            parse(ParseError::TooManyFields),
            true,
            Status(431),
        ),
        down(
            "unknown transfer coding on a request",
            parse(ParseError::UnknownCoding),
            true,
            Status(501),
        ),
        down(
            "head timeout after some head bytes",
            K::Timeout(Timeout::Head),
            true,
            Status(408),
        ),
        down(
            "head timeout with no byte: silence",
            K::Timeout(Timeout::Head),
            false,
            Close,
        ),
        down(
            "client body timeout",
            K::Timeout(Timeout::ClientBody),
            true,
            Status(408),
        ),
        down("CONNECT", K::NotImplemented, true, Status(501)),
        up(
            "no descriptor for an upstream socket (EMFILE): the proxy is full, not the upstream",
            K::NoDescriptor,
            Status(503),
        ),
        down("client closed early", K::Closed, true, Close),
        down(
            "client connection reset",
            K::Io(io::ErrorKind::ConnectionReset),
            true,
            Close,
        ),
        down(
            "client send timeout: it reads nothing",
            K::Timeout(Timeout::ClientSend),
            true,
            Close,
        ),
        down(
            "keep-alive timeout between requests",
            K::Timeout(Timeout::KeepAlive),
            false,
            Close,
        ),
        up(
            "connect refused",
            K::ConnectFailed(io::ErrorKind::ConnectionRefused),
            Status(502),
        ),
        up("upstream closed early", K::Closed, Status(502)),
        up(
            "upstream reset",
            K::Io(io::ErrorKind::ConnectionReset),
            Status(502),
        ),
        up(
            "invalid response head",
            parse(ParseError::Malformed("x")),
            Status(502),
        ),
        up(
            "invalid response framing",
            parse(ParseError::Framing("x")),
            Status(502),
        ),
        up(
            "response body truncated",
            parse(ParseError::Truncated),
            Status(502),
        ),
        up(
            "101 without an upgrade request",
            K::UnexpectedUpgrade,
            Status(502),
        ),
    ];
    for t in TIMEOUTS {
        rows.push(up("any upstream timer", K::Timeout(t), Status(504)));
    }
    rows
}

#[test]
fn answers_before_the_response_head() {
    for row in rows() {
        assert_eq!(
            row.error.answer(false, row.head_bytes_seen),
            row.answer,
            "{}: {}",
            row.why,
            row.error
        );
    }
}

#[test]
fn everything_closes_once_the_response_head_was_sent() {
    for row in rows() {
        for seen in [false, true] {
            assert_eq!(
                row.error.answer(true, seen),
                Answer::Close,
                "{}: {}",
                row.why,
                row.error
            );
        }
    }
}

#[test]
fn head_bytes_seen_matters_only_for_the_head_timeout() {
    for row in rows() {
        if row.error.kind == ErrorKind::Timeout(Timeout::Head) {
            continue;
        }
        assert_eq!(
            row.error.answer(false, !row.head_bytes_seen),
            row.answer,
            "{}",
            row.why
        );
    }
}

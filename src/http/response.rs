//! `ResponsePlan`: what the proxy does with a parsed response head, given
//! the request it answers (ARCHITECTURE.md §5, §6, §8).
//!
//! Why it exists: interim or final, framing, upgrade validation, de-chunking
//! for HTTP/1.0 clients, which framing fields reach the client, and the
//! keep-alive verdicts of both sides are decided here, from the head and a
//! few facts about the exchange ([`ResponseContext`]), as plain functions
//! tested with byte strings alone.
//!
//! What it must not know: sockets, buffers, the clock, the pool.
//!
//! Order of use: [`plan_response`] (rewrites framing and hop-by-hop fields),
//! then the user's `response_filter`, then [`finish_response_head`] (sets
//! `Connection` for the client), then encode.

use super::error::ParseError;
use super::framing::BodyKind;
use super::head::ResponseHead;
use super::headers::Headers;
use super::hop::{remove_hop_by_hop, response_keep_alive};

/// Most 1xx interim responses forwarded before the final one; more is an
/// upstream error (502): a flood of them would only cost the client.
pub const MAX_INTERIM: u32 = 16;

/// What the plan needs to know about the request and the exchange so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseContext<'a> {
    /// The request's method (a response to `HEAD` has no body).
    pub method: &'a str,
    /// The request's minor version: 0 for an HTTP/1.0 client.
    pub request_version: u8,
    /// The request asked for a protocol upgrade (RFC 9110 §7.8).
    pub upgrade_requested: bool,
    /// The whole request body was taken from the client.
    pub request_body_done: bool,
    /// A write of the request to the upstream failed before this head came
    /// (the upstream answered early, then stopped reading).
    pub request_write_failed: bool,
    /// 1xx heads already received for this request, this one excluded.
    pub interim_seen: u32,
}

/// Why a response head cannot be forwarded: the client gets 502
/// (ARCHITECTURE.md §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseRefusal {
    /// Invalid framing, too many interim heads, or a coding an HTTP/1.0
    /// client cannot be given.
    Invalid(ParseError),
    /// `101 Switching Protocols` to a request that asked for no upgrade, or
    /// before its body was complete.
    UnexpectedUpgrade,
}

/// The verdict on a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponsePlan {
    /// A 1xx head other than 101: the final head is still to come. It is
    /// forwarded only if `forward` (never to an HTTP/1.0 client,
    /// RFC 9110 §15.2).
    Interim {
        /// Send this head downstream.
        forward: bool,
    },
    /// The final head.
    Final(FinalPlan),
}

/// What a final response head means for both connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalPlan {
    /// How the response body is delimited on the upstream connection
    /// (RFC 9112 §6.3).
    pub framing: BodyKind,
    /// A 101 answered an upgrade: both directions become a byte tunnel.
    pub tunnel: bool,
    /// The client speaks HTTP/1.0 and the body is chunked: only chunk data
    /// goes downstream, delimited by closing (RFC 9112 §7.1).
    pub dechunk: bool,
    /// The upstream connection may be reused afterwards as far as this head
    /// says: HTTP/1.1, no `Connection: close`, not delimited by close
    /// (RFC 9112 §9.3).
    pub upstream_keep_alive: bool,
    /// The client connection must close after this response (until-close
    /// body, tunnel, de-chunking, or a request body that cannot follow).
    pub close_client: bool,
    /// The rest of the request body is dropped: the upstream answered after
    /// a failed write.
    pub abandon_request: bool,
}

/// Plans the response whose head is `head`, and rewrites the head's
/// framing and hop-by-hop fields for the client:
/// - 1xx other than 101: interim, at most [`MAX_INTERIM`]; hop-by-hop
///   fields removed.
/// - 101: valid only after an upgrade request whose body is complete; the
///   `Upgrade` field stays.
/// - otherwise the framing of RFC 9112 §6.3 for the request's method;
///   `Transfer-Encoding` is removed toward an HTTP/1.0 client and from a
///   204 when the body is not chunked (RFC 9112 §6.1); a chunked body to
///   an HTTP/1.0 client is de-chunked (and `Trailer` dropped), unless a
///   coding besides chunked was applied (then 502, as nginx).
///
/// Errors: [`ResponseRefusal`] (502).
pub fn plan_response(
    head: &mut ResponseHead,
    cx: &ResponseContext<'_>,
) -> Result<ResponsePlan, ResponseRefusal> {
    if (100..200).contains(&head.status) && head.status != 101 {
        if cx.interim_seen.saturating_add(1) > MAX_INTERIM {
            return Err(ResponseRefusal::Invalid(ParseError::Malformed(
                "too many 1xx responses",
            )));
        }
        remove_hop_by_hop(&mut head.headers, false);
        return Ok(ResponsePlan::Interim {
            forward: cx.request_version >= 1,
        });
    }
    let tunnel = head.status == 101;
    let framing = if tunnel {
        if !cx.upgrade_requested || !cx.request_body_done {
            return Err(ResponseRefusal::UnexpectedUpgrade);
        }
        BodyKind::UntilClose
    } else {
        head.body_kind(cx.method)
            .map_err(ResponseRefusal::Invalid)?
    };
    let upstream_keep_alive =
        response_keep_alive(head.version, &head.headers) && framing != BodyKind::UntilClose;
    let http10 = cx.request_version == 0;
    if http10 && framing == BodyKind::Chunked && !only_chunked(&head.headers) {
        // A coding besides chunked (gzip, chunked) cannot be undone here
        // and cannot be announced to HTTP/1.0 (as nginx: 502).
        return Err(ResponseRefusal::Invalid(ParseError::Framing(
            "transfer coding besides chunked for an HTTP/1.0 client",
        )));
    }
    if (http10 || head.status == 204) && framing != BodyKind::Chunked {
        // RFC 9112 §6.1: no Transfer-Encoding to an HTTP/1.0 request, nor
        // in a 204.
        head.headers.remove_all("transfer-encoding");
        if http10 {
            head.headers.remove_all("trailer");
        }
    }
    let dechunk = framing == BodyKind::Chunked && http10;
    if dechunk {
        // An HTTP/1.0 client knows no chunked coding (RFC 9112 §7.1): it
        // gets the chunk data, delimited by the close.
        head.headers.remove_all("transfer-encoding");
        head.headers.remove_all("trailer");
    }
    let abandon_request = cx.request_write_failed;
    // An early answer from an upstream that will close: the rest of the
    // request body cannot follow, so the client connection closes too.
    let early_and_closing = !(abandon_request || cx.request_body_done || upstream_keep_alive);
    let close_client = tunnel
        || framing == BodyKind::UntilClose
        || abandon_request
        || early_and_closing
        || dechunk;
    remove_hop_by_hop(&mut head.headers, tunnel);
    Ok(ResponsePlan::Final(FinalPlan {
        framing,
        tunnel,
        dechunk,
        upstream_keep_alive,
        close_client,
        abandon_request,
    }))
}

/// Sets the `Connection` field the client gets, after `response_filter`
/// ran (RFC 9112 §9.3): `close` when the client connection will close
/// (`client_keep_alive` false), `keep-alive` for an HTTP/1.0 client whose
/// connection stays open, nothing for a tunnel (its `Connection: upgrade`
/// is already there) or an HTTP/1.1 keep-alive.
pub fn finish_response_head(
    head: &mut ResponseHead,
    tunnel: bool,
    request_version: u8,
    client_keep_alive: bool,
) {
    if tunnel {
        return;
    }
    if !client_keep_alive {
        head.headers.append("Connection", b"close");
    } else if request_version == 0 {
        head.headers.append("Connection", b"keep-alive");
    }
}

/// The response's transfer codings are exactly `chunked` (one field, one
/// element, RFC 9112 §6.1).
fn only_chunked(headers: &Headers) -> bool {
    let mut codings = headers
        .get_all("transfer-encoding")
        .flat_map(|v| v.split(|&b| b == b','));
    let first = codings.next().map(|c| c.trim_ascii());
    first.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"))
        && codings.all(|c| c.trim_ascii().is_empty())
}

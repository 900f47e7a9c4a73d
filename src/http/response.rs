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
use super::known::Known;
use super::syntax::list_elements;

/// The refusal of a transfer coding the client cannot be given (HTTP/1.0,
/// HTTP/2): the proxy's limit, not the server's fault (its try is not
/// counted against it).
pub const UNDELIVERABLE_CODING: &str =
    "transfer coding besides chunked for an HTTP/1.0 or HTTP/2 client";

/// What the plan needs to know about the request and the exchange so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseContext<'a> {
    /// The request's method (a response to `HEAD` has no body).
    pub method: &'a str,
    /// The request's minor version: 0 for an HTTP/1.0 client.
    pub request_version: u8,
    /// The request asked for a protocol upgrade (RFC 9110 §7.8).
    pub upgrade_requested: bool,
    /// The request's `Upgrade` field value: the protocols the client
    /// offered; a 101 may only switch to one of them (RFC 9110 §7.8).
    pub upgrade_offer: &'a [u8],
    /// The whole request body was taken from the client.
    pub request_body_done: bool,
    /// A write of the request to the upstream failed before this head came
    /// (the upstream answered early, then stopped reading).
    pub request_write_failed: bool,
    /// Bytes of the 1xx heads received for this request, this one
    /// included (0 for a final head).
    pub interim_bytes: usize,
    /// Most bytes of 1xx heads accepted before the final head (the
    /// response head size limit, summed over the interim heads): more is
    /// a 502. RFC 9110 §15.2 makes a proxy forward every 1xx, so they are
    /// bounded by bytes (and by the upstream read timeout), not by count.
    pub interim_budget: usize,
    /// The client connection speaks HTTP/1 (not HTTP/2, whose streams
    /// end on their own): a body the upstream delimits by closing goes to
    /// an HTTP/1.1 client chunk-encoded ([`FinalPlan::enchunk`]).
    pub http1_client: bool,
}

/// Why a response head cannot be forwarded: the client gets 502
/// (ARCHITECTURE.md §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseRefusal {
    /// Invalid framing, interim heads over their byte budget, or a coding
    /// an HTTP/1.0 client cannot be given.
    Invalid(ParseError),
    /// `101 Switching Protocols` to a request that asked for no upgrade,
    /// before its body was complete, without an `Upgrade` field, or naming
    /// a protocol the client did not offer (RFC 9110 §7.8, §15.2.2).
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
    /// The body is delimited by the upstream's close and the client speaks
    /// HTTP/1.1: it goes downstream chunk-encoded (the head got
    /// `Transfer-Encoding: chunked`), each read one chunk, and the last
    /// chunk follows a clean close, so the client connection stays open
    /// and a cut body is told from a whole one (RFC 9112 §7.1, §8).
    pub enchunk: bool,
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
/// - 1xx other than 101: interim, within `cx.interim_budget` bytes;
///   hop-by-hop and framing fields removed (RFC 9110 §8.6, RFC 9112 §6.1).
/// - 101: valid only after an upgrade request whose body is complete, and
///   with an `Upgrade` field naming only protocols the client offered
///   (RFC 9110 §7.8, §15.2.2); the `Upgrade` field stays.
/// - otherwise the framing of RFC 9112 §6.3 for the request's method;
///   `Transfer-Encoding` is removed toward an HTTP/1.0 client, from a 204
///   and from a 304 (where it could only mislead), and a 204 loses
///   `Content-Length` too (RFC 9112 §6.1, RFC 9110 §8.6); identical
///   `Content-Length` values go on as one field (RFC 9112 §6.3 rule 5);
///   a chunked body to an HTTP/1.0 client is de-chunked (and `Trailer`
///   dropped). A transfer coding besides chunked (and identity), or a
///   chunked that is not the final coding, cannot be given to an HTTP/1.0
///   or an HTTP/2 client: 502, as nginx.
/// - a body delimited by the upstream's close, with no `Transfer-Encoding`,
///   goes to an HTTP/1.1 client (over HTTP/1) chunk-encoded, so its
///   connection stays open (nginx's `chunked_transfer_encoding`, HAProxy
///   does the same); not a tunnel's bytes, and not a body under another
///   transfer coding (`gzip` until close), which keeps the close.
/// - a 426 to an HTTP/1.1 client keeps its `Upgrade` field (RFC 9110
///   §15.5.22: it names the protocols required), with `Connection: upgrade`.
///
/// Errors: [`ResponseRefusal`] (502).
pub fn plan_response(
    head: &mut ResponseHead,
    cx: &ResponseContext<'_>,
) -> Result<ResponsePlan, ResponseRefusal> {
    // Both framing fields: refused whatever the status, interim and 101
    // too (RFC 9112 §6.3 step 3; a 1xx may carry neither, RFC 9112 §6.1,
    // RFC 9110 §8.6).
    super::framing::framing_fields(&head.headers).map_err(ResponseRefusal::Invalid)?;
    if (100..200).contains(&head.status) && head.status != 101 {
        if cx.interim_bytes > cx.interim_budget {
            return Err(ResponseRefusal::Invalid(ParseError::Malformed(
                "1xx responses over the response head size limit",
            )));
        }
        remove_hop_by_hop(&mut head.headers, false);
        remove_framing_fields(&mut head.headers);
        return Ok(ResponsePlan::Interim {
            forward: cx.request_version >= 1,
        });
    }
    let tunnel = head.status == 101;
    let framing = if tunnel {
        if !cx.upgrade_requested
            || !cx.request_body_done
            || !upgrade_was_offered(&head.headers, cx.upgrade_offer)
        {
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
    if (http10 || !cx.http1_client)
        && framing != BodyKind::Empty
        && !only_chunked_or_identity(&head.headers)
    {
        // A coding besides chunked (`gzip, chunked`, or `gzip` until
        // close) cannot be undone here and cannot be announced to
        // HTTP/1.0 (as nginx: 502) nor to HTTP/2, which has no
        // `Transfer-Encoding` (RFC 9113 §8.2.2).
        return Err(ResponseRefusal::Invalid(ParseError::Framing(
            UNDELIVERABLE_CODING,
        )));
    }
    if head.status == 204 {
        // RFC 9110 §8.6, RFC 9112 §6.1: a 204 has no framing fields.
        remove_framing_fields(&mut head.headers);
    } else if head.status == 304 || (http10 && framing != BodyKind::Chunked) {
        // RFC 9112 §6.1: no Transfer-Encoding to an HTTP/1.0 request; a
        // 304's Transfer-Encoding could only announce a body it lacks.
        // (A 304's Content-Length is the selected representation's.)
        head.headers.remove_known(Known::TransferEncoding);
        if http10 {
            head.headers.remove_known(Known::Trailer);
        }
    }
    single_content_length(&mut head.headers);
    let dechunk = framing == BodyKind::Chunked && http10;
    if dechunk {
        // An HTTP/1.0 client knows no chunked coding (RFC 9112 §7.1): it
        // gets the chunk data, delimited by the close.
        head.headers.remove_known(Known::TransferEncoding);
        head.headers.remove_known(Known::Trailer);
    }
    let abandon_request = cx.request_write_failed;
    // An early answer (final head before the request body was all read):
    // the rest of the body is not worth reading (nginx and HAProxy close
    // too), so the client connection closes after this response, and the
    // head says so (RFC 9112 §9.6) — whether or not the upstream keeps its
    // connection.
    let early = !cx.request_body_done && !tunnel;
    let enchunk = framing == BodyKind::UntilClose
        && !tunnel
        && !http10
        && cx.http1_client
        && !head.headers.has_known(Known::TransferEncoding);
    let close_client = tunnel
        || (framing == BodyKind::UntilClose && !enchunk)
        || abandon_request
        || early
        || dechunk;
    // A 426 must name the protocols to upgrade to (RFC 9110 §15.5.22,
    // §7.8), so its `Upgrade` field reaches an HTTP/1.1 client, with the
    // `Connection: upgrade` option a sender of `Upgrade` adds.
    let keep_upgrade =
        tunnel || (head.status == 426 && !http10 && head.headers.has_known(Known::Upgrade));
    remove_hop_by_hop(&mut head.headers, keep_upgrade);
    if enchunk {
        head.headers
            .append_known(Known::TransferEncoding, b"chunked");
    }
    Ok(ResponsePlan::Final(FinalPlan {
        framing,
        tunnel,
        dechunk,
        enchunk,
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
        head.headers.append_known(Known::Connection, b"close");
    } else if request_version == 0 {
        head.headers.append_known(Known::Connection, b"keep-alive");
    }
}

/// The response's transfer codings are `identity` and at most one
/// `chunked`, which then comes last (RFC 9112 §6.1; none at all is fine
/// too): what the proxy can undo for an HTTP/1.0 or HTTP/2 client. A
/// `chunked` followed by any coding (`chunked, identity`) leaves the body
/// delimited by close and still chunk-coded (RFC 9112 §6.3 step 4), which
/// nothing undoes: sent on, the chunk framing would be taken for content.
fn only_chunked_or_identity(headers: &Headers) -> bool {
    let mut chunked = false;
    headers
        .get_all_known(Known::TransferEncoding)
        .flat_map(list_elements)
        .all(|c| {
            if chunked {
                // A coding after chunked: chunked twice, or not last.
                return false;
            }
            chunked = c.eq_ignore_ascii_case(b"chunked");
            chunked || c.eq_ignore_ascii_case(b"identity")
        })
}

/// Removes `Content-Length` and `Transfer-Encoding` (from 1xx and 204
/// heads, which have no body, RFC 9110 §8.6).
fn remove_framing_fields(headers: &mut Headers) {
    headers.remove_known(Known::ContentLength);
    headers.remove_known(Known::TransferEncoding);
}

/// Several `Content-Length` values (fields or a list) that agree go on as
/// one field (RFC 9112 §6.3 rule 5: a recipient may accept identical
/// duplicates as one value; the next hop must not have to). Values that do
/// not agree can only remain on a response without a body (to HEAD, 304),
/// where they are removed rather than forwarded.
fn single_content_length(headers: &mut Headers) {
    let mut values = headers
        .get_all_known(Known::ContentLength)
        .flat_map(|v| v.split(|&b| b == b','));
    let Some(first) = values.next().map(<[u8]>::trim_ascii) else {
        return;
    };
    let mut several = false;
    let mut agree = !first.is_empty() && first.iter().all(u8::is_ascii_digit);
    for v in values {
        several = true;
        agree &= v.trim_ascii() == first;
    }
    if !several {
        if !agree {
            headers.remove_known(Known::ContentLength);
        }
        return;
    }
    // Rare (a misconfigured upstream): one small copy is fine here.
    let value = first.to_vec();
    headers.remove_known(Known::ContentLength);
    if agree {
        headers.append_known(Known::ContentLength, &value);
    }
}

/// The 101's `Upgrade` field is present and every protocol it names (a
/// `protocol-name [ "/" protocol-version ]`, compared ignoring ASCII
/// case) was in the client's `offer` (RFC 9110 §7.8: a server MUST NOT
/// switch to a protocol the client did not indicate).
fn upgrade_was_offered(headers: &Headers, offer: &[u8]) -> bool {
    let mut named = headers
        .get_all_known(Known::Upgrade)
        .flat_map(list_elements)
        .peekable();
    if named.peek().is_none() {
        return false;
    }
    named.all(|p| {
        list_elements(offer).any(|o| {
            o.eq_ignore_ascii_case(p)
                || (!p.contains(&b'/')
                    && o.split(|&b| b == b'/')
                        .next()
                        .is_some_and(|name| name.eq_ignore_ascii_case(p)))
        })
    })
}

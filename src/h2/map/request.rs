//! A decoded HTTP/2 request field list to a [`RequestHead`] for the
//! HTTP/1.1 upstream (RFC 9113 §8.1–§8.3, §8.5), and a request trailer
//! section to fields.
//!
//! The head that comes out is what an HTTP/1.1 client would have sent:
//! method, origin-form target (`*` for `OPTIONS *`), version 1.1, `Host`
//! first (from `:authority`, else the `host` field; a request with
//! neither, or an empty one, is malformed, RFC 9113 §8.3.1), the regular fields in arrival order, the cookie crumbs joined
//! into one `cookie` field (RFC 9113 §8.2.3), and `Transfer-Encoding:
//! chunked` when a body of unknown length follows, so that
//! `plan_request` frames it like any HTTP/1.1 request.
//!
//! What it must not know: frames, streams, the configuration, the
//! HTTP/1.1 plan's own checks (it runs next, on the head made here).

use super::fields::{check_name, check_value, is_connection_specific};
use crate::h2::{ErrorCode, H2Error};
use crate::http::Headers;
use crate::http::RequestHead;
use crate::http::known::Known;
use crate::http::syntax::{is_token, list_elements};
use crate::http::target::{check_authority, check_origin_form};

/// Why a request is not forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A malformed request (RFC 9113 §8.1.1): a stream error
    /// PROTOCOL_ERROR. The machine may answer 400 before the reset.
    Malformed(&'static str),
    /// A request answered with this status by the proxy: 400 (a `Host`
    /// that differs from `:authority`, RFC 9113 §8.3.1; a target or
    /// authority that HTTP/1.1 would refuse too), 405 (extended CONNECT,
    /// RFC 8441), 501 (CONNECT, RFC 9113 §8.5; ARCHITECTURE.md §8).
    Status(u16, &'static str),
}

impl Refusal {
    /// The stream error to send when no response is sent (always for
    /// [`Refusal::Malformed`]).
    pub fn to_h2(self, stream_id: u32) -> H2Error {
        let why = match self {
            Refusal::Malformed(why) | Refusal::Status(_, why) => why,
        };
        H2Error::Stream(stream_id, ErrorCode::ProtocolError, why)
    }

    /// The status to answer with, if the proxy answers.
    pub fn status(self) -> Option<u16> {
        match self {
            Refusal::Malformed(_) => None,
            Refusal::Status(status, _) => Some(status),
        }
    }
}

/// A request ready for `plan_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedRequest {
    /// The head as an HTTP/1.1 request.
    pub head: RequestHead,
    /// The `content-length` the client declared, in bytes: the DATA
    /// frames must add up to it (RFC 9113 §8.1.1, [`super::BodyLength`]).
    pub content_length: Option<u64>,
    /// The body goes upstream chunked (no `content-length`, and the
    /// HEADERS frame had no END_STREAM): `Transfer-Encoding: chunked` was
    /// added to the head.
    pub chunked: bool,
}

/// The request pseudo-header fields (RFC 9113 §8.3.1; `:protocol` of RFC
/// 8441 only to refuse extended CONNECT).
#[derive(Default)]
struct Pseudo<'f> {
    method: Option<&'f [u8]>,
    scheme: Option<&'f [u8]>,
    authority: Option<&'f [u8]>,
    path: Option<&'f [u8]>,
    protocol: Option<&'f [u8]>,
}

/// Maps a request's decoded field list (in order) to a head for the
/// HTTP/1.1 upstream; `end_stream`: the HEADERS frame ended the stream
/// (no body).
///
/// Errors, malformed (stream PROTOCOL_ERROR, RFC 9113 §8.1.1): a pseudo
/// field after a regular one, unknown, a response's (`:status`) or
/// repeated (§8.3); `:method`, `:scheme` or `:path` missing, `:path`
/// empty or neither `/…` nor `*` for OPTIONS (§8.3.1); an upper-case or
/// otherwise invalid name, an invalid value (§8.2.1); a
/// connection-specific field, TE other than `trailers` (§8.2.2);
/// `:authority` with userinfo (§8.3.1); a `content-length` that is not a
/// number, values that differ, or one above 0 on a request without DATA
/// (§8.1.1); CONNECT with `:scheme` or `:path` or without `:authority`
/// (§8.5); `:protocol` on another method.
/// Answered by the proxy ([`Refusal::Status`]): 400 for `Host` and
/// `:authority` naming different hosts, several `Host` fields, a scheme
/// other than http(s), a target or authority HTTP/1.1 refuses too; 405
/// for extended CONNECT; 501 for CONNECT. Equal `content-length` values
/// in several fields all go into the head, where `plan_request` refuses
/// them with 400 (as a list of them).
pub fn map_request<'f>(
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    end_stream: bool,
) -> Result<MappedRequest, Refusal> {
    let mut head = RequestHead::default();
    let (content_length, chunked) = map_request_into(fields, end_stream, &mut head)?;
    Ok(MappedRequest {
        head,
        content_length,
        chunked,
    })
}

/// [`map_request`] into `head`, whose storage is reused (a recycled
/// exchange's: no allocation per request on the steady path). Returns the
/// declared `content-length` and whether the body goes chunked
/// ([`MappedRequest`]'s other fields). On an error `head` is left
/// partly written; nothing of it goes anywhere.
///
/// Errors: as [`map_request`].
pub fn map_request_into<'f>(
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    end_stream: bool,
    head: &mut RequestHead,
) -> Result<(Option<u64>, bool), Refusal> {
    let mut pseudo = Pseudo::default();
    let mut headers = std::mem::take(&mut head.headers);
    headers.clear();
    let mut regular_seen = false;
    let mut host_written = false;
    let mut host_fields = 0usize;
    let mut host_value: Option<&'f [u8]> = None;
    let mut cookie: Option<Vec<u8>> = None;
    let mut content_length: Option<u64> = None;
    for (name, value) in fields {
        if let Some(p) = name.strip_prefix(b":") {
            if regular_seen {
                return Err(Refusal::Malformed(
                    "pseudo-header field after a regular field (RFC 9113 §8.3)",
                ));
            }
            let slot = match p {
                b"method" => &mut pseudo.method,
                b"scheme" => &mut pseudo.scheme,
                b"authority" => &mut pseudo.authority,
                b"path" => &mut pseudo.path,
                b"protocol" => &mut pseudo.protocol,
                _ => {
                    return Err(Refusal::Malformed(
                        "unknown or response pseudo-header field in a request (RFC 9113 §8.3)",
                    ));
                }
            };
            if slot.is_some() {
                return Err(Refusal::Malformed(
                    "repeated pseudo-header field (RFC 9113 §8.3)",
                ));
            }
            check_value(value).map_err(Refusal::Malformed)?;
            *slot = Some(value);
            continue;
        }
        if !regular_seen {
            regular_seen = true;
            if let Some(authority) = pseudo.authority {
                headers.append_known(Known::Host, authority);
                host_written = true;
            }
        }
        check_name(name).map_err(Refusal::Malformed)?;
        check_value(value).map_err(Refusal::Malformed)?;
        let known = Known::of(name);
        if is_connection_specific(known) {
            return Err(Refusal::Malformed(
                "connection-specific header field (RFC 9113 §8.2.2)",
            ));
        }
        match known {
            Known::Te => {
                if !value.eq_ignore_ascii_case(b"trailers") {
                    return Err(Refusal::Malformed(
                        "TE other than trailers (RFC 9113 §8.2.2)",
                    ));
                }
                // Hop-by-hop toward the HTTP/1.1 upstream: not forwarded.
            }
            Known::Host => {
                host_fields += 1;
                if host_value.is_none() {
                    host_value = Some(value);
                }
                if pseudo.authority.is_none() && host_fields == 1 {
                    headers.append_known(Known::Host, value);
                    host_written = true;
                }
            }
            Known::ContentLength => {
                let n = parse_content_length(value)?;
                if content_length.is_some_and(|m| m != n) {
                    return Err(Refusal::Malformed(
                        "content-length values differ (RFC 9110 §8.6)",
                    ));
                }
                // Every field goes on: `plan_request` refuses several
                // values, even equal ones, with 400 as for HTTP/1.1 (a
                // list, `5, 5`, is refused there too).
                headers.append_known(Known::ContentLength, value);
                content_length = Some(n);
            }
            _ if name == b"cookie" => {
                // RFC 9113 §8.2.3: crumbs joined with "; " for HTTP/1.1.
                match cookie.as_mut() {
                    Some(c) => {
                        c.extend_from_slice(b"; ");
                        c.extend_from_slice(value);
                    }
                    None => cookie = Some(value.to_vec()),
                }
            }
            _ => {
                let name = std::str::from_utf8(name)
                    .map_err(|_| Refusal::Malformed("invalid field name (RFC 9113 §8.2.1)"))?;
                headers
                    .try_append(name, value)
                    .map_err(|_| Refusal::Malformed("invalid field name (RFC 9113 §8.2.1)"))?;
            }
        }
    }
    let method = check_control_data(&pseudo)?;
    let path = pseudo.path.unwrap_or_default();
    if let Some(authority) = pseudo.authority {
        if authority.contains(&b'@') {
            return Err(Refusal::Malformed(
                "userinfo in :authority (RFC 9113 §8.3.1)",
            ));
        }
        // An empty one is malformed (below), not a 400.
        if !authority.is_empty() {
            check_authority(authority).map_err(|_| Refusal::Status(400, "invalid :authority"))?;
        }
    }
    if host_fields > 1 {
        return Err(Refusal::Status(400, "several Host fields"));
    }
    // http and https have a mandatory authority: a request must carry
    // `:authority` or `host`, and neither may be empty (RFC 9113 §8.3.1;
    // the scheme is one of the two, checked above). CONNECT was answered
    // by `check_control_data`.
    if pseudo.authority.or(host_value).is_none_or(<[u8]>::is_empty)
        || host_value.is_some_and(<[u8]>::is_empty)
    {
        return Err(Refusal::Malformed(
            "no :authority or host, or an empty one (RFC 9113 §8.3.1)",
        ));
    }
    if let (Some(authority), Some(host)) = (pseudo.authority, host_value)
        && !same_authority(authority, host, pseudo.scheme.unwrap_or_default())
    {
        return Err(Refusal::Status(
            400,
            "Host differs from :authority (RFC 9113 §8.3.1)",
        ));
    }
    if let Some(host) = host_value
        && pseudo.authority.is_none()
        && !host.is_empty()
    {
        check_authority(host).map_err(|_| Refusal::Status(400, "invalid Host"))?;
    }
    if end_stream && content_length.is_some_and(|n| n > 0) {
        return Err(Refusal::Malformed(
            "content-length above 0 on a request without DATA (RFC 9113 §8.1.1)",
        ));
    }
    if !host_written {
        // No regular field came (the authority is still to write), or the
        // target has no authority: an empty Host (RFC 9112 §3.2).
        headers.append_known(Known::Host, pseudo.authority.unwrap_or_default());
    }
    if let Some(c) = cookie {
        headers.append("cookie", &c);
    }
    let chunked = content_length.is_none() && !end_stream;
    if chunked {
        headers.append_known(Known::TransferEncoding, b"chunked");
    }
    head.method.clear();
    head.method.push_str(method);
    head.target.clear();
    match std::str::from_utf8(path) {
        Ok(p) => head.target.push_str(p),
        Err(_) => head.target.push_str(&String::from_utf8_lossy(path)),
    }
    head.version = 1;
    head.headers = headers;
    Ok((content_length, chunked))
}

/// The checks of the request pseudo-header fields together (RFC 9113
/// §8.3.1, §8.5; RFC 8441 §4); returns the method.
fn check_control_data<'f>(p: &Pseudo<'f>) -> Result<&'f str, Refusal> {
    let method = p.method.ok_or(Refusal::Malformed(
        "request without :method (RFC 9113 §8.3.1)",
    ))?;
    if !is_token(method) {
        return Err(Refusal::Malformed("invalid :method (RFC 9110 §9.1)"));
    }
    let method = std::str::from_utf8(method)
        .map_err(|_| Refusal::Malformed("invalid :method (RFC 9110 §9.1)"))?;
    if method == "CONNECT" {
        if p.protocol.is_some() {
            return Err(Refusal::Status(405, "extended CONNECT (RFC 8441)"));
        }
        if p.scheme.is_some() || p.path.is_some() || p.authority.is_none() {
            return Err(Refusal::Malformed(
                "CONNECT with :scheme or :path, or without :authority (RFC 9113 §8.5)",
            ));
        }
        return Err(Refusal::Status(501, "CONNECT (RFC 9113 §8.5)"));
    }
    if p.protocol.is_some() {
        return Err(Refusal::Malformed(
            ":protocol outside CONNECT (RFC 8441 §4)",
        ));
    }
    let (Some(scheme), Some(path)) = (p.scheme, p.path) else {
        return Err(Refusal::Malformed(
            "request without :scheme or :path (RFC 9113 §8.3.1)",
        ));
    };
    if path.is_empty() {
        return Err(Refusal::Malformed("empty :path (RFC 9113 §8.3.1)"));
    }
    if path == b"*" {
        if method != "OPTIONS" {
            return Err(Refusal::Malformed(
                ":path * on a method other than OPTIONS (RFC 9113 §8.3.1)",
            ));
        }
    } else if path.first() != Some(&b'/') {
        return Err(Refusal::Malformed(
            ":path neither an absolute path nor * (RFC 9113 §8.3.1)",
        ));
    } else {
        check_origin_form(path).map_err(|_| Refusal::Status(400, "invalid :path"))?;
    }
    if !scheme.eq_ignore_ascii_case(b"http") && !scheme.eq_ignore_ascii_case(b"https") {
        return Err(Refusal::Status(400, "scheme other than http or https"));
    }
    Ok(method)
}

/// Whether `:authority` and `Host` name the same authority after
/// scheme-based normalisation (RFC 9113 §8.3.1, RFC 3986 §6.2.3), by the
/// HTTP/1 rule for an absolute-form target and its `Host`
/// (`http::target::same_authority`): host compared ignoring ASCII case
/// and one trailing dot, the scheme's default port (80 for http, 443 for
/// https) equal to no port.
fn same_authority(authority: &[u8], host: &[u8], scheme: &[u8]) -> bool {
    let default_port: &[u8] = if scheme.eq_ignore_ascii_case(b"https") {
        b"443"
    } else {
        b"80"
    };
    crate::http::target::same_authority(authority, host, default_port)
}

/// A `content-length` value: one number, or a list of the same number
/// (RFC 9110 §8.6), each 1*DIGIT without overflow.
fn parse_content_length(value: &[u8]) -> Result<u64, Refusal> {
    let bad = Refusal::Malformed("invalid content-length (RFC 9110 §8.6)");
    let mut result: Option<u64> = None;
    let mut elements = 0;
    for e in list_elements(value) {
        elements += 1;
        if !e.iter().all(u8::is_ascii_digit) {
            return Err(bad);
        }
        let n = e.iter().try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
        let n = n.ok_or(bad)?;
        if result.is_some_and(|m| m != n) {
            return Err(Refusal::Malformed(
                "content-length values differ (RFC 9110 §8.6)",
            ));
        }
        result = Some(n);
    }
    if elements == 0 {
        return Err(bad);
    }
    result.ok_or(bad)
}

/// Maps a request trailer section (the field list of a HEADERS frame
/// with END_STREAM after the body) to fields for the upstream's chunked
/// trailer section; `content-length` and `host` are dropped (framing and
/// routing fields, not allowed in trailers, RFC 9110 §6.5.1).
///
/// Errors, malformed (RFC 9113 §8.1): a pseudo-header field, an invalid
/// name or value, a connection-specific field.
pub fn map_trailers<'f>(
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
) -> Result<Headers, Refusal> {
    let mut headers = Headers::new();
    for (name, value) in fields {
        if name.first() == Some(&b':') {
            return Err(Refusal::Malformed(
                "pseudo-header field in a trailer section (RFC 9113 §8.1)",
            ));
        }
        check_name(name).map_err(Refusal::Malformed)?;
        check_value(value).map_err(Refusal::Malformed)?;
        let known = Known::of(name);
        if is_connection_specific(known) || known == Known::Te {
            return Err(Refusal::Malformed(
                "connection-specific field in a trailer section (RFC 9113 §8.2.2)",
            ));
        }
        if matches!(known, Known::ContentLength | Known::Host) {
            // Framing and routing are decided by the header section; a
            // trailer may not carry them (RFC 9110 §6.5.1), so the
            // trailer section made here for the upstream does not either.
            continue;
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| Refusal::Malformed("invalid field name (RFC 9113 §8.2.1)"))?;
        headers
            .try_append(name, value)
            .map_err(|_| Refusal::Malformed("invalid field name (RFC 9113 §8.2.1)"))?;
    }
    Ok(headers)
}

//! A response head, or a trailer section, to an HPACK block for the
//! HTTP/2 client (RFC 9113 §8.1, §8.2, §8.3.2).
//!
//! What goes: `:status` first, then every field in order with its name
//! lower-cased (RFC 9113 §8.2) and its value without surrounding
//! whitespace (§8.2.1). What does not: the connection-specific fields —
//! `Connection` and every field it names, `Keep-Alive`,
//! `Proxy-Connection`, `Transfer-Encoding`, `Upgrade`, `TE` (§8.2.2) — a
//! `Content-Length` that is not one number, and fields that cannot be
//! sent in HTTP/2 (a name with upper case letters is lower-cased, any
//! other invalid name or value is dropped). The body itself goes as DATA
//! frames: a chunked upstream body is de-chunked by the machine
//! (`http::chunked`), its trailer section goes through
//! [`encode_trailer_section`], and a response without content
//! ([`has_content`]) ends with its HEADERS frame.
//!
//! What it must not know: frames, streams, the upstream connection.

use super::fields::is_connection_specific;
use crate::h2::hpack::Encoder;
use crate::http::ResponseHead;
use crate::http::headers::Headers;
use crate::http::known::Known;
use crate::http::syntax::{is_token, list_elements, trim_ows};

/// Whether a response to `method` with `status` has content, i.e. DATA
/// frames (RFC 9110 §6.4.1): not to HEAD, not 1xx, 204 or 304. Without
/// content the final HEADERS frame carries END_STREAM (RFC 9113 §8.1).
pub fn has_content(method: &str, status: u16) -> bool {
    !(method == "HEAD" || (100..200).contains(&status) || status == 204 || status == 304)
}

/// Appends the HPACK block of a response head, final or interim (1xx
/// other than 101: RFC 9113 §8.6 has no 101), to `out`: the size update
/// due ([`Encoder::begin_block`]), `:status`, then the fields (see the
/// module doc). A 1xx or 204 loses `content-length` too (RFC 9110 §8.6).
pub fn encode_response_head(head: &ResponseHead, encoder: &mut Encoder, out: &mut Vec<u8>) {
    encoder.begin_block(out);
    encoder.status(out, head.status);
    let no_length = (100..200).contains(&head.status) || head.status == 204;
    encode_fields(&head.headers, encoder, out, no_length);
}

/// Appends the HPACK block of a trailer section given as fields (no
/// pseudo-header field, RFC 9113 §8.1); connection-specific fields and
/// `content-length` are left out. Returns how many fields went: with
/// none, the machine ends the stream with an empty DATA frame instead.
pub fn encode_trailers(trailers: &Headers, encoder: &mut Encoder, out: &mut Vec<u8>) -> usize {
    encoder.begin_block(out);
    encode_fields(trailers, encoder, out, true)
}

/// [`encode_trailers`] for an HTTP/1.1 trailer section as it came after
/// a chunked body's last chunk (RFC 9112 §7.1.2): `name: value` lines up
/// to the empty line; a line that is not a field (no colon, a name that
/// is not a token) is dropped. Returns how many fields went.
pub fn encode_trailer_section(raw: &[u8], encoder: &mut Encoder, out: &mut Vec<u8>) -> usize {
    let mut fields = Headers::new();
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (
            line.get(..colon).unwrap_or_default(),
            line.get(colon + 1..).unwrap_or_default(),
        );
        if let Ok(name) = std::str::from_utf8(name) {
            // A name that is not a token is refused by `try_append`.
            let _ = fields.try_append(name, trim_ows(value));
        }
    }
    encode_trailers(&fields, encoder, out)
}

/// Encodes `headers` without the fields HTTP/2 forbids (and without
/// `content-length` when `no_length`); returns how many went.
fn encode_fields(
    headers: &Headers,
    encoder: &mut Encoder,
    out: &mut Vec<u8>,
    no_length: bool,
) -> usize {
    // The names `Connection` lists, lower case (rare: no allocation when
    // there is no such field).
    let named: Vec<Vec<u8>> = headers
        .get_all_known(Known::Connection)
        .flat_map(list_elements)
        .map(<[u8]>::to_ascii_lowercase)
        .collect();
    // The encoder's scratch: no allocation per head.
    let mut name_buf = encoder.take_scratch();
    let mut sent = 0;
    for (name, value) in headers.iter() {
        let known = Known::of(name.as_bytes());
        if is_connection_specific(known) || known == Known::Te {
            continue;
        }
        let value = trim_ows(value);
        if known == Known::ContentLength
            && (no_length || value.is_empty() || !value.iter().all(u8::is_ascii_digit))
        {
            continue;
        }
        if !is_token(name.as_bytes()) || value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
            continue;
        }
        name_buf.clear();
        name_buf.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        if named.contains(&name_buf) {
            continue;
        }
        encoder.field(out, &name_buf, value);
        sent += 1;
    }
    encoder.put_scratch(name_buf);
    sent
}

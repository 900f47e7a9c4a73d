//! Field validity in HTTP/2 (RFC 9113 §8.2): names, values, and the
//! connection-specific fields (§8.2.2).
//!
//! What it must not know: pseudo-header fields' meaning, heads.

use crate::http::known::Known;
use crate::http::syntax::is_token;

/// Checks a regular field name (RFC 9113 §8.2.1, RFC 9110 §5.1): a
/// token, without upper-case letters.
///
/// Errors: the reason the message is malformed (RFC 9113 §8.1.1).
pub(super) fn check_name(name: &[u8]) -> Result<(), &'static str> {
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err("upper-case field name (RFC 9113 §8.2.1)");
    }
    if !is_token(name) {
        return Err("invalid field name (RFC 9113 §8.2.1)");
    }
    Ok(())
}

/// Checks a field value (RFC 9113 §8.2.1, RFC 9110 §5.5): no NUL, CR,
/// LF or other control character but HTAB, and no SP or HTAB at either
/// end.
///
/// Errors: the reason the message is malformed (RFC 9113 §8.1.1).
pub(super) fn check_value(value: &[u8]) -> Result<(), &'static str> {
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err("control character in a field value (RFC 9113 §8.2.1)");
    }
    let ws = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if ws(value.first()) || ws(value.last()) {
        return Err("field value starts or ends with whitespace (RFC 9113 §8.2.1)");
    }
    Ok(())
}

/// True for the connection-specific fields an HTTP/2 message must not
/// carry (RFC 9113 §8.2.2): Connection, Keep-Alive, Proxy-Connection,
/// Transfer-Encoding, Upgrade. (TE is allowed with `trailers` alone.)
pub(super) fn is_connection_specific(known: Known) -> bool {
    matches!(
        known,
        Known::Connection
            | Known::KeepAlive
            | Known::ProxyConnection
            | Known::TransferEncoding
            | Known::Upgrade
    )
}

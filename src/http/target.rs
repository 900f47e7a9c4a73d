//! The request target as a gateway passes it on (RFC 9112 §3.2).
//!
//! A client may send the absolute form (`GET http://example.com/a HTTP/1.1`).
//! A gateway acts as the origin server toward its client, so it takes the
//! host from the target and replaces `Host` with it (RFC 9112 §3.2.2), and
//! it forwards the origin form (`/a`) upstream, which every origin server
//! accepts. Pure code over strings: no sockets.
//!
//! What it must not know: sockets, the upstream peer, the configuration.

use super::error::ParseError;
use super::head::RequestHead;

/// Rewrites an absolute-form target (`http://authority/path?query`, scheme
/// case-insensitive, `http` or `https`) to origin form (`/path?query`, or
/// `/` when the path is empty) and sets `Host` to the authority (replacing
/// any `Host` fields). Other targets are left alone.
///
/// Errors: `Malformed` for an absolute form with an empty authority or
/// one with userinfo (`user@host`, RFC 9110 §4.2.4).
pub fn normalize_absolute_form(req: &mut RequestHead) -> Result<(), ParseError> {
    let Some(rest) = strip_scheme(&req.target) else {
        return Ok(());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return Err(ParseError::Malformed(
            "absolute-form target without authority",
        ));
    }
    if authority.contains('@') {
        return Err(ParseError::Malformed("userinfo in the request target"));
    }
    let path = path.split('#').next().unwrap_or("");
    // RFC 9112 §3.2.4: `OPTIONS http://h` (no path) is `OPTIONS *` at the
    // origin.
    let options_star = path.is_empty() && req.method == "OPTIONS";
    let origin = if options_star {
        "*".to_string()
    } else if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let authority = authority.to_string();
    req.headers.remove_all("host");
    req.headers.append("Host", authority.as_bytes());
    req.target = origin;
    Ok(())
}

/// The part after `http://` or `https://` (scheme matched ignoring case).
fn strip_scheme(target: &str) -> Option<&str> {
    for scheme in ["http://", "https://"] {
        if let Some(head) = target.get(..scheme.len())
            && head.eq_ignore_ascii_case(scheme)
        {
            return target.get(scheme.len()..);
        }
    }
    None
}

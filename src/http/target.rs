//! The request target as a gateway passes it on (RFC 9112 §3.2).
//!
//! A client may send the absolute form (`GET http://example.com/a HTTP/1.1`).
//! A gateway acts as the origin server toward its client, so it takes the
//! host from the target and replaces `Host` with it (RFC 9112 §3.2.2), and
//! it forwards the origin form (`/a`) upstream, which every origin server
//! accepts. Pure code over strings: no sockets.
//!
//! A `Host` that is not the target's authority is refused, not replaced:
//! RFC 9112 §3.2 requires a client to send a `Host` identical to the
//! target URI's authority, so a request where they differ (an empty or
//! whitespace-only `Host` included) comes from a broken or hostile client,
//! and the part of a chain that routes by `Host` (a cache, a WAF, the
//! application) would read another host than the one sluice routed by.
//! §3.2.2 tells an origin server to ignore such a `Host`; a proxy that
//! forwards to origins which may not is safer refusing it, as HTTPWookiee's
//! host tests expect.
//!
//! What it must not know: sockets, the upstream peer, the configuration.

use super::error::ParseError;
use super::head::RequestHead;
use super::known::Known;

/// Rewrites an absolute-form target (`http://authority/path?query`, scheme
/// case-insensitive, `http` or `https`) to origin form (`/path?query`, or
/// `/` when the path is empty) and sets `Host` to the authority (replacing
/// any `Host` fields). Other targets are left alone.
///
/// Errors: `Malformed` for an absolute form with an empty authority, one
/// with userinfo (`user@host`, RFC 9110 §4.2.4), an authority that is not
/// `host [ ":" port ]` ([`check_authority`]), a path and query that are
/// not RFC 3986's (a fragment included, [`check_origin_form`]), or a
/// `Host` field that is not the same authority ([`same_authority`]: host
/// ignoring case and one trailing dot, the scheme's default port as good
/// as none). Nothing is changed before these checks pass.
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
    check_authority(authority.as_bytes())?;
    check_path_query(path.as_bytes())?;
    let default_port: &[u8] = if req
        .target
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("https"))
    {
        b"443"
    } else {
        b"80"
    };
    if let Some(host) = req.headers.get_known(Known::Host)
        && !same_authority(host, authority.as_bytes(), default_port)
    {
        return Err(ParseError::Malformed(
            "Host is not the absolute-form target's authority",
        ));
    }
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
    req.headers.remove_known(Known::Host);
    req.headers.append_known(Known::Host, authority.as_bytes());
    req.target = origin;
    Ok(())
}

/// Whether two authorities (`host [ ":" port ]`) name the same host and
/// port (RFC 3986 §6.2.2, §6.2.3): the host compared ignoring ASCII case
/// and one trailing dot (`example.com.` is the same name, RFC 1034 §3.1,
/// as routes match it), an absent or empty port read as `default_port`.
pub(crate) fn same_authority(a: &[u8], b: &[u8], default_port: &[u8]) -> bool {
    let ((ha, pa), (hb, pb)) = (host_port(a), host_port(b));
    let (ha, hb) = (
        ha.strip_suffix(b".").unwrap_or(ha),
        hb.strip_suffix(b".").unwrap_or(hb),
    );
    let port = |p: &'_ [u8]| -> bool {
        let p = if p.is_empty() { default_port } else { p };
        p == if pb.is_empty() { default_port } else { pb }
    };
    !ha.is_empty() && ha.eq_ignore_ascii_case(hb) && port(pa)
}

/// An authority's host and port (empty when absent): `[v6]:port`,
/// `name:port`, `name`.
fn host_port(x: &[u8]) -> (&[u8], &[u8]) {
    let colon = match x.first() {
        Some(b'[') => x
            .iter()
            .position(|&c| c == b']')
            .map(|end| end + 1)
            .filter(|&i| x.get(i) == Some(&b':')),
        _ => x.iter().rposition(|&c| c == b':'),
    };
    match colon {
        Some(i) => (
            x.get(..i).unwrap_or_default(),
            x.get(i + 1..).unwrap_or_default(),
        ),
        None => (x, &[]),
    }
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

/// Checks an origin-form target (RFC 9112 §3.2.1: `absolute-path [ "?"
/// query ]`, RFC 3986 §3.3, §3.4): it starts with `/`, every byte is a
/// `pchar`, `/` or (in the query) `?`, and every `%` starts a
/// pct-encoded octet. A `#` (a fragment is never sent, RFC 9110 §7.1),
/// a backslash, `<`, `>`, `|`, `{`, `}`, `^`, backtick, `"`, SP, CTLs and
/// obs-text are all refused: another parser could read such a target
/// differently from the path filter in front of it (the class of HAProxy's
/// CVE-2023-45539).
///
/// Errors: `Malformed`, naming the rule broken.
pub fn check_origin_form(target: &[u8]) -> Result<(), ParseError> {
    if target.first() != Some(&b'/') {
        return Err(ParseError::Malformed(
            "origin-form target must start with /",
        ));
    }
    check_path_query(target)
}

/// `path-abempty [ "?" query ]` (RFC 3986 §3.3, §3.4): see
/// [`check_origin_form`].
fn check_path_query(s: &[u8]) -> Result<(), ParseError> {
    if s.contains(&b'#') {
        return Err(ParseError::Malformed("fragment in the request target"));
    }
    if !all_chars(s, |b| in_class(b, PATH_QUERY)) {
        return Err(ParseError::Malformed("invalid byte in the request target"));
    }
    Ok(())
}

/// Every byte of `s` passes `ok`, or is a `%` starting a pct-encoded
/// octet (`%` HEXDIG HEXDIG, RFC 3986 §2.1).
fn all_chars(s: &[u8], ok: impl Fn(u8) -> bool) -> bool {
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if b == b'%' {
            let pct = s.get(i + 1..i + 3).unwrap_or_default();
            if pct.len() != 2 || !pct.iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            i += 3;
        } else if ok(b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// Class bit: `unreserved / sub-delims` (RFC 3986 §2.3, §2.2).
const UNRESERVED_OR_SUB_DELIM: u8 = 1;
/// Class bit: a byte of a path or query besides pct-encoded: `pchar`
/// (`unreserved / sub-delims / ":" / "@"`, RFC 3986 §3.3) or `/` or `?`
/// (§3.4).
const PATH_QUERY: u8 = 2;

/// The classes of each byte value, built at compile time: one load per
/// byte of every target and `Host` checked.
static URI_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let unreserved_or_sub_delim = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        if unreserved_or_sub_delim {
            t[i] = UNRESERVED_OR_SUB_DELIM | PATH_QUERY;
        } else if matches!(b, b':' | b'@' | b'/' | b'?') {
            t[i] = PATH_QUERY;
        }
        i += 1;
    }
    t
};

/// True if byte `b` is in a class of `mask` (an OR of the class bits).
fn in_class(b: u8, mask: u8) -> bool {
    URI_CLASS.get(usize::from(b)).is_some_and(|c| c & mask != 0)
}

/// `unreserved / sub-delims` (RFC 3986 §2.3, §2.2).
fn is_unreserved_or_sub_delim(b: u8) -> bool {
    in_class(b, UNRESERVED_OR_SUB_DELIM)
}

/// Checks a URI authority as `Host` carries it (RFC 9112 §3.2, RFC 3986
/// §3.2.2, §3.2.3): `host [ ":" port ]` where host is an IP-literal in
/// brackets (hex digits, `:` and `.`, or `v` IPvFuture), or a reg-name
/// (unreserved, pct-encoded, sub-delims), and port is at most five digits
/// up to 65535. No userinfo. The host may not be empty (`""`, `:80`) nor
/// only dots (`.`): an http(s) URI with an empty host is invalid and its
/// recipient must reject it (RFC 9110 §4.2.1, §4.2.2; nginx answers 400),
/// and a redirect to `https://$host…` would point at another site. An
/// IPv6 literal must be an IPv6 address (`[:]` is not).
///
/// Errors: `Malformed("invalid Host")` or a more precise reason.
pub fn check_authority(a: &[u8]) -> Result<(), ParseError> {
    let bad = ParseError::Malformed("invalid Host");
    if a.first() == Some(&b'[') {
        let close = a.iter().position(|&b| b == b']').ok_or(bad.clone())?;
        let inside = a.get(1..close).unwrap_or_default();
        let ip_ok = !inside.is_empty()
            && (std::str::from_utf8(inside)
                .ok()
                .and_then(|t| t.parse::<std::net::Ipv6Addr>().ok())
                .is_some()
                || (inside
                    .first()
                    .is_some_and(|b| b.eq_ignore_ascii_case(&b'v'))
                    && inside
                        .iter()
                        .all(|&b| is_unreserved_or_sub_delim(b) || b == b':')));
        if !ip_ok {
            return Err(bad);
        }
        return match a.get(close + 1..).unwrap_or_default() {
            [] => Ok(()),
            [b':', port @ ..] => check_port(port),
            _ => Err(bad),
        };
    }
    let (host, port) = match a.iter().rposition(|&b| b == b':') {
        Some(colon) => (
            a.get(..colon).unwrap_or_default(),
            a.get(colon + 1..).unwrap_or_default(),
        ),
        None => (a, &[][..]),
    };
    if host.iter().all(|&b| b == b'.') {
        return Err(ParseError::Malformed("invalid Host: no host name"));
    }
    if !all_chars(host, is_unreserved_or_sub_delim) {
        return Err(bad);
    }
    // An empty label between two dots (`..example.com`) names no host; it
    // matched `*.example.com` routes (nginx refuses it too).
    if host.windows(2).any(|w| w == b"..") {
        return Err(ParseError::Malformed("invalid Host: an empty label"));
    }
    check_port(port)
}

/// An authority's port: empty (RFC 3986 §3.2.3 allows `host:`) or at most
/// five digits up to 65535.
///
/// Errors: `Malformed("invalid port in the authority")`.
fn check_port(port: &[u8]) -> Result<(), ParseError> {
    let ok = port.is_empty()
        || (port.len() <= 5
            && port.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(port)
                .ok()
                .and_then(|p| p.parse::<u16>().ok())
                .is_some());
    if ok {
        Ok(())
    } else {
        Err(ParseError::Malformed("invalid port in the authority"))
    }
}

#[cfg(test)]
mod class_tests {
    use super::*;

    #[test]
    fn the_byte_classes_match_rfc_3986_for_every_byte() {
        for b in 0..=255u8 {
            let unreserved_or_sub_delim =
                b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
            let pchar = unreserved_or_sub_delim || b == b':' || b == b'@';
            assert_eq!(
                is_unreserved_or_sub_delim(b),
                unreserved_or_sub_delim,
                "{b}"
            );
            assert_eq!(
                in_class(b, PATH_QUERY),
                pchar || b == b'/' || b == b'?',
                "{b}"
            );
        }
    }
}

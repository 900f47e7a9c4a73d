//! Hop-by-hop fields, keep-alive verdicts and the proxy's own forwarding
//! fields (RFC 9110 §7.6, RFC 9112 §9.3, ARCHITECTURE.md §6).
//!
//! Why it exists: a proxy forwards end-to-end fields and drops the ones that
//! describe only the connection they arrived on; it sets `Connection` on
//! each side itself, and says who it is (`Via`) and whom it forwards for
//! (`X-Forwarded-For`, `X-Forwarded-Proto`).
//!
//! What it must not know: sockets, time, configuration (the caller passes
//! the switches), body framing.
//!
//! Invariants: fields that are not removed keep their order; fields the
//! proxy adds go at the end (except `X-Forwarded-For`, which grows in
//! place); `Transfer-Encoding`, `Content-Length`, `Trailer` and `Host`
//! are never removed, even when `Connection` names them, because body
//! framing and routing must reach the upstream exactly as the proxy read
//! them.

use std::net::IpAddr;

use super::headers::Headers;
use super::known::Known;
use super::syntax::list_elements;

/// Fields that are hop-by-hop whatever `Connection` says (RFC 9110 §7.6.1;
/// `Proxy-Connection` and `Keep-Alive` are the pre-standard ones it names).
const HOP_BY_HOP: [Known; 5] = [
    Known::Connection,
    Known::KeepAlive,
    Known::ProxyConnection,
    Known::Te,
    Known::Upgrade,
];

/// [`HOP_BY_HOP`] as a mask of [`Known::bit`]s.
const HOP_BY_HOP_MASK: u32 = {
    let mut mask = 0;
    let mut i = 0;
    while i < HOP_BY_HOP.len() {
        mask |= HOP_BY_HOP[i].bit();
        i += 1;
    }
    mask
};

/// Fields kept even if `Connection` names them. RFC 9110 §7.6.1 forbids a
/// sender to list a field meant for all recipients; honouring such a list
/// would let a client strip the framing the proxy used (`Content-Length`,
/// `Transfer-Encoding`: request smuggling), the `Trailer` announcement
/// (RFC 9110 §6.6.2: end-to-end) or `Host` (routing).
const NEVER_REMOVED: [Known; 4] = [
    Known::TransferEncoding,
    Known::ContentLength,
    Known::Trailer,
    Known::Host,
];

/// True if any `Connection` field lists `token` (a comma-separated list of
/// tokens with OWS, compared ignoring ASCII case; RFC 9110 §7.6.1).
pub fn connection_has(headers: &Headers, token: &str) -> bool {
    headers
        .get_all_known(Known::Connection)
        .flat_map(list_elements)
        .any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
}

/// True if `Connection` lists `upgrade` and an `Upgrade` field is present
/// (RFC 9110 §7.8: a sender of Upgrade must also send that option).
pub fn is_upgrade_request(headers: &Headers) -> bool {
    connection_has(headers, "upgrade") && headers.has_known(Known::Upgrade)
}

/// Takes `h2c` and `h2` out of a request's `Upgrade` offer, and
/// `HTTP2-Settings` with them (RFC 7540 §3.2.1: a connection-specific
/// field): the upstream is never offered the switch to HTTP/2 (`h2` over
/// a TLS upstream, which RFC 9113 §3.2 forbids in `Upgrade` but a server
/// may take, as Apache's `H2Upgrade on` does). Through such a tunnel
/// the client's later requests would go to the upstream as HTTP/2 frames
/// the proxy never reads, past its routes, allow/deny rules, header rules
/// and access log ("h2c smuggling"); RFC 9113 §3.1 deprecates the
/// upgrade, and sluice never offers it itself. Other protocols in the
/// offer stay (one `Upgrade` field listing them, in order); with none
/// left the field goes, so the request is no upgrade request. A request
/// without `Upgrade` costs one bit test.
#[inline(always)]
pub fn drop_h2c_offer(headers: &mut Headers) {
    if headers.has_known(Known::Upgrade) {
        drop_h2c_from_upgrade(headers);
    }
}

/// [`drop_h2c_offer`] for a request with `Upgrade`.
fn drop_h2c_from_upgrade(headers: &mut Headers) {
    let is_h2c = |p: &[u8]| {
        p.split(|&b| b == b'/').next().is_some_and(|name| {
            name.eq_ignore_ascii_case(b"h2c") || name.eq_ignore_ascii_case(b"h2")
        })
    };
    let offers_h2c = headers
        .get_all_known(Known::Upgrade)
        .flat_map(list_elements)
        .any(is_h2c);
    if !offers_h2c {
        return;
    }
    let rest: Vec<Vec<u8>> = headers
        .get_all_known(Known::Upgrade)
        .flat_map(list_elements)
        .filter(|p| !is_h2c(p))
        .map(<[u8]>::to_vec)
        .collect();
    headers.remove_known(Known::Upgrade);
    headers.remove_all("http2-settings");
    if !rest.is_empty() {
        headers.append_known(Known::Upgrade, &rest.join(&b", "[..]));
    }
}

/// The fields the proxy sets or extends for the upstream to trust, which
/// a client must not be able to stand in for.
const MANAGED: [&str; 3] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-client-cert",
];

/// Removes a request's fields whose names spell one of the proxy's own
/// forwarding fields (`X-Forwarded-For`, `X-Forwarded-Proto`,
/// `X-Forwarded-Client-Cert`) with `_` for `-` (`X-Forwarded_For`,
/// `X_Forwarded_Proto`). CGI-style servers (WSGI, Rack, PHP) map `-` and
/// `_` to the same variable (`HTTP_X_FORWARDED_PROTO`), so such a field
/// stands in for the one the proxy set, replaced or extended: the client
/// chooses the scheme, address or certificate the application reads
/// (Puma CVE-2024-45614; nginx drops every name with `_` by default).
/// Other names with `_` pass. A request without `_` in a name costs one
/// scan of the names the codec does not know (those it knows have none).
#[inline]
pub fn drop_managed_lookalikes(headers: &mut Headers) {
    if headers.any_other_name(|name| name.contains(&b'_')) {
        headers.retain(|name, _| !(name.contains('_') && MANAGED.iter().any(|m| spells(name, m))));
    }
}

/// `name` is `managed` (lower case, with `-`) but for ASCII case and `_`
/// in place of `-`.
fn spells(name: &str, managed: &str) -> bool {
    name.len() == managed.len()
        && name
            .bytes()
            .zip(managed.bytes())
            .all(|(n, m)| n.eq_ignore_ascii_case(&m) || (n == b'_' && m == b'-'))
}

/// Removes the hop-by-hop fields (RFC 9110 §7.6.1): `Connection`,
/// `Keep-Alive`, `Proxy-Connection`, `TE`, `Upgrade`, and every field that
/// `Connection` names, except `Transfer-Encoding`, `Content-Length`,
/// `Trailer` and `Host` (see the module doc). The other fields keep their
/// order.
///
/// If `keep_upgrade` (the caller decided to pass an upgrade through, e.g.
/// [`is_upgrade_request`] was true before this call): the `Upgrade` field
/// stays, and every `Connection` field is replaced by one
/// `Connection: upgrade` at the end (ARCHITECTURE.md §6).
pub fn remove_hop_by_hop(headers: &mut Headers, keep_upgrade: bool) {
    // Most messages carry no `Connection` or one that lists only `close`
    // or `keep-alive`, which name no field.
    let names_fields = headers
        .get_all_known(Known::Connection)
        .flat_map(list_elements)
        .any(|t| !t.eq_ignore_ascii_case(b"close") && !t.eq_ignore_ascii_case(b"keep-alive"));
    if !names_fields {
        // Only the hop-by-hop fields themselves go, by tag, without
        // looking at names (nothing at all for most requests: one test of
        // a mask).
        let keep = if keep_upgrade {
            Known::Upgrade.bit()
        } else {
            0
        };
        headers.remove_known_set(HOP_BY_HOP_MASK & !keep);
        if keep_upgrade {
            headers.append_known(Known::Connection, b"upgrade");
        }
        return;
    }
    // The names `Connection` lists, copied: `retain` borrows `headers`.
    let named: Vec<Vec<u8>> = headers
        .get_all_known(Known::Connection)
        .flat_map(list_elements)
        .map(<[u8]>::to_vec)
        .collect();
    headers.retain_tagged(|known, name, _| {
        if NEVER_REMOVED.contains(&known) {
            return true;
        }
        if keep_upgrade && known == Known::Upgrade {
            return true;
        }
        let listed = named
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name.as_bytes()));
        !(HOP_BY_HOP.contains(&known) || listed)
    });
    if keep_upgrade {
        headers.append_known(Known::Connection, b"upgrade");
    }
}

/// Whether the client's connection may carry another request after this
/// one (RFC 9112 §9.3): `close` listed → false; HTTP/1.1 (`version` 1) →
/// true; HTTP/1.0 (`version` 0) → true only if `keep-alive` is listed.
pub fn request_keep_alive(version: u8, headers: &Headers) -> bool {
    if connection_has(headers, "close") {
        return false;
    }
    version >= 1 || connection_has(headers, "keep-alive")
}

/// Whether an upstream connection may be reused after this response: only
/// an HTTP/1.1 response (`version` 1) without `Connection: close`
/// (RFC 9112 §9.3; sluice never reuses an HTTP/1.0 upstream, even with
/// `keep-alive`). The body kind and leftover bytes are the caller's part of
/// the verdict (ARCHITECTURE.md §6).
pub fn response_keep_alive(version: u8, headers: &Headers) -> bool {
    version == 1 && !connection_has(headers, "close")
}

/// True if a `Via` field names `pseudonym` as a received-by (RFC 9110
/// §7.6.3: `received-protocol RWS received-by [ RWS comment ]`, compared
/// ignoring ASCII case): the request already passed this proxy.
pub fn via_names(headers: &Headers, pseudonym: &str) -> bool {
    headers
        .get_all_known(Known::Via)
        .flat_map(list_elements)
        .filter_map(|e| {
            e.split(|&b| b == b' ' || b == b'\t')
                .filter(|w| !w.is_empty())
                .nth(1)
        })
        .any(|by| by.eq_ignore_ascii_case(pseudonym.as_bytes()))
}

/// Longest `Keep-Alive: timeout=N` taken seriously (a day), in seconds.
const MAX_KEEP_ALIVE_HINT: u64 = 86_400;

/// The idle limit a response announces with `Keep-Alive: timeout=N`
/// (RFC 2068 §19.7.1.1; Apache and nginx's `keepalive_timeout` second
/// parameter send it): `N` seconds, from the first `timeout` parameter of
/// any `Keep-Alive` field (name ignoring case, value 1*DIGIT, optionally
/// quoted), at most a day. `None` if absent or malformed.
pub fn keep_alive_timeout(headers: &Headers) -> Option<u64> {
    headers
        .get_all_known(Known::KeepAlive)
        .flat_map(list_elements)
        .find_map(|param| {
            let eq = param.iter().position(|&b| b == b'=')?;
            let (name, value) = (param.get(..eq)?, param.get(eq + 1..)?);
            if !name.trim_ascii().eq_ignore_ascii_case(b"timeout") {
                return None;
            }
            let value = value.trim_ascii();
            let value = value
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(value);
            if value.is_empty() || value.len() > 9 || !value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let n = std::str::from_utf8(value).ok()?.parse::<u64>().ok()?;
            Some(n.min(MAX_KEEP_ALIVE_HINT))
        })
}

/// Adds the proxy's own fields to a request going upstream (ARCHITECTURE.md §6).
///
/// - `via`: with `Some((protocol, name))`, appends `Via: <protocol> <name>`
///   as a new field at the end (RFC 9110 §7.6.3; received-protocol
///   `protocol`, as `1.1` or `2`, pseudonym `name`, which must be a token).
/// - `xff`: appends `, <client_ip>` to the value of the last
///   `X-Forwarded-For` field in place (or sets it if that value is empty),
///   or adds `X-Forwarded-For: <client_ip>` at the end. An IPv4-mapped IPv6
///   address (from a dual-stack listener) is written as IPv4; IPv6 without
///   brackets (the de-facto XFF format).
/// - `xfp`: the scheme the client used (`b"http"` or `b"https"`): replaces
///   every `X-Forwarded-Proto` with one `X-Forwarded-Proto: <scheme>` at
///   the end, so a client cannot claim a scheme it did not use.
///
/// Every other field stays where it was; `Host` is untouched.
pub fn add_forwarding_fields(
    headers: &mut Headers,
    client_ip: IpAddr,
    via: Option<(&[u8], &str)>,
    xff: bool,
    xfp: Option<&'static [u8]>,
) {
    if let Some((protocol, name)) = via {
        headers.append_known_made(Known::Via, &[protocol, b" ", name.as_bytes()]);
    }
    if xff {
        // Formatted on the stack: no allocation per request.
        let mut text = [0u8; 64];
        let ip = crate::text::ip_text(client_ip.to_canonical(), &mut text);
        // The separator before our element: none after an empty value or
        // a trailing comma and space, a space after a bare trailing comma
        // (`a,` becomes `a, ip`, not `a,, ip`), else a comma and a space
        // (RFC 9110 §5.6.1).
        let separator: Option<&'static [u8]> =
            headers.get_all_known(Known::XForwardedFor).last().map(|v| {
                if list_elements(v).next().is_none() {
                    &b""[..]
                } else if v.ends_with(b",") {
                    &b" "[..]
                } else if v.trim_ascii_end().ends_with(b",") {
                    &b""[..]
                } else {
                    &b", "[..]
                }
            });
        match separator {
            None => headers.append_known_made(Known::XForwardedFor, &[ip.as_bytes()]),
            Some(sep) => {
                headers.append_to_last_known(Known::XForwardedFor, sep);
                headers.append_to_last_known(Known::XForwardedFor, ip.as_bytes());
            }
        }
    }
    if let Some(scheme) = xfp {
        headers.remove_known(Known::XForwardedProto);
        headers.append_known_made(Known::XForwardedProto, &[scheme]);
    }
}

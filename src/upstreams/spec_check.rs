//! The checks that upstream groups and routes (`[[upstream]]`,
//! `[[route]]`) fit together and that each key's value is one the proxy
//! can act on: called by `--check-config` and at start and reload, before
//! anything is bound. Errors name the key path (`upstream[0].health_check.rise`).
//!
//! What it must not know: sockets, the loop, how a server is chosen.

use std::collections::HashSet;

use crate::config::ConfigError;
use crate::header_rules::check_name;

use super::spec::*;

/// Checks a health check's `host`, `headers` and `expect_body`: a
/// field name must be a token, a value visible ASCII and spaces (RFC 9110
/// §5.5), `Host` goes in `host`, and a `HEAD` has no body to search.
///
/// Errors: the key at fault inside `health_check`, and why.
fn check_request_fields(hc: &HealthCheck) -> Result<(), (&'static str, String)> {
    let value_ok = |v: &str| {
        v.bytes()
            .all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
    };
    if let Some(h) = &hc.host
        && (h.is_empty() || h.bytes().any(|b| !(0x21..0x7f).contains(&b)))
    {
        return Err(("host", format!("{h:?} is not a host")));
    }
    for (name, value) in &hc.headers {
        if !crate::http::syntax::is_token(name.as_bytes()) || !value_ok(value) {
            return Err((
                "headers",
                format!("{name:?} = {value:?} is not a valid field"),
            ));
        }
        let reserved = ["host", "connection", "content-length", "transfer-encoding"];
        if reserved.iter().any(|r| name.eq_ignore_ascii_case(r)) {
            return Err((
                "headers",
                format!("{name:?} is set by sluice (use `host` for the Host field)"),
            ));
        }
    }
    match &hc.expect_body {
        Some(_) if hc.method == CheckMethod::Head => Err((
            "expect_body",
            "needs method GET (a HEAD answer has no body)".into(),
        )),
        Some(b) if b.is_empty() || b.len() > MAX_CHECK_BODY => {
            Err(("expect_body", format!("must be 1..={MAX_CHECK_BODY} bytes")))
        }
        _ => Ok(()),
    }
}

/// Checks a route's own answer and rules: its header rules (names a
/// route may touch, values valid templates), `rate_limit`, its timeouts,
/// `redirect` (a valid template, a redirect status) or `respond` (a
/// status, a `Content-Type` without controls), not both.
///
/// Errors: the key inside the route that is at fault, and why.
fn check_answer(r: &RouteSpec) -> Result<(), (&'static str, String)> {
    let rule_sets = [
        (
            r.request_rules(),
            [
                "set_request_headers",
                "add_request_headers",
                "remove_request_headers",
            ],
        ),
        (
            r.response_rules(),
            [
                "set_response_headers",
                "add_response_headers",
                "remove_response_headers",
            ],
        ),
    ];
    for (rules, [set, add, remove]) in rule_sets {
        let names = [
            (set, rules.set.keys().collect::<Vec<_>>()),
            (add, rules.add.keys().collect()),
            (remove, rules.remove.iter().collect()),
        ];
        for (key, list) in names {
            for (i, name) in list.iter().enumerate() {
                check_name(name).map_err(|e| (key, format!("header rule: {e}")))?;
                // Field names are case-insensitive (RFC 9110 §5.1): two
                // spellings would be applied in key order, not file order.
                if let Some(other) = list.iter().take(i).find(|o| o.eq_ignore_ascii_case(name)) {
                    return Err((
                        key,
                        format!("header rule: {name:?} and {other:?} are the same field"),
                    ));
                }
            }
        }
        // A request must keep its Host, exactly one (RFC 9112 §3.2); `set`
        // may change it. `add` appends a second Host line, which a server
        // must answer with 400 (and a lenient one may read either).
        if remove == "remove_request_headers"
            && rules.remove.iter().any(|n| n.eq_ignore_ascii_case("host"))
        {
            return Err((
                remove,
                "header rule: \"Host\" may not be removed (RFC 9112 §3.2: a request \
                 has one; set_request_headers may change it)"
                    .into(),
            ));
        }
        if add == "add_request_headers" && rules.add.keys().any(|n| n.eq_ignore_ascii_case("host"))
        {
            return Err((
                add,
                "header rule: \"Host\" may not be added (RFC 9112 §3.2: a request \
                 has exactly one; set_request_headers may change it)"
                    .into(),
            ));
        }
        for (key, map) in [(set, rules.set), (add, rules.add)] {
            for (name, value) in map {
                // A tab inside a field value is its own whitespace (RFC
                // 9110 §5.5), not a control character; a redirect's URL
                // has none, and neither has a Host.
                let inside = !value.starts_with('\t') && !value.ends_with('\t');
                if value.contains('\t') && (!inside || name.eq_ignore_ascii_case("host")) {
                    return Err((
                        key,
                        format!(
                            "header rule value {value:?} of {name:?}: a tab may only stand \
                             between other characters, and not in Host"
                        ),
                    ));
                }
                // A Host is uri-host [":" port] (RFC 9110 §7.2): never
                // empty for an http(s) target, and never with a space,
                // which a server must answer with 400 (RFC 9112 §3.2).
                if key == "set_request_headers"
                    && name.eq_ignore_ascii_case("host")
                    && (value.trim().is_empty() || value.contains(' '))
                {
                    return Err((
                        key,
                        format!(
                            "header rule value {value:?} of {name:?}: a host (and port) \
                             is not empty and has no space (RFC 9110 §7.2)"
                        ),
                    ));
                }
                crate::template::check(&value.replace('\t', " "))
                    .map_err(|e| (key, format!("header rule value {e}")))?;
            }
        }
    }
    if let Some(l) = r.rate_limit
        && (l.requests_per_second == 0 || l.burst == 0)
    {
        return Err((
            "rate_limit",
            "needs requests_per_second and burst of at least 1".into(),
        ));
    }
    let timeouts = [
        ("upstream_read_timeout", r.upstream_read_timeout),
        ("upstream_connect_timeout", r.upstream_connect_timeout),
        ("client_body_timeout", r.client_body_timeout),
    ];
    for (key, t) in timeouts {
        if t.is_some_and(|t| t.is_zero()) {
            return Err((key, "must be more than 0".into()));
        }
    }
    if r.redirect.is_some() && r.respond.is_some() {
        return Err((
            "respond",
            "a route has redirect or respond, not both".into(),
        ));
    }
    if let Some(to) = &r.redirect {
        if to.trim().is_empty() {
            return Err(("redirect", "redirect is empty (an empty Location)".into()));
        }
        crate::template::check(to).map_err(|e| ("redirect", format!("redirect {e}")))?;
    }
    match (r.redirect_status, &r.redirect) {
        (Some(_), None) => {
            return Err(("redirect_status", "redirect_status without redirect".into()));
        }
        (Some(s), Some(_)) if ![301, 302, 303, 307, 308].contains(&s) => {
            return Err((
                "redirect_status",
                format!("{s} is not 301, 302, 303, 307 or 308"),
            ));
        }
        _ => {}
    }
    if let Some(resp) = &r.respond {
        if !(200..=599).contains(&resp.status) || resp.status == 204 || resp.status == 304 {
            return Err((
                "respond",
                format!(
                    "status {} must be 200..=599 and not 204 or 304 (they have no body)",
                    resp.status
                ),
            ));
        }
        if resp.status == 205 && !resp.body.is_empty() {
            return Err((
                "respond",
                "status 205 has no content (RFC 9110 §15.3.6): its body must be empty".into(),
            ));
        }
        let ok_type = resp
            .content_type
            .as_ref()
            .is_none_or(|t| !t.is_empty() && !t.bytes().any(|b| b.is_ascii_control()));
        if !ok_type {
            return Err((
                "respond",
                "content_type is empty or holds a control character".into(),
            ));
        }
    }
    Ok(())
}

/// Checks groups and routes: a name once, servers present, weights and
/// health-check values in bounds, each route's group known.
///
/// Errors: the first value at fault, with its key path
/// (`upstream[0].health_check.rise`, `route[1].upstream`).
pub(crate) fn check(groups: &[GroupSpec], routes: &[RouteSpec]) -> Result<(), ConfigError> {
    if groups.is_empty() {
        return Err(ConfigError::new(
            "upstream",
            "at least one upstream group is needed",
        ));
    }
    let mut names = HashSet::new();
    for (gi, g) in groups.iter().enumerate() {
        check_group(g).map_err(|(key, reason)| {
            ConfigError::at("upstream", format!("upstream[{gi}].{key}"), reason)
        })?;
        let name = g.name.get_ref();
        if !names.insert(name.as_str()) {
            return Err(ConfigError::at(
                "upstream",
                format!("upstream[{gi}].name"),
                format!("group {name:?} is declared twice"),
            ));
        }
    }
    for (ri, r) in routes.iter().enumerate() {
        let at = |key: &str, reason: String| {
            ConfigError::at("upstream", format!("route[{ri}].{key}"), reason)
        };
        check_answer(r).map_err(|(key, reason)| at(key, reason))?;
        let up = r.upstream.get_ref();
        if up.is_empty() && r.answers_itself() {
            // No group needed: the route answers every request itself.
        } else if up.is_empty() {
            return Err(at(
                "upstream",
                "a route needs upstream (a group's name), redirect or respond".into(),
            ));
        } else if !names.contains(up.as_str()) {
            return Err(at(
                "upstream",
                format!("route to unknown upstream group {up:?}"),
            ));
        }
        if let Some(h) = &r.host
            && let Err(why) = check_route_host(h)
        {
            return Err(at("host", format!("{h:?} {why}")));
        }
    }
    Ok(())
}

/// Checks a route's `host`: a name of ASCII labels (letters, digits, `-`,
/// `_`), none empty, one trailing dot allowed; or `*.` then such a name
/// (a wildcard, nginx's `server_name *.example.com`). Anything else could
/// never equal a valid request `Host` (non-ASCII gets 400 there), so the
/// route would be dead and its `allow`/`deny` never applied.
///
/// Errors: why it is not one, for the message after the value.
fn check_route_host(h: &str) -> Result<(), &'static str> {
    if h == "*" {
        return Err("is not a host name (leave host out for a route that matches any host)");
    }
    let name = h.strip_prefix("*.").unwrap_or(h);
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.contains(':') || name.contains('/') {
        return Err("is not a host name (no port, no path)");
    }
    if name.contains('*') {
        return Err("is not a host name: a wildcard is only \"*.\" at its start");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !name.split('.').all(label_ok) {
        return Err(
            "is not a host name (ASCII letters, digits, '-' and '_' in dot-separated labels, \
             none empty; an internationalized name in its xn-- form)",
        );
    }
    Ok(())
}

/// Checks one group's own values.
///
/// Errors: the key inside the group at fault (`servers[1]`,
/// `health_check.rise`), and why.
fn check_group(g: &GroupSpec) -> Result<(), (String, String)> {
    let fail = |key: &str, reason: String| Err((key.to_string(), reason));
    let name = g.name.get_ref();
    if name.is_empty() {
        return fail("name", "a group needs a name".into());
    }
    if g.servers.get_ref().is_empty() {
        return fail("servers", format!("group {name:?} has no servers"));
    }
    if let Some((si, s)) = g
        .servers
        .get_ref()
        .iter()
        .enumerate()
        .find(|(_, s)| s.weight == 0 || s.weight > MAX_WEIGHT)
    {
        return fail(
            &format!("servers[{si}]"),
            format!("server {s}: weight must be 1..={MAX_WEIGHT}"),
        );
    }
    let tls_keys = [
        ("tls_server_name", g.tls_server_name.is_some()),
        ("tls_ca", g.tls_ca.is_some()),
        ("tls_verify", !g.tls_verify),
        ("tls_client_cert", g.tls_client_cert.is_some()),
        ("tls_client_key", g.tls_client_key.is_some()),
    ];
    if let Some((key, _)) = tls_keys.iter().find(|(_, given)| *given)
        && !g.tls
    {
        return fail(
            key,
            format!("group {name:?}: tls_* settings without tls = true"),
        );
    }
    match (&g.tls_client_cert, &g.tls_client_key) {
        (Some(_), None) => {
            return fail(
                "tls_client_cert",
                "tls_client_cert needs tls_client_key beside it".into(),
            );
        }
        (None, Some(_)) => {
            return fail(
                "tls_client_key",
                "tls_client_key needs tls_client_cert beside it".into(),
            );
        }
        _ => {}
    }
    if g.fail_timeout.is_zero() {
        return fail("fail_timeout", "must be longer than 0 ms".into());
    }
    if g.resolve_interval.is_zero() {
        return fail("resolve_interval", "must be longer than 0 ms".into());
    }
    if let Some((i, st)) = g
        .fail_on_status
        .iter()
        .enumerate()
        .find(|(_, s)| !(100..=599).contains(*s))
    {
        return fail(
            &format!("fail_on_status[{i}]"),
            format!("{st} is not a status"),
        );
    }
    if let Some(hc) = &g.health_check {
        check_health(hc).map_err(|(key, reason)| (format!("health_check.{key}"), reason))?;
    }
    Ok(())
}

/// Checks a group's active health check.
///
/// Errors: the key inside `health_check` at fault, and why.
fn check_health(hc: &HealthCheck) -> Result<(), (String, String)> {
    let fail = |key: &str, reason: &str| Err((key.to_string(), reason.to_string()));
    if hc.rise == 0 {
        return fail(
            "rise",
            "must be at least 1 (passed checks that bring a server back)",
        );
    }
    if hc.fall == 0 {
        return fail(
            "fall",
            "must be at least 1 (failed checks that take a server out)",
        );
    }
    if hc.interval.is_zero() {
        return fail("interval", "must be longer than 0 ms");
    }
    if hc.timeout.is_zero() {
        return fail("timeout", "must be longer than 0 ms");
    }
    if !hc.path.starts_with('/') || hc.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return fail(
            "path",
            "must start with / and hold no space or control character",
        );
    }
    check_request_fields(hc).map_err(|(key, why)| (key.to_string(), why))
}

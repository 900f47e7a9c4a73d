//! Routing (ARCHITECTURE.md §13): which group a request goes to, by its
//! host and path, first match wins. Sans-IO over the request head.
//!
//! Host matching ignores ASCII case, a port and one trailing dot;
//! `*.example.com` matches one or more labels before `.example.com`, not
//! `example.com` itself. A path prefix matches the normalized path
//! (`http::path`). After
//! `plan_request` an absolute-form target's authority is the `Host` field,
//! so the `Host` field is all this needs.
//!
//! What it must not know: sockets, servers, health.

use crate::http::RequestHead;
use crate::http::known::Known;
use crate::http::path;

/// How a route matches the host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    Any,
    /// Exact, lowercased.
    Exact(String),
    /// `*.suffix`: stores `.suffix`, lowercased.
    Wildcard(String),
}

/// One route, with its group resolved to an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    host: HostMatch,
    /// The path prefix, normalized (`http::path`), as bytes.
    prefix: Option<Vec<u8>>,
    /// The group's index.
    pub group: usize,
    /// Its index among the `[[route]]` tables (`Config::route`).
    pub spec: usize,
    /// Matches only requests over TLS (`Some(true)`) or plain
    /// (`Some(false)`); `None`: both.
    pub tls: Option<bool>,
}

impl Route {
    /// A route for `host` (`None`: any; `*.x` wildcard) and `prefix` to
    /// group `group`.
    pub(crate) fn new(host: Option<&str>, prefix: Option<&str>, group: usize) -> Self {
        // One trailing dot is the same name (RFC 1034 §3.1): requests
        // are matched without it, so the route's name is too.
        let host = host.map(|h| h.strip_suffix('.').unwrap_or(h));
        let host = match host.map(str::to_ascii_lowercase) {
            None => HostMatch::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(rest) if rest.starts_with('.') => HostMatch::Wildcard(rest.to_string()),
                _ => HostMatch::Exact(h),
            },
        };
        // The prefix in the form paths are matched in (`first_match`): a
        // prefix written `/caf%C3%A9/` or `/a/./b` still matches. `/` is
        // a catch-all (`OPTIONS *` included).
        let prefix = prefix.map(|p| {
            let mut out = Vec::new();
            path::normalize(p.as_bytes(), &mut out);
            out
        });
        Route {
            host,
            prefix,
            group,
            spec: 0,
            tls: None,
        }
    }

    /// The request with host `host` (without port, any case) and target
    /// `target` matches.
    pub(crate) fn matches(&self, host: &[u8], target: &[u8]) -> bool {
        let host_ok = match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(h) => host.eq_ignore_ascii_case(h.as_bytes()),
            HostMatch::Wildcard(suffix) => {
                host.len() > suffix.len()
                    && host
                        .get(host.len() - suffix.len()..)
                        .is_some_and(|end| end.eq_ignore_ascii_case(suffix.as_bytes()))
            }
        };
        host_ok
            && self
                .prefix
                .as_ref()
                .is_none_or(|p| p == b"/" || target.starts_with(p))
    }
}

/// The host of `req` without its port: from `Host` (`[v6]:port`,
/// `name:port`, `name`), empty when absent.
pub(crate) fn request_host(req: &RequestHead) -> &[u8] {
    let h = req.headers.get_known(Known::Host).unwrap_or(&[]);
    if h.first() == Some(&b'[') {
        return match h.iter().position(|&b| b == b']') {
            Some(end) => h.get(..=end).unwrap_or(h),
            None => h,
        };
    }
    match h.iter().rposition(|&b| b == b':') {
        Some(colon) => h.get(..colon).unwrap_or(h),
        None => h,
    }
}

/// The first route `req` (a plain request) matches: its group.
#[cfg(test)]
pub(crate) fn route(routes: &[Route], req: &RequestHead) -> Option<usize> {
    first_match(routes, req, false).map(|r| r.group)
}

/// The first route `req` matches; `tls`: it came over TLS.
///
/// The host is matched without one trailing dot (`admin.example.com.` is
/// the same name, RFC 1034 §3.1), and a path prefix against the target's
/// normalized path (`http::path`: `%XX` decoded, `//` merged, dot segments
/// removed), so that `/%61dmin` or `/x/../admin` cannot slip past a route
/// for `/admin`; the target itself goes upstream unchanged.
pub(crate) fn first_match<'a>(
    routes: &'a [Route],
    req: &RequestHead,
    tls: bool,
) -> Option<&'a Route> {
    let host = request_host(req);
    let host = host.strip_suffix(b".").unwrap_or(host);
    let raw = req.target.as_bytes();
    let mut normal = Vec::new();
    let target = if routes.iter().any(|r| r.prefix.is_some()) && path::needs_normalizing(raw) {
        path::normalize(raw, &mut normal);
        normal.as_slice()
    } else {
        raw
    };
    routes
        .iter()
        .find(|r| r.tls.is_none_or(|t| t == tls) && r.matches(host, target))
}

//! The edge rules of a request's route (docs/configuration.md, "Edge rules"):
//! what the proxy answers itself instead of forwarding, decided after the
//! plan and `request_filter`, once the route is known and before any
//! server is picked or any byte goes upstream.
//!
//! In order:
//! - `deny`, then `allow` (a route's lists of client networks, on the
//!   client address after the PROXY header and `trusted_proxies`): 403;
//! - `rate_limit` (a token bucket per client address, `rate_limit.rs`):
//!   429 with `Retry-After` when the client's bucket is empty;
//! - `redirect` (with `redirect_status`, 301 by default) or `respond`:
//!   the route's own answer, no upstream asked. A request with a body
//!   closes the connection after it (`answer_own`): the body is never
//!   read, so never parsed as a request;
//! - `max_body_size` (a route's value, else the top level's; 0: no
//!   limit): a larger `Content-Length` is answered 413 here; a chunked
//!   body is counted as it streams, each chunk from its size line
//!   (`Exchange::check_body_limit`).
//!
//! What it must not know: how bytes move, the pool, the balancer, which
//! protocol the client speaks.

use crate::cidr::any_contains;
use crate::conn::Shared;
use crate::conn::access::Termination;
use crate::filter::Reply;
use crate::http::{BodyKind, RequestHead, reason_phrase};
use crate::rate_limit::retry_after_secs;
use crate::template::expand;
use crate::upstreams::spec::RouteSpec;
use std::net::IpAddr;

/// The route's `redirect` or `respond` answer to `req` (`tls`: it came
/// over TLS; `client`: its client address), if it has one.
fn own_answer(
    r: &RouteSpec,
    req: &RequestHead,
    tls: bool,
    client: IpAddr,
) -> Option<(Reply, Termination)> {
    if let Some(to) = &r.redirect {
        if let Some(missing) = unbuildable(to, req) {
            log::debug!("redirect refused: {missing}");
            let reply = Reply::text(400, format!("400 Bad Request: {missing}\n"));
            return Some((reply, Termination::ProxyError));
        }
        let mut addr = [0u8; 64];
        let vars = crate::header_rules::request_vars(req, tls, client, &mut addr);
        let mut location = Vec::with_capacity(to.len() + 64);
        expand(to, &vars, &mut location);
        // 301 by default (nginx `return 301`); `check` allowed only
        // 301, 302, 303, 307, 308.
        let status = r.redirect_status.unwrap_or(301);
        let body = format!("{status} {}\n", reason_phrase(status));
        let mut reply = Reply::text(status, body);
        reply.headers.append("Location", &location);
        return Some((reply, Termination::Redirect));
    }
    let resp = r.respond.as_ref()?;
    let mut reply = Reply::new(resp.status, resp.body.as_bytes());
    if let Some(t) = &resp.content_type {
        reply.headers.append("Content-Type", t.as_bytes());
    }
    Some((reply, Termination::FixedAnswer))
}

/// Why the redirect `to` cannot be a URL for `req`, if it cannot: it
/// uses `$host` and the request names no host (HTTP/1.0 without `Host`:
/// `https:///p` would be read by browsers as the host `p`), or it uses
/// `$request_uri` and the target is `*` (`OPTIONS *` is about the server,
/// not a resource; RFC 9112 §3.2.4). Either is a 400: the target URI
/// cannot be reconstructed (RFC 9112 §3.3).
fn unbuildable(to: &str, req: &RequestHead) -> Option<&'static str> {
    if crate::template::uses(to, "host") && crate::upstreams::route::request_host(req).is_empty() {
        return Some("no Host to redirect to");
    }
    if req.target == "*" && crate::template::uses(to, "request_uri") {
        return Some("the target * cannot be redirected");
    }
    None
}

/// What the edge rules make of a request.
pub(crate) struct Verdict {
    /// The proxy answers instead of an upstream, with this termination
    /// state (access log, outcome metrics).
    pub answer: Option<(Reply, Termination)>,
    /// Most request body bytes the exchange may take (0: no limit).
    pub max_body: u64,
}

/// The edge rules of `route` (an index into `Config::route`, `None` when
/// no route chose the group) for a request framed as `framing`, from
/// client address `ip` (after the PROXY header and `trusted_proxies`),
/// over TLS if `tls`.
///
/// The route's response header rules (`set_response_headers`, …) apply to
/// its own answers too (redirect, respond, 403, 429, 413), as nginx's
/// `add_header … always` does: an HSTS field set on a route is on its
/// http→https redirect and on its 429.
pub(crate) fn verdict(
    sh: &mut Shared,
    req: &RequestHead,
    route: Option<usize>,
    framing: BodyKind,
    ip: IpAddr,
    tls: bool,
) -> Verdict {
    let mut v = decide(sh, req, route, framing, ip, tls);
    if let (Some((reply, _)), Some(r)) =
        (v.answer.as_mut(), route.and_then(|i| sh.cfg.route.get(i)))
    {
        r.response_rules()
            .apply_for(&mut reply.headers, req, tls, ip);
    }
    v
}

/// [`verdict`] before the route's response header rules.
fn decide(
    sh: &mut Shared,
    req: &RequestHead,
    route: Option<usize>,
    framing: BodyKind,
    ip: IpAddr,
    tls: bool,
) -> Verdict {
    let cfg = &sh.cfg;
    let spec = route.and_then(|i| cfg.route.get(i));
    let max_body = spec
        .and_then(|r| r.max_body_size)
        .unwrap_or(cfg.max_body_size);
    if let Some(r) = spec {
        let own = own_answer(r, req, tls, ip);
        // First match of deny, then allow; with an allow list,
        // anything else is denied (nginx's order of `deny`/`allow`
        // lines written deny first).
        if any_contains(&r.deny, ip) || (!r.allow.is_empty() && !any_contains(&r.allow, ip)) {
            let reply = Reply::text(403, "403 Forbidden\n");
            return Verdict {
                answer: Some((reply, Termination::Denied)),
                max_body,
            };
        }
        let limiter = route
            .and_then(|i| sh.rates.get_mut(i))
            .and_then(Option::as_mut);
        if let Some(l) = limiter {
            let now = sh.now.saturating_duration_since(sh.epoch).as_nanos();
            if let Err(wait) = l.check(ip, u64::try_from(now).unwrap_or(u64::MAX)) {
                let secs = retry_after_secs(wait);
                let mut reply =
                    Reply::text(429, "429 Too Many Requests: over this route's rate_limit\n");
                reply
                    .headers
                    .append("Retry-After", secs.to_string().as_bytes());
                return Verdict {
                    answer: Some((reply, Termination::RateLimited)),
                    max_body,
                };
            }
        }
        if own.is_some() {
            return Verdict {
                answer: own,
                max_body,
            };
        }
    }
    let answer = match framing {
        BodyKind::Length(n) if max_body > 0 && n > max_body => Some((
            Reply::text(
                413,
                "413 Content Too Large: the body is over max_body_size\n",
            ),
            Termination::BodyTooLarge,
        )),
        _ => None,
    };
    Verdict { answer, max_body }
}

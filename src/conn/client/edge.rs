//! The edge rules of a request's route (README "Edge rules", issue 25):
//! what the proxy answers itself instead of forwarding, decided after the
//! plan and `request_filter`, once the route is known and before any
//! server is picked or any byte goes upstream.
//!
//! In order:
//! - `deny`, then `allow` (a route's lists of client networks, on the
//!   client address after the PROXY header and `trusted_proxies`): 403;
//! - `max_body_size` (a route's value, else the top level's; 0: no
//!   limit): a larger `Content-Length` is answered 413 here; a chunked
//!   body is counted as it streams (`Exchange::check_body_limit`).
//!
//! What it must not know: how bytes move, the pool, the balancer.

use super::ClientConn;
use crate::cidr::any_contains;
use crate::config::Config;
use crate::conn::access::Termination;
use crate::filter::Reply;
use crate::http::BodyKind;

/// What the edge rules make of a request.
pub(super) struct Verdict {
    /// The proxy answers instead of an upstream, with this termination
    /// state (access log, outcome metrics).
    pub answer: Option<(Reply, Termination)>,
    /// Most request body bytes the exchange may take (0: no limit).
    pub max_body: u64,
}

impl ClientConn {
    /// The edge rules of `route` (an index into `Config::route`, `None`
    /// when no route chose the group) for a request framed as `framing`.
    pub(super) fn edge_verdict(
        &self,
        cfg: &Config,
        route: Option<usize>,
        framing: BodyKind,
    ) -> Verdict {
        let spec = route.and_then(|i| cfg.route.get(i));
        let max_body = spec
            .and_then(|r| r.max_body_size)
            .unwrap_or(cfg.max_body_size);
        if let Some(r) = spec {
            let ip = self.client_addr().ip();
            // First match of deny, then allow; with an allow list,
            // anything else is denied (nginx's order of `deny`/`allow`
            // lines written deny first).
            if any_contains(&r.deny, ip) || (!r.allow.is_empty() && !any_contains(&r.allow, ip)) {
                let reply = Reply::new(403, "403 Forbidden\n");
                return Verdict {
                    answer: Some((reply, Termination::Denied)),
                    max_body,
                };
            }
        }
        let answer = match framing {
            BodyKind::Length(n) if max_body > 0 && n > max_body => Some((
                Reply::new(
                    413,
                    "413 Content Too Large: the body is over max_body_size\n",
                ),
                Termination::BodyTooLarge,
            )),
            _ => None,
        };
        Verdict { answer, max_body }
    }
}

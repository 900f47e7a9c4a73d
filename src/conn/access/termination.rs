//! [`Termination`]: how an exchange ended, one of a fixed set of states
//! (HAProxy's termination flags are the model): the state an error ends
//! it in, the name the access log and the metrics' label give it, its
//! column in the outcome table.
//!
//! What it must not know: sockets, buffers, how a record is formatted.

/// How an exchange ended (HAProxy's termination flags are the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Termination {
    /// The response went out whole.
    Complete,
    /// The client reset or closed before the response was complete (499 if
    /// no answer had started).
    ClientAborted,
    /// A client timer ran out: request head, request body gap, or send;
    /// or a tunnel's idle timeout (neither side sent).
    ClientTimeout,
    /// The upstream closed or reset before its response was complete.
    UpstreamClosedEarly,
    /// An upstream timer ran out: connect, read or write gap.
    UpstreamTimeout,
    /// The upstream connect failed (refused, unreachable).
    UpstreamRefused,
    /// The TLS handshake with the upstream failed (verification, an
    /// alert, closed during it).
    UpstreamTlsError,
    /// The drain deadline (or a stop) closed the connection mid-request.
    DrainCut,
    /// `request_filter` answered instead of an upstream, or the proxy as
    /// the final recipient (`Max-Forwards: 0`).
    ProxyReply,
    /// The proxy refused the request (400/404 no route/414/431/501/505/
    /// 508) or the upstream's response (502: invalid head, unexpected 101).
    ProxyError,
    /// The proxy refused a request body over `max_body_size` (413, or a
    /// close once the response had started).
    BodyTooLarge,
    /// A route's `allow`/`deny` refused the client (403).
    Denied,
    /// A route's `redirect` answered (301/302/307/308).
    Redirect,
    /// A route's `respond` answered with its fixed response.
    FixedAnswer,
    /// A route's `rate_limit` refused the client (429).
    RateLimited,
}

impl Termination {
    /// How an exchange ended by `err` is reported (access log, metrics).
    pub(crate) fn of_error(err: &crate::error::ProxyError) -> Termination {
        use crate::error::{ErrorKind as K, Side};
        use crate::http::ParseError;
        match (err.side, &err.kind) {
            (Side::Downstream, K::Parse(ParseError::BodyTooLarge)) => Termination::BodyTooLarge,
            (Side::Downstream, K::Parse(_) | K::NotImplemented) => Termination::ProxyError,
            (Side::Downstream, K::Timeout(_)) => Termination::ClientTimeout,
            (Side::Downstream, _) => Termination::ClientAborted,
            (Side::Upstream, k) if k.is_upstream_tls() => Termination::UpstreamTlsError,
            (Side::Upstream, K::ConnectFailed(_)) => Termination::UpstreamRefused,
            (Side::Upstream, K::Timeout(_)) => Termination::UpstreamTimeout,
            (Side::Upstream, K::Closed | K::Io(_)) => Termination::UpstreamClosedEarly,
            (Side::Upstream, _) => Termination::ProxyError,
        }
    }

    /// Every state, in the outcome table's column order.
    pub(crate) const ALL: [Termination; crate::stats::TERMINATIONS] = [
        Termination::Complete,
        Termination::ClientAborted,
        Termination::ClientTimeout,
        Termination::UpstreamClosedEarly,
        Termination::UpstreamTimeout,
        Termination::UpstreamRefused,
        Termination::DrainCut,
        Termination::ProxyReply,
        Termination::ProxyError,
        Termination::BodyTooLarge,
        Termination::Denied,
        Termination::Redirect,
        Termination::FixedAnswer,
        Termination::UpstreamTlsError,
        Termination::RateLimited,
    ];

    /// The name written in the access log and the metrics' label.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Termination::Complete => "complete",
            Termination::ClientAborted => "client_aborted",
            Termination::ClientTimeout => "client_timeout",
            Termination::UpstreamClosedEarly => "upstream_closed_early",
            Termination::UpstreamTimeout => "upstream_timeout",
            Termination::UpstreamRefused => "upstream_refused",
            Termination::DrainCut => "drain_cut",
            Termination::ProxyReply => "proxy_reply",
            Termination::ProxyError => "proxy_error",
            Termination::BodyTooLarge => "body_too_large",
            Termination::Denied => "denied",
            Termination::Redirect => "redirect",
            Termination::FixedAnswer => "fixed_answer",
            Termination::UpstreamTlsError => "upstream_tls_error",
            Termination::RateLimited => "rate_limited",
        }
    }

    /// Its column in the outcome table.
    pub(super) fn index(self) -> usize {
        Termination::ALL
            .iter()
            .position(|&t| t == self)
            .unwrap_or(0)
    }
}

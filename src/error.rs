//! `ProxyError`: what went wrong in an exchange, on which side, and the one
//! table (ARCHITECTURE.md §8) that turns it into what the client sees.
//!
//! Kind and side are separate fields (as pingora's `ErrorType` and
//! `ErrorSource`): the side is set where the error enters the exchange. The
//! retry rules (ARCHITECTURE.md §7) read the same facts in `conn::exchange`.
//!
//! What it must not know: sockets, buffers, how the answer is written.

use std::fmt;
use std::io;

use crate::http::ParseError;

/// Which peer an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client connection.
    Downstream,
    /// The upstream connection.
    Upstream,
}

/// A timer that ran out (ARCHITECTURE.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// No byte of a next request head within the keep-alive timeout.
    KeepAlive,
    /// A request head did not complete within the request head timeout.
    Head,
    /// A non-blocking connect to the upstream did not complete.
    Connect,
    /// No response byte from the upstream for the upstream read timeout.
    UpstreamRead,
    /// The upstream accepted no pending request byte for the write timeout.
    UpstreamWrite,
    /// No request body byte from the client for the client body timeout.
    ClientBody,
    /// The client accepted no pending response byte for the send timeout.
    ClientSend,
    /// A closing connection did not send EOF within the linger time.
    Linger,
    /// No byte in either direction of a tunnel (after a 101) for the
    /// tunnel idle timeout.
    TunnelIdle,
    /// During a graceful drain, a keep-alive connection stayed idle long
    /// enough that closing it is unlikely to race a request.
    DrainIdle,
}

impl Timeout {
    /// The setting that ran out, as the configuration names it (for log
    /// lines an operator acts on: `upstream_read_timeout`).
    pub fn setting(self) -> &'static str {
        match self {
            Timeout::KeepAlive => "keepalive_timeout",
            Timeout::Head => "request_head_timeout",
            Timeout::Connect => "upstream_connect_timeout",
            Timeout::UpstreamRead => "upstream_read_timeout",
            Timeout::UpstreamWrite => "upstream_write_timeout",
            Timeout::ClientBody => "client_body_timeout",
            Timeout::ClientSend => "client_send_timeout",
            Timeout::Linger => "linger",
            Timeout::TunnelIdle => "tunnel_idle_timeout",
            Timeout::DrainIdle => "drain idle",
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The peer's bytes are not valid HTTP/1.1 (head, framing, chunks).
    Parse(ParseError),
    /// The peer closed its side while more was expected.
    Closed,
    /// The connect to the upstream failed (refused, unreachable), or for
    /// a TLS upstream its handshake did (`InvalidData`: a certificate
    /// that does not verify, an alert; `UnexpectedEof`: closed during the
    /// handshake; [`ErrorKind::is_upstream_tls`]).
    ConnectFailed(io::ErrorKind),
    /// A read or write failed (reset, broken pipe).
    Io(io::ErrorKind),
    /// A timer ran out.
    Timeout(Timeout),
    /// The upstream answered 101 to a request that asked for no upgrade.
    UnexpectedUpgrade,
    /// No server to send the request to: its group is unknown or none of
    /// its servers has an address yet (502).
    NoServer,
    /// The request asks for something a reverse proxy does not do
    /// (`CONNECT`): 501 (RFC 9110 §15.6.2).
    NotImplemented,
    /// The request's `Via` already names this proxy: 508 (RFC 5842 §7.2).
    LoopDetected,
    /// Every server of the group is out (down by active checks, ejected,
    /// drained or in maintenance) and none may be tried in panic mode: 503
    /// with `Retry-After: retry_after` (seconds until the earliest server
    /// may return, at least 1), at once: nginx answers 502 and HAProxy 503
    /// ("no server available") without a connect.
    Unavailable {
        /// Seconds for `Retry-After`.
        retry_after: u32,
    },
    /// No descriptor for an upstream socket (`EMFILE`/`ENFILE`), even
    /// after closing an idle pooled one: 503 with `Retry-After` (the
    /// upstream is fine; the proxy is full), never retried.
    NoDescriptor,
}

impl ErrorKind {
    /// A connect that failed in its TLS handshake: no TCP connect fails
    /// with these kinds, the transport's handshake does (issue 23: the
    /// termination state `upstream_tls_error`).
    pub(crate) fn is_upstream_tls(&self) -> bool {
        matches!(
            self,
            ErrorKind::ConnectFailed(io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof)
        )
    }
}

/// An error that ends one exchange (never the loop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyError {
    /// Where it came from.
    pub side: Side,
    /// What it was.
    pub kind: ErrorKind,
}

impl ProxyError {
    /// An error on the client side.
    pub fn downstream(kind: ErrorKind) -> Self {
        ProxyError {
            side: Side::Downstream,
            kind,
        }
    }

    /// An error on the upstream side.
    pub fn upstream(kind: ErrorKind) -> Self {
        ProxyError {
            side: Side::Upstream,
            kind,
        }
    }

    /// What the client gets (ARCHITECTURE.md §8). `response_started`: a final
    /// response head already went downstream. `head_bytes_seen`: some byte
    /// of a request head arrived (for the head timeout: 408 or silence).
    pub fn answer(&self, response_started: bool, head_bytes_seen: bool) -> Answer {
        use ErrorKind as K;
        if response_started {
            return Answer::Close;
        }
        match (self.side, &self.kind) {
            (_, K::NoDescriptor | K::Unavailable { .. }) => Answer::Status(503),
            (Side::Downstream, K::Parse(e)) => Answer::Status(e.request_status()),
            (Side::Downstream, K::Timeout(Timeout::Head)) if head_bytes_seen => Answer::Status(408),
            (Side::Downstream, K::Timeout(Timeout::ClientBody)) => Answer::Status(408),
            (Side::Downstream, K::NotImplemented) => Answer::Status(501),
            (Side::Downstream, K::LoopDetected) => Answer::Status(508),
            (Side::Downstream, _) => Answer::Close,
            (Side::Upstream, K::Timeout(_)) => Answer::Status(504),
            (Side::Upstream, _) => Answer::Status(502),
        }
    }
}

/// Seconds a 503 for a spent descriptor budget asks the client to wait
/// (`Retry-After`, RFC 9110 §10.2.3).
pub const RETRY_AFTER_SECS: u32 = 1;

/// The client's side of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Write a response with this status and `Connection: close`, then close.
    Status(u16),
    /// Write what is already pending, then close (no new bytes).
    Close,
}

impl ProxyError {
    /// What happened, without the side (`connect failed: connection
    /// refused`), for a line that already names the peer.
    pub fn what(&self) -> String {
        let full = self.to_string();
        match full.split_once(": ") {
            Some((_, rest)) => rest.to_string(),
            None => full,
        }
    }

    /// `Retry-After` seconds of a 503 for this error.
    pub fn retry_after(&self) -> u32 {
        match self.kind {
            ErrorKind::Unavailable { retry_after } => retry_after,
            _ => RETRY_AFTER_SECS,
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
        };
        match &self.kind {
            ErrorKind::Unavailable { retry_after } => {
                write!(
                    f,
                    "{side}: no server available (retry after {retry_after}s)"
                )
            }
            ErrorKind::Parse(e) => write!(f, "{side}: {e}"),
            ErrorKind::Closed => write!(f, "{side}: closed early"),
            ErrorKind::ConnectFailed(k) => write!(f, "{side}: connect failed: {k}"),
            ErrorKind::Io(k) => write!(f, "{side}: i/o error: {k}"),
            ErrorKind::Timeout(t) => write!(f, "{side}: timeout: {}", t.setting()),
            ErrorKind::UnexpectedUpgrade => write!(f, "{side}: 101 without upgrade"),
            ErrorKind::NotImplemented => write!(f, "{side}: method not implemented"),
            ErrorKind::NoServer => write!(f, "{side}: no server to send to"),
            ErrorKind::LoopDetected => write!(f, "{side}: loop detected (Via names this proxy)"),
            ErrorKind::NoDescriptor => write!(f, "{side}: no descriptor left (EMFILE)"),
        }
    }
}

impl std::error::Error for ProxyError {}

#[cfg(test)]
mod tests {
    use super::{ErrorKind, ProxyError, Timeout};

    #[test]
    fn a_timeout_is_named_by_its_setting() {
        let e = ProxyError::upstream(ErrorKind::Timeout(Timeout::UpstreamRead));
        assert_eq!(e.to_string(), "upstream: timeout: upstream_read_timeout");
        assert_eq!(e.what(), "timeout: upstream_read_timeout");
    }
}

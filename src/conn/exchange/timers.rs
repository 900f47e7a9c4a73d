//! The timers of an [`Exchange`]: the timeouts it runs under
//! ([`Timeouts`]: its route's, or the top level's), and the earliest
//! deadline they set now, each measuring only time in which the side it
//! blames could have moved bytes (docs/configuration.md's timer table).
//!
//! What it must not know: the client socket, the client's send timeout
//! (the client connection's), how the loop keeps its timers.

use std::time::Instant;

use super::{Exchange, Resp};
use crate::config::Config;
use crate::conn::upstream::UpstreamConn;
use crate::error::Timeout;

/// The timeouts an exchange runs under: the top level's, or its route's
/// own `upstream_connect_timeout`, `upstream_read_timeout` and
/// `client_body_timeout` where it gives them (docs/edge.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// Upstream connect.
    pub connect: std::time::Duration,
    /// Upstream read gap (and the response-head wait).
    pub read: std::time::Duration,
    /// Client request body gap.
    pub client_body: std::time::Duration,
}

impl Timeouts {
    /// The timeouts of `route` (an index into `cfg.route`): `None` when
    /// it overrides none (the exchange then reads the top level's).
    pub(crate) fn of_route(cfg: &Config, route: Option<usize>) -> Option<Self> {
        let r = cfg.route.get(route?)?;
        if r.upstream_connect_timeout.is_none()
            && r.upstream_read_timeout.is_none()
            && r.client_body_timeout.is_none()
        {
            return None;
        }
        Some(Timeouts {
            connect: r
                .upstream_connect_timeout
                .unwrap_or(cfg.upstream_connect_timeout),
            read: r.upstream_read_timeout.unwrap_or(cfg.upstream_read_timeout),
            client_body: r.client_body_timeout.unwrap_or(cfg.client_body_timeout),
        })
    }

    /// The top level's.
    fn top(cfg: &Config) -> Self {
        Timeouts {
            connect: cfg.upstream_connect_timeout,
            read: cfg.upstream_read_timeout,
            client_body: cfg.client_body_timeout,
        }
    }
}

impl Exchange {
    /// The connect timeout of this exchange (its route's, or the top
    /// level's).
    pub(crate) fn connect_timeout(&self, cfg: &Config) -> std::time::Duration {
        self.timeouts
            .map_or(cfg.upstream_connect_timeout, |t| t.connect)
    }

    /// The earliest deadline the exchange's own timers set (the client's
    /// send timeout is the client connection's); docs/configuration.md's
    /// timer table lists them. `client_out_paused`: the response buffer toward
    /// the client is above its high watermark (the upstream is then not
    /// expected to send); `client_write_at`: the last write to the client.
    ///
    /// Each timer measures only time in which the side it blames could
    /// have moved bytes and none moved:
    /// - connect: from the connect's start (alone while connecting);
    /// - upstream read: the wait for the response head starts when the
    ///   whole request was written (a body still flowing is guarded by the
    ///   gap timers below, never by this one); in the response body, the
    ///   gap since the last read from the upstream or the last write to a
    ///   client whose buffer was full;
    /// - upstream write: the gap since the upstream last accepted a byte,
    ///   while bytes for it are pending;
    /// - client body: the gap since the client last sent a body byte or the
    ///   upstream last made room for one, while the body's buffer has room;
    /// - a client that asked `Expect: 100-continue` and sent no body byte
    ///   may wait for the `100` (RFC 9110 §10.1.1): until a response byte
    ///   comes, the upstream, which has the head, is the side that must
    ///   move (upstream read, from the head's write: 504), and the client
    ///   body gap starts again at the last response byte.
    pub(crate) fn deadline(
        &self,
        cfg: &Config,
        up: Option<&UpstreamConn>,
        client_out_paused: bool,
        client_write_at: Instant,
    ) -> Option<(Instant, Timeout)> {
        let limits = self.timeouts.unwrap_or_else(|| Timeouts::top(cfg));
        let mut best: Option<(Instant, Timeout)> = None;
        let mut consider = |at: Instant, t: Timeout| {
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, t));
            }
        };
        let bytes_for_upstream = self.to_upstream.as_ref().is_some_and(|b| !b.is_empty());
        let awaiting_continue = self.expect_continue && self.first_byte.is_none();
        if let Some(up) = up {
            if let Some((at, t)) = up.deadline(limits.connect) {
                // Panic-mode connects share one connect timeout.
                return Some((self.panic_until.map_or(at, |p| at.min(p)), t));
            }
            let request_unsent = !self.request_taken() || bytes_for_upstream;
            let head_wait_before_sent = matches!(self.resp, Resp::AwaitHead)
                && request_unsent
                && self.write_failed.is_none();
            if !self.response_done() && !client_out_paused && !head_wait_before_sent {
                let since = if matches!(self.resp, Resp::Body(_)) {
                    self.up_read_at.max(client_write_at)
                } else {
                    self.up_read_at
                };
                consider(since + limits.read, Timeout::UpstreamRead);
            }
            if bytes_for_upstream {
                consider(
                    self.up_write_at + cfg.upstream_write_timeout,
                    Timeout::UpstreamWrite,
                );
            }
            if awaiting_continue && self.up_written >= self.head_bytes.len() as u64 {
                consider(self.up_write_at + limits.read, Timeout::UpstreamRead);
            }
        }
        let wants_body =
            !self.request_taken() && self.to_upstream.as_ref().is_none_or(|b| !b.is_paused());
        if wants_body && !self.tunnel && !awaiting_continue {
            let mut since = self.down_read_at.max(self.up_write_at);
            if self.expect_continue {
                // The 100 (or an early final head) the client waited for.
                since = since.max(self.up_read_at);
            }
            consider(since + limits.client_body, Timeout::ClientBody);
        }
        best
    }

    /// The last read or write on either side of the exchange (a tunnel's
    /// idle time runs from here; the client connection adds its writes).
    pub(crate) fn last_progress(&self) -> Instant {
        self.up_read_at.max(self.up_write_at).max(self.down_read_at)
    }
}

//! A client connection's timeouts (ARCHITECTURE.md §4, §8, §12): which
//! deadline applies in each state, and what the connection does when the
//! loop's timer for it fires.
//!
//! What it must not know: the loop's timer structure (it only reads
//! `deadline` and calls `on_timer`).

use std::time::Instant;

use log::debug;

use super::{ClientConn, DRAIN_IDLE_GRACE, LINGER, Shared, State};
use crate::config::Config;
use crate::error::{ErrorKind, ProxyError, Timeout};
use crate::stats::Stats;

impl ClientConn {
    /// The loop's timer for this connection fired at `sh.now`.
    pub(crate) fn on_timer(&mut self, sh: &mut Shared) {
        let Some((at, which)) = self.deadline(sh) else {
            return;
        };
        if at > sh.now {
            return;
        }
        let stats = sh.stats.clone();
        match which {
            Timeout::KeepAlive => {
                Stats::add(&stats.timeouts_keepalive, 1);
                debug!("client {}: keep-alive timeout", self.side.addr);
                self.set_state(State::Closed);
            }
            Timeout::Linger => {
                // Closing over unread client bytes resets the connection,
                // and the kernel drops what of the response it has not sent
                // (RFC 9112 §9.6): while that shrinks (the client reads),
                // linger on.
                let queued = self.side.stream.unsent();
                if queued > 0 && queued < self.linger_queued {
                    self.linger_queued = queued;
                    self.set_state(State::Closing {
                        linger_until: Some(sh.now + LINGER),
                    });
                } else {
                    self.set_state(State::Closed);
                }
            }
            Timeout::DrainIdle => {
                debug!("client {}: idle during the drain: closed", self.side.addr);
                self.set_state(State::Closed);
            }
            Timeout::TunnelIdle => {
                Stats::add(&stats.timeouts_gap, 1);
                self.fail(ProxyError::downstream(ErrorKind::Timeout(which)), sh);
            }
            Timeout::Head => {
                Stats::add(&stats.timeouts_head, 1);
                if self.side.stream.is_handshaking() {
                    // `tls_handshake_timeout` (the deadline below).
                    Stats::add(&stats.tls_handshakes_timeout, 1);
                }
                if self.head_bytes_seen() {
                    self.fail(
                        ProxyError::downstream(ErrorKind::Timeout(Timeout::Head)),
                        sh,
                    );
                } else {
                    debug!("client {}: no request head in time", self.side.addr);
                    self.set_state(State::Closed);
                }
            }
            Timeout::Connect => {
                Stats::add(&stats.timeouts_connect, 1);
                self.fail(ProxyError::upstream(ErrorKind::Timeout(which)), sh);
            }
            Timeout::UpstreamRead | Timeout::UpstreamWrite => {
                Stats::add(&stats.timeouts_upstream, 1);
                self.fail(ProxyError::upstream(ErrorKind::Timeout(which)), sh);
            }
            Timeout::ClientBody | Timeout::ClientSend => {
                Stats::add(&stats.timeouts_gap, 1);
                self.fail(ProxyError::downstream(ErrorKind::Timeout(which)), sh);
            }
        }
        self.drive(sh);
    }

    /// The earliest deadline that applies now and what it guards.
    pub(crate) fn deadline(&self, sh: &Shared) -> Option<(Instant, Timeout)> {
        let cfg = &sh.cfg;
        let send = self.side.out.as_ref().filter(|b| !b.is_empty()).map(|_| {
            (
                self.side.write_at + cfg.client_send_timeout,
                Timeout::ClientSend,
            )
        });
        match self.state {
            State::Closed | State::ToH2 => None,
            State::Closing { linger_until } => {
                send.or(linger_until.map(|at| (at, Timeout::Linger)))
            }
            State::Head => {
                if self.head_bytes_seen() {
                    let start = self.head_started.unwrap_or(self.idle_since);
                    Some((start + cfg.request_head_timeout, Timeout::Head))
                } else if self.requests == 0 {
                    // A TLS client's wait for its first request runs from
                    // the end of its handshake (`idle_since`; the accept
                    // until then, and for a plain one), parked or not: one
                    // whose handshake took a while still gets the request
                    // head timeout, and in a drain the idle grace.
                    let wait = wait_deadline(cfg, false, self.draining, self.idle_since);
                    // A TLS handshake must end within its own timeout of
                    // the accept (silent close, as a head timeout with no
                    // byte of a request). One under way is not idle: a
                    // drain lets it end (then the drain's idle rule runs).
                    let handshake = self.accepted_at + cfg.tls_handshake_timeout;
                    let under_way = self.draining && self.side.stream.handshake_under_way();
                    if self.side.stream.is_handshaking() && (handshake < wait.0 || under_way) {
                        Some((handshake, Timeout::Head))
                    } else {
                        Some(wait)
                    }
                } else {
                    Some(wait_deadline(cfg, true, self.draining, self.idle_since))
                }
            }
            State::Busy => {
                let Some(ex) = self.exchange.as_deref() else {
                    return send;
                };
                if ex.tunnel {
                    // No HTTP timeout in a tunnel: only its idle time, which
                    // progress in either direction resets.
                    let last = ex.last_progress().max(self.side.write_at);
                    return Some((last + cfg.tunnel_idle_timeout, Timeout::TunnelIdle));
                }
                let up = ex.upstream.and_then(|k| sh.ups.get(k));
                let out_paused = self.side.out.as_ref().is_some_and(|b| b.is_paused());
                let ex_deadline = ex.deadline(cfg, up, out_paused, self.side.write_at);
                // While connecting, only the connect timeout applies.
                if up.is_some_and(|u| u.is_connecting()) {
                    return ex_deadline;
                }
                match (send, ex_deadline) {
                    (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                    (a, b) => a.or(b),
                }
            }
        }
    }
}

/// The deadline of a connection waiting for a request of which no byte
/// came yet, `since` it was accepted (`served`: false) or since its last
/// response went out: the request head timeout for a first request (or
/// the keep-alive timeout if shorter), the keep-alive timeout between
/// requests, and `DRAIN_IDLE_GRACE` during a drain (ARCHITECTURE.md §12).
pub(super) fn wait_deadline(
    cfg: &Config,
    served: bool,
    draining: bool,
    since: Instant,
) -> (Instant, Timeout) {
    if draining && (served || cfg.defer_accept) {
        // With TCP_DEFER_ACCEPT a connection reaches the loop without a
        // byte only after the kernel held it silent for 1 s, or when the
        // drain turned the defer off (its client sends within a round
        // trip): idle, like a kept connection.
        let idle = since + DRAIN_IDLE_GRACE;
        let limit = if served {
            cfg.keepalive_timeout
        } else {
            cfg.request_head_timeout.min(cfg.keepalive_timeout)
        };
        (idle.min(since + limit), Timeout::DrainIdle)
    } else if served {
        (since + cfg.keepalive_timeout, Timeout::KeepAlive)
    } else if cfg.request_head_timeout <= cfg.keepalive_timeout {
        (since + cfg.request_head_timeout, Timeout::Head)
    } else {
        (since + cfg.keepalive_timeout, Timeout::KeepAlive)
    }
}

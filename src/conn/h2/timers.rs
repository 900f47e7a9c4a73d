//! An HTTP/2 connection's timeouts: the connection's own (the preface
//! within the request head timeout, the keep-alive timeout with no
//! stream, the send timeout of queued frames, the drain's grace, its
//! hold of the first GOAWAY and its wait for the PING's answer, the
//! linger), the answered streams' (`answered.rs`) and every stream's,
//! folded into the one deadline the loop arms
//! for the connection. A stream's are its exchange's (`Exchange::deadline`,
//! as for HTTP/1) plus the send timeout of a response the client's window
//! holds back (a client that never opens its window: cut per stream, and
//! per connection when it reads nothing at all; the same timeout bounds a
//! truncated stream, whose upstream is gone, sending what it holds).
//!
//! What it must not know: the loop's timer structure.

use std::time::Instant;

use log::debug;

use super::stream::Sent;
use super::{Goaway, H2Conn, State};
use crate::conn::Shared;
use crate::error::{ErrorKind, ProxyError, Timeout};
use crate::stats::Stats;

/// During a drain, how long a connection with no stream waits before it
/// closes (the HTTP/1 machine's grace for an idle keep-alive client).
const DRAIN_IDLE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

impl H2Conn {
    /// The earliest deadline that applies now and what it guards.
    pub(crate) fn deadline(&self, sh: &Shared) -> Option<(Instant, Timeout)> {
        let mut best = self.conn_deadline(sh);
        if let Some(at) = self
            .answered_deadline()
            .filter(|_| self.state == State::Open)
            && best.is_none_or(|b| at < b.0)
        {
            best = Some((at, Timeout::ClientBody));
        }
        if let Some(since) = self.drain_held
            && self.state == State::Open
        {
            let at = since + super::DRAIN_HOLD_MAX;
            if best.is_none_or(|b| at < b.0) {
                best = Some((at, Timeout::DrainIdle));
            }
        }
        if let Goaway::Announced { since } = self.goaway
            && self.state == State::Open
        {
            let at = since + super::DRAIN_PING_WAIT;
            if best.is_none_or(|b| at < b.0) {
                best = Some((at, Timeout::DrainIdle));
            }
        }
        if self.state == State::Open {
            for d in self
                .streams
                .iter()
                .filter_map(|s| self.stream_deadline(s, sh))
            {
                if best.is_none_or(|b| d.0 < b.0) {
                    best = Some(d);
                }
            }
        }
        best
    }

    /// Stream `s`'s earliest deadline.
    fn stream_deadline(
        &self,
        s: &super::stream::Stream,
        sh: &Shared,
    ) -> Option<(Instant, Timeout)> {
        let cfg = &sh.cfg;
        let held = s.out_pending() > 0 && s.sent == Sent::Head;
        let send = held.then(|| (s.write_at + cfg.client_send_timeout, Timeout::ClientSend));
        let Some(ex) = s.ex.as_deref() else {
            return send;
        };
        let up = ex.upstream.and_then(|k| sh.ups.get(k));
        let paused = s.out.as_ref().is_some_and(|b| b.is_paused());
        let own = ex.deadline(cfg, up, paused, s.write_at);
        if up.is_some_and(|u| u.is_connecting()) {
            return own;
        }
        match (send, own) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// The loop's timer for this connection fired at `sh.now`: every
    /// stream whose deadline passed is failed by its timeout (the error
    /// table's answer, or RST_STREAM), and a connection deadline closes
    /// the connection (with GOAWAY where one can still go).
    pub(crate) fn on_timer(&mut self, sh: &mut Shared) {
        let now = sh.now;
        let stats = sh.stats.clone();
        // Streams first (by id: failing one removes it).
        let due: Vec<(u32, Timeout)> = self
            .streams
            .iter()
            .filter_map(|s| {
                let (at, t) = self.stream_deadline(s, sh)?;
                (at <= now).then_some((s.id, t))
            })
            .collect();
        for (id, t) in due {
            let Some(i) = self.find(id) else {
                continue;
            };
            let err = match t {
                Timeout::Connect => {
                    Stats::add(&stats.timeouts_connect, 1);
                    ProxyError::upstream(ErrorKind::Timeout(t))
                }
                Timeout::UpstreamRead | Timeout::UpstreamWrite => {
                    Stats::add(&stats.timeouts_upstream, 1);
                    ProxyError::upstream(ErrorKind::Timeout(t))
                }
                _ => {
                    Stats::add(&stats.timeouts_gap, 1);
                    ProxyError::downstream(ErrorKind::Timeout(t))
                }
            };
            self.fail_stream(i, err, sh);
        }
        self.expire_answered(sh);
        if self
            .drain_held
            .is_some_and(|since| since + super::DRAIN_HOLD_MAX <= now)
        {
            debug!("h2 client {}: streams still open: drain GOAWAY", self.addr);
            self.announce_drain(sh);
        }
        if let Goaway::Announced { since } = self.goaway
            && since + super::DRAIN_PING_WAIT <= now
        {
            debug!(
                "h2 client {}: drain PING not answered: final GOAWAY",
                self.addr
            );
            self.final_goaway(sh);
        }
        if let Some((at, which)) = self.conn_deadline(sh)
            && at <= now
        {
            match which {
                Timeout::ClientSend => {
                    Stats::add(&stats.timeouts_gap, 1);
                    debug!("h2 client {}: send timeout: closed", self.addr);
                    self.end_all_streams(sh, crate::conn::access::Termination::ClientTimeout);
                    self.state = State::Closed;
                }
                Timeout::Linger => {
                    let queued = self.tx.unsent();
                    if queued > 0 && queued < self.linger_queued {
                        self.linger_queued = queued;
                        self.state = State::Closing {
                            linger_until: Some(now + std::time::Duration::from_secs(2)),
                        };
                    } else {
                        self.state = State::Closed;
                    }
                }
                Timeout::KeepAlive | Timeout::DrainIdle | Timeout::Head => {
                    if which == Timeout::KeepAlive {
                        Stats::add(&stats.timeouts_keepalive, 1);
                    } else if which == Timeout::Head {
                        Stats::add(&stats.timeouts_head, 1);
                    }
                    debug!("h2 client {}: {which:?} timeout: GOAWAY", self.addr);
                    if self.goaway != Goaway::None || self.state == State::Open {
                        self.final_goaway(sh);
                    }
                    self.state = State::Closing { linger_until: None };
                }
                _ => {}
            }
        }
        self.drive(sh);
    }

    /// The connection's own deadline (not its streams').
    fn conn_deadline(&self, sh: &Shared) -> Option<(Instant, Timeout)> {
        let cfg = &sh.cfg;
        let send = (self.queued() > 0)
            .then(|| (self.write_at + cfg.client_send_timeout, Timeout::ClientSend));
        let own = match self.state {
            State::Closed => return None,
            State::Closing { linger_until } => linger_until.map(|at| (at, Timeout::Linger)),
            // A stream answered early still lingers (`answered.rs`): its
            // own deadline ends it, then the connection closes or idles.
            State::Open if !self.answered.is_empty() => None,
            State::Open if self.streams.is_empty() => Some(if self.requests == 0 {
                (
                    self.accepted_at + cfg.request_head_timeout.min(cfg.keepalive_timeout),
                    Timeout::Head,
                )
            } else if self.draining {
                (self.idle_since + DRAIN_IDLE_GRACE, Timeout::DrainIdle)
            } else {
                (self.idle_since + cfg.keepalive_timeout, Timeout::KeepAlive)
            }),
            State::Open => None,
        };
        // A header block left open (the CONTINUATION flood's way to hold
        // up to `max_head_size`) is cut like an HTTP/1 head that does not
        // end, on every request of the connection, not only the first.
        let block = self
            .block_since
            .filter(|_| self.state == State::Open)
            .map(|t| (t + cfg.request_head_timeout, Timeout::Head));
        [send, own, block].into_iter().flatten().min_by_key(|d| d.0)
    }
}

//! The end of a loop: a graceful drain (ARCHITECTURE.md §12) one turn at
//! a time, and the stop that closes what is left and logs the counters.
//!
//! What it must not know: HTTP.

use super::*;

/// How long a draining listener with `TCP_DEFER_ACCEPT` stays open: the
/// kernel releases a held connection at its first bytes, or at the SYN-ACK
/// retransmission 1 s after its SYN (`listen::DEFER_ACCEPT_SECS`); the rest
/// is a margin for the client's answer to it.
const DEFERRED_GRACE: Duration = Duration::from_millis(1500);

impl Server {
    /// One turn of a graceful drain; true when the loop may return.
    pub(super) fn drain_step(&mut self) -> bool {
        let now = self.sh.now;
        if self.drain_deadline.is_none() {
            let timeout = self.sh.cfg.drain_timeout;
            self.drain_deadline = Some(now + timeout);
            if self.handed_over.load(Ordering::SeqCst) {
                // The successor serves on this socket and its queue: only
                // this loop's descriptor of it closes (`Server::succeed`).
                self.close_listener();
            }
            // Serve what is already queued on the listener, then close it
            // so new connections go to the other processes on the port.
            // The log line comes after: once it is out, no new connection
            // is served here.
            self.accept_paused_until = None;
            self.at_capacity = false;
            self.accept();
            // With TCP_DEFER_ACCEPT the kernel may still hold connections
            // whose first bytes have not come: closing the listener now
            // would reset them. Accepting without the defer, the listener
            // stays open until every one of them was handed over (their
            // bytes, or the SYN-ACK retransmission at 1 s, release them);
            // what arrives meanwhile is served here, drained.
            let mut deferred = false;
            if self.sh.cfg.defer_accept {
                for l in &self.listeners {
                    deferred |= listen::set_defer_accept(&*l.socket, 0).is_ok();
                }
            }
            if deferred {
                self.listener_close_at = Some(now + DEFERRED_GRACE);
            } else {
                self.close_listener();
            }
            info!(
                "draining: {} client connections, up to {timeout:?}",
                self.clients.len()
            );
            for (key, e) in self.clients.iter_mut() {
                e.conn.begin_drain(&mut self.sh);
                queue(&mut self.runnable, ConnId::new(key, e.generation), e);
            }
            self.drive_runnable();
            self.sh.access.flush();
        }
        if self.listener_close_at.is_some_and(|t| t <= now) {
            self.accept();
            self.close_listener();
        }
        let sh = &mut self.sh;
        sh.ups.close_idle(&sh.stats);
        sh.checks.close_all();
        if self.clients.is_empty() && self.listeners.is_empty() {
            // The admin endpoints last: stop accepting, answer what was
            // accepted (each within its 5 s, and never past the drain
            // deadline), then end — an admin connection is not dropped
            // unanswered by a reload's drain that has time left.
            let time_left = self.drain_deadline.is_none_or(|t| t > now);
            if let Some(a) = self.admin.as_mut() {
                a.stop_accepting(self.poll.registry());
                if !a.is_idle() && time_left {
                    return false;
                }
            }
            info!("drained");
            return true;
        }
        if self.drain_deadline.is_some_and(|t| t <= now) {
            warn!(
                "drain timeout: closing {} client connections",
                self.clients.len()
            );
            return true;
        }
        false
    }

    /// Stops accepting: every listener is deregistered and closed, and new
    /// connections go to the other processes on the port (or, handed
    /// over, to the successor that serves on the same socket). Deregistered
    /// by its descriptor: a successor's copy keeps the socket open, and
    /// epoll would go on reporting it to this loop.
    fn close_listener(&mut self) {
        use std::os::fd::AsRawFd;
        self.listener_close_at = None;
        for l in std::mem::take(&mut self.listeners) {
            let fd = l.socket.as_raw_fd();
            let _ = self.sh.registry.deregister(&mut mio::unix::SourceFd(&fd));
        }
    }

    /// Adds the access records the log dropped or lost since the last
    /// call to `sluice_access_log_dropped_total`.
    pub(super) fn count_lost_records(&mut self) {
        let lost = self.sh.access.take_lost();
        if lost > 0 {
            Stats::add(&self.sh.stats.access_log_dropped, lost);
        }
    }

    pub(super) fn stop(&mut self) {
        self.close_listener();
        let keys: Vec<usize> = self.clients.iter().map(|(k, _)| k).collect();
        for key in keys {
            if let Some(e) = self.clients.try_remove(key) {
                e.conn.close(&mut self.sh, true);
            }
        }
        let sh = &mut self.sh;
        sh.ups.close_idle(&sh.stats);
        sh.checks.close_all();
        self.resolver = None;
        let st = sh.stats.snapshot();
        info!(
            "stopped: requests={} accepted={} active={} idle={} buffered={} peak_buffered={} \
             buffers_in_use={} pauses={} resumes={} upstream_connects={} reuses={} retries={} \
             evicted(peer_closed={} unexpected_data={} idle_timeout={} cap={}) \
             choice(newest={} older={} new_for_risk={} retired={}) closed_for_room={} \
             timeouts(keepalive={} head={} gap={} upstream={} connect={}) \
             status(400={} 408={} 431={} 501={} 502={} 503={} 504={}) upstream_open={} \
             ejections={} checks={} checks_failed={} marked_down={}",
            st.requests,
            st.downstream_accepted,
            st.downstream_active,
            st.downstream_idle,
            st.buffered_bytes,
            st.buffered_bytes_peak,
            st.buffers_in_use,
            st.read_pauses,
            st.read_resumes,
            st.upstream_connects,
            st.upstream_reuses,
            st.retries,
            st.pool_evicted_peer_closed,
            st.pool_evicted_unexpected_data,
            st.pool_evicted_idle_timeout,
            st.pool_evicted_cap,
            st.pool_take_newest,
            st.pool_take_older,
            st.pool_new_for_risk,
            st.pool_retired_near_limit,
            st.downstream_closed_for_room,
            st.timeouts_keepalive,
            st.timeouts_head,
            st.timeouts_gap,
            st.timeouts_upstream,
            st.timeouts_connect,
            st.status_400,
            st.status_408,
            st.status_431,
            st.status_501,
            st.status_502,
            st.status_503,
            st.status_504,
            sh.ups.open_count(),
            st.ejections,
            st.health_checks,
            st.health_checks_failed,
            st.servers_marked_down
        );
    }
}

//! `Stats`: the process's counters and gauges, readable from any thread.
//!
//! The loop thread is the only writer; tests and the shutdown log read them.
//! Relaxed atomics: each value is exact on its own, a snapshot of several is
//! not one instant.
//!
//! What it must not know: connections, HTTP; it only holds numbers.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! stats {
    ($( $(#[$doc:meta])* $name:ident, )*) => {
        /// Counters (only grow) and gauges (go up and down) of one loop.
        #[derive(Debug, Default)]
        pub struct Stats {
            $( $(#[$doc])* pub $name: AtomicU64, )*
        }

        /// A plain copy of [`Stats`] at one moment (field by field).
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct StatsSnapshot {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Stats {
            /// Reads every field.
            pub fn snapshot(&self) -> StatsSnapshot {
                StatsSnapshot { $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }
    };
}

stats! {
    /// Downstream connections accepted (counter).
    downstream_accepted,
    /// Downstream connections open now (gauge).
    downstream_active,
    /// Downstream connections waiting for a next request head with no byte
    /// of it yet (gauge).
    downstream_idle,
    /// Request heads parsed (counter).
    requests,
    /// Requests answered by `request_filter` (counter).
    filter_replies,
    /// Upstream connections opened (counter).
    upstream_connects,
    /// Requests sent on a pooled upstream connection (counter).
    upstream_reuses,
    /// Idle upstream connections in the pool now (gauge).
    pool_idle,
    /// Upstream connections parked in the pool (counter).
    pool_puts,
    /// Pooled connections closed because the upstream closed them (counter).
    pool_evicted_peer_closed,
    /// Pooled connections closed because bytes arrived while idle (counter).
    pool_evicted_unexpected_data,
    /// Pooled connections closed at the pool idle timeout (counter).
    pool_evicted_idle_timeout,
    /// Pooled connections closed to keep a per-peer or global cap (counter).
    pool_evicted_cap,
    /// Requests that took the newest pooled connection their rule allowed
    /// (`pool::IdlePool::choose`, counter).
    pool_take_newest,
    /// Non-idempotent requests that passed over connections parked a
    /// moment ago and took an older one (counter).
    pool_take_older,
    /// Non-idempotent requests that opened a new connection although
    /// pooled ones existed: none was safe to risk (counter).
    pool_new_for_risk,
    /// Pooled connections closed before use: idle too close to the
    /// server's learned idle limit (counter).
    pool_retired_near_limit,
    /// Requests sent again on a new upstream connection (counter).
    retries,
    /// 400 responses the proxy wrote (counter).
    status_400,
    /// 408 responses the proxy wrote (counter).
    status_408,
    /// 431 responses the proxy wrote (counter).
    status_431,
    /// 501 responses the proxy wrote (counter).
    status_501,
    /// 502 responses the proxy wrote (counter).
    status_502,
    /// 503 responses the proxy wrote: no descriptor for an upstream socket
    /// (counter).
    status_503,
    /// 504 responses the proxy wrote (counter).
    status_504,
    /// Idle keep-alive client connections closed to make room for a new
    /// client at the connection cap (counter).
    downstream_closed_for_room,
    /// Downstream connections closed at the keep-alive timeout (counter).
    timeouts_keepalive,
    /// Downstream connections closed at the request head timeout (counter).
    timeouts_head,
    /// Exchanges ended by a body or send gap timeout (counter).
    timeouts_gap,
    /// Upstream connects that timed out (counter).
    timeouts_connect,
    /// Bytes held in exchange buffers now, both directions (gauge).
    buffered_bytes,
    /// Highest `buffered_bytes` seen (gauge that only grows).
    buffered_bytes_peak,
    /// Body buffers handed out and not yet returned (gauge).
    buffers_in_use,
    /// Times a source's read interest was removed at the high watermark.
    read_pauses,
    /// Times it was given back at the low watermark (counter).
    read_resumes,
    /// Bytes read from downstream peers (counter).
    bytes_from_downstream,
    /// Bytes written to downstream peers (counter).
    bytes_to_downstream,
    /// Bytes read from upstream peers (counter).
    bytes_from_upstream,
    /// Bytes written to upstream peers (counter).
    bytes_to_upstream,
}

impl Stats {
    /// Adds `n` to a counter or gauge.
    pub(crate) fn add(field: &AtomicU64, n: u64) {
        field.fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts `n` from a gauge, stopping at 0.
    pub(crate) fn sub(field: &AtomicU64, n: u64) {
        let _ = field.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    /// Raises `buffered_bytes` by `n` and keeps the peak.
    pub(crate) fn buffered_add(&self, n: u64) {
        let now = self.buffered_bytes.fetch_add(n, Ordering::Relaxed) + n;
        self.buffered_bytes_peak.fetch_max(now, Ordering::Relaxed);
    }
}

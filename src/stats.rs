//! `Stats`: the process's counters and gauges, readable from any thread.
//!
//! The loop thread is the only writer; tests and the shutdown log read them.
//! Relaxed atomics: each value is exact on its own, a snapshot of several is
//! not one instant.
//!
//! Besides the named fields, two tables the access record fills
//! (`conn::access`): requests by status class and termination state
//! ([`Outcomes`]), and three latency histograms ([`Histogram`]): two the
//! access record fills, one the TLS handshakes with clients. The metrics
//! endpoint publishes all of it (`metrics`), in [`Stats::values`] order.
//!
//! What it must not know: connections, HTTP; it only holds numbers.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! stats {
    ($( $(#[$doc:meta])* $name:ident, )*) => {
        /// Counters (only grow) and gauges (go up and down) of one loop.
        #[derive(Debug, Default)]
        pub struct Stats {
            $( $(#[$doc])* pub $name: AtomicU64, )*
            /// Requests logged, by status class and termination state.
            pub outcomes: Outcomes,
            /// Request durations (head complete → record written).
            pub request_duration: Histogram,
            /// Upstream first-byte times (head complete → first response
            /// byte from the upstream).
            pub upstream_first_byte: Histogram,
            /// TLS handshakes with clients that completed (full or
            /// resumed): from the accept to the handshake's end.
            pub tls_handshake_duration: Histogram,
        }

        /// Names of the named fields, in [`Stats::values`] order.
        pub(crate) const FIELD_NAMES: &[&str] = &[ $( stringify!($name), )* ];

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

            /// Every number, in a fixed order: the named fields
            /// ([`FIELD_NAMES`]), then the outcome table, then the three
            /// histograms ([`Histograms`] order; [`VALUE_COUNT`] in all).
            pub(crate) fn values(&self) -> impl Iterator<Item = u64> + '_ {
                [ $( &self.$name, )* ]
                    .into_iter()
                    .chain(self.outcomes.0.iter())
                    .chain(self.request_duration.cells())
                    .chain(self.upstream_first_byte.cells())
                    .chain(self.tls_handshake_duration.cells())
                    .map(|v| v.load(Ordering::Relaxed))
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
    /// PROXY protocol headers read from listed sources (counter).
    proxy_headers,
    /// Connections closed for a bad PROXY header, or for one from a
    /// source not in `accept_proxy_protocol` (counter).
    proxy_headers_refused,
    /// New connections closed because their client address already held
    /// `max_connections_per_client` (counter).
    downstream_refused_per_client,
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
    /// Pooled connections taken without a liveness check (`MSG_PEEK`):
    /// hot, and no event since they were parked (counter).
    pool_take_unchecked,
    /// Socket reads (`recv`) of the data path, on either side, `WouldBlock`
    /// included (counter; issue 22's regression guard counts these).
    socket_reads,
    /// Socket writes (`send`) of the data path, on either side (counter).
    socket_writes,
    /// Liveness looks without consuming (`MSG_PEEK`, `SO_ERROR`) at a
    /// waiting client or a pooled upstream connection (counter).
    socket_peeks,
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
    /// 403 responses the proxy wrote: a route's `allow`/`deny` (counter).
    status_403,
    /// 404 responses the proxy wrote: routes exist and none matches
    /// (counter).
    status_404,
    /// 405 responses the proxy wrote: extended CONNECT over HTTP/2 (counter).
    status_405,
    /// 408 responses the proxy wrote (counter).
    status_408,
    /// 413 responses the proxy wrote: a body over `max_body_size`
    /// (counter).
    status_413,
    /// 414 responses the proxy wrote (counter).
    status_414,
    /// 429 responses the proxy wrote: a route's `rate_limit` (counter).
    status_429,
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
    /// 505 responses the proxy wrote (counter).
    status_505,
    /// 508 responses the proxy wrote: a loop (counter).
    status_508,
    /// Client connections that speak HTTP/2 (h2 or h2c) (counter).
    h2_connections,
    /// Client connections that carried an HTTP/1 request (counted at the
    /// first) (counter).
    h1_connections,
    /// Requests read on HTTP/1 connections (counter).
    h1_requests,
    /// HTTP/2 streams opened by clients (requests) (counter).
    h2_streams,
    /// RST_STREAM frames received from clients (counter).
    h2_resets_received,
    /// RST_STREAM sent: NO_ERROR (a complete answer; the client's body not
    /// wanted) (counter).
    h2_resets_sent_no_error,
    /// RST_STREAM sent: PROTOCOL_ERROR (a malformed request) (counter).
    h2_resets_sent_protocol_error,
    /// RST_STREAM sent: REFUSED_STREAM (over the stream limit) (counter).
    h2_resets_sent_refused_stream,
    /// RST_STREAM sent: CANCEL (a client-side timeout) (counter).
    h2_resets_sent_cancel,
    /// RST_STREAM sent: FLOW_CONTROL_ERROR (counter).
    h2_resets_sent_flow_control_error,
    /// RST_STREAM sent: STREAM_CLOSED (counter).
    h2_resets_sent_stream_closed,
    /// RST_STREAM sent: INTERNAL_ERROR (an upstream failure after the
    /// response began: a cut body, a read timeout) (counter).
    h2_resets_sent_internal_error,
    /// RST_STREAM sent: any other code (counter).
    h2_resets_sent_other,
    /// GOAWAY sent: NO_ERROR (drain, keep-alive timeout) (counter).
    h2_goaways_no_error,
    /// GOAWAY sent: PROTOCOL_ERROR (counter).
    h2_goaways_protocol_error,
    /// GOAWAY sent: ENHANCE_YOUR_CALM (a flood) (counter).
    h2_goaways_enhance_your_calm,
    /// GOAWAY sent: FLOW_CONTROL_ERROR (counter).
    h2_goaways_flow_control_error,
    /// GOAWAY sent: COMPRESSION_ERROR (counter).
    h2_goaways_compression_error,
    /// GOAWAY sent: any other code (counter).
    h2_goaways_other,
    /// Idle keep-alive client connections closed to make room for a new
    /// client at the connection cap (counter).
    downstream_closed_for_room,
    /// Downstream connections closed at the keep-alive timeout (counter).
    timeouts_keepalive,
    /// Downstream connections closed at the request head timeout (counter).
    timeouts_head,
    /// Exchanges ended by a body or send gap timeout of the client (or
    /// a tunnel's idle timeout) (counter).
    timeouts_gap,
    /// Exchanges ended by the upstream read or write timeout (counter).
    timeouts_upstream,
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
    /// Servers ejected by passive health (consecutive failures) (counter).
    ejections,
    /// Active health checks finished (counter).
    health_checks,
    /// Active health checks that failed or timed out (counter).
    health_checks_failed,
    /// Active health checks not started for want of local resources
    /// (descriptor budget, `EMFILE`, `ENOBUFS`, …): no result (counter).
    health_checks_skipped,
    /// Servers marked down by active checks (counter).
    servers_marked_down,
    /// Full TLS handshakes with clients completed (not resumed)
    /// (counter).
    tls_handshakes,
    /// TLS handshakes with clients that resumed a session (a ticket or
    /// the session cache) (counter).
    tls_handshakes_resumed,
    /// TLS handshakes with clients that failed: an alert sent or
    /// received, an unknown SNI refused (counter).
    tls_handshakes_failed,
    /// TLS handshakes with clients not finished within
    /// `tls_handshake_timeout` (counter).
    tls_handshakes_timeout,
    /// Client connections whose TLS handshake completed on TLS 1.2
    /// (counter).
    tls_connections_tls12,
    /// Client connections whose TLS handshake completed on TLS 1.3
    /// (counter).
    tls_connections_tls13,
    /// Access records dropped: the log's reader (a pipe or socket) took
    /// no bytes while 4 MiB waited, or none before the stop, or had
    /// closed its end (counter).
    access_log_dropped,
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

/// Status classes counted: 1xx … 5xx, and "other" (outside 100..=599).
pub(crate) const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

/// How many termination states the outcome table has a column for (see
/// `conn::access::Termination`).
pub(crate) const TERMINATIONS: usize = 15;

/// Requests by status class (row, [`CLASSES`]) and termination state
/// (column).
#[derive(Debug)]
pub struct Outcomes(pub(crate) [AtomicU64; CLASSES.len() * TERMINATIONS]);

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Outcomes {
    /// Counts one request with `status` that ended in termination state
    /// number `termination` (< [`TERMINATIONS`]).
    pub(crate) fn count(&self, status: u16, termination: usize) {
        let class = match status {
            100..=599 => usize::from(status / 100 - 1),
            _ => CLASSES.len() - 1,
        };
        if let Some(c) = self.0.get(class * TERMINATIONS + termination) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests of status class `class` (index into [`CLASSES`]) that ended
    /// in termination state `termination`.
    pub fn get(&self, class: usize, termination: usize) -> u64 {
        self.0
            .get(class * TERMINATIONS + termination)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// Upper bounds of the histogram buckets, in seconds (Prometheus's
/// default buckets with 1 ms and 2.5 ms added: a proxy on loopback answers
/// in well under 5 ms).
pub const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram: observations per bucket (not cumulative; the last
/// cell is "above every bound"), their sum in microseconds and count.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

/// Cells one [`Histogram`] adds to [`Stats::values`].
pub(crate) const HISTOGRAM_CELLS: usize = BUCKETS.len() + 3;

/// The histograms of [`Stats`], in [`Stats::values`] order (the index
/// says where a histogram's cells start after the outcome table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Histograms {
    /// [`Stats::request_duration`].
    RequestDuration = 0,
    /// [`Stats::upstream_first_byte`].
    UpstreamFirstByte = 1,
    /// [`Stats::tls_handshake_duration`].
    TlsHandshake = 2,
}

/// How many histograms [`Stats`] has.
const HISTOGRAMS: usize = 3;

/// Numbers in [`Stats::values`].
pub(crate) const VALUE_COUNT: usize =
    FIELD_NAMES.len() + CLASSES.len() * TERMINATIONS + HISTOGRAMS * HISTOGRAM_CELLS;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records one observation of `d`.
    pub(crate) fn observe(&self, d: std::time::Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The cells in [`Stats::values`] order: buckets, sum (µs), count.
    fn cells(&self) -> impl Iterator<Item = &AtomicU64> {
        self.buckets.iter().chain([&self.sum_us, &self.count])
    }
}

//! The plain counter and gauge families of `/metrics`, declared once: each
//! one's name, help and kind, and the `Stats` fields its series read, each
//! with the label that tells them apart. A scrape (`expose.rs`) encodes
//! them for every worker index; the families of a shape of their own (the
//! requests by class and termination, the histograms, the workers'
//! draining flag and start time) are encoded there.
//!
//! Why a table: a counter of `Stats` becomes a family by one row, with no
//! code of its own; and a worker's gauges are told from its counters by
//! `kind` when its running loops are summed (`expose::worker_views`).
//!
//! What it must not know: the region, how a scrape is encoded, sockets,
//! HTTP, the loop.

use prometheus_client::metrics::MetricType;

/// Plain counters and gauges: (metric name, help, kind, stats field,
/// extra label).
pub(super) type Plain = (
    &'static str,
    &'static str,
    MetricType,
    &'static [(&'static str, Option<(&'static str, &'static str)>)],
);

/// Every plain family, in the order a scrape shows them.
pub(super) const PLAIN: &[Plain] = &[
    (
        "sluice_tls_handshakes",
        "TLS handshakes with clients, by result (ok: full, resumed: a ticket or cached session, failed: an alert, a refused name or a handshake past its bound, timeout: not done within tls_handshake_timeout).",
        MetricType::Counter,
        &[
            ("tls_handshakes", Some(("result", "ok"))),
            ("tls_handshakes_resumed", Some(("result", "resumed"))),
            ("tls_handshakes_failed", Some(("result", "failed"))),
            ("tls_handshakes_timeout", Some(("result", "timeout"))),
        ],
    ),
    (
        "sluice_tls_connections",
        "Client connections whose TLS handshake completed, by the version negotiated.",
        MetricType::Counter,
        &[
            ("tls_connections_tls12", Some(("version", "TLSv1.2"))),
            ("tls_connections_tls13", Some(("version", "TLSv1.3"))),
        ],
    ),
    (
        "sluice_health_checks",
        "Active health checks, by result (skipped: not started for want of local descriptors, no result).",
        MetricType::Counter,
        &[
            ("health_checks", Some(("result", "done"))),
            ("health_checks_failed", Some(("result", "failed"))),
            ("health_checks_skipped", Some(("result", "skipped"))),
        ],
    ),
    (
        "sluice_client_connections_accepted",
        "Client connections accepted.",
        MetricType::Counter,
        &[("downstream_accepted", None)],
    ),
    (
        "sluice_client_connections",
        "Client connections open now, by state (idle: waiting for a next request head).",
        MetricType::Gauge,
        &[
            ("downstream_active", Some(("state", "open"))),
            ("downstream_idle", Some(("state", "idle"))),
        ],
    ),
    (
        "sluice_request_heads",
        "Request heads parsed.",
        MetricType::Counter,
        &[("requests", None)],
    ),
    (
        "sluice_requests_by_protocol",
        "Requests read, by the protocol the client spoke.",
        MetricType::Counter,
        &[
            ("h1_requests", Some(("protocol", "http/1.1"))),
            ("h2_streams", Some(("protocol", "h2"))),
        ],
    ),
    (
        "sluice_client_connections_by_protocol",
        "Client connections by protocol: HTTP/1 ones counted at their first request, HTTP/2 ones when they chose it (ALPN h2, or the h2c preface).",
        MetricType::Counter,
        &[
            ("h1_connections", Some(("protocol", "http/1.1"))),
            ("h2_connections", Some(("protocol", "h2"))),
        ],
    ),
    (
        "sluice_http2_resets_received",
        "RST_STREAM frames HTTP/2 clients sent.",
        MetricType::Counter,
        &[("h2_resets_received", None)],
    ),
    (
        "sluice_http2_resets_sent",
        "RST_STREAM frames sent to HTTP/2 clients, by error code.",
        MetricType::Counter,
        &[
            ("h2_resets_sent_no_error", Some(("code", "NO_ERROR"))),
            (
                "h2_resets_sent_protocol_error",
                Some(("code", "PROTOCOL_ERROR")),
            ),
            (
                "h2_resets_sent_refused_stream",
                Some(("code", "REFUSED_STREAM")),
            ),
            ("h2_resets_sent_cancel", Some(("code", "CANCEL"))),
            (
                "h2_resets_sent_flow_control_error",
                Some(("code", "FLOW_CONTROL_ERROR")),
            ),
            (
                "h2_resets_sent_stream_closed",
                Some(("code", "STREAM_CLOSED")),
            ),
            (
                "h2_resets_sent_internal_error",
                Some(("code", "INTERNAL_ERROR")),
            ),
            ("h2_resets_sent_other", Some(("code", "other"))),
        ],
    ),
    (
        "sluice_http2_goaways_sent",
        "GOAWAY frames sent to HTTP/2 clients, by error code.",
        MetricType::Counter,
        &[
            ("h2_goaways_no_error", Some(("code", "NO_ERROR"))),
            (
                "h2_goaways_protocol_error",
                Some(("code", "PROTOCOL_ERROR")),
            ),
            (
                "h2_goaways_enhance_your_calm",
                Some(("code", "ENHANCE_YOUR_CALM")),
            ),
            (
                "h2_goaways_flow_control_error",
                Some(("code", "FLOW_CONTROL_ERROR")),
            ),
            (
                "h2_goaways_compression_error",
                Some(("code", "COMPRESSION_ERROR")),
            ),
            ("h2_goaways_other", Some(("code", "other"))),
        ],
    ),
    (
        "sluice_filter_replies",
        "Requests answered by request_filter.",
        MetricType::Counter,
        &[("filter_replies", None)],
    ),
    (
        "sluice_proxy_protocol_headers",
        "PROXY protocol headers at connection starts, by result.",
        MetricType::Counter,
        &[
            ("proxy_headers", Some(("result", "accepted"))),
            ("proxy_headers_refused", Some(("result", "refused"))),
        ],
    ),
    (
        "sluice_downstream_refused_per_client",
        "New connections closed: their client address held max_connections_per_client.",
        MetricType::Counter,
        &[("downstream_refused_per_client", None)],
    ),
    (
        "sluice_upstream_connects",
        "Upstream connections opened.",
        MetricType::Counter,
        &[("upstream_connects", None)],
    ),
    (
        "sluice_upstream_reuses",
        "Requests sent on a pooled upstream connection.",
        MetricType::Counter,
        &[("upstream_reuses", None)],
    ),
    (
        "sluice_upstream_retries",
        "Requests sent again on a new upstream connection.",
        MetricType::Counter,
        &[("retries", None)],
    ),
    (
        "sluice_access_log_dropped",
        "Access records dropped because the log's reader did not take them.",
        MetricType::Counter,
        &[("access_log_dropped", None)],
    ),
    (
        "sluice_pool_puts",
        "Upstream connections parked in the pool.",
        MetricType::Counter,
        &[("pool_puts", None)],
    ),
    (
        "sluice_pool_evictions",
        "Pooled upstream connections closed, by reason.",
        MetricType::Counter,
        &[
            ("pool_evicted_peer_closed", Some(("reason", "peer_closed"))),
            (
                "pool_evicted_unexpected_data",
                Some(("reason", "unexpected_data")),
            ),
            (
                "pool_evicted_idle_timeout",
                Some(("reason", "idle_timeout")),
            ),
            ("pool_evicted_cap", Some(("reason", "cap"))),
        ],
    ),
    (
        "sluice_pool_idle_connections",
        "Idle upstream connections in the pool now.",
        MetricType::Gauge,
        &[("pool_idle", None)],
    ),
    (
        "sluice_proxy_responses",
        "Error responses the proxy wrote itself, by status.",
        MetricType::Counter,
        &[
            ("status_400", Some(("code", "400"))),
            ("status_403", Some(("code", "403"))),
            ("status_404", Some(("code", "404"))),
            ("status_405", Some(("code", "405"))),
            ("status_408", Some(("code", "408"))),
            ("status_413", Some(("code", "413"))),
            ("status_414", Some(("code", "414"))),
            ("status_429", Some(("code", "429"))),
            ("status_431", Some(("code", "431"))),
            ("status_501", Some(("code", "501"))),
            ("status_502", Some(("code", "502"))),
            ("status_503", Some(("code", "503"))),
            ("status_504", Some(("code", "504"))),
            ("status_505", Some(("code", "505"))),
            ("status_508", Some(("code", "508"))),
        ],
    ),
    (
        "sluice_timeouts",
        "Timers that ran out, by kind.",
        MetricType::Counter,
        &[
            ("timeouts_keepalive", Some(("kind", "keepalive"))),
            ("timeouts_head", Some(("kind", "request_head"))),
            ("timeouts_gap", Some(("kind", "body_or_send_gap"))),
            (
                "timeouts_upstream",
                Some(("kind", "upstream_read_or_write")),
            ),
            ("timeouts_connect", Some(("kind", "upstream_connect"))),
        ],
    ),
    (
        "sluice_buffered_bytes",
        "Bytes held in exchange buffers now, both directions.",
        MetricType::Gauge,
        &[("buffered_bytes", None)],
    ),
    (
        "sluice_buffered_bytes_peak",
        "Highest sluice_buffered_bytes seen.",
        MetricType::Gauge,
        &[("buffered_bytes_peak", None)],
    ),
    (
        "sluice_buffers_in_use",
        "Body buffers handed out now.",
        MetricType::Gauge,
        &[("buffers_in_use", None)],
    ),
    (
        "sluice_watermark_pauses",
        "Times a source's reading was paused at the high watermark.",
        MetricType::Counter,
        &[("read_pauses", None)],
    ),
    (
        "sluice_watermark_resumes",
        "Times it resumed at the low watermark.",
        MetricType::Counter,
        &[("read_resumes", None)],
    ),
    (
        "sluice_bytes",
        "Bytes moved, by peer and direction (heads, bodies and framing).",
        MetricType::Counter,
        &[
            ("bytes_from_downstream", Some(("direction", "client_in"))),
            ("bytes_to_downstream", Some(("direction", "client_out"))),
            ("bytes_from_upstream", Some(("direction", "upstream_in"))),
            ("bytes_to_upstream", Some(("direction", "upstream_out"))),
        ],
    ),
];

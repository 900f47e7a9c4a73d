//! The admin endpoints' bodies from the region's slots: `/metrics` in the
//! Prometheus text exposition format (0.0.4, encoded by the
//! `prometheus-client` crate), and `/status` as JSON.
//!
//! Every series carries a `worker` label (the slot index): one scrape shows
//! the whole process group, and `sum without (worker) (…)` gives its
//! totals. The metric names are listed in docs/observability.md ("Metrics";
//! scripts/check-docs.sh fails on a name missing there).
//!
//! What it must not know: sockets, HTTP, the loop.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

use super::Observer;
use super::certs::CertView;
use super::region::LoopView;
use super::tier::WorkerStates;
use crate::conn::access::{Termination, rfc3339_ms};
use crate::stats::{BUCKETS, CLASSES, FIELD_NAMES, HISTOGRAM_CELLS, Histograms, TERMINATIONS};
use crate::upstreams::ServerState;

/// The `Content-Type` of `/metrics`.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Plain counters and gauges: (metric name, help, kind, stats field,
/// extra label).
type Plain = (
    &'static str,
    &'static str,
    MetricType,
    &'static [(&'static str, Option<(&'static str, &'static str)>)],
);

const PLAIN: &[Plain] = &[
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

/// One worker index as a scrape shows it: counters from the index's totals
/// (every loop that held it added to them, so they never go down), gauges
/// summed over its running loops (`buffered_bytes_peak`: the highest),
/// draining while none of its loops serves, started when its newest loop
/// started.
#[derive(Debug)]
struct SlotView {
    index: usize,
    draining: bool,
    started_ms: u64,
    values: Vec<u64>,
}

/// The worker indices that have a running loop, from `region`.
fn worker_views(region: &super::Region) -> Vec<SlotView> {
    let loops = region.read_loops();
    let mut indices: Vec<usize> = loops.iter().map(|l| l.index).collect();
    indices.dedup();
    indices
        .into_iter()
        .map(|index| {
            let mine: Vec<&LoopView> = loops.iter().filter(|l| l.index == index).collect();
            let mut values = region.read_totals(index);
            for (name, _, kind, fields) in PLAIN {
                if !matches!(kind, MetricType::Gauge) {
                    continue;
                }
                for (field, _) in fields.iter() {
                    let Some(i) = FIELD_NAMES.iter().position(|n| n == field) else {
                        continue;
                    };
                    let each = mine.iter().map(|l| l.values.get(i).copied().unwrap_or(0));
                    let v = if *name == "sluice_buffered_bytes_peak" {
                        each.max().unwrap_or(0)
                    } else {
                        each.fold(0u64, u64::wrapping_add)
                    };
                    if let Some(cell) = values.get_mut(i) {
                        *cell = v;
                    }
                }
            }
            SlotView {
                index,
                draining: mine.iter().all(|l| l.draining),
                started_ms: mine.iter().map(|l| l.started_ms).max().unwrap_or(0),
                values,
            }
        })
        .collect()
}

/// `/readyz`: true while any loop of the group serves (is not draining),
/// the answering one counted as draining when `draining`. A reload's new
/// loops serve before the old ones drain, so the group stays ready across
/// it; a shutdown drains every loop.
pub(crate) fn group_ready(obs: &Observer, draining: bool) -> bool {
    if obs.claimed.is_none() && !draining {
        return true;
    }
    obs.region
        .read_loops()
        .iter()
        .any(|l| !(l.draining || (draining && Some(l.slot) == obs.claimed)))
}

/// The worker indices of one scrape, as a `prometheus-client` collector.
#[derive(Debug)]
struct Slots(Vec<SlotView>);

type Labels = Vec<(&'static str, String)>;

impl Slots {
    fn field(values: &[u64], name: &str) -> u64 {
        FIELD_NAMES
            .iter()
            .position(|&n| n == name)
            .and_then(|i| values.get(i).copied())
            .unwrap_or(0)
    }

    fn worker(v: &SlotView) -> Labels {
        vec![("worker", v.index.to_string())]
    }

    fn histogram(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        which: Histograms,
    ) -> Result<(), std::fmt::Error> {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        let start =
            FIELD_NAMES.len() + CLASSES.len() * TERMINATIONS + which as usize * HISTOGRAM_CELLS;
        for v in &self.0 {
            let cells = v.values.get(start..start + HISTOGRAM_CELLS).unwrap_or(&[]);
            let buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(cells.iter().copied())
                .collect();
            let sum = cells.get(BUCKETS.len() + 1).copied().unwrap_or(0) as f64 / 1e6;
            let count = cells.get(BUCKETS.len() + 2).copied().unwrap_or(0);
            let labels = Slots::worker(v);
            m.encode_family(&labels)?
                .encode_histogram::<Labels>(sum, count, &buckets, None)?;
        }
        Ok(())
    }
}

impl Collector for Slots {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        {
            let mut m = encoder.encode_descriptor(
                "sluice_requests",
                "Requests logged, by status class and termination state.",
                None,
                MetricType::Counter,
            )?;
            for v in &self.0 {
                for (c, class) in CLASSES.iter().enumerate() {
                    for (t, term) in Termination::ALL.iter().enumerate() {
                        let n = v
                            .values
                            .get(FIELD_NAMES.len() + c * TERMINATIONS + t)
                            .copied()
                            .unwrap_or(0);
                        // Only what happened: 54 series per worker otherwise.
                        if n == 0 && !(*class == "2xx" && t == 0) {
                            continue;
                        }
                        let mut labels = Slots::worker(v);
                        labels.push(("code_class", (*class).to_string()));
                        labels.push(("termination", term.name().to_string()));
                        ConstCounter::new(n).encode(m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        self.histogram(
            &mut encoder,
            "sluice_request_duration_seconds",
            "Request duration, head complete to record written.",
            Histograms::RequestDuration,
        )?;
        self.histogram(
            &mut encoder,
            "sluice_upstream_first_byte_seconds",
            "Time from request head complete to the first response byte from the upstream.",
            Histograms::UpstreamFirstByte,
        )?;
        self.histogram(
            &mut encoder,
            "sluice_tls_handshake_duration_seconds",
            "TLS handshakes with clients that completed (full or resumed), from the accept to the handshake's end.",
            Histograms::TlsHandshake,
        )?;
        for (name, help, kind, fields) in PLAIN {
            let mut m = encoder.encode_descriptor(name, help, None, *kind)?;
            for v in &self.0 {
                for (field, extra) in fields.iter() {
                    let mut labels = Slots::worker(v);
                    if let Some((k, val)) = extra {
                        labels.push((k, (*val).to_string()));
                    }
                    let n = Slots::field(&v.values, field);
                    let e = m.encode_family(&labels)?;
                    match kind {
                        MetricType::Counter => ConstCounter::new(n).encode(e)?,
                        _ => ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(e)?,
                    }
                }
            }
        }
        let mut m = encoder.encode_descriptor(
            "sluice_worker_draining",
            "1 while the worker drains (its /readyz answers 503).",
            None,
            MetricType::Gauge,
        )?;
        for v in &self.0 {
            ConstGauge::new(i64::from(v.draining)).encode(m.encode_family(&Slots::worker(v))?)?;
        }
        let mut m = encoder.encode_descriptor(
            "sluice_worker_start_time_seconds",
            "When the worker started, seconds since the epoch.",
            None,
            MetricType::Gauge,
        )?;
        for v in &self.0 {
            ConstGauge::new(v.started_ms as f64 / 1000.0)
                .encode(m.encode_family(&Slots::worker(v))?)?;
        }
        Ok(())
    }
}

/// Each upstream server's health as each running worker sees it (every
/// worker checks and counts on its own, ARCHITECTURE.md §13; the others'
/// views come from the tier board): labelled with the worker, the group
/// and the server. A server whose name has no address yet has no series.
#[derive(Debug)]
struct Servers {
    workers: Vec<WorkerStates>,
}

impl Servers {
    /// Every (worker, server) pair with an address.
    fn each(&self) -> impl Iterator<Item = (usize, &ServerState)> {
        self.workers.iter().flat_map(|w| {
            w.states
                .iter()
                .filter(|s| s.addr.is_some())
                .map(move |s| (w.index, s))
        })
    }
}

impl Collector for Servers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        type Pick = fn(&ServerState) -> bool;
        let families: [(&str, &str, Pick); 3] = [
            (
                "sluice_upstream_server_up",
                "1 if the upstream server may be chosen now (not ejected, not marked down), as the answering worker sees it.",
                |s| s.available,
            ),
            (
                "sluice_upstream_server_ejected",
                "1 while passive health (max_fails) keeps the server out.",
                |s| s.ejected,
            ),
            (
                "sluice_upstream_server_checked_down",
                "1 while active health checks mark the server down.",
                |s| s.down,
            ),
        ];
        let labels_of = |w: usize, s: &ServerState| -> Labels {
            vec![
                ("worker", w.to_string()),
                ("group", s.group.clone()),
                ("server", s.name.clone()),
            ]
        };
        for (name, help, pick) in families {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (w, s) in self.each() {
                ConstGauge::new(i64::from(pick(s))).encode(m.encode_family(&labels_of(w, s))?)?;
            }
        }
        {
            let mut m = encoder.encode_descriptor(
                "sluice_upstream_server_backup",
                "1 if the server is a backup (takes requests only while no other server of its group may).",
                None,
                MetricType::Gauge,
            )?;
            for (w, s) in self.each() {
                ConstGauge::new(i64::from(s.backup)).encode(m.encode_family(&labels_of(w, s))?)?;
            }
        }
        {
            let mut m = encoder.encode_descriptor(
                "sluice_upstream_server_responses",
                "Tries on the server by the class of its answer (none: no response), as the answering worker counted them.",
                None,
                MetricType::Counter,
            )?;
            for (w, s) in self.each() {
                for (class, n) in ["none", "1xx", "2xx", "3xx", "4xx", "5xx"]
                    .iter()
                    .zip(s.traffic.classes)
                {
                    let mut labels = labels_of(w, s);
                    labels.push(("code_class", (*class).to_string()));
                    ConstCounter::new(n).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        let mut m = encoder.encode_descriptor(
            "sluice_upstream_server_first_byte_seconds",
            "Time from request head complete to the server's first response byte, as the answering worker measured it.",
            None,
            MetricType::Histogram,
        )?;
        for (w, s) in self.each() {
            // Per-bucket counts: the encoder makes them cumulative.
            let buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(s.traffic.buckets)
                .collect();
            let total = s.traffic.buckets.iter().sum();
            let sum = s.traffic.sum_us as f64 / 1e6;
            m.encode_family(&labels_of(w, s))?
                .encode_histogram::<Labels>(sum, total, &buckets, None)?;
        }
        Ok(())
    }
}

/// The `/metrics` body for the group's slots, and the upstream servers'
/// health as each worker sees it (`workers`).
pub(crate) fn metrics_text(obs: &Observer, workers: &[WorkerStates], certs: &[CertView]) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Slots(worker_views(&obs.region))));
    registry.register_collector(Box::new(Servers {
        workers: workers.to_vec(),
    }));
    registry.register_collector(Box::new(super::certs::Certs {
        worker: obs.slot,
        certs: certs.to_vec(),
    }));
    let mut out = String::new();
    if prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).is_err() {
        out.clear();
    }
    out
}

#[derive(Serialize)]
struct Status {
    version: &'static str,
    config_digest: String,
    uptime_seconds: f64,
    pid: u32,
    workers: Vec<WorkerStatus>,
    /// The worker that answered.
    answered_by_worker: usize,
    /// The upstream groups over every worker, then the workers that
    /// disagree (`groups`, `per_worker`).
    #[serde(flatten)]
    tier: super::tier::TierView,
    /// The TLS listeners' certificates as the answering worker loaded them.
    certificates: Vec<CertView>,
}

#[derive(Serialize)]
struct WorkerStatus {
    worker: usize,
    pid: u64,
    started: String,
    config_digest: String,
    draining: bool,
    requests: u64,
    client_connections: u64,
}

/// The `/status` body: version, this process's config digest, the group's
/// uptime, one entry per worker, and the upstream groups with each
/// server's state over the `workers` (the answering one first).
pub(crate) fn status_json(obs: &Observer, workers: &[WorkerStates], certs: &[CertView]) -> String {
    let now = super::region::now_ms();
    let at = |ms: u64| std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms));
    let status = Status {
        version: env!("CARGO_PKG_VERSION"),
        config_digest: format!("{:016x}", obs.digest),
        uptime_seconds: now.saturating_sub(obs.region.group_start_ms()) as f64 / 1000.0,
        pid: std::process::id(),
        workers: obs
            .region
            .read_loops()
            .into_iter()
            .map(|v| WorkerStatus {
                worker: v.index,
                pid: v.pid,
                started: rfc3339_ms(at(v.started_ms)),
                config_digest: format!("{:016x}", v.digest),
                draining: v.draining,
                requests: Slots::field(&v.values, "requests"),
                client_connections: Slots::field(&v.values, "downstream_active"),
            })
            .collect(),
        answered_by_worker: obs.slot,
        tier: super::tier::view(workers),
        certificates: certs.to_vec(),
    };
    let mut text = serde_json::to_string_pretty(&status).unwrap_or_default();
    text.push('\n');
    text
}

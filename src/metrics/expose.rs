//! The admin endpoints' bodies from the region's slots: `/metrics` in the
//! Prometheus text exposition format (0.0.4, encoded by the
//! `prometheus-client` crate), and `/status` as JSON.
//!
//! Every series carries a `worker` label (the slot index): one scrape shows
//! the whole process group, and `sum without (worker) (…)` gives its
//! totals. The metric names are listed in docs/observability.md ("Metrics";
//! scripts/check-docs.sh fails on a name missing there).
//!
//! Here one scrape is read and put together: the region's slots become one
//! view per worker index, encoded with the families declared in
//! `families.rs` and those of a shape of their own; the upstream servers'
//! series (`servers.rs`) and the certificates' (`certs.rs`) join them.
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
use super::families::PLAIN;
use super::region::LoopView;
use super::servers::Servers;
use super::tier::WorkerStates;
use crate::conn::access::{Termination, rfc3339_ms};
use crate::stats::{BUCKETS, CLASSES, FIELD_NAMES, HISTOGRAM_CELLS, Histograms, TERMINATIONS};

/// The `Content-Type` of `/metrics`.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

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

/// A series' labels, `worker` first.
pub(super) type Labels = Vec<(&'static str, String)>;

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

//! The upstream servers in `/metrics`: per worker, group and server,
//! whether it may be chosen, ejected, checked down, a backup, its tries by
//! the class of their answer and its first-byte histogram, as each running
//! worker sees it (every worker checks and counts on its own,
//! ARCHITECTURE.md §13; the others' views come from the tier board).
//!
//! Why per worker: the workers may disagree (one ejected a server the
//! others still send to); `/status` gives the group-wide view first
//! (`tier.rs`), a scrape each worker's own, to sum or compare.
//!
//! What it must not know: how the states are worked out, the region,
//! sockets, the loop.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::expose::Labels;
use super::tier::WorkerStates;
use crate::stats::BUCKETS;
use crate::upstreams::ServerState;

/// Each upstream server's health as each running worker sees it (every
/// worker checks and counts on its own, ARCHITECTURE.md §13; the others'
/// views come from the tier board): labelled with the worker, the group
/// and the server. A server whose name has no address yet has no series.
#[derive(Debug)]
pub(crate) struct Servers {
    /// Each running worker's view of every server.
    pub workers: Vec<WorkerStates>,
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

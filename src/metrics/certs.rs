//! The TLS listeners' certificates as the admin endpoints show them (issue
//! 23, "Observability"): in `/status` each certificate's names, notAfter,
//! file and expiry warning; in `/metrics` the gauge
//! `sluice_tls_certificate_expiry_seconds` (seconds left, negative once
//! expired), per certificate, as the answering worker loaded them.
//!
//! What it must not know: sockets, the loop, how certificates are loaded
//! (the loop hands in [`CertView`]s).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::Serialize;

/// One certificate of the TLS listeners, for `/status` and `/metrics`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct CertView {
    /// The chain's file.
    pub file: String,
    /// The leaf's subjectAltName DNS names.
    pub names: Vec<String>,
    /// The leaf's notAfter, as text (`Jan  1 00:00:00 2027 +00:00`).
    pub not_after: String,
    /// Seconds from now to the notAfter; negative once expired.
    pub seconds_left: i64,
    /// The expiry warning (expired, or within 14 days), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The expiry gauge for the answering worker's certificates.
#[derive(Debug)]
pub(crate) struct Certs {
    /// The answering worker's index.
    pub worker: usize,
    /// Its certificates, in the order configured.
    pub certs: Vec<CertView>,
}

impl Collector for Certs {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.certs.is_empty() {
            return Ok(());
        }
        let mut m = encoder.encode_descriptor(
            "sluice_tls_certificate_expiry_seconds",
            "Seconds until the TLS listener's certificate expires (negative: expired), as the answering worker loaded it.",
            None,
            MetricType::Gauge,
        )?;
        for c in &self.certs {
            let labels: Vec<(&'static str, String)> = vec![
                ("worker", self.worker.to_string()),
                ("file", c.file.clone()),
                ("names", c.names.join(",")),
            ];
            ConstGauge::new(c.seconds_left).encode(m.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

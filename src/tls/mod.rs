//! TLS material and rustls configurations, sans-IO: certificates and keys
//! read from PEM files (`certs.rs`), the SNI choice (`sni.rs`, RFC 6066
//! §3), the server configuration of the TLS listeners (`server.rs`), the
//! shared session-ticket keys (`tickets.rs`) and how their secret reaches
//! the workers (`secret_fd.rs`), the client configurations for upstream
//! TLS (`client.rs`), and the interned TLS identity an upstream `Peer`
//! will carry (`identity.rs`).
//!
//! The crypto provider is `ring` (docs/performance.md, "TLS crypto
//! provider", has the measurement against aws-lc-rs).
//!
//! What it must not know: sockets, mio, the loop, connections. It hands
//! out `Arc<ServerConfig>` / `Arc<ClientConfig>` and facts, and reads a
//! ClientHello's server name (`client_hello.rs`) and bounds what a
//! client's handshake may send (`handshake_gate.rs`); the transport
//! (`conn/transport/`) drives rustls' unbuffered server and client
//! sessions over the sockets.

use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;

pub mod certs;
pub mod client;
pub mod client_cert;
pub mod client_hello;
mod error;
pub mod handshake_gate;
pub mod identity;
pub mod secret_fd;
pub mod server;
pub mod sni;
#[cfg(test)]
pub(crate) mod tests;
pub mod tickets;

pub use error::TlsError;
pub use server::{ServerTls, server_config};

use crate::config::{CertificateSpec, Config, ConfigError, ConfigWarning};

/// The crypto provider every configuration is built with: ring's, made
/// once per process.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// Seconds since the Unix epoch now (0 if the clock is before it).
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Loads every TLS file `config` names, as the start will (and a reload,
/// and `--check-config`): the listeners' certificates and keys (built
/// into their server configuration when a TLS listener is configured),
/// `tls_client_ca`, and each TLS upstream group's CA, client certificate
/// and server names.
///
/// Returns the warnings to log: certificates expired or expiring within
/// 14 days, groups with `tls_verify = false`, each with its key path.
///
/// Errors: the first file that cannot be used, as a [`ConfigError`] for
/// the knob that names it (with the key path of the file's entry, such
/// as `certificate[1].key`, when it is one of a table's).
pub fn check(config: &Config) -> Result<Vec<ConfigWarning>, ConfigError> {
    let mut warnings = Vec::new();
    let err = |key: &'static str, path: Option<String>, e: TlsError| ConfigError {
        key,
        reason: e.to_string(),
        path,
    };
    if !config.listen_tls.is_empty() || !config.certificate.is_empty() {
        let secret = tickets::TicketSecret::generate().map_err(|e| err("listen-tls", None, e))?;
        let built = ServerTls::build(config, &secret, server::SERVER_ALPN).map_err(|e| {
            let file = e.file.as_deref();
            // The entry that names the file; when several name it (one key
            // file written in two entries), the first of them that fails
            // to load alone, not merely the first.
            let names = |c: &CertificateSpec| {
                file.is_some_and(|f| {
                    f == c.key.get_ref().as_path() || f == c.cert.get_ref().as_path()
                })
            };
            let naming: Vec<(usize, &CertificateSpec)> = config
                .certificate
                .iter()
                .enumerate()
                .filter(|(_, c)| names(c))
                .collect();
            let at_fault = if naming.len() > 1 {
                naming.iter().find(|(_, c)| {
                    certs::LoadedCert::load(c.cert.get_ref(), c.key.get_ref()).is_err()
                })
            } else {
                naming.first()
            };
            let cert = at_fault.map(|(i, c)| {
                if file == Some(c.key.get_ref().as_path()) {
                    format!("certificate[{i}].key")
                } else {
                    format!("certificate[{i}].cert")
                }
            });
            match cert {
                Some(path) => err("certificate", Some(path), e),
                None if file.is_some() && file == config.tls_client_ca.as_deref() => {
                    err("tls-client-ca", None, e)
                }
                None => err("listen-tls", None, e),
            }
        })?;
        let now = now_unix();
        for c in built.store.certs() {
            if let Some(text) = c.expiry_warning(now) {
                let i = config
                    .certificate
                    .iter()
                    .position(|s| s.cert.get_ref().as_path() == c.cert_file.as_path());
                let path = i.map_or_else(
                    || "certificate".to_string(),
                    |i| format!("certificate[{i}].cert"),
                );
                warnings.push(ConfigWarning::new(path, text));
            }
        }
    }
    let mut identities = identity::TlsIdentities::new();
    for (gi, g) in config.upstream.iter().enumerate() {
        let Some(profile) = client::UpstreamTls::of_group(g) else {
            continue;
        };
        let name = g.name.get_ref();
        if !profile.verify {
            warnings.push(ConfigWarning::new(
                format!("upstream[{gi}].tls_verify"),
                format!(
                    "group {name:?}: tls_verify = false: any certificate is accepted, \
                     so anyone on the path can read and change its traffic"
                ),
            ));
        }
        for s in g.servers.get_ref() {
            let host = g.tls_server_name.as_deref().unwrap_or(&s.host);
            identities.intern(&profile, host).map_err(|e| {
                err(
                    "upstream",
                    Some(format!("upstream[{gi}].servers")),
                    TlsError {
                        reason: format!("group {name:?}: {}", e.reason),
                        ..e
                    },
                )
            })?;
        }
    }
    Ok(warnings)
}

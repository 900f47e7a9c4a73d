//! The server side's rustls configuration, built from `Config`: the
//! certificates (`certs.rs`) behind the SNI resolver (`sni.rs`), the
//! versions, ALPN, client certificates, the per-worker session cache and
//! the instance's shared tickets (`tickets.rs`).
//!
//! - Versions: TLS 1.2 and 1.3 (`tls_min_version = "1.2"`, the default;
//!   Mozilla "intermediate"), or 1.3 only; rustls' default AEAD suites,
//!   nothing older (RFC 8996).
//! - ALPN (RFC 7301): the caller's list, in its order of preference; a
//!   client that offers only protocols not in it gets the fatal alert
//!   `no_application_protocol` (RFC 7301 §3.2, sent by rustls); a client
//!   that offers none gets no ALPN answer and speaks HTTP/1.1.
//! - Client certificates (`tls_client_auth`): off, optional (a client
//!   without one is let in, one with an invalid one is refused) or
//!   required, verified against `tls_client_ca` (RFC 8446 §4.3.2).
//! - Resumption: the shared ticketer for TLS 1.3 and 1.2 tickets, plus a
//!   stateful cache of [`SESSION_CACHE_ENTRIES`] per configuration (one
//!   per worker; a `--workers 1` reload starts a new one, tickets carry on
//!   while the client-certificate settings stay the same: a ticket is
//!   bound to them, `tickets.rs`).
//!
//! What it must not know: sockets, the loop.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::{ServerSessionMemoryCache, WebPkiClientVerifier};

use super::TlsError;
use super::certs::{LoadedCert, read_chain, roots_of};
use super::handshake_gate::HandshakeGate;
use super::sni::CertStore;
use super::tickets::{SharedTicketer, TicketSecret};
use crate::config::{ClientAuth, Config, TlsVersion};

/// Stateful sessions kept per configuration (per worker): about 100 bytes
/// of key material each, for TLS 1.2 clients that do not take tickets.
pub const SESSION_CACHE_ENTRIES: usize = 4096;

/// ALPN protocol id of HTTP/1.1 (RFC 7301 §6).
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// ALPN protocol id of HTTP/1.0 (RFC 7301 §6): `curl -0` offers it alone;
/// the HTTP/1 machine serves 1.0 as it does on the plain port (nginx
/// accepts it too).
pub const ALPN_HTTP10: &[u8] = b"http/1.0";

/// What the TLS listeners offer, most preferred first.
pub const SERVER_ALPN: &[&[u8]] = &[ALPN_HTTP11, ALPN_HTTP10];

/// ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2).
pub const ALPN_H2: &[u8] = b"h2";

/// What a TLS listener offers with HTTP/2 on (`http2`, the default): `h2`
/// first (the server's preference wins, RFC 7301 §3.2), then HTTP/1.
pub const SERVER_ALPN_H2: &[&[u8]] = &[ALPN_H2, ALPN_HTTP11, ALPN_HTTP10];

/// A server configuration and the certificates behind it (for the expiry
/// warnings, `/status` and the transport's SNI decision).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// What each `ServerConnection` of the TLS listeners is made with.
    pub config: Arc<ServerConfig>,
    /// The certificates it serves, for `CertStore::covers` and the status.
    pub store: Arc<CertStore>,
    /// It asks clients for certificates (`tls_client_auth` `optional` or
    /// `required`): their handshake may carry a chain beyond 8 KiB.
    pub client_auth: bool,
}

/// Loads every configured certificate, in order.
///
/// Errors: no certificate configured; any certificate or key that cannot
/// be loaded (the error names its file).
pub fn load_certificates(config: &Config) -> Result<Vec<LoadedCert>, TlsError> {
    if config.certificate.is_empty() {
        return Err(TlsError::general(
            "a TLS listener needs a certificate (--tls-cert FILE --tls-key FILE, or \
             [[certificate]] in the config file)",
        ));
    }
    config
        .certificate
        .iter()
        .map(|c| LoadedCert::load(c.cert.get_ref(), c.key.get_ref()))
        .collect()
}

impl ServerTls {
    /// The store a new session must check the ClientHello's name against
    /// before rustls answers it (`tls_unknown_sni = "reject"`: a name no
    /// certificate covers gets `unrecognized_name`, `sni.rs`); `None`
    /// when every ClientHello gets a certificate.
    pub fn sni_check(&self) -> Option<Arc<CertStore>> {
        self.store.rejects_unknown().then(|| self.store.clone())
    }

    /// The bound a new session's handshake is held to
    /// (`handshake_gate.rs`: 8 KiB, and 64 KiB more for a client's
    /// certificate chain when the listener asks for one).
    pub fn handshake_gate(&self) -> HandshakeGate {
        HandshakeGate::new(self.client_auth)
    }

    /// Builds the server configuration of `config`'s TLS listeners with
    /// ticket keys from `secret` and the ALPN protocols `alpn` (most
    /// preferred first).
    ///
    /// Errors: as [`load_certificates`]; `tls_client_ca` unreadable or
    /// without a certificate; rustls refused the combination.
    pub fn build(
        config: &Config,
        secret: &TicketSecret,
        alpn: &[&[u8]],
    ) -> Result<ServerTls, TlsError> {
        let certs = load_certificates(config)?;
        let store = Arc::new(CertStore::new(certs, config.tls_unknown_sni));
        let provider = super::provider();
        let versions: &[&'static rustls::SupportedProtocolVersion] = match config.tls_min_version {
            TlsVersion::V1_2 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            TlsVersion::V1_3 => &[&rustls::version::TLS13],
        };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| TlsError::general(format!("TLS versions: {e}")))?;
        // What a resumed session must have been issued under (tickets.rs).
        let mut context = format!("tls_client_auth {:?}", config.tls_client_auth).into_bytes();
        let builder = match (config.tls_client_auth, &config.tls_client_ca) {
            (ClientAuth::Off, _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(TlsError::general(
                    "tls_client_auth other than \"off\" needs tls_client_ca",
                ));
            }
            (auth, Some(ca)) => {
                let chain = read_chain(ca)?;
                for c in &chain {
                    context.extend_from_slice(&(c.len() as u64).to_be_bytes());
                    context.extend_from_slice(c.as_ref());
                }
                let roots = roots_of(ca, chain)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                let verifier = if auth == ClientAuth::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| TlsError::in_file(ca, format!("client verifier: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server = builder.with_cert_resolver(store.clone());
        server.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        server.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES);
        server.ticketer = Arc::new(SharedTicketer::new(secret.clone()).bound_to(&context));
        Ok(ServerTls {
            config: Arc::new(server),
            store,
            client_auth: config.tls_client_auth != ClientAuth::Off,
        })
    }
}

/// The one call the loop's TLS listeners need: the server configuration
/// for `config`, with this instance's ticket secret
/// (`secret_fd::process_secret`) and ALPN `h2` (unless `http2` is off),
/// `http/1.1` and `http/1.0`. Called at start (so
/// a bad certificate fails the start) and at every reload (a failure
/// refuses the reload and the old configuration stays).
///
/// Errors: as [`ServerTls::build`], or the secret could not be had.
pub fn server_config(config: &Config) -> Result<ServerTls, TlsError> {
    let secret = super::secret_fd::process_secret()?;
    let alpn = if config.http2 {
        SERVER_ALPN_H2
    } else {
        SERVER_ALPN
    };
    ServerTls::build(config, secret, alpn)
}

//! The client side's rustls configuration, for TLS to upstreams: what to
//! trust (a CA file or the system trust store), whether to verify at all,
//! an optional client certificate, ALPN `http/1.1`, a session cache so a
//! new connection to a known server resumes.
//!
//! - Server names: the group's `tls_server_name`, else the server's host;
//!   an IP literal is verified against the certificate's IP SANs
//!   (RFC 6125 §1.7.2 leaves IPs to RFC 5280 §4.2.1.6; webpki does so).
//! - `tls_verify = false` uses [`NoVerification`]: any certificate for any
//!   name is accepted (the handshake signature is still checked against
//!   the certificate it came with). The start warns about it.
//! - The system trust store (`rustls-native-certs`: the OS's bundle, which
//!   the OS updates) is read once per process.
//!
//! What it must not know: sockets, the loop, the pool.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::Resumption;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::TlsError;
use super::certs::{read_chain, read_roots};
use super::server::ALPN_HTTP11;
use crate::upstreams::spec::GroupSpec;

/// One upstream TLS profile: everything of a group's TLS settings but the
/// server name. Groups with equal profiles share one `ClientConfig` (and
/// its session cache).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// PEM file of the CA certificates to trust; `None`: the system store.
    pub ca: Option<PathBuf>,
    /// Verify the server's certificate and name (`tls_verify`).
    pub verify: bool,
    /// A client certificate chain and its key, for upstream mTLS.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl UpstreamTls {
    /// The TLS profile of `group`, or `None` when it speaks plain TCP.
    pub fn of_group(group: &GroupSpec) -> Option<UpstreamTls> {
        if !group.tls {
            return None;
        }
        Some(UpstreamTls {
            ca: group.tls_ca.clone(),
            verify: group.tls_verify,
            client_cert: group
                .tls_client_cert
                .clone()
                .zip(group.tls_client_key.clone()),
        })
    }

    /// Builds the client configuration.
    ///
    /// Errors (naming the file): the CA file or the client certificate or
    /// key cannot be loaded; the system store has no certificate.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let provider = super::provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::general(format!("TLS versions: {e}")))?;
        let builder = if self.verify {
            builder.with_root_certificates(self.roots()?)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
        };
        let mut config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = read_chain(cert)?;
                let der = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| TlsError::in_file(key, format!("no usable private key: {e:?}")))?;
                builder
                    .with_client_auth_cert(chain, der)
                    .map_err(|e| TlsError::in_file(key, format!("client certificate: {e}")))?
            }
        };
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        config.resumption = Resumption::default();
        Ok(Arc::new(config))
    }

    /// The trust anchors: the CA file's certificates, or the system's.
    fn roots(&self) -> Result<Arc<RootCertStore>, TlsError> {
        let Some(ca) = &self.ca else {
            return system_roots();
        };
        Ok(Arc::new(read_roots(ca)?))
    }
}

/// The system trust store, read once per process.
fn system_roots() -> Result<Arc<RootCertStore>, TlsError> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    if let Some(r) = ROOTS.get() {
        return Ok(r.clone());
    }
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or("none found".to_string(), |e| e.to_string());
        return Err(TlsError::general(format!(
            "the system trust store has no usable certificate ({why}); set tls_ca"
        )));
    }
    Ok(ROOTS.get_or_init(|| Arc::new(roots)).clone())
}

/// The name a connection to `host` verifies: a DNS name, or an IP
/// address for an IP literal.
///
/// Errors: `host` is neither.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| TlsError::general(format!("{host:?} is not a DNS name or an IP address")))
}

/// `tls_verify = false`: accepts any certificate for any name.
#[derive(Debug)]
pub struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

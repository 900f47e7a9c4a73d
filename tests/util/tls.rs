//! TLS for the tests: self-signed certificates made here (rcgen; no
//! private key is checked in), rustls client configurations that trust
//! them, a blocking client stream whose reads have a bound, and the proxy
//! in process with a plain and a TLS listener.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::CLIENT_TIMEOUT;

/// A client session over a blocking socket.
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A self-signed P-256 certificate for some DNS names, written as
/// `cert.pem` and `key.pem` to a temporary directory removed on drop.
pub struct TestCert {
    pub dir: PathBuf,
    /// The certificate's DER, for a client's trust store.
    pub der: Vec<u8>,
    /// Its private key's DER (PKCS#8), for a server in the test.
    pub key_der: Vec<u8>,
}

impl TestCert {
    /// A certificate for `localhost`.
    pub fn new(tag: &str) -> TestCert {
        TestCert::for_names(tag, &["localhost"])
    }

    /// A certificate whose subjectAltName lists `names`.
    pub fn for_names(tag: &str, names: &[&str]) -> TestCert {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-cert-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        TestCert {
            der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            dir,
        }
    }

    /// The chain (this certificate alone) for a rustls server.
    pub fn chain(&self) -> Vec<rustls::pki_types::CertificateDer<'static>> {
        vec![rustls::pki_types::CertificateDer::from(self.der.clone())]
    }

    /// The private key for a rustls server.
    pub fn key(&self) -> rustls::pki_types::PrivateKeyDer<'static> {
        rustls::pki_types::PrivateKeyDer::Pkcs8(self.key_der.clone().into())
    }

    pub fn cert_path(&self) -> String {
        self.dir.join("cert.pem").display().to_string()
    }

    pub fn key_path(&self) -> String {
        self.dir.join("key.pem").display().to_string()
    }

    /// This certificate as a `[[certificate]]` of a `Config`.
    pub fn spec(&self) -> sluice::CertificateSpec {
        sluice::CertificateSpec::new(self.dir.join("cert.pem"), self.dir.join("key.pem"))
    }

    /// The `[[certificate]]` table of a config file.
    pub fn toml(&self) -> String {
        format!(
            "[[certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
            self.cert_path(),
            self.key_path()
        )
    }

    /// A client configuration that trusts this certificate.
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        trusting(&[&self.der])
    }
}

impl Drop for TestCert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client configuration (ring, TLS 1.2 and 1.3, no ALPN) that trusts
/// each of `certs` (DER).
pub fn trusting(certs: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    trusting_with(certs, rustls::DEFAULT_VERSIONS, &[])
}

/// A client configuration that trusts `certs`, speaks only `versions` and
/// offers `alpn`.
pub fn trusting_with(
    certs: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(rustls::pki_types::CertificateDer::from(c.to_vec()))
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

/// A client session to `addr` asking for `localhost` (not yet
/// handshaken: the first write or read does it).
pub fn tls_connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> TlsStream {
    tls_connect_as(addr, cfg, "localhost")
}

/// [`tls_connect`] asking for `name` (a DNS name is sent as SNI; an IP
/// address is not).
pub fn tls_connect_as(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>, name: &str) -> TlsStream {
    tls_over_as(TcpStream::connect(addr).unwrap(), cfg, name)
}

/// A client session for `localhost` over an open socket.
pub fn tls_over(sock: TcpStream, cfg: &Arc<rustls::ClientConfig>) -> TlsStream {
    tls_over_as(sock, cfg, "localhost")
}

/// A client session for `name` over an open socket.
pub fn tls_over_as(sock: TcpStream, cfg: &Arc<rustls::ClientConfig>, name: &str) -> TlsStream {
    let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    sock.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    sock.set_write_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// `GET target` on a new TLS connection to `addr` with `Connection:
/// close`: status and body.
#[track_caller]
pub fn tls_get(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>, target: &str) -> (u16, Vec<u8>) {
    use std::io::Write;
    let mut s = tls_connect(addr, cfg);
    s.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let (status, _, body) = super::wire::read_length_response(&mut s);
    (status, body)
}

/// The error a client gets for its first request on `s` (the handshake's
/// alert, as rustls words it).
#[track_caller]
pub fn first_error(s: &mut TlsStream) -> String {
    use std::io::Write;
    let r = s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut buf = [0u8; 64];
    let read = s.read(&mut buf);
    let err = r.err().or(read.err()).expect("the handshake fails");
    err.to_string()
}

/// The proxy in process with a plain and a TLS listener (port 0 each);
/// shut down on drop.
pub struct TlsProxy {
    pub plain: SocketAddr,
    pub tls: SocketAddr,
    pub handle: sluice::ServerHandle,
    pub stats: Arc<sluice::Stats>,
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// A [`TlsProxy`] serving `cert` in front of `upstream`, with the
/// configuration changed by `tweak`.
pub fn start_tls_proxy(
    upstream: SocketAddr,
    cert: &TestCert,
    tweak: impl FnOnce(&mut sluice::Config),
) -> TlsProxy {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut config = sluice::Config {
        listen: vec![any],
        listen_tls: vec![any],
        certificate: vec![cert.spec()],
        access_log: sluice::AccessLogTarget::Off,
        upstream: vec![sluice::GroupSpec::new(
            sluice::DEFAULT_GROUP,
            vec![upstream.into()],
        )],
        ..sluice::Config::default()
    };
    tweak(&mut config);
    let server =
        sluice::Server::bind(config, sluice::Forward::new(upstream)).expect("Server::bind");
    let proxy = TlsProxy {
        plain: server.local_addr(),
        tls: server.tls_addr().expect("a TLS listener"),
        handle: server.handle(),
        stats: server.stats(),
    };
    std::thread::spawn(move || server.run());
    proxy
}

/// A client configuration that accepts any server certificate (it still
/// checks the handshake's signatures): for a test that looks at which
/// certificate was served, whatever names it covers.
pub fn accepting_any() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    Arc::new(cfg)
}

/// The verifier of [`accepting_any`].
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The leaf certificate the server presented on `s` (DER), once the
/// handshake is done.
pub fn served_leaf(s: &TlsStream) -> Vec<u8> {
    s.conn.peer_certificates().expect("a handshake")[0]
        .as_ref()
        .to_vec()
}

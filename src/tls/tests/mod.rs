//! In-memory TLS tests: certificates made with rcgen into a temporary
//! directory, client and server connections pumping records to each other
//! through byte buffers (`read_tls` / `write_tls` on `Vec<u8>`), no socket.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SignatureAlgorithm};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ConnectionCommon, RootCertStore, ServerConnection};

use crate::config::{CertificateSpec, Config};

mod certs;
mod handshake;
mod identity;
mod tickets;

/// A test CA and a directory for the PEM files it makes.
pub struct Pki {
    pub dir: PathBuf,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    pub ca_der: CertificateDer<'static>,
    files: std::cell::Cell<u32>,
}

impl Pki {
    /// A fresh CA; its files go under a directory named after `tag`.
    pub fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("sluice-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("sluice test CA {tag}"));
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let pki = Pki {
            dir,
            ca_der: ca.der().clone(),
            ca_params,
            ca_key,
            files: std::cell::Cell::new(0),
        };
        std::fs::write(pki.ca_file(), ca.pem()).unwrap();
        pki
    }

    /// The CA certificate's PEM file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    fn next(&self) -> u32 {
        let n = self.files.get() + 1;
        self.files.set(n);
        n
    }

    /// A leaf for `names` with a key of `alg`, signed by the CA: the chain
    /// file (leaf, then CA) and the key file (PKCS#8).
    pub fn leaf_with(
        &self,
        names: &[&str],
        alg: &'static SignatureAlgorithm,
        tweak: impl FnOnce(&mut CertificateParams),
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate_for(alg).unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        tweak(&mut params);
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let n = self.next();
        let cert_file = self.dir.join(format!("leaf{n}.pem"));
        let key_file = self.dir.join(format!("leaf{n}.key"));
        let ca_pem = std::fs::read_to_string(self.ca_file()).unwrap();
        std::fs::write(&cert_file, format!("{}{ca_pem}", cert.pem())).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }

    /// A P-256 leaf for `names`.
    pub fn leaf(&self, names: &[&str]) -> (PathBuf, PathBuf) {
        self.leaf_with(names, &rcgen::PKCS_ECDSA_P256_SHA256, |_| {})
    }

    /// A file of `text` in the directory.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A client configuration trusting this CA, with `tweak` applied.
    pub fn client(&self, tweak: impl FnOnce(&mut ClientConfig)) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let mut c = ClientConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tweak(&mut c);
        Arc::new(c)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Handshake bytes `hs` in plaintext handshake records (type 22, legacy
/// version 0x0301) of at most `max` bytes each, as a client frames them.
pub fn handshake_records(hs: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in hs.chunks(max) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&(part.len() as u16).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// A `Config` whose TLS listener serves `certs`.
pub fn tls_config(certs: &[(PathBuf, PathBuf)], tweak: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config {
        listen_tls: vec!["127.0.0.1:0".parse().unwrap()],
        certificate: certs
            .iter()
            .map(|(c, k)| CertificateSpec::new(c.clone(), k.clone()))
            .collect(),
        ..Config::default()
    };
    tweak(&mut c);
    c
}

/// How a handshake through [`pump`] ended, per side.
#[derive(Debug)]
pub struct Outcome {
    pub client: Result<(), rustls::Error>,
    pub server: Result<(), rustls::Error>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.client.is_ok() && self.server.is_ok()
    }
}

/// Moves what `from` has to send into `to`; true if any byte moved.
fn transfer<A, B>(
    from: &mut ConnectionCommon<A>,
    to: &mut ConnectionCommon<B>,
) -> Result<bool, rustls::Error> {
    let mut buf = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut buf).unwrap();
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).unwrap();
        to.process_new_packets()?;
    }
    Ok(!buf.is_empty())
}

/// Runs the handshake (and any records after it, such as TLS 1.3
/// tickets) until nothing moves or a side fails; a failing side's alert
/// is delivered to the other before returning.
pub fn pump(c: &mut ClientConnection, s: &mut ServerConnection) -> Outcome {
    for _ in 0..64 {
        let a = match transfer(c, s) {
            Ok(a) => a,
            Err(e) => {
                let client = transfer(s, c).map(|_| ());
                return Outcome {
                    client,
                    server: Err(e),
                };
            }
        };
        let b = match transfer(s, c) {
            Ok(b) => b,
            Err(e) => {
                let server = transfer(c, s).map(|_| ());
                return Outcome {
                    client: Err(e),
                    server,
                };
            }
        };
        if !a && !b {
            break;
        }
    }
    Outcome {
        client: Ok(()),
        server: Ok(()),
    }
}

/// A client connection to `name` and a server connection, pumped.
pub fn connect(
    client: &Arc<ClientConfig>,
    server: &Arc<rustls::ServerConfig>,
    name: &str,
) -> (ClientConnection, ServerConnection, Outcome) {
    let mut c = ClientConnection::new(
        client.clone(),
        ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    let mut s = ServerConnection::new(server.clone()).unwrap();
    let out = pump(&mut c, &mut s);
    (c, s, out)
}

/// The leaf certificate the client was shown.
pub fn served_leaf(c: &ClientConnection) -> CertificateDer<'static> {
    c.peer_certificates().unwrap()[0].clone().into_owned()
}

/// The leaf certificate in a chain file.
pub fn leaf_of(file: &std::path::Path) -> CertificateDer<'static> {
    super::certs::read_chain(file).unwrap()[0].clone()
}

//! HTTPS on a TLS listener (issue 23, the served part): the rustls session
//! in the loop under the client machine. A rustls client in the test talks
//! to `--listen-tls` over real sockets; certificates are made here (rcgen),
//! no key is checked in. What a user observes: statuses and bytes through
//! TLS, keep-alive on one session, `X-Forwarded-Proto: https` upstream,
//! a plaintext 400 naming HTTPS for plain HTTP on the TLS port, and the
//! alerts for a client whose ALPN has nothing in common.

#[path = "../util/mod.rs"]
mod util;

mod alpn_sni;
mod client_auth;
mod client_hello;
mod close;
mod not_tls;
mod observability;
mod requests;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use util::*;

/// A rustls client configuration trusting `cert`, offering `alpn`.
fn client_config(cert: &TestCert, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    trusting_with(&[&cert.der], rustls::DEFAULT_VERSIONS, alpn)
}

/// `count` ALPN names of 62 bytes that no server speaks, then
/// `http/1.1`: a ClientHello 63 bytes longer per name.
fn padded_alpn(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("x-padding-{i:03}-{}", "p".repeat(48)).into_bytes())
        .chain([b"http/1.1".to_vec()])
        .collect()
}

/// The proxy's handshakes with clients: (completed full, resumed, failed).
fn handshakes(proxy: &TlsProxy) -> (u64, u64, u64) {
    let st = proxy.stats.snapshot();
    (
        st.tls_handshakes,
        st.tls_handshakes_resumed,
        st.tls_handshakes_failed,
    )
}

/// `GET /0` and `GET /1`, each on a new session of `cfg` (whose session
/// cache keeps the first one's ticket), each answered with its target,
/// each closed with `close_notify`: the second session is resumed.
#[track_caller]
fn two_sessions_the_second_resumed(addr: std::net::SocketAddr, cfg: &Arc<rustls::ClientConfig>) {
    for i in 0..2 {
        let mut s = tls_connect(addr, cfg);
        s.write_all(format!("GET /{i} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        let (status, _, body) = read_length_response(&mut s);
        assert_eq!((status, body), (200, format!("/{i}").into_bytes()));
        s.conn.send_close_notify();
        let _ = s.flush();
        if i == 1 {
            assert_eq!(
                s.conn.handshake_kind(),
                Some(rustls::HandshakeKind::Resumed)
            );
        }
    }
}

/// A CA and a client certificate it signed (CN `client one`, DNS
/// `client.test` or the names given), with the CA's PEM file written
/// into `dir`.
struct ClientPki {
    ca_file: PathBuf,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

fn client_pki(dir: &std::path::Path) -> ClientPki {
    client_pki_for(dir, &["client.test".to_string()])
}

fn client_pki_for(dir: &std::path::Path, names: &[String]) -> ClientPki {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "client CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let ca_file = dir.join("client-ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(names.to_vec()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "client one");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    ClientPki {
        ca_file,
        chain: vec![cert.der().clone()],
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    }
}

impl ClientPki {
    /// The `X-Forwarded-Client-Cert` value the proxy makes for this
    /// client certificate.
    fn forwarded(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, self.chain[0].as_ref());
        let hash: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("Hash={hash};Subject=\"CN=client one\";DNS=client.test")
    }
}

//! Whole handshakes in memory against `ServerTls::build`: SNI, ALPN,
//! versions, client certificates.

use super::*;
use crate::config::{ClientAuth, TlsVersion, UnknownSni};
use crate::tls::server::{ALPN_HTTP11, ServerTls};
use crate::tls::sni::UNRECOGNIZED_NAME_ALERT;
use crate::tls::tickets::TicketSecret;
use rustls::AlertDescription;

fn build(config: &Config) -> ServerTls {
    let secret = TicketSecret::generate().unwrap();
    ServerTls::build(config, &secret, &[ALPN_HTTP11]).unwrap()
}

#[test]
fn sni_picks_exact_wildcard_or_the_default_certificate() {
    let pki = Pki::new("sni");
    let certs = [pki.leaf(&["a.example.com"]), pki.leaf(&["*.example.net"])];
    let server = build(&tls_config(&certs, |_| {}));
    let client = pki.client(|_| {});
    let (c, _, out) = connect(&client, &server.config, "a.example.com");
    assert!(out.ok(), "{out:?}");
    assert_eq!(served_leaf(&c), leaf_of(&certs[0].0));
    let (c, _, out) = connect(&client, &server.config, "X.Example.NET");
    assert!(out.ok(), "{out:?}");
    assert_eq!(served_leaf(&c), leaf_of(&certs[1].0));
    // Unknown name: the first certificate (seen by a client that accepts
    // any, since it covers no such name).
    let lax = crate::tls::client::UpstreamTls {
        ca: None,
        verify: false,
        client_cert: None,
    };
    let lax = lax.client_config().unwrap();
    let (c, _, out) = connect(&lax, &server.config, "other.test");
    assert!(out.ok(), "{out:?}");
    assert_eq!(served_leaf(&c), leaf_of(&certs[0].0));
}

#[test]
fn reject_without_the_acceptor_step_is_access_denied() {
    // What rustls does when the resolver returns no certificate.
    let pki = Pki::new("reject-resolver");
    let certs = [pki.leaf(&["a.example.com"])];
    let server = build(&tls_config(&certs, |c| {
        c.tls_unknown_sni = UnknownSni::Reject
    }));
    let (_, _, out) = connect(&pki.client(|_| {}), &server.config, "other.test");
    assert_eq!(
        out.client.unwrap_err(),
        rustls::Error::AlertReceived(AlertDescription::AccessDenied)
    );
}

/// A client's ClientHello to `name`, read by rustls' `Acceptor` (the step
/// the transport takes before choosing a configuration).
fn hello(pki: &Pki, name: &str) -> (ClientConnection, rustls::server::Accepted) {
    let name = ServerName::try_from(name.to_string()).unwrap();
    let mut c = ClientConnection::new(pki.client(|_| {}), name).unwrap();
    let mut bytes = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut bytes).unwrap();
    }
    let mut acceptor = rustls::server::Acceptor::default();
    acceptor.read_tls(&mut &bytes[..]).unwrap();
    (c, acceptor.accept().unwrap().unwrap())
}

#[test]
fn reject_through_the_acceptor_sends_unrecognized_name() {
    let pki = Pki::new("reject-acceptor");
    let certs = [pki.leaf(&["a.example.com"])];
    let server = build(&tls_config(&certs, |c| {
        c.tls_unknown_sni = UnknownSni::Reject
    }));
    let (mut c, accepted) = hello(&pki, "other.test");
    let sni = accepted.client_hello().server_name().map(str::to_string);
    assert_eq!(sni.as_deref(), Some("other.test"));
    assert!(!server.store.covers(sni.as_deref()));
    c.read_tls(&mut &UNRECOGNIZED_NAME_ALERT[..]).unwrap();
    assert_eq!(
        c.process_new_packets().unwrap_err(),
        rustls::Error::AlertReceived(AlertDescription::UnrecognisedName)
    );
    // A covered name goes on to a whole handshake from the same hello.
    let (mut c, accepted) = hello(&pki, "a.example.com");
    assert!(server.store.covers(accepted.client_hello().server_name()));
    let mut s = accepted.into_connection(server.config.clone()).unwrap();
    assert!(pump(&mut c, &mut s).ok());
}

#[test]
fn alpn_http11_is_chosen_and_unknown_protocols_get_no_application_protocol() {
    let pki = Pki::new("alpn");
    let server = build(&tls_config(&[pki.leaf(&["a.example.com"])], |_| {}));
    let both = pki.client(|c| c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    let (c, s, out) = connect(&both, &server.config, "a.example.com");
    assert!(out.ok(), "{out:?}");
    assert_eq!(c.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(s.alpn_protocol(), Some(&b"http/1.1"[..]));
    let none = pki.client(|_| {});
    let (_, s, out) = connect(&none, &server.config, "a.example.com");
    assert!(out.ok(), "{out:?}");
    assert_eq!(
        s.alpn_protocol(),
        None,
        "a client without ALPN speaks HTTP/1.1"
    );
    let h2_only = pki.client(|c| c.alpn_protocols = vec![b"h2".to_vec()]);
    let (_, _, out) = connect(&h2_only, &server.config, "a.example.com");
    assert_eq!(
        out.client.unwrap_err(),
        rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol)
    );
}

/// A client configuration that speaks only `version`.
fn only(pki: &Pki, version: &'static rustls::SupportedProtocolVersion) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    Arc::new(
        ClientConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[test]
fn tls12_and_tls13_clients_and_the_minimum_version() {
    let pki = Pki::new("versions");
    let certs = [pki.leaf(&["a.example.com"])];
    let v12 = only(&pki, &rustls::version::TLS12);
    let v13 = only(&pki, &rustls::version::TLS13);
    let both = build(&tls_config(&certs, |_| {}));
    let (c, _, out) = connect(&v12, &both.config, "a.example.com");
    assert!(out.ok(), "{out:?}");
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    let (c, _, out) = connect(&v13, &both.config, "a.example.com");
    assert!(out.ok(), "{out:?}");
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    let min13 = build(&tls_config(&certs, |c| {
        c.tls_min_version = TlsVersion::V1_3
    }));
    let (_, _, out) = connect(&v12, &min13.config, "a.example.com");
    assert_eq!(
        out.client.unwrap_err(),
        rustls::Error::AlertReceived(AlertDescription::ProtocolVersion)
    );
    assert!(connect(&v13, &min13.config, "a.example.com").2.ok());
}

#[test]
fn client_certificates_required_and_optional() {
    let pki = Pki::new("mtls");
    let clients = Pki::new("mtls-clients");
    let strangers = Pki::new("mtls-strangers");
    let certs = [pki.leaf(&["a.example.com"])];
    let with_cert = |from: &Pki| {
        let (cert, key) = from.leaf(&["client.example"]);
        let chain = crate::tls::certs::read_chain(&cert).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&key).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        Arc::new(
            ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .unwrap(),
        )
    };
    use rustls::pki_types::pem::PemObject;
    let good = with_cert(&clients);
    let stranger = with_cert(&strangers);
    let anonymous = pki.client(|_| {});
    for auth in [ClientAuth::Required, ClientAuth::Optional] {
        let server = build(&tls_config(&certs, |c| {
            c.tls_client_auth = auth;
            c.tls_client_ca = Some(clients.ca_file());
        }));
        let (_, s, out) = connect(&good, &server.config, "a.example.com");
        assert!(out.ok(), "{auth:?}: {out:?}");
        assert!(s.peer_certificates().is_some());
        let (_, _, out) = connect(&stranger, &server.config, "a.example.com");
        assert!(out.server.is_err(), "{auth:?}: a certificate of another CA");
        let (_, s, out) = connect(&anonymous, &server.config, "a.example.com");
        match auth {
            ClientAuth::Required => assert!(out.server.is_err(), "no certificate"),
            _ => {
                assert!(out.ok(), "optional: {out:?}");
                assert!(s.peer_certificates().is_none());
            }
        }
    }
}

#[test]
fn client_auth_without_a_ca_and_no_certificate_are_refused() {
    let pki = Pki::new("refusals");
    let secret = TicketSecret::generate().unwrap();
    let config = tls_config(&[pki.leaf(&["a.example.com"])], |c| {
        c.tls_client_auth = ClientAuth::Required;
    });
    let e = ServerTls::build(&config, &secret, &[ALPN_HTTP11]).unwrap_err();
    assert!(e.reason.contains("tls_client_ca"), "{e}");
    let e = ServerTls::build(&tls_config(&[], |_| {}), &secret, &[ALPN_HTTP11]).unwrap_err();
    assert!(e.reason.contains("needs a certificate"), "{e}");
}

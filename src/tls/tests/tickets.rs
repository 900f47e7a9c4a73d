//! Shared session tickets: one secret, any configuration built with it;
//! period rotation; the secret's memfd hand-off.

use std::sync::atomic::{AtomicU64, Ordering};

use rustls::HandshakeKind;
use rustls::server::ProducesTickets;

use super::*;
use crate::tls::secret_fd::{read_secret, secret_memfd};
use crate::tls::server::{ALPN_HTTP11, ServerTls};
use crate::tls::tickets::{SharedTicketer, TicketSecret};

#[test]
fn a_ticket_resumes_on_every_configuration_with_the_same_secret_only() {
    let pki = Pki::new("tickets");
    let config = tls_config(&[pki.leaf(&["a.example.com"])], |_| {});
    let s = TicketSecret::generate().unwrap();
    let other = TicketSecret::generate().unwrap();
    let build = |secret: &TicketSecret| ServerTls::build(&config, secret, &[ALPN_HTTP11]).unwrap();
    // Two "workers" with S, one instance with S'.
    let (w1, w2, stranger) = (build(&s), build(&s), build(&other));
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut roots = RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        let client = Arc::new(
            ClientConfig::builder_with_provider(crate::tls::provider())
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let (_, s1, out) = connect(&client, &w1.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(s1.handshake_kind(), Some(HandshakeKind::Full));
        let (_, s2, out) = connect(&client, &w2.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(
            s2.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{version:?}: a ticket of worker 1 resumes on worker 2"
        );
        let (_, s3, out) = connect(&client, &stranger.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(
            s3.handshake_kind(),
            Some(HandshakeKind::Full),
            "{version:?}: another secret cannot open it"
        );
    }
}

#[test]
fn a_ticket_is_good_in_its_period_and_the_next_only() {
    let now = Arc::new(AtomicU64::new(1000));
    let clock = now.clone();
    let t = SharedTicketer::with_clock(
        TicketSecret::from_bytes([7; 32]),
        Arc::new(move || clock.load(Ordering::Relaxed)),
    );
    let ticket = t.encrypt(b"session state").unwrap();
    assert_eq!(t.decrypt(&ticket).as_deref(), Some(&b"session state"[..]));
    now.store(1001, Ordering::Relaxed);
    assert_eq!(
        t.decrypt(&ticket).as_deref(),
        Some(&b"session state"[..]),
        "the previous period's key still opens it"
    );
    now.store(1002, Ordering::Relaxed);
    assert_eq!(t.decrypt(&ticket), None, "two periods later it is refused");
    // Tampered or cut tickets are refused, never a panic.
    now.store(1000, Ordering::Relaxed);
    let mut bad = ticket.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(t.decrypt(&bad), None);
    for n in 0..ticket.len() {
        assert_eq!(t.decrypt(&ticket[..n]), None, "cut at {n}");
    }
    // Another process with the same secret and clock opens it.
    let same = SharedTicketer::with_clock(TicketSecret::from_bytes([7; 32]), Arc::new(|| 1000));
    assert!(same.decrypt(&ticket).is_some());
    assert_eq!(t.lifetime(), 12 * 3600);
}

#[test]
fn the_secret_passes_through_a_sealed_memfd() {
    let secret = TicketSecret::generate().unwrap();
    let fd = secret_memfd(&secret).unwrap();
    assert_eq!(read_secret(&fd).unwrap(), secret);
    use std::os::fd::AsRawFd;
    // SAFETY: writes from a live buffer to our own descriptor.
    let n = unsafe { libc::pwrite(fd.as_raw_fd(), [0_u8; 4].as_ptr().cast(), 4, 0) };
    assert_eq!(n, -1, "sealed against writes");
    assert_eq!(format!("{secret:?}"), "TicketSecret(..)");
}

/// A client of `pki`'s server speaking only `version`, with a certificate
/// of `cert_from`'s CA if given; its tickets stay in its configuration.
fn client_of(
    pki: &Pki,
    version: &'static rustls::SupportedProtocolVersion,
    cert_from: Option<&Pki>,
) -> Arc<ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    let builder = ClientConfig::builder_with_provider(crate::tls::provider())
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert_from {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let (cert, key) = ca.leaf(&["client.example"]);
            let chain = crate::tls::certs::read_chain(&cert).unwrap();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    })
}

#[test]
fn a_ticket_resumes_only_under_the_client_certificate_settings_it_was_issued_under() {
    // rustls resumes a session with the client certificate it had, without
    // checking it again: a ticket from before a reload that turned
    // tls_client_auth on, or replaced tls_client_ca, let a client past
    // them (found by a break-it pass).
    let pki = Pki::new("ticket-context");
    let clients = Pki::new("ticket-context-clients");
    let others = Pki::new("ticket-context-others");
    let certs = [pki.leaf(&["a.example.com"])];
    let s = TicketSecret::generate().unwrap();
    let build = |tweak: &dyn Fn(&mut crate::config::Config)| {
        ServerTls::build(&tls_config(&certs, tweak), &s, &[ALPN_HTTP11]).unwrap()
    };
    let required = |ca: &Pki| {
        let file = ca.ca_file();
        build(&move |c: &mut crate::config::Config| {
            c.tls_client_auth = crate::config::ClientAuth::Required;
            c.tls_client_ca = Some(file.clone());
        })
    };
    let off = build(&|_| {});
    let (by_clients, by_clients_again, by_others) =
        (required(&clients), required(&clients), required(&others));
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        // Turned on: a ticket of the "off" configuration, no certificate.
        let anonymous = client_of(&pki, version, None);
        let (_, s1, out) = connect(&anonymous, &off.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(s1.handshake_kind(), Some(HandshakeKind::Full));
        let (_, s2, out) = connect(&anonymous, &by_clients.config, "a.example.com");
        assert_ne!(
            s2.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{version:?}"
        );
        assert!(out.server.is_err(), "{version:?}: no certificate, refused");
        // Same settings: resumed; the CA replaced: not.
        let holder = client_of(&pki, version, Some(&clients));
        let (_, s1, out) = connect(&holder, &by_clients.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(s1.handshake_kind(), Some(HandshakeKind::Full));
        let (_, s2, out) = connect(&holder, &by_clients_again.config, "a.example.com");
        assert!(out.ok(), "{out:?}");
        assert_eq!(
            s2.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{version:?}: same settings"
        );
        let (_, s3, out) = connect(&holder, &by_others.config, "a.example.com");
        assert_ne!(
            s3.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{version:?}"
        );
        assert!(
            out.server.is_err(),
            "{version:?}: a certificate of a CA no longer trusted"
        );
    }
}

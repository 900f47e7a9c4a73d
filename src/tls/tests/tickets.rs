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

//! Real clients' flights through the bound: openssl hellos, a 100 KB body, a 10 KB chain, HRR.

use std::sync::Arc;

use rustls::ClientConnection;

use super::feed_helpers::{REQUEST, hello, push_all, reply, setup};
use crate::config::{ClientAuth, UnknownSni};
use crate::conn::transport::feed::{End, ServerFeed};
use crate::tls::handshake_gate::HANDSHAKE_MAX;
use crate::tls::tests::{Pki, tls_config};

#[test]
fn openssl_client_hellos_are_answered_and_unknown_names_refused_under_reject() {
    // What `openssl s_client` sent (the fuzz target's seeds: a flags byte
    // and a seed byte, then the hello), and whether a listener answers it
    // with its ServerHello; else: the alert `no_application_protocol` of
    // a listener with `http2 = false` (that client offered h2 and spdy/3
    // only: a failed handshake), and `unrecognized_name` under reject.
    // With HTTP/2 on (the default) every hello here but the rejected one
    // is served.
    let seeds: [(&[u8], bool, bool); 4] = [
        (
            include_bytes!("../../fuzz/corpus/tls_server/hello-tls13-sni-whole"),
            true,
            true,
        ),
        (
            include_bytes!("../../fuzz/corpus/tls_server/hello-tls12-sni-whole"),
            true,
            true,
        ),
        (
            include_bytes!("../../fuzz/corpus/tls_server/hello-nosni-whole"),
            true,
            false,
        ),
        (
            include_bytes!("../../fuzz/corpus/tls_server/hello-unknown-sni-whole"),
            false,
            false,
        ),
    ];
    let s = setup("feed-openssl", |c| c.http2 = false);
    let h2 = setup("feed-openssl-h2", |_| {});
    let r = setup("feed-openssl-r", |c| c.tls_unknown_sni = UnknownSni::Reject);
    for (seed, served, served_under_reject) in seeds {
        let wire = &seed[2..];
        for chunks in [vec![wire], wire.chunks(1).collect()] {
            let mut sess = h2.feed.session().unwrap();
            let answer = push_all(&mut sess, &chunks);
            assert_eq!(answer.first(), Some(&22), "a ServerHello");
            assert_eq!(sess.end(), End::Open);
            let mut sess = s.feed.session().unwrap();
            let answer = push_all(&mut sess, &chunks);
            if served {
                assert_eq!(answer.first(), Some(&22), "a ServerHello");
                assert_eq!(sess.end(), End::Open);
            } else {
                // After its ServerHello, rustls' alert goes encrypted.
                assert_eq!(answer.first(), Some(&22));
                assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
                assert_eq!(sess.handshakes(), (0, 1));
            }
            let mut sess = r.feed.session().unwrap();
            let answer = push_all(&mut sess, &chunks);
            if served_under_reject {
                assert_eq!(answer.first(), Some(&22));
                assert_eq!(sess.end(), End::Open);
            } else {
                assert_eq!(answer, [21, 3, 3, 0, 2, 2, 112], "unrecognized_name");
            }
        }
    }
}

/// The client's bytes after the server's `answer`: its Finished with
/// `request` right behind it (encrypted as the client's first records).
fn finished_and(c: &mut ClientConnection, answer: &[u8], request: &[u8]) -> Vec<u8> {
    let mut rd = answer;
    while !rd.is_empty() {
        c.read_tls(&mut rd).unwrap();
        c.process_new_packets().unwrap();
    }
    assert!(!c.is_handshaking());
    let mut out = Vec::new();
    let mut rest = request;
    while !rest.is_empty() {
        let n = std::io::Write::write(&mut c.writer(), rest).unwrap();
        rest = &rest[n..];
        while c.wants_write() {
            c.write_tls(&mut out).unwrap();
        }
    }
    out
}

#[test]
fn a_request_and_a_100_kb_body_right_behind_the_finished_pass() {
    let s = setup("feed-post", |_| {});
    let mut request =
        b"POST /up HTTP/1.1\r\nHost: a.example.com\r\nContent-Length: 102400\r\n\r\n".to_vec();
    request.extend((0..102_400u32).map(|i| (i % 251) as u8));
    let (mut c, first) = hello(&s.client, "a.example.com");
    let mut sess = s.feed.session().unwrap();
    let answer = sess.push(&first);
    let flight = finished_and(&mut c, &answer, &request);
    // The Finished and the first 32 KiB of the request in one write:
    // the server's first read takes the Finished and a record's worth of
    // application data behind it.
    for chunk in flight.chunks(32 * 1024) {
        sess.push(chunk);
    }
    assert_eq!(sess.end(), End::Open);
    assert_eq!(sess.handshakes(), (1, 0));
    assert_eq!(sess.plaintext(), request);
}

#[test]
fn a_client_certificate_chain_over_8_kib_completes_the_handshake() {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let pki = Pki::new("feed-mtls");
    let certs = [pki.leaf(&["a.example.com"])];
    let feed = ServerFeed::new(&tls_config(&certs, |c| {
        c.tls_client_auth = ClientAuth::Required;
        c.tls_client_ca = Some(pki.ca_file());
    }))
    .unwrap();
    // A client leaf naming 400 hosts: about 10 KB of chain.
    let names: Vec<String> = (0..400)
        .map(|i| format!("client-{i:03}.example.com"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (chain, key) = pki.leaf(&names);
    let chain = crate::tls::certs::read_chain(&chain).unwrap();
    let chain_len: usize = chain.iter().map(|c| c.len()).sum();
    assert!(chain_len > HANDSHAKE_MAX, "{chain_len}");
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .unwrap();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let (mut c, first) = hello(&Arc::new(client), "a.example.com");
        let mut sess = feed.session().unwrap();
        let mut answer = sess.push(&first);
        // TLS 1.3: the client's flight completes it; TLS 1.2: the
        // server's CCS and Finished after the client's flight do.
        let mut sent = 0;
        while c.is_handshaking() {
            let mut rd = &answer[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
                c.process_new_packets().unwrap();
            }
            let mut flight = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut flight).unwrap();
            }
            assert!(!flight.is_empty() || !c.is_handshaking(), "{version:?}");
            sent += flight.len();
            answer = sess.push(&flight);
        }
        assert!(sent > HANDSHAKE_MAX, "{version:?}: {sent}");
        let flight = reply(&mut c, &answer, REQUEST);
        sess.push(&flight);
        assert_eq!(sess.end(), End::Open, "{version:?}");
        assert_eq!(sess.handshakes(), (1, 0), "{version:?}");
        assert_eq!(sess.plaintext(), REQUEST, "{version:?}");
    }
}

/// A key exchange group the server does not have (P-521 in ring's
/// provider): a client that sends its key share first gets a
/// HelloRetryRequest. It never completes.
#[derive(Debug)]
struct Unserved;

impl rustls::crypto::SupportedKxGroup for Unserved {
    fn start(&self) -> Result<Box<dyn rustls::crypto::ActiveKeyExchange>, rustls::Error> {
        Ok(Box::new(Unserved))
    }

    fn name(&self) -> rustls::NamedGroup {
        rustls::NamedGroup::secp521r1
    }
}

impl rustls::crypto::ActiveKeyExchange for Unserved {
    fn complete(
        self: Box<Self>,
        _peer: &[u8],
    ) -> Result<rustls::crypto::SharedSecret, rustls::Error> {
        Err(rustls::Error::General("never used".into()))
    }

    fn pub_key(&self) -> &[u8] {
        &[4; 133]
    }

    fn group(&self) -> rustls::NamedGroup {
        rustls::NamedGroup::secp521r1
    }
}

#[test]
fn a_second_client_hello_after_a_hello_retry_request_passes() {
    // The client's key share is for a group the server lacks; it also
    // lists X25519: a HelloRetryRequest, then a ChangeCipherSpec (RFC
    // 8446 D.4) and a second ClientHello in plaintext, cut anywhere.
    let s = setup("feed-hrr", |_| {});
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = vec![&Unserved, rustls::crypto::ring::kx_group::X25519];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(s._pki.ca_der.clone()).unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    // No memory of the group the server chose (its key share would come
    // first next time).
    client.resumption = rustls::client::Resumption::disabled();
    let client = Arc::new(client);
    // Whole, after the first byte, after the ChangeCipherSpec, inside the
    // hello, byte by byte.
    for cut in [0, 1, 6, 100, usize::MAX] {
        let (mut c, first) = hello(&client, "a.example.com");
        let mut sess = s.feed.session().unwrap();
        let retry = sess.push(&first);
        let mut rd = &retry[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
        }
        assert!(c.is_handshaking(), "a HelloRetryRequest");
        let mut second = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut second).unwrap();
        }
        assert_eq!(second.first(), Some(&20), "a ChangeCipherSpec first");
        let chunks: Vec<&[u8]> = match cut {
            0 => vec![&second[..]],
            usize::MAX => second.chunks(1).collect(),
            i => vec![&second[..i], &second[i..]],
        };
        let answer = push_all(&mut sess, &chunks);
        sess.push(&reply(&mut c, &answer, REQUEST));
        assert_eq!(sess.end(), End::Open, "cut {cut}");
        assert_eq!(sess.handshakes(), (1, 0));
        assert_eq!(sess.plaintext(), REQUEST);
    }
}

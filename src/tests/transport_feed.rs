//! The server side of the TLS transport fed over loopback sockets
//! (`conn::transport::feed`), the same bytes whole, split at every byte
//! position and byte by byte: the handshake, the SNI look, the plaintext
//! sniff and a request after the handshake must come out the same
//! (STYLE §4's rule for every incremental reader, applied to the records
//! rustls reads). And the handshake's bound (`tls::handshake_gate`): what
//! a refused or half-sent handshake makes a session hold, counted by the
//! test allocator (`tests/heap.rs`), while real clients still get through.

use std::sync::Arc;

use rustls::ClientConnection;
use rustls::pki_types::ServerName;

use super::heap;
use crate::config::{ClientAuth, Config, UnknownSni};
use crate::conn::transport::feed::{End, FeedSession, ServerFeed};
use crate::tls::handshake_gate::{DECODE_ERROR_ALERT, HANDSHAKE_MAX};
use crate::tls::tests::{Pki, handshake_records, tls_config};

/// The ways one input is cut into chunks: whole, at every byte position
/// in two, and one byte at a time.
fn splits(bytes: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut all = vec![vec![bytes]];
    for i in 1..bytes.len() {
        all.push(vec![&bytes[..i], &bytes[i..]]);
    }
    all.push(bytes.chunks(1).collect());
    all
}

/// Pushes `chunks` one after the other; what the server wrote back.
fn push_all(s: &mut FeedSession, chunks: &[&[u8]]) -> Vec<u8> {
    let mut answer = Vec::new();
    for c in chunks {
        answer.extend(s.push(c));
    }
    answer
}

struct Setup {
    _pki: Pki,
    feed: ServerFeed,
    client: Arc<rustls::ClientConfig>,
}

fn setup(tag: &str, tweak: impl FnOnce(&mut Config)) -> Setup {
    let pki = Pki::new(tag);
    let certs = [pki.leaf(&["a.example.com"])];
    let feed = ServerFeed::new(&tls_config(&certs, tweak)).unwrap();
    let client = pki.client(|c| c.alpn_protocols = vec![b"http/1.1".to_vec()]);
    Setup {
        _pki: pki,
        feed,
        client,
    }
}

/// [`setup`] for a listener with `tls_unknown_sni = "reject"` or not.
fn setup_sni(tag: &str, reject: bool) -> Setup {
    setup(tag, |c| {
        if reject {
            c.tls_unknown_sni = UnknownSni::Reject;
        }
    })
}

/// A client for `name` and its first flight (the ClientHello).
fn hello(cfg: &Arc<rustls::ClientConfig>, name: &str) -> (ClientConnection, Vec<u8>) {
    let name = ServerName::try_from(name.to_string()).unwrap();
    let mut c = ClientConnection::new(cfg.clone(), name).unwrap();
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).unwrap();
    }
    (c, out)
}

/// Hands the server's `answer` to the client; the client's next flight
/// (its Finished) with `request` behind it once the handshake is done.
fn reply(c: &mut ClientConnection, answer: &[u8], request: &[u8]) -> Vec<u8> {
    let mut rd = answer;
    while !rd.is_empty() {
        c.read_tls(&mut rd).unwrap();
        c.process_new_packets().unwrap();
    }
    assert!(
        !c.is_handshaking(),
        "the server's flight completes the client"
    );
    std::io::Write::write_all(&mut c.writer(), request).unwrap();
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).unwrap();
    }
    out
}

const REQUEST: &[u8] = b"GET /split HTTP/1.1\r\nHost: a.example.com\r\n\r\n";

#[test]
fn a_client_hello_split_anywhere_gets_the_same_server_flight() {
    let s = setup("feed-hello", |_| {});
    let (_, first) = hello(&s.client, "a.example.com");
    for chunks in splits(&first) {
        let cut: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        // A hello of the same shape each time (its random parts differ).
        let (mut c, hello) = hello(&s.client, "a.example.com");
        assert_eq!(hello.len(), first.len());
        let mut at = 0;
        let chunks: Vec<&[u8]> = cut
            .iter()
            .map(|n| {
                at += n;
                &hello[at - n..at]
            })
            .collect();
        let mut sess = s.feed.session().unwrap();
        let answer = push_all(&mut sess, &chunks);
        assert_eq!(sess.end(), End::Open, "cut {cut:?}");
        assert!(sess.is_handshaking(), "cut {cut:?}");
        // A handshake record (22) with the server's flight, which
        // completes the client's side of the handshake.
        assert_eq!(answer.first(), Some(&22), "cut {cut:?}");
        let finished = reply(&mut c, &answer, REQUEST);
        sess.push(&finished);
        assert_eq!(sess.end(), End::Open, "cut {cut:?}");
        assert!(!sess.is_handshaking(), "cut {cut:?}");
        assert_eq!(sess.plaintext(), REQUEST, "cut {cut:?}");
        assert_eq!(sess.handshakes(), (1, 0));
    }
}

#[test]
fn the_client_finished_and_a_request_split_anywhere_give_the_same_plaintext() {
    let s = setup("feed-finished", |_| {});
    // The client's second flight is the same length each time; cut it
    // at every byte (each cut on a new session).
    let probe = {
        let (mut c, hello) = hello(&s.client, "a.example.com");
        let mut sess = s.feed.session().unwrap();
        let answer = sess.push(&hello);
        reply(&mut c, &answer, REQUEST)
    };
    for cut in (1..probe.len()).chain([0, usize::MAX]) {
        let (mut c, hello) = hello(&s.client, "a.example.com");
        let mut sess = s.feed.session().unwrap();
        let answer = sess.push(&hello);
        let flight = reply(&mut c, &answer, REQUEST);
        assert_eq!(flight.len(), probe.len());
        let chunks: Vec<&[u8]> = match cut {
            0 => vec![&flight[..]],
            usize::MAX => flight.chunks(1).collect(),
            i => vec![&flight[..i], &flight[i..]],
        };
        push_all(&mut sess, &chunks);
        assert_eq!(sess.end(), End::Open, "cut {cut}");
        assert_eq!(sess.plaintext(), REQUEST, "cut {cut}");
        // The client's close_notify then FIN: the end of the stream.
        c.send_close_notify();
        let mut bye = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut bye).unwrap();
        }
        sess.push(&bye);
        assert_eq!(sess.end(), End::Eof, "cut {cut}");
    }
}

#[test]
fn an_unknown_name_under_reject_gets_unrecognized_name_however_the_hello_is_cut() {
    let s = setup("feed-reject", |c| c.tls_unknown_sni = UnknownSni::Reject);
    let (_, first) = hello(&s.client, "other.test");
    for chunks in splits(&first) {
        let mut sess = s.feed.session().unwrap();
        let answer = push_all(&mut sess, &chunks);
        // The fatal alert unrecognized_name (112), nothing else.
        assert_eq!(answer, [21, 3, 3, 0, 2, 2, 112], "{:?}", chunks.len());
        assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
        assert_eq!(sess.handshakes(), (0, 1));
    }
    // A known name is served, cut anywhere too.
    let (_, known) = hello(&s.client, "a.example.com");
    for chunks in splits(&known) {
        let mut sess = s.feed.session().unwrap();
        let answer = push_all(&mut sess, &chunks);
        assert_eq!(answer.first(), Some(&22));
        assert_eq!(sess.end(), End::Open);
    }
}

#[test]
fn a_name_that_is_not_a_dns_name_gets_illegal_parameter_under_either_setting() {
    // RFC 6066 §3: the name is a hostname; `a..example.com` is none. Under
    // reject it got unrecognized_name, docs/tls.md says illegal_parameter
    // (found by a break-it pass).
    for (tag, reject) in [("feed-badname-reject", true), ("feed-badname", false)] {
        let s = setup(tag, |c| {
            if reject {
                c.tls_unknown_sni = UnknownSni::Reject;
            }
        });
        let (_, mut first) = hello(&s.client, "aa.example.com");
        let at = first
            .windows(14)
            .position(|w| w == b"aa.example.com")
            .unwrap();
        first[at..at + 14].copy_from_slice(b"a..example.com");
        let mut sess = s.feed.session().unwrap();
        let answer = sess.push(&first);
        assert_eq!(answer, [21, 3, 3, 0, 2, 2, 47], "reject {reject}");
        assert_ne!(sess.end(), End::Open);
    }
}

#[test]
fn plain_http_turns_the_transport_plain_and_other_bytes_close_it_however_cut() {
    let s = setup("feed-plain", |_| {});
    for chunks in splits(REQUEST) {
        let mut sess = s.feed.session().unwrap();
        let answer = push_all(&mut sess, &chunks);
        assert!(answer.is_empty());
        assert!(sess.http_on_tls());
        assert_eq!(sess.plaintext(), REQUEST);
        assert_eq!(sess.end(), End::Open);
    }
    for junk in [&b"\x00\x01\x02 junk"[..], b"\x80\x2e\x01\x03\x01"] {
        for chunks in splits(junk) {
            let mut sess = s.feed.session().unwrap();
            assert!(push_all(&mut sess, &chunks).is_empty());
            assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
        }
    }
    // A FIN in the middle of a hello: the end, nothing answered.
    let (_, first) = hello(&s.client, "a.example.com");
    let mut sess = s.feed.session().unwrap();
    assert!(sess.push(&first[..10]).is_empty());
    assert!(sess.close_write().is_empty());
    assert_ne!(sess.end(), End::Open);
}

/// Puts a session's record storages on this thread's free list (as a
/// loop's are after its first connections), so that the counts below
/// are what a session holds, not the list's first fill; returns the heap
/// peak of a session made and dropped with nothing read: the fixed state
/// (rustls' session and the transport's, the harness's buffers).
fn warm(s: &Setup) -> usize {
    let (mut c, first) = hello(&s.client, "a.example.com");
    let mut sess = s.feed.session().unwrap();
    let answer = sess.push(&first);
    sess.push(&reply(&mut c, &answer, REQUEST));
    assert_eq!(sess.plaintext(), REQUEST);
    drop(sess);
    heap::measure(|| drop(s.feed.session().unwrap())).1
}

/// Pushes `chunks` on a new session of `feed`; the session, what the
/// server wrote back, and the heap peak the session reached.
fn measured(feed: &ServerFeed, chunks: &[&[u8]]) -> (FeedSession, Vec<u8>, usize) {
    let ((sess, answer), peak, _) = heap::measure(|| {
        let mut sess = feed.session().unwrap();
        let answer = push_all(&mut sess, chunks);
        (sess, answer)
    });
    (sess, answer, peak)
}

/// A handshake refused by the bound: the plaintext `decode_error` alert,
/// a failed handshake counted, the session's heap peak within the fixed
/// state and the bound.
#[track_caller]
fn assert_refused(feed: &ServerFeed, fixed: usize, chunks: &[&[u8]]) -> usize {
    let (sess, answer, peak) = measured(feed, chunks);
    assert_eq!(answer, DECODE_ERROR_ALERT);
    assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
    assert_eq!(sess.handshakes(), (0, 1));
    assert!(
        peak <= fixed + HANDSHAKE_MAX,
        "a session refused at the bound reached {peak} bytes of heap (fixed state {fixed})"
    );
    peak
}

/// A ClientHello record declaring 16 KiB with a hello message declaring
/// 65,000 bytes (the `tls_server` fuzz target's seed), `n` bytes of it.
fn huge_hello(n: usize) -> Vec<u8> {
    let mut wire = vec![22, 3, 1, 0x40, 0, 1, 0, 0xfd, 0xe8];
    wire.resize(n, 0);
    wire
}

#[test]
fn a_half_sent_hello_declaring_65000_bytes_is_refused_at_its_header() {
    for reject in [false, true] {
        let s = setup_sni(&format!("feed-huge-{reject}"), reject);
        let fixed = warm(&s);
        // Its record's header is over the bound: refused whatever came.
        let wire = huge_hello(2 * (16384 + 5));
        let peak = assert_refused(&s.feed, fixed, &[&wire]);
        eprintln!("reject {reject}: fixed state {fixed} bytes, refused hello's peak {peak}");
        assert_refused(&s.feed, fixed, &[&wire[..9]]);
        // In records of 1 KiB: the message's header says it.
        let small = handshake_records(&wire[5..8000], 1024);
        assert_refused(&s.feed, fixed, &[&small]);
        assert_refused(&s.feed, fixed, &small.chunks(1).collect::<Vec<_>>());
    }
}

#[test]
fn a_record_of_4096_empty_handshake_messages_is_refused() {
    for reject in [false, true] {
        let s = setup_sni(&format!("feed-empty-{reject}"), reject);
        let fixed = warm(&s);
        let mut wire = vec![22, 3, 1, 0x40, 0];
        wire.resize(16384 + 5, 0);
        let peak = assert_refused(&s.feed, fixed, &[&wire]);
        eprintln!("reject {reject}: fixed state {fixed} bytes, empty messages' peak {peak}");
        // A record within the bound of 2,044 of them: refused at the
        // seventeenth message's header.
        let mut wire = vec![22, 3, 1, 0x1f, 0xf0];
        wire.resize(0x1ff0 + 5, 0);
        assert_refused(&s.feed, fixed, &[&wire]);
    }
}

#[test]
fn a_half_sent_hello_holds_its_bytes_once() {
    let s = setup("feed-half", |_| {});
    let fixed = warm(&s);
    // 8,000 bytes of a hello that would just fit the bound.
    let mut wire = vec![22, 3, 1, 0x1f, 0xfb, 1, 0, 0x1f, 0xf7];
    wire.resize(8000, 0);
    for chunks in [vec![&wire[..]], wire.chunks(1000).collect()] {
        let (sess, peak, held) = heap::measure(|| {
            let mut sess = s.feed.session().unwrap();
            assert!(push_all(&mut sess, &chunks).is_empty());
            sess
        });
        assert_eq!(sess.end(), End::Open);
        assert!(sess.is_handshaking());
        eprintln!(
            "a half-sent hello of 8,000 bytes in {} pieces: peak {peak}, held {held} (fixed {fixed})",
            chunks.len()
        );
        // Its bytes, once: not a 17 KiB storage, no copy for the SNI look.
        let held = usize::try_from(held).unwrap();
        assert!(held <= fixed + wire.len() + 64, "held {held}");
        assert!(peak <= fixed + 2 * wire.len(), "peak {peak}");
    }
}

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
#[test]
fn a_record_of_no_known_type_behind_a_half_sent_hello_gets_one_alert() {
    // Found by the fuzz target: rustls failed on the record, and the
    // transport asked it again for its alert with the same input; it
    // failed on the record again and asserted against a second fatal
    // alert (debug builds). The gate refuses such a header itself now.
    for reject in [false, true] {
        let s = setup_sni(&format!("feed-badtype-{reject}"), reject);
        let (_, first) = hello(&s.client, "a.example.com");
        let mut wire = first[..first.len() - 20].to_vec();
        let len = (wire.len() - 5) as u16;
        wire[3..5].copy_from_slice(&len.to_be_bytes());
        wire.extend_from_slice(&[0x33, 0, 0x16, 0, 0]);
        for chunks in splits(&wire) {
            let mut sess = s.feed.session().unwrap();
            let answer = push_all(&mut sess, &chunks);
            assert_eq!(answer, DECODE_ERROR_ALERT, "{} pieces", chunks.len());
            assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
            assert_eq!(sess.handshakes(), (0, 1));
        }
    }
}

#[test]
fn a_record_that_does_not_decrypt_after_the_hello_fails_the_handshake_once() {
    // rustls fails on it (bad_record_mac) and, asked for its alert,
    // must not read it again (a second fatal alert).
    let s = setup("feed-mac", |_| {});
    for len in [17, 40, 512] {
        let (_, first) = hello(&s.client, "a.example.com");
        let mut sess = s.feed.session().unwrap();
        assert_eq!(sess.push(&first).first(), Some(&22));
        let mut junk = vec![23, 3, 3];
        junk.extend_from_slice(&(len as u16).to_be_bytes());
        junk.resize(5 + len, 0x5a);
        let alert = sess.push(&junk);
        assert_eq!(alert.first(), Some(&23), "an encrypted alert");
        assert_eq!(sess.end(), End::Failed(std::io::ErrorKind::InvalidData));
        assert_eq!(sess.handshakes(), (0, 1));
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

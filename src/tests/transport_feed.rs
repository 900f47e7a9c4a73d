//! The server side of the TLS transport fed over loopback sockets
//! (`conn::transport::feed`), the same bytes whole, split at every byte
//! position and byte by byte: the handshake, the SNI look, the plaintext
//! sniff and a request after the handshake must come out the same
//! (STYLE §4's rule for every incremental reader, applied to the records
//! rustls reads); the bound's tests are `transport_feed_refused.rs`, real
//! clients' flights `transport_feed_clients.rs`, the helpers `feed_helpers.rs`.

use super::feed_helpers::{REQUEST, hello, push_all, reply, setup, splits};
use crate::config::UnknownSni;
use crate::conn::transport::feed::End;

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

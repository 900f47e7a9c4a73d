//! The handshake's bound fed: what refused or half-sent hellos hold (`heap.rs`), one alert.

use super::feed_helpers::{REQUEST, Setup, hello, push_all, reply, setup, setup_sni, splits};
use super::heap;
use crate::conn::transport::feed::{End, FeedSession, ServerFeed};
use crate::tls::handshake_gate::{DECODE_ERROR_ALERT, HANDSHAKE_MAX};
use crate::tls::tests::handshake_records;

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

//! Helpers the feed harness's tests share: inputs cut every way, a feed and a client, flights.

use std::sync::Arc;

use rustls::ClientConnection;
use rustls::pki_types::ServerName;

use crate::config::{Config, UnknownSni};
use crate::conn::transport::feed::{FeedSession, ServerFeed};
use crate::tls::tests::{Pki, tls_config};

/// The ways one input is cut into chunks: whole, at every byte position
/// in two, and one byte at a time.
pub(super) fn splits(bytes: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut all = vec![vec![bytes]];
    for i in 1..bytes.len() {
        all.push(vec![&bytes[..i], &bytes[i..]]);
    }
    all.push(bytes.chunks(1).collect());
    all
}

/// Pushes `chunks` one after the other; what the server wrote back.
pub(super) fn push_all(s: &mut FeedSession, chunks: &[&[u8]]) -> Vec<u8> {
    let mut answer = Vec::new();
    for c in chunks {
        answer.extend(s.push(c));
    }
    answer
}

pub(super) struct Setup {
    pub(super) _pki: Pki,
    pub(super) feed: ServerFeed,
    pub(super) client: Arc<rustls::ClientConfig>,
}

pub(super) fn setup(tag: &str, tweak: impl FnOnce(&mut Config)) -> Setup {
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
pub(super) fn setup_sni(tag: &str, reject: bool) -> Setup {
    setup(tag, |c| {
        if reject {
            c.tls_unknown_sni = UnknownSni::Reject;
        }
    })
}

/// A client for `name` and its first flight (the ClientHello).
pub(super) fn hello(cfg: &Arc<rustls::ClientConfig>, name: &str) -> (ClientConnection, Vec<u8>) {
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
pub(super) fn reply(c: &mut ClientConnection, answer: &[u8], request: &[u8]) -> Vec<u8> {
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

pub(super) const REQUEST: &[u8] = b"GET /split HTTP/1.1\r\nHost: a.example.com\r\n\r\n";

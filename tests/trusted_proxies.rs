//! `trusted_proxies` (issue 25, item 2; docs/configuration.md, "Edge rules"): behind a
//! trusted peer the client address is the rightmost untrusted
//! `X-Forwarded-For` entry (nginx `real_ip_recursive on`), in the access
//! record; from an untrusted peer the field is appended to and never
//! believed. The field going upstream always gains the peer's address.

mod util;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use sluice::{AccessLogFormat, AccessLogTarget, Cidr};
use util::*;

fn nets(list: &[&str]) -> Vec<Cidr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

/// A proxy to `up` trusting `trusted` (and reading PROXY headers from
/// `pp`), logging JSON records to a file of its own.
fn proxy(up: SocketAddr, trusted: &[&str], pp: &[&str]) -> (Proxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let (trusted, pp) = (nets(trusted), nets(pp));
    let proxy = start_forward_proxy(up, move |c| {
        c.trusted_proxies = trusted;
        c.accept_proxy_protocol = pp;
        c.access_log = AccessLogTarget::File(path.into());
        c.access_log_format = AccessLogFormat::Json;
        c.request_head_timeout = Duration::from_millis(500);
    });
    (proxy, log)
}

fn with_xff(xff: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: {xff}\r\n\r\n").into_bytes()
}

fn clients(log: &TempFile, n: usize) -> Vec<String> {
    wait_access_lines(log.path(), n)
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["client"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn trusted_peer_gives_the_rightmost_untrusted_entry() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = proxy(up.addr, &["127.0.0.1/32", "10.0.0.0/8"], &[]);
    let mut c = proxy.client();
    // A spoofed leftmost entry, the real client, a trusted hop.
    let xff = "198.51.100.1, 203.0.113.5, 10.1.1.1";
    assert_eq!(c.round_trip(with_xff(xff)).status, 200);
    // An unparsable entry stops the walk at the trusted hop right of it.
    assert_eq!(
        c.round_trip(with_xff("203.0.113.5, unknown, 10.2.2.2"))
            .status,
        200
    );
    // No field: the peer.
    assert_eq!(c.round_trip(get("/")).status, 200);
    let got = clients(&log, 3);
    assert_eq!(got[0], "203.0.113.5:0");
    assert_eq!(got[1], "10.2.2.2:0");
    assert!(
        got[2].starts_with("127.0.0.1:") && got[2] != "127.0.0.1:0",
        "{got:?}"
    );
    // Upstream, the field gains the peer's address, as always.
    let reqs = up.wait_requests(3);
    assert_eq!(
        reqs[0].header("x-forwarded-for"),
        Some("198.51.100.1, 203.0.113.5, 10.1.1.1, 127.0.0.1")
    );
}

#[test]
fn untrusted_peer_is_never_believed() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = proxy(up.addr, &["10.0.0.0/8"], &[]);
    let mut c = proxy.client();
    assert_eq!(c.round_trip(with_xff("203.0.113.5")).status, 200);
    let got = clients(&log, 1);
    assert!(got[0].starts_with("127.0.0.1:"), "{got:?}");
    assert_eq!(
        up.single_request().header("x-forwarded-for"),
        Some("203.0.113.5, 127.0.0.1")
    );
}

#[test]
fn proxy_header_then_the_walk() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = proxy(up.addr, &["10.0.0.0/8"], &["127.0.0.1/32"]);
    // The balancer says the peer is 10.1.2.3 (trusted): its field counts.
    let mut c = proxy.client();
    let mut wire = b"PROXY TCP4 10.1.2.3 10.0.0.1 4000 80\r\n".to_vec();
    wire.extend_from_slice(&with_xff("203.0.113.5"));
    assert_eq!(c.round_trip(wire).status, 200);
    // It says 198.51.100.7 (untrusted): a spoofed field is not believed.
    let mut c = proxy.client();
    let mut wire = b"PROXY TCP4 198.51.100.7 10.0.0.1 4001 80\r\n".to_vec();
    wire.extend_from_slice(&with_xff("203.0.113.5"));
    assert_eq!(c.round_trip(wire).status, 200);
    assert_eq!(clients(&log, 2), ["203.0.113.5:0", "198.51.100.7:4001"]);
    let reqs = up.wait_requests(2);
    assert_eq!(
        reqs[0].header("x-forwarded-for"),
        Some("203.0.113.5, 10.1.2.3")
    );
    assert_eq!(
        reqs[1].header("x-forwarded-for"),
        Some("203.0.113.5, 198.51.100.7")
    );
}

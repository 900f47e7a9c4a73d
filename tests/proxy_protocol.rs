//! PROXY protocol in (issue 25, item 1; docs/configuration.md, "Edge rules"): a
//! connection from a source in `accept_proxy_protocol` opens with a v1 or
//! v2 header whose source address becomes the client's — in
//! `X-Forwarded-For` and the access record — on every request of the
//! connection; a header from any other source is refused (400, close).

mod util;

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use sluice::{AccessLogFormat, AccessLogTarget, Cidr};
use util::*;

/// A proxy to `up` that expects PROXY headers from `sources`, logging
/// JSON records to a file of its own.
fn pp_proxy(up: SocketAddr, sources: &[&str]) -> (Proxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let sources: Vec<Cidr> = sources.iter().map(|s| s.parse().unwrap()).collect();
    let proxy = start_forward_proxy(up, move |c| {
        c.accept_proxy_protocol = sources;
        c.access_log = AccessLogTarget::File(path.into());
        c.access_log_format = AccessLogFormat::Json;
        c.request_head_timeout = Duration::from_millis(500);
    });
    (proxy, log)
}

const V1: &[u8] = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 80\r\n";

#[test]
fn v1_header_sets_the_client_address_for_every_request() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = pp_proxy(up.addr, &["127.0.0.1/32"]);
    let mut c = proxy.client();
    let mut first = V1.to_vec();
    first.extend_from_slice(&get("/one"));
    assert_eq!(c.round_trip(first).status, 200);
    // The header came once; the next request on the connection keeps it.
    assert_eq!(c.round_trip(get("/two")).status, 200);
    let reqs = up.wait_requests(2);
    for r in &reqs {
        assert_eq!(r.header("x-forwarded-for"), Some("192.0.2.7"), "{r:?}");
    }
    for rec in wait_access_json(log.path(), 2) {
        assert_eq!(rec["client"], "192.0.2.7:51000", "{rec}");
    }
    assert_eq!(proxy.stats.snapshot().proxy_headers, 1);
}

#[test]
fn v2_header_with_tlvs_split_at_every_byte() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = pp_proxy(up.addr, &["127.0.0.0/8"]);
    let header = proxy_v2_with_tlvs(80);
    let mut wire = header.clone();
    wire.extend_from_slice(&get_close("/"));
    // Every split inside the header and the first bytes of the request.
    for cut in 1..header.len() + 3 {
        let mut c = proxy.client();
        c.send(wire.get(..cut).unwrap());
        thread::sleep(Duration::from_millis(3));
        c.send(wire.get(cut..).unwrap());
        assert_eq!(c.read_response().status, 200, "split at {cut}");
    }
    let reqs = up.wait_requests(header.len() + 2);
    assert!(
        reqs.iter()
            .all(|r| r.header("x-forwarded-for") == Some("198.51.100.9"))
    );
}

#[test]
fn v2_local_keeps_the_socket_address() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = pp_proxy(up.addr, &["127.0.0.1"]);
    let mut c = proxy.client();
    let mut wire = proxy_v2(0x20, 0x00, &[]);
    wire.extend_from_slice(&get("/health"));
    assert_eq!(c.round_trip(wire).status, 200);
    assert_eq!(
        up.single_request().header("x-forwarded-for"),
        Some("127.0.0.1")
    );
}

#[test]
fn listed_source_without_a_valid_header_is_closed() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = pp_proxy(up.addr, &["127.0.0.1/32"]);
    // Each row: what the connection opens with, and why it is refused.
    let oversized = proxy_v2(0x21, 0x11, &vec![0; 5000]);
    let rows: [(&[u8], &str); 4] = [
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "a request, no header"),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 51000\r\n",
            "a v1 field missing",
        ),
        (&oversized, "a v2 header over 4 KiB"),
        (b"PROXY TCP4 300.0.0.1 10.0.0.1 1 2\r\n", "not an address"),
    ];
    for (bytes, why) in rows {
        eprintln!("case: {why}");
        let mut c = proxy.client();
        c.send_lossy(bytes);
        let resp = c.read_response();
        assert_proxy_error(&resp, 400);
        c.assert_closed();
    }
    // Nothing at all within the request head timeout: closed silently.
    let mut c = proxy.client();
    assert!(c.read_until_closed(Duration::from_secs(3)).is_empty());
    assert_eq!(up.accepted(), 0, "nothing may reach the upstream");
    assert_eq!(proxy.stats.snapshot().proxy_headers_refused, 4);
}

#[test]
fn header_from_an_unlisted_source_is_never_trusted() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    // 127.0.0.1 is not in the list.
    let (proxy, log) = pp_proxy(up.addr, &["10.0.0.0/8"]);
    for header in [V1.to_vec(), proxy_v2_with_tlvs(80)] {
        let mut c = proxy.client();
        let mut wire = header;
        wire.extend_from_slice(&get("/"));
        c.send_lossy(wire);
        assert_proxy_error(&c.read_response(), 400);
        c.assert_closed();
    }
    assert_eq!(up.accepted(), 0);
    // An ordinary request from it is served as before, under its own address.
    let mut c = proxy.client();
    assert_eq!(c.round_trip(get("/")).status, 200);
    assert_eq!(
        up.single_request().header("x-forwarded-for"),
        Some("127.0.0.1")
    );
    let recs = wait_access_json(log.path(), 3);
    assert!(
        recs.iter()
            .all(|r| r["client"].as_str().unwrap().starts_with("127.0.0.1:"))
    );
}

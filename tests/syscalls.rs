//! The syscall floor of a keep-alive request (issue 22), counted without
//! timing: the proxy's own counters of socket reads, writes and liveness
//! peeks on the data path (`Stats::socket_reads`, `socket_writes`,
//! `socket_peeks`). One keep-alive request in front of an upstream that
//! answers with a head like nginx's (about 240 bytes) and a body of 200 B,
//! 1 KiB or 16 KiB takes four: the request read, the write upstream, the
//! response read, the write to the client. `epoll_wait` is the loop's and
//! is measured by `scripts/bench.sh`, not here.

mod util;

use std::sync::Arc;

use util::*;

/// Requests measured per body size, after one that opens the upstream
/// connection.
const MEASURED: u64 = 20;

/// A response head like stock nginx's for a static file.
fn nginx_like(body_len: usize) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {body_len}\r\n\
         Last-Modified: Tue, 01 Dec 2026 19:00:00 GMT\r\nConnection: keep-alive\r\n\
         ETag: \"674c7e10-{body_len:x}\"\r\nAccept-Ranges: bytes\r\n\r\n"
    )
    .into_bytes();
    r.extend((0..body_len).map(|i| b'a' + (i % 26) as u8));
    r
}

/// Socket calls of the data path so far.
fn calls(stats: &Arc<sluice::Stats>) -> (u64, u64, u64) {
    let s = stats.snapshot();
    (s.socket_reads, s.socket_writes, s.socket_peeks)
}

/// Socket calls per keep-alive request for `body_len`-byte responses:
/// (reads, writes, peeks), each summed over `MEASURED` requests.
fn per_request(body_len: usize) -> (u64, u64, u64) {
    let upstream = Upstream::start(respond_forever(nginx_like(body_len)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    // The first request connects upstream (connect, SO_ERROR): not counted.
    let first = client.round_trip(get("/warm"));
    assert_eq!(first.status, 200);
    let before = calls(&proxy.stats);
    for i in 0..MEASURED {
        let resp = client.round_trip(get(&format!("/{i}")));
        assert_eq!(resp.status, 200, "{}", preview(&resp.head));
        assert_eq!(resp.body.len(), body_len);
    }
    let after = calls(&proxy.stats);
    assert_eq!(upstream.accepted(), 1, "one upstream connection, reused");
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

fn assert_floor(body_len: usize) {
    let (reads, writes, peeks) = per_request(body_len);
    let total = reads + writes + peeks;
    assert!(
        total <= 4 * MEASURED,
        "{body_len}-byte body: {reads} reads + {writes} writes + {peeks} peeks \
         over {MEASURED} requests ({:.2} per request, the floor is 4)",
        total as f64 / MEASURED as f64
    );
    assert_eq!(peeks, 0, "no liveness peek on a hot connection");
}

#[test]
fn a_keep_alive_request_with_a_200_byte_body_takes_four_socket_calls() {
    assert_floor(200);
}

#[test]
fn a_keep_alive_request_with_a_1_kib_body_takes_four_socket_calls() {
    assert_floor(1024);
}

#[test]
fn a_keep_alive_request_with_a_16_kib_body_takes_four_socket_calls() {
    assert_floor(16 * 1024);
}

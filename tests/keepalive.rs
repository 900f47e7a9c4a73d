//! Downstream keep-alive (DESIGN.md §6): the client's version and
//! `Connection` decide the downstream side, the upstream's decide only the
//! upstream side; pipelined requests are answered in order.

mod util;

use util::*;

#[test]
fn connection_close_from_client_closes_after_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(b"GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok");
    assert!(resp.says_close(), "{:?}", String::from_utf8_lossy(&resp.head));
    client.assert_closed();
}

#[test]
fn http10_client_without_keep_alive_is_closed_after_response() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let resp = client.round_trip(b"GET / HTTP/1.0\r\nHost: example.test\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok");
    client.assert_closed();
}

#[test]
fn connection_close_from_upstream_keeps_client_connection_alive() {
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();

    let first = client.round_trip(get("/1"));
    assert_eq!(first.status, 200);
    assert_eq!(first.body, b"ok");
    assert!(!first.says_close(), "upstream's close leaked downstream: {:?}", String::from_utf8_lossy(&first.head));

    let second = client.round_trip(get("/2"));
    assert_eq!(second.status, 200);
    assert_eq!(second.body, b"ok");
    assert_eq!(upstream.accepted(), 2, "the second request needs a new upstream connection");
    let targets: Vec<String> = upstream.wait_requests(2).into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/1", "/2"]);
}

#[test]
fn pipelined_requests_get_responses_in_order() {
    let upstream = Upstream::start(serve(|req| ok_response(&format!("answer to {}", req.target))));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send([get("/one"), get("/two"), get("/three")].concat());
    for target in ["/one", "/two", "/three"] {
        let resp = client.read_response();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_str(), format!("answer to {target}"));
    }
}

#[test]
fn many_sequential_requests_share_one_client_connection() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for i in 0..20 {
        let target = format!("/seq/{i}");
        let resp = client.round_trip(get(&target));
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_str(), target);
    }
    assert_eq!(proxy.stats.snapshot().downstream_accepted, 1);
}

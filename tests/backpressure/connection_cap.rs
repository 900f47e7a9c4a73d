//! Above the connection cap a new client waits in the kernel backlog.

use super::*;

#[test]
fn connection_over_the_cap_waits_in_the_backlog_until_one_closes() {
    const CAP: usize = 4;
    let upstream = Upstream::start(respond_forever(ok_response("hi")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_connections = CAP);
    let mut held: Vec<Client> = (0..CAP)
        .map(|i| {
            let mut c = proxy.client();
            assert_eq!(c.round_trip(get("/first")).status, 200, "client {i}");
            // Busy with a next head: not an idle keep-alive connection the
            // proxy would close to make room (those are, see
            // tests/descriptors.rs).
            c.send(b"GET /again HTTP/1.1\r\n");
            c
        })
        .collect();
    // Every partial head was read: no held connection is idle.
    let sent = CAP * (get("/first").len() + b"GET /again HTTP/1.1\r\n".len());
    let reached = wait_until(WAIT, || {
        let s = proxy.stats.snapshot();
        s.downstream_active == CAP as u64 && s.bytes_from_downstream == sent as u64
    });
    assert!(reached, "{:?}", proxy.stats.snapshot());

    // The kernel completes the handshake; the proxy does not accept it.
    let mut waiting = proxy.client();
    waiting.send(get("/waiting"));
    waiting.assert_open(Duration::from_millis(500));
    let s = proxy.stats.snapshot();
    assert_eq!(s.downstream_accepted, CAP as u64, "{s:?}");
    assert_eq!(s.downstream_active, CAP as u64, "{s:?}");

    for (i, c) in held.iter_mut().enumerate() {
        c.send(b"Host: example.test\r\n\r\n");
        let resp = c.read_response();
        assert_eq!(resp.status, 200, "client {i} under the cap");
        assert_eq!(resp.body, b"hi");
    }
    assert!(
        waiting.wire.buffered().is_empty(),
        "the waiting client got bytes"
    );

    drop(held.remove(0));
    let resp = waiting.read_response();
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(resp.body, b"hi");
    let s = proxy.stats.snapshot();
    assert_eq!(s.downstream_accepted, CAP as u64 + 1, "{s:?}");
    assert!(s.downstream_active <= CAP as u64, "over the cap: {s:?}");
}

//! Idle keep-alive and silent new connections hold no buffers.

use super::*;

#[test]
fn idle_keepalive_connections_hold_no_buffers() {
    const CLIENTS: usize = 50;
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| proxy.client()).collect();
    for round in 0..2 {
        for c in &mut clients {
            c.send(get("/idle"));
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let resp = c.read_response();
            assert_eq!(resp.status, 200, "client {i}, round {round}");
            assert_eq!(resp.body, b"hello", "client {i}, round {round}");
            assert!(!resp.says_close(), "client {i}, round {round}: close");
        }
        let settled = wait_until(WAIT, || {
            let s = proxy.stats.snapshot();
            s.downstream_idle == CLIENTS as u64 && s.buffers_in_use == 0 && s.buffered_bytes == 0
        });
        let s = proxy.stats.snapshot();
        assert!(
            settled,
            "round {round}: idle connections hold buffers: {s:?}"
        );
        assert_eq!(s.downstream_active, CLIENTS as u64, "round {round}: {s:?}");
        assert_eq!(s.downstream_idle, CLIENTS as u64, "round {round}: {s:?}");
        assert_eq!(s.buffers_in_use, 0, "round {round}: {s:?}");
        assert_eq!(s.buffered_bytes, 0, "round {round}: {s:?}");
    }
}

/// A new connection is read at once when it is accepted (with
/// `TCP_DEFER_ACCEPT` its request is usually there). One that has sent
/// nothing (handed over after the kernel's 1 s defer) keeps no buffer from
/// that read.
#[test]
fn silent_new_connections_hold_no_buffers() {
    const CLIENTS: usize = 20;
    let upstream = Upstream::start(respond_forever(ok_response("hello")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let _clients: Vec<Client> = (0..CLIENTS).map(|_| proxy.client()).collect();
    // The loop accepts a batch before it reads each new connection, and a
    // snapshot can fall between a read's buffer taken and given back: wait
    // until every connection was accepted and read once, then until no
    // buffer is held (a kept buffer never settles to 0).
    let read_once = wait_until(WAIT, || {
        let s = proxy.stats.snapshot();
        s.downstream_active == CLIENTS as u64 && s.socket_reads >= CLIENTS as u64
    });
    let s = proxy.stats.snapshot();
    assert!(read_once, "not all accepted and read: {s:?}");
    let settled = wait_until(WAIT, || {
        let s = proxy.stats.snapshot();
        s.buffers_in_use == 0 && s.buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    assert!(settled, "silent connections hold buffers: {s:?}");
    assert_eq!(s.downstream_active, CLIENTS as u64, "{s:?}");
    assert_eq!(s.buffers_in_use, 0, "{s:?}");
    assert_eq!(s.buffered_bytes, 0, "{s:?}");
}

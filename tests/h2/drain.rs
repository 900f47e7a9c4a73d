//! A graceful drain over HTTP/2 (RFC 9113 §6.8, ARCHITECTURE.md §12): a
//! first GOAWAY with the largest id and a PING, the final GOAWAY with the
//! last stream after the PING's answer, or after a second without one.

use super::*;

/// A proxy (`drain_timeout` 30 s) whose upstream answers `"late"` after
/// `delay`, a client with one GET in flight to it (its stream id), and the
/// drain begun.
fn draining_with_a_stream_in_flight(delay: Duration) -> (Upstream, Proxy, TempFile, H2Client, u32) {
    let up = Upstream::start(move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            std::thread::sleep(delay);
            conn.send(ok_response("late"));
            conn.hold_until_closed();
        }
    });
    let (proxy, log) = h2_proxy(up.addr, |c| c.drain_timeout = Duration::from_secs(30));
    let mut c = H2Client::connect(proxy.addr);
    let id = c.send_get("/in-flight");
    assert_eventually("the upstream got the request", || up.requests().len() == 1);
    proxy.handle.drain();
    (up, proxy, log, c, id)
}

#[test]
fn rfc9113_6_8_a_drain_sends_goaway_twice_and_finishes_the_stream_in_flight() {
    let (_up, _proxy, _log, mut c, id) =
        draining_with_a_stream_in_flight(Duration::from_millis(300));
    // A first GOAWAY with the largest id, a PING (answered by the
    // client), then the real last stream id.
    let first = c
        .read_until(Duration::from_secs(3), |f| f.kind == kind::GOAWAY)
        .expect("a first GOAWAY");
    assert_eq!(&first.payload[..4], &0x7fff_ffffu32.to_be_bytes());
    assert_eq!(first.error_code(), Some(NO_ERROR));
    let last = c
        .read_until(Duration::from_secs(3), |f| f.kind == kind::GOAWAY)
        .expect("the final GOAWAY");
    assert_eq!(&last.payload[..4], &id.to_be_bytes());
    let r = c.responses(&[id], Duration::from_secs(5));
    assert_eq!(r[&id].status, 200);
    assert_eq!(r[&id].body, b"late");
}

#[test]
fn rfc9113_6_8_a_drain_whose_ping_is_not_answered_sends_the_final_goaway_anyway() {
    let (_up, _proxy, _log, mut c, id) =
        draining_with_a_stream_in_flight(Duration::from_millis(2500));
    // Frames read one by one, the PING never acknowledged: the final
    // GOAWAY still comes, about a second after the first, while the
    // stream in flight (2.5 s upstream) is still open, and names it.
    let mut order = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while order.len() < 3 && std::time::Instant::now() < deadline {
        match c.read_frame() {
            Ok(f) if f.kind == kind::GOAWAY => order.push(f),
            Ok(f) if f.kind == kind::HEADERS && f.stream == id => order.push(f),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let kinds: Vec<u8> = order.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [kind::GOAWAY, kind::GOAWAY, kind::HEADERS],
        "first GOAWAY, final GOAWAY, then the response: {order:?}"
    );
    assert_eq!(&order[1].payload[..4], &id.to_be_bytes());
    assert_eq!(order[1].error_code(), Some(NO_ERROR));
}

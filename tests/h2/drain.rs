//! A graceful drain over HTTP/2 (RFC 9113 §6.8, ARCHITECTURE.md §12): a
//! first GOAWAY with the largest id and a PING once no stream is open (or
//! after 2 s), the final GOAWAY with the last stream after the PING's
//! answer, or after a second without one.

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

/// The GOAWAY frames and the HEADERS of stream `id`, in the order read
/// until `n` of them came (or 10 s); PINGs are acknowledged when `ack`.
fn goaways_and_response(c: &mut H2Client, id: u32, n: usize, ack: bool) -> Vec<H2Frame> {
    let mut order = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while order.len() < n && std::time::Instant::now() < deadline {
        let f = if ack {
            c.read_until(Duration::from_secs(3), |_| true)
        } else {
            c.read_frame().ok()
        };
        match f {
            Some(f) if f.kind == kind::GOAWAY => order.push(f),
            Some(f) if f.kind == kind::HEADERS && f.stream == id => order.push(f),
            Some(_) => {}
            None => break,
        }
    }
    order
}

#[test]
fn rfc9113_6_8_a_drain_holds_its_first_goaway_until_the_stream_in_flight_ends() {
    let (_up, _proxy, _log, mut c, id) =
        draining_with_a_stream_in_flight(Duration::from_millis(300));
    // The response first (no GOAWAY while a stream is open: Chromium
    // fails a request it had given the connection when one comes), then
    // GOAWAY with the largest id and a PING (answered), then the last
    // stream id.
    let order = goaways_and_response(&mut c, id, 3, true);
    let kinds: Vec<u8> = order.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [kind::HEADERS, kind::GOAWAY, kind::GOAWAY],
        "{order:?}"
    );
    assert_eq!(&order[1].payload[..4], &0x7fff_ffffu32.to_be_bytes());
    assert_eq!(order[1].error_code(), Some(NO_ERROR));
    assert_eq!(&order[2].payload[..4], &id.to_be_bytes());
}

#[test]
fn rfc9113_6_8_a_drain_sends_both_goaways_in_time_to_a_client_that_holds_a_stream_and_no_ping() {
    // The upstream answers after 4.5 s; the PING is never acknowledged.
    // The first GOAWAY still comes once the 2 s hold is over, the final
    // one a second later, naming the stream still in flight, and the
    // stream finishes after both.
    let (_up, _proxy, _log, mut c, id) =
        draining_with_a_stream_in_flight(Duration::from_millis(4500));
    let order = goaways_and_response(&mut c, id, 3, false);
    let kinds: Vec<u8> = order.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [kind::GOAWAY, kind::GOAWAY, kind::HEADERS],
        "{order:?}"
    );
    assert_eq!(&order[0].payload[..4], &0x7fff_ffffu32.to_be_bytes());
    assert_eq!(&order[1].payload[..4], &id.to_be_bytes());
    assert_eq!(order[1].error_code(), Some(NO_ERROR));
}

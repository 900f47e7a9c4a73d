//! Slow and oversized request heads: 408 at the head timeout, 431 over the limits.

use super::*;

/// A GET head of exactly `size` bytes (padded with an `X-Pad` field).
fn get_of_size(size: usize) -> Vec<u8> {
    let start = "GET /sized HTTP/1.1\r\nHost: example.test\r\nX-Pad: ";
    let end = "\r\n\r\n";
    let pad = size
        .checked_sub(start.len() + end.len())
        .expect("size too small for a head");
    format!("{start}{}{end}", "a".repeat(pad)).into_bytes()
}

/// A GET head with `fields` header fields (`Host` and `fields - 1` others).
fn get_with_fields(fields: usize) -> Vec<u8> {
    let mut head = String::from("GET /fields HTTP/1.1\r\nHost: example.test\r\n");
    for i in 1..fields {
        head.push_str(&format!("X-Field-{i}: {i}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// Sends each row's request (`request(n)`) on a new connection: a 200
/// with the upstream's `fits`, or the proxy's own `status` and a close.
/// A row is (n, status, why); `unit` names n in a failure.
fn answers_by_row(
    proxy: &Proxy,
    rows: &[(usize, u16, &str)],
    unit: &str,
    request: fn(usize) -> Vec<u8>,
) {
    for &(n, status, why) in rows {
        let mut client = proxy.client();
        client.send_lossy(request(n));
        let resp = client
            .try_read_response(false)
            .unwrap_or_else(|e| panic!("{why} ({n} {unit}): {e}"));
        if status == 200 {
            assert_eq!(resp.status, 200, "{why}: {}", preview(&resp.raw()));
            assert_eq!(resp.body, b"fits", "{why}");
        } else {
            assert_proxy_error(&resp, status);
            client.assert_closed();
        }
    }
}

#[test]
fn slow_loris_trickling_a_head_gets_408_at_the_head_timeout() {
    const HEAD_TIMEOUT: Duration = Duration::from_millis(500);
    const DRIP: Duration = Duration::from_millis(100);
    let upstream = Upstream::start(respond_forever(ok_response("never")));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.request_head_timeout = HEAD_TIMEOUT;
        c.keepalive_timeout = Duration::from_secs(5);
    });
    let head = b"GET /slow HTTP/1.1\r\nHost: example.test\r\nUser-Agent: loris\r\n\r\n";
    let mut client = proxy.client();
    let started = Instant::now();

    let stop = Arc::new(AtomicBool::new(false));
    let dripped = Arc::new(AtomicUsize::new(0));
    let mut stream = client.wire.stream.try_clone().expect("clone client socket");
    let (stp, count) = (stop.clone(), dripped.clone());
    let writer = thread::spawn(move || {
        for byte in head {
            if stp.load(Ordering::SeqCst) || stream.write_all(&[*byte]).is_err() {
                return;
            }
            count.fetch_add(1, Ordering::SeqCst);
            // Pacing, not synchronisation: one byte per DRIP is the attack.
            thread::sleep(DRIP);
        }
    });

    let got = client.read_until_closed(CLIENT_TIMEOUT);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    assert!(
        wait_until(WAIT, || writer.is_finished()),
        "dripping writer stuck"
    );
    let dripped = dripped.load(Ordering::SeqCst);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 408 "),
        "expected a 408, got {}",
        preview(&got)
    );
    assert!(
        text.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "408 without Connection: close: {}",
        preview(&got)
    );
    assert!(
        dripped > 0 && dripped < head.len(),
        "{dripped} of {} head bytes sent before the close",
        head.len()
    );
    assert!(
        elapsed >= HEAD_TIMEOUT - Duration::from_millis(100),
        "closed after {elapsed:?}, before the {HEAD_TIMEOUT:?} head timeout"
    );
    let s = proxy.stats.snapshot();
    assert_eq!(s.timeouts_head, 1, "{s:?}");
    assert_eq!(s.status_408, 1, "{s:?}");
    assert_eq!(s.timeouts_keepalive, 0, "{s:?}");
    assert_eq!(upstream.accepted(), 0, "a partial head went upstream");
}

#[test]
fn head_larger_than_max_head_size_gets_431() {
    const LIMIT: usize = 8 * 1024;
    let upstream = Upstream::start(respond_forever(ok_response("fits")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_head_size = LIMIT);
    // (head size in bytes, status, why)
    let rows: [(usize, u16, &str); 4] = [
        (LIMIT - 1, 200, "one byte under the limit"),
        (LIMIT, 200, "exactly the limit"),
        (LIMIT + 1, 431, "one byte over the limit"),
        (2 * LIMIT, 431, "twice the limit"),
    ];
    answers_by_row(&proxy, &rows, "bytes", get_of_size);
    let s = proxy.stats.snapshot();
    assert_eq!(s.status_431, 2, "{s:?}");
    assert_eq!(
        upstream.requests().len(),
        2,
        "only heads within the limit go up"
    );
}

#[test]
fn head_with_more_fields_than_max_header_count_gets_431() {
    const LIMIT: usize = 10;
    let upstream = Upstream::start(respond_forever(ok_response("fits")));
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_header_count = LIMIT);
    // (header fields, status, why)
    let rows: [(usize, u16, &str); 3] = [
        (LIMIT, 200, "exactly the limit"),
        (LIMIT + 1, 431, "one field over the limit"),
        (10 * LIMIT, 431, "ten times the limit"),
    ];
    answers_by_row(&proxy, &rows, "fields", get_with_fields);
    let s = proxy.stats.snapshot();
    assert_eq!(s.status_431, 2, "{s:?}");
    assert_eq!(
        upstream.requests().len(),
        1,
        "only heads within the limit go up"
    );
}

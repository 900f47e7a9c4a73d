//! Small watermarks: a slow reader paused and resumed, every resume after a pause.

use super::*;

#[test]
fn small_watermarks_pause_and_resume_a_slow_reader_repeatedly() {
    const SIZE: usize = MIB;
    const HIGH: usize = 1024;
    const LOW: usize = 256;
    let written = Arc::new(AtomicUsize::new(0));
    let upstream = pattern_upstream(SIZE, written.clone());
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.high_watermark = HIGH;
        c.low_watermark = LOW;
    });
    let mut client = proxy.client();
    client.send(get("/slices"));
    // Read nothing until the proxy's buffer has filled once.
    assert_eventually("a first pause", || proxy.stats.snapshot().read_pauses >= 1);

    let head = client.read_response_head();
    assert_eq!(head.status, 200, "{}", preview(&head.head));
    if let Err(e) = read_pattern(
        &mut client.wire,
        0,
        SIZE,
        4 * 1024,
        Duration::from_millis(1),
    ) {
        panic!("response body: {e}");
    }
    assert_eq!(written.load(Ordering::SeqCst), SIZE);
    assert_eventually("buffers drained", || {
        proxy.stats.snapshot().buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    println!(
        "watermarks {HIGH}/{LOW}: read_pauses {} read_resumes {} peak {}",
        s.read_pauses, s.read_resumes, s.buffered_bytes_peak
    );
    assert!(s.read_pauses >= 2, "{s:?}");
    assert!(s.read_resumes >= 2, "{s:?}");
    assert!(
        s.buffered_bytes_peak <= buffered_bound(HIGH),
        "proxy buffered {} bytes at peak, high watermark {HIGH}: {s:?}",
        s.buffered_bytes_peak
    );
}

#[test]
fn every_counted_resume_follows_a_counted_pause() {
    // Head and body in one write: the proxy reads both into its head buffer
    // and moves the body bytes to the client's buffer past the 1 KiB high
    // watermark. That is a pause (the buffer is paused until it drains), so
    // when it drains and counts a resume, a pause must have been counted.
    const HIGH: usize = 1024;
    let body = "b".repeat(4 * HIGH);
    let upstream = Upstream::start(respond_forever(ok_response(&body)));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.high_watermark = HIGH;
        c.low_watermark = HIGH / 4;
    });
    let mut client = proxy.client();
    let resp = client.round_trip(get("/one-write"));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body_str(), body);
    assert_eventually("buffers drained", || {
        proxy.stats.snapshot().buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    assert!(
        s.read_resumes <= s.read_pauses,
        "read_resumes {} > read_pauses {}: {s:?}",
        s.read_resumes,
        s.read_pauses
    );
}

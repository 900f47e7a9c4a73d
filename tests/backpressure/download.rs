//! Downloads: a client reading nothing stops the upstream; a fast one stays exact.

use super::*;

#[test]
fn client_reading_nothing_stops_the_upstream_at_the_watermark() {
    const SIZE: usize = 64 * MIB;
    let high = Config::default().high_watermark;
    let written = Arc::new(AtomicUsize::new(0));
    let upstream = pattern_upstream(SIZE, written.clone());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(get("/big"));

    // The client reads nothing: the upstream can write only what the
    // proxy's buffer and the kernel's socket buffers on both legs hold.
    let (stalled_at, stalled) = wait_stalled(&written);
    let paused = proxy.stats.snapshot();
    println!(
        "client reading nothing: upstream wrote {stalled_at} bytes ({:.2} MiB) of {SIZE}; \
         proxy buffered {} now, {} at peak (high watermark {high})",
        stalled_at as f64 / MIB as f64,
        paused.buffered_bytes,
        paused.buffered_bytes_peak
    );
    assert!(
        stalled,
        "upstream kept writing for {STALL_MAX:?}: {stalled_at} bytes"
    );
    assert!(
        stalled_at < 16 * MIB,
        "upstream wrote {stalled_at} bytes to a client that reads nothing"
    );
    assert!(
        paused.buffered_bytes_peak <= buffered_bound(high),
        "proxy buffered {} bytes at peak, high watermark {high}: {paused:?}",
        paused.buffered_bytes_peak
    );
    assert!(
        paused.buffered_bytes <= buffered_bound(high),
        "proxy buffers {} bytes while paused: {paused:?}",
        paused.buffered_bytes
    );
    assert!(
        paused.read_pauses >= 1,
        "upstream read never paused: {paused:?}"
    );
    // Before it stalled, the proxy's writes to this client went through
    // at once until the kernel's send buffer was full (4 MiB by default):
    // less than the 8 MiB a buffer must see drained before it grows.
    assert!(
        paused.buffered_bytes_peak <= (BODY_START + HEAD_ROOM + LENT_HEADROOM) as u64,
        "a client reading nothing made the buffer grow: {} bytes at peak",
        paused.buffered_bytes_peak
    );

    // Now the client reads everything.
    read_pattern_response(&mut client, SIZE, "response body");
    assert_eq!(written.load(Ordering::SeqCst), SIZE, "upstream wrote all");

    assert_eventually("buffers drained after the transfer", || {
        let s = proxy.stats.snapshot();
        s.buffered_bytes == 0 && s.read_resumes >= 1
    });
    let s = proxy.stats.snapshot();
    assert!(s.read_resumes >= 1, "upstream read never resumed: {s:?}");
    assert!(
        s.buffered_bytes_peak <= buffered_bound(high),
        "peak after the transfer: {s:?}"
    );
    assert_eq!(
        client.round_trip(get("/again")).status,
        200,
        "connection still usable"
    );
}

#[test]
fn fast_download_past_the_buffer_growth_is_byte_exact_twice_on_one_connection() {
    // 24 MiB each: well past the 8 MiB of full drains after which a body
    // buffer grows, so the growth and the return of a grown buffer happen.
    const SIZE: usize = 24 * MIB;
    let high = Config::default().high_watermark;
    let written = Arc::new(AtomicUsize::new(0));
    let upstream = pattern_upstream(SIZE, written.clone());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    for round in 1..=2 {
        client.send(get("/big"));
        read_pattern_response(&mut client, SIZE, &format!("response body {round}"));
    }
    assert_eq!(
        written.load(Ordering::SeqCst),
        2 * SIZE,
        "upstream wrote all"
    );
    assert_eventually("buffers drained after the transfers", || {
        proxy.stats.snapshot().buffered_bytes == 0
    });
    let s = proxy.stats.snapshot();
    println!(
        "fast download: {} bytes buffered at peak (start {BODY_START}, high watermark {high})",
        s.buffered_bytes_peak
    );
    assert!(
        s.buffered_bytes_peak <= buffered_bound(high),
        "a growing buffer went past the high watermark: {s:?}"
    );
    assert_eq!(upstream.accepted(), 1, "one upstream connection for both");
}

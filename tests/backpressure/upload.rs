//! Uploads: an upstream that stops reading stops the client at the watermark.

use super::*;

#[test]
fn upstream_not_reading_stops_the_client_upload_at_the_watermark() {
    const SIZE: usize = 64 * MIB;
    const FIRST: usize = MIB;
    let high = Config::default().high_watermark;
    let resume = Arc::new(AtomicBool::new(false));
    let verdict: Arc<Mutex<Option<Result<(), String>>>> = Arc::new(Mutex::new(None));
    let (res, ver) = (resume.clone(), verdict.clone());
    let upstream = Upstream::start(move |mut conn: UpConn| {
        let Some(req) = conn.read_request_head() else {
            return;
        };
        conn.record(req);
        // The first MiB, then nothing until the test says so.
        let mut result = read_pattern(&mut conn.wire, 0, FIRST, SLICE, Duration::ZERO);
        if result.is_ok() {
            if !wait_until(WRITER_MAX, || res.load(Ordering::SeqCst)) {
                return;
            }
            result = read_pattern(&mut conn.wire, FIRST, SIZE - FIRST, SLICE, Duration::ZERO);
        }
        let ok = result.is_ok();
        *ver.lock().unwrap() = Some(result);
        if ok {
            conn.send(ok_response("stored"));
            conn.hold_until_closed();
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();

    let sent = Arc::new(AtomicUsize::new(0));
    let mut stream = client.wire.stream.try_clone().expect("clone client socket");
    let count = sent.clone();
    let writer = thread::spawn(move || -> io::Result<()> {
        stream.write_all(
            format!(
                "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: {SIZE}\r\n\r\n"
            )
            .as_bytes(),
        )?;
        write_pattern(&mut stream, SIZE, &count)
    });

    let (stalled_at, stalled) = wait_stalled(&sent);
    let paused = proxy.stats.snapshot();
    println!(
        "upstream not reading: client wrote {stalled_at} bytes ({:.2} MiB) of {SIZE}; \
         proxy buffered {} now, {} at peak (high watermark {high})",
        stalled_at as f64 / MIB as f64,
        paused.buffered_bytes,
        paused.buffered_bytes_peak
    );
    // Let the upstream go on whatever happens, so no thread is left stuck.
    let release = || resume.store(true, Ordering::SeqCst);
    if !stalled || stalled_at >= 32 * MIB {
        release();
    }
    assert!(
        stalled,
        "client kept writing for {STALL_MAX:?}: {stalled_at} bytes"
    );
    assert!(
        stalled_at < 32 * MIB,
        "client wrote {stalled_at} bytes to an upstream that stopped reading"
    );
    assert!(
        stalled_at >= FIRST,
        "client stalled at {stalled_at} bytes, before the upstream's first MiB"
    );
    assert!(
        paused.buffered_bytes_peak <= buffered_bound(high),
        "proxy buffered {} bytes at peak, high watermark {high}: {paused:?}",
        paused.buffered_bytes_peak
    );
    assert!(
        paused.read_pauses >= 1,
        "client read never paused: {paused:?}"
    );
    // What the upstream stopped reading stays held, never more than the
    // high watermark. It is the start size only if the stall was noticed
    // before the buffer grew: the kernel's buffers absorb several MiB at
    // full speed before the first stall (the upstream's receive buffer may
    // grow to `tcp_rmem` max, 32 MiB on the CI machine), which looks like a
    // fast sink and may grow the buffer to the high watermark; a stall
    // noticed after that lowers the capacity, but the bytes already pending
    // are kept, not dropped (ARCHITECTURE.md §4). Which comes first is a
    // race between the kernel's buffers and the loop's next turn, so either
    // is correct here; the sizing rule itself is tested without sockets in
    // `src/tests/buffer_sizing.rs`.
    assert!(
        paused.buffered_bytes <= buffered_bound(high),
        "an upstream that stopped reading left {} bytes buffered (high watermark {high})",
        paused.buffered_bytes
    );

    release();
    assert!(
        wait_until(WRITER_MAX, || writer.is_finished()),
        "client writer still blocked after the upstream read again"
    );
    if let Err(e) = writer.join().expect("writer thread panicked") {
        panic!("client upload: {e}");
    }
    let resp = client.read_response();
    assert_eq!(resp.status, 200, "{}", preview(&resp.raw()));
    assert_eq!(resp.body, b"stored");
    match verdict.lock().unwrap().take() {
        Some(Ok(())) => {}
        Some(Err(e)) => panic!("upstream got a different body: {e}"),
        None => panic!("upstream has no verdict"),
    }
    let req = upstream.single_request();
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.header("content-length"),
        Some(SIZE.to_string().as_str())
    );

    let s = proxy.stats.snapshot();
    assert!(s.read_resumes >= 1, "client read never resumed: {s:?}");
    assert!(
        s.read_resumes <= s.read_pauses,
        "more resumes than pauses: {s:?}"
    );
    assert!(
        s.buffered_bytes_peak <= buffered_bound(high),
        "peak after the transfer: {s:?}"
    );
}

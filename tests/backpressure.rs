//! Backpressure and slow peers (ARCHITECTURE.md §4, §8, §9): a side that does not
//! read stops the other side at the high watermark plus what the kernel's
//! socket buffers hold, the proxy's own buffering stays bounded, and the
//! transfer completes byte for byte once the slow side reads again. Slow or
//! oversized request heads are cut with 408/431; idle connections hold no
//! buffers; above the connection cap new clients wait in the kernel backlog.
//!
//! Bodies here are large, so they are never held whole: both ends stream a
//! deterministic pattern (see [`pattern`]) and check it slice by slice.

mod util;

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use util::*;

/// Bytes one proxy read takes from a socket (`READ_CHUNK` in the proxy): the
/// most a direction may hold above its high watermark (ARCHITECTURE.md §4).
const READ_CHUNK: usize = 64 * 1024;
/// Allowance for a response or request head the proxy encodes into a buffer
/// on top of body bytes.
const HEAD_ROOM: usize = 1024;
/// Room in front of a response's first read for the head the proxy
/// encodes (`LENT_HEADROOM` in `buffer`): the first read (head and one body
/// buffer's worth) goes on to the client in place, its head rewritten.
const LENT_HEADROOM: usize = 1024;
/// The size a body buffer starts at and keeps while its sink has not
/// proved fast (`BODY_START` in the proxy's `buffer::sizing`): a side
/// that stops reading holds this much, not the 32 KiB high watermark.
const BODY_START: usize = 16 * 1024;
/// Largest slice the pattern helpers write or check at once.
const SLICE: usize = 64 * 1024;
/// Period of the body pattern: a prime, so a slice that went missing, came
/// twice or out of order (slices are powers of two) cannot line up again.
const PERIOD: usize = 65_521;
/// How often [`wait_stalled`] looks at a byte count.
const STALL_POLL: Duration = Duration::from_millis(50);
/// How long a byte count must stay unchanged to count as stalled.
const STALL_QUIET: Duration = Duration::from_millis(500);
/// Longest [`wait_stalled`] waits for a count to stall.
const STALL_MAX: Duration = Duration::from_secs(5);
/// Longest a pattern writer keeps retrying a blocked socket before it gives
/// up (longer than any test).
const WRITER_MAX: Duration = Duration::from_secs(15);

const MIB: usize = 1024 * 1024;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `PERIOD + SLICE` bytes where byte `i` depends on `i % PERIOD` only, so
/// the `len <= SLICE` body bytes at offset `o` are `pattern()[o % PERIOD..][..len]`.
fn pattern() -> &'static [u8] {
    static BLOCK: OnceLock<Vec<u8>> = OnceLock::new();
    BLOCK.get_or_init(|| {
        (0..PERIOD + SLICE)
            .map(|i| (((i % PERIOD) as u32).wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect()
    })
}

/// The `len <= SLICE` pattern bytes of a body at `offset`.
fn pattern_at(offset: usize, len: usize) -> &'static [u8] {
    let start = offset % PERIOD;
    &pattern()[start..start + len]
}

/// Writes body bytes `0..total` of the pattern to `stream` in slices of
/// [`SLICE`], adding each accepted byte to `written` as it goes. A blocked
/// write (the peer does not read) is retried until [`WRITER_MAX`].
fn write_pattern(stream: &mut TcpStream, total: usize, written: &AtomicUsize) -> io::Result<()> {
    let deadline = Instant::now() + WRITER_MAX;
    let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
    let mut done = 0;
    while done < total {
        let len = SLICE.min(total - done);
        match stream.write(pattern_at(done, len)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                done += n;
                written.fetch_add(n, Ordering::SeqCst);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) && Instant::now() < deadline => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads body bytes `from..from + len` from `wire`, at most `slice` bytes
/// per read with `pause` after each, and checks them against the pattern.
/// The error names the first offset that differs, or where the bytes ended.
fn read_pattern(
    wire: &mut Wire,
    from: usize,
    len: usize,
    slice: usize,
    pause: Duration,
) -> Result<(), String> {
    let end = from + len;
    let mut at = from;
    while at < end {
        let part = wire
            .read_some(slice.min(SLICE).min(end - at))
            .map_err(|e| format!("read at body offset {at}: {e}"))?;
        if part.is_empty() {
            return Err(format!("EOF at body offset {at} of {end}"));
        }
        let want = pattern_at(at, part.len());
        if part != want {
            let i = part.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!("body differs at offset {}", at + i));
        }
        at += part.len();
        if !pause.is_zero() {
            // Pacing, not synchronisation: this reader is slow on purpose.
            thread::sleep(pause);
        }
    }
    Ok(())
}

/// Polls `count` every [`STALL_POLL`] until it has not changed for
/// [`STALL_QUIET`]; gives up after [`STALL_MAX`]. Returns the last value
/// and whether it stalled.
fn wait_stalled(count: &AtomicUsize) -> (usize, bool) {
    let started = Instant::now();
    let mut last = count.load(Ordering::SeqCst);
    let mut since = Instant::now();
    loop {
        thread::sleep(STALL_POLL);
        let now = count.load(Ordering::SeqCst);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= STALL_QUIET {
            return (now, true);
        }
        if started.elapsed() >= STALL_MAX {
            return (now, false);
        }
    }
}

/// Most bytes the proxy may hold at once with `high` as its high watermark:
/// the watermark, one read chunk past it, and a head (ARCHITECTURE.md §4).
fn buffered_bound(high: usize) -> u64 {
    (high + READ_CHUNK + HEAD_ROOM) as u64
}

/// Reads a 200 response head announcing `len` body bytes, then the body at
/// full speed, checked against the pattern; `what` names it in a failure.
#[track_caller]
fn read_pattern_response(client: &mut Client, len: usize, what: &str) {
    let head = client.read_response_head();
    assert_eq!(head.status, 200, "{}", preview(&head.head));
    assert_eq!(
        head.header("content-length"),
        Some(len.to_string().as_str())
    );
    if let Err(e) = read_pattern(&mut client.wire, 0, len, SLICE, Duration::ZERO) {
        panic!("{what}: {e}");
    }
}

/// A response head for a `len`-byte body.
fn head_for(len: usize) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n")
}

/// An upstream that answers each request with a `len`-byte pattern body
/// written as fast as the proxy takes it, counting body bytes in `written`.
fn pattern_upstream(len: usize, written: Arc<AtomicUsize>) -> Upstream {
    Upstream::start(move |mut conn: UpConn| {
        while conn.read_request().is_some() {
            if !conn.send(head_for(len)) {
                return;
            }
            if write_pattern(&mut conn.wire.stream, len, &written).is_err() {
                return;
            }
        }
    })
}

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

// ---------------------------------------------------------------------------
// 1. A client that reads nothing
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 2. An upstream that stops reading an upload
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 3. Slow and oversized request heads
// ---------------------------------------------------------------------------

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
    for (size, status, why) in rows {
        let mut client = proxy.client();
        client.send_lossy(get_of_size(size));
        let resp = client
            .try_read_response(false)
            .unwrap_or_else(|e| panic!("{why} ({size} bytes): {e}"));
        if status == 200 {
            assert_eq!(resp.status, 200, "{why}: {}", preview(&resp.raw()));
            assert_eq!(resp.body, b"fits", "{why}");
        } else {
            assert_proxy_error(&resp, status);
            client.assert_closed();
        }
    }
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
    for (fields, status, why) in rows {
        let mut client = proxy.client();
        client.send_lossy(get_with_fields(fields));
        let resp = client
            .try_read_response(false)
            .unwrap_or_else(|e| panic!("{why} ({fields} fields): {e}"));
        if status == 200 {
            assert_eq!(resp.status, 200, "{why}: {}", preview(&resp.raw()));
            assert_eq!(resp.body, b"fits", "{why}");
        } else {
            assert_proxy_error(&resp, status);
            client.assert_closed();
        }
    }
    let s = proxy.stats.snapshot();
    assert_eq!(s.status_431, 2, "{s:?}");
    assert_eq!(
        upstream.requests().len(),
        1,
        "only heads within the limit go up"
    );
}

// ---------------------------------------------------------------------------
// 4. Idle keep-alive connections
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 5. The connection cap
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 6. Small watermarks
// ---------------------------------------------------------------------------

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

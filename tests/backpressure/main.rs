//! Backpressure and slow peers (ARCHITECTURE.md §4, §8, §9): a side that does not
//! read stops the other side at the high watermark plus what the kernel's
//! socket buffers hold, the proxy's own buffering stays bounded, and the
//! transfer completes byte for byte once the slow side reads again. Slow or
//! oversized request heads are cut with 408/431; idle connections hold no
//! buffers; above the connection cap new clients wait in the kernel backlog.
//!
//! Bodies here are large, so they are never held whole: both ends stream a
//! deterministic pattern (see [`pattern`]) and check it slice by slice.

#[path = "../util/mod.rs"]
mod util;

mod connection_cap;
mod download;
mod heads;
mod idle;
mod upload;
mod watermarks;

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

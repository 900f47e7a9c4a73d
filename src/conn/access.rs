//! The access record: one per request whose head was read (and one per
//! 4xx answer to a head that could not be read), for exchanges and for the
//! proxy's own answers alike (ARCHITECTURE.md §11): its fields ([`Access`],
//! with every try as an [`Attempt`]), and the method and target sniffed
//! from a head that could not be read. [`Access::record`] is the one place
//! a request is counted in the outcome table and the latency histograms,
//! and formatted into the access log's buffer (shortened to fit `PIPE_BUF`
//! where the log asks it). How the exchange ended is a [`Termination`]
//! (`termination.rs`); the text and JSON forms are written in `format.rs`,
//! the time in `stamp.rs`.
//!
//! What it must not know: sockets, buffers; it formats what it is given.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use crate::access_log::AccessLog;
use crate::conn::transport::TlsFacts;
use crate::stats::Stats;

mod format;
mod stamp;
mod termination;

#[cfg(test)]
pub(crate) use format::escape_text;
pub(crate) use stamp::{StampCache, rfc3339_ms};
pub(crate) use termination::Termination;

/// One try of a request on an upstream server, as the access record
/// lists it (nginx's `$upstream_addr`, `$upstream_status`,
/// `$upstream_connect_time`, one entry per server tried).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempt {
    /// The server.
    pub addr: SocketAddr,
    /// Its response's status; 0 when none came.
    pub status: u16,
    /// The connect's time (a new connection only; for a failed connect,
    /// the time spent on it).
    pub connect: Option<Duration>,
    /// `ok` (a response came), or how the try failed: `refused`,
    /// `connect_timeout`, `connect_error`, `reset`, `closed`,
    /// `read_timeout`, `write_timeout`, `invalid_response`,
    /// `no_descriptor`, or the request's termination for a try the proxy
    /// cut (`client_aborted`, …).
    pub outcome: &'static str,
}

/// Whom a record is about: the client's address and its connection's TLS
/// facts (`None`: plain, or no handshake done).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Downstream<'a> {
    /// The client's address (after a PROXY header or trusted
    /// `X-Forwarded-For`).
    pub addr: SocketAddr,
    /// The TLS facts of the client connection.
    pub tls: Option<TlsFacts<'a>>,
    /// The HTTP/2 stream the request came on (`None`: HTTP/1).
    pub stream: Option<u32>,
}

/// What one access record says.
pub(crate) struct Access<'a> {
    /// The client's address.
    pub client: SocketAddr,
    /// The client connection's TLS facts (`None`: plain).
    pub tls: Option<TlsFacts<'a>>,
    /// Request method (`-` if the head could not be read).
    pub method: &'a str,
    /// Request target as received (possibly cut short for an unreadable
    /// head).
    pub target: &'a [u8],
    /// Request minor version (0 or 1); `None` if the head could not be read.
    pub version: Option<u8>,
    /// The HTTP/2 stream it came on (`None`: HTTP/1; the protocol is then
    /// `HTTP/2.0`).
    pub stream: Option<u32>,
    /// The `Host` field's value, if any.
    pub host: Option<&'a [u8]>,
    /// The request's `X-Request-Id` (`request_id`), if any.
    pub request_id: Option<&'a [u8]>,
    /// Status the client got (499: it left before any answer).
    pub status: u16,
    /// Request body bytes taken from the client (chunk framing excluded).
    pub bytes_in: u64,
    /// Response body bytes queued toward the client (chunk framing
    /// excluded).
    pub bytes_out: u64,
    /// When the request head was complete.
    pub started: Instant,
    /// The upstream peer, `None` for the proxy's own answer.
    pub upstream: Option<SocketAddr>,
    /// Time the upstream connect took (a new connection only).
    pub connect: Option<Duration>,
    /// From `started` to the first response byte from the upstream.
    pub first_byte: Option<Duration>,
    /// `Some(reused)` if an upstream connection carried the request.
    pub reused: Option<bool>,
    /// Times the request was sent again.
    pub retries: u32,
    /// Every try, in order (empty for the proxy's own answer).
    pub attempts: &'a [Attempt],
    /// How it ended.
    pub termination: Termination,
}

// A record shortened to fit `PIPE_BUF` keeps at most these many bytes of
// its method, target and host (before escaping): escaped at the worst (6
// bytes for one, in JSON) and with the other fields, it stays under 4,096.
/// Longest method of a shortened record (bytes).
const SHORT_METHOD: usize = 32;
/// Longest target of a shortened record (bytes).
const SHORT_TARGET: usize = 384;
/// Longest host of a shortened record (bytes).
const SHORT_HOST: usize = 96;

/// `bytes` cut to `max` bytes followed by `...` if longer (a cut method
/// stays ASCII: it is a token).
fn shorten(bytes: &[u8], max: usize) -> std::borrow::Cow<'_, [u8]> {
    match bytes.get(..max) {
        Some(head) if bytes.len() > max => {
            let mut cut = head.to_vec();
            cut.extend_from_slice(b"...");
            std::borrow::Cow::Owned(cut)
        }
        _ => std::borrow::Cow::Borrowed(bytes),
    }
}

impl Access<'_> {
    /// Counts the request (outcome table, histograms) and writes its record
    /// into `log`'s buffer. The duration runs from `started` to the clock
    /// read here (not the batch's time: a fast round trip inside one batch
    /// would read 0).
    pub(crate) fn record(&self, stats: &Stats, log: &mut AccessLog) {
        let now = Instant::now();
        let duration = now.saturating_duration_since(self.started);
        stats.outcomes.count(self.status, self.termination.index());
        stats.request_duration.observe(duration);
        if let Some(fb) = self.first_byte {
            stats.upstream_first_byte.observe(fb);
        }
        if !log.is_on() {
            return;
        }
        let format = log.format();
        let mut stamp = [0u8; 24];
        let time = log.stamp(SystemTime::now().checked_sub(duration), &mut stamp);
        let fit = log.records_fit_pipe_buf();
        let Some(buf) = log.line_buffer(now) else {
            // A stalled reader left no room: the log counts the drop.
            return;
        };
        let start = buf.len();
        self.write(format, buf, time, duration);
        if fit && buf.len().saturating_sub(start) > libc::PIPE_BUF {
            // Other workers write the same pipe: only a record of at most
            // PIPE_BUF bytes is written in one piece, so the fields the
            // client chose the length of are shortened (HAProxy truncates
            // its log lines too).
            buf.truncate(start);
            let method = shorten(self.method.as_bytes(), SHORT_METHOD);
            let target = shorten(self.target, SHORT_TARGET);
            let host = self.host.map(|h| shorten(h, SHORT_HOST));
            let id = self
                .request_id
                .map(|h| shorten(h, crate::request_id::MAX_KEPT));
            let short = Access {
                method: std::str::from_utf8(&method).unwrap_or("-"),
                target: &target,
                host: host.as_deref(),
                request_id: id.as_deref(),
                ..*self
            };
            short.write(format, buf, time, duration);
        }
    }
}

/// Method and target sniffed from the bytes of a head that could not be
/// parsed (too large, malformed, timed out): the first word (at most 32
/// bytes, `-` if none) and the second (at most 512 bytes), for the record
/// of the 4xx it got. Words are split at spaces and tabs: `GET\t/a` (a
/// 400, RFC 9112 §3 wants one SP) is logged as `GET` and `/a`, not as no
/// method and the version for a target.
pub(crate) fn sniff_request_line(bytes: &[u8]) -> (String, Vec<u8>) {
    let line = bytes
        .split(|&b| b == b'\n' || b == b'\r')
        .next()
        .unwrap_or_default();
    let mut words = line
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty());
    let method: String = match words.next() {
        Some(w) if w.len() <= 32 && w.iter().all(|b| b.is_ascii_graphic()) => {
            String::from_utf8_lossy(w).into_owned()
        }
        _ => "-".to_string(),
    };
    let target = words
        .next()
        .map(|w| w.get(..w.len().min(512)).unwrap_or(w).to_vec())
        .unwrap_or_else(|| b"-".to_vec());
    (method, target)
}

#[cfg(test)]
mod tests {
    use super::sniff_request_line;

    #[test]
    fn an_unreadable_request_line_is_sniffed_at_spaces_and_tabs() {
        // (line, method, target)
        for (line, method, target) in [
            (&b"GET /a HTTP/1.1\r\n"[..], "GET", &b"/a"[..]),
            (b"GET\t/a HTTP/1.1\r\n", "GET", b"/a"),
            (b"GET  /a\tHTTP/1.1", "GET", b"/a"),
            (b"\x01\x02 /a", "-", b"/a"),
            (b"", "-", b"-"),
        ] {
            let (m, t) = sniff_request_line(line);
            assert_eq!((m.as_str(), t.as_slice()), (method, target), "{line:?}");
        }
    }
}

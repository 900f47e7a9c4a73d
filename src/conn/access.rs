//! The access record: one per request whose head was read (and one per
//! 4xx answer to a head that could not be read), for exchanges and for the
//! proxy's own answers alike (ARCHITECTURE.md §11). [`Access::record`] is
//! the one place a request is counted in the outcome table and the latency
//! histograms, and formatted into the access log's buffer.
//!
//! Formats (docs/observability.md, "Access log"): `text`, fields as `key=value`, the ones
//! that may hold spaces `"`-quoted, with `"`, `\`, control bytes and bytes
//! above 0x7e escaped as `\xHH` (nginx's `escape=default`); `json`, one
//! object per line with the field names the issue fixed (`time`, `client`,
//! `method`, `target`, `protocol`, `host`, `status`, `bytes_in`,
//! `bytes_out`, `duration_ms`, `upstream`, `upstream_connect_ms`,
//! `upstream_first_byte_ms`, `upstream_conn`, `retries`, `termination`),
//! and `upstreams`: every server tried, in order, as `{"addr", "status",
//! "connect_ms", "outcome"}` (issue 27). The text form lists the tries
//! as nginx's `$upstream_addr` and `$upstream_status` do:
//! `upstream_addr="A, B" upstream_status="502, 200"`.
//!
//! What it must not know: sockets, buffers; it formats what it is given.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::access_log::AccessLog;
use crate::config::AccessLogFormat;
use crate::conn::transport::TlsFacts;
use crate::stats::Stats;
use crate::text;

/// How an exchange ended (HAProxy's termination flags are the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Termination {
    /// The response went out whole.
    Complete,
    /// The client reset or closed before the response was complete (499 if
    /// no answer had started).
    ClientAborted,
    /// A client timer ran out: request head, request body gap, or send;
    /// or a tunnel's idle timeout (neither side sent).
    ClientTimeout,
    /// The upstream closed or reset before its response was complete.
    UpstreamClosedEarly,
    /// An upstream timer ran out: connect, read or write gap.
    UpstreamTimeout,
    /// The upstream connect failed (refused, unreachable).
    UpstreamRefused,
    /// The TLS handshake with the upstream failed (verification, an
    /// alert, closed during it).
    UpstreamTlsError,
    /// The drain deadline (or a stop) closed the connection mid-request.
    DrainCut,
    /// `request_filter` answered instead of an upstream, or the proxy as
    /// the final recipient (`Max-Forwards: 0`).
    ProxyReply,
    /// The proxy refused the request (400/404 no route/414/431/501/505/
    /// 508) or the upstream's response (502: invalid head, unexpected 101).
    ProxyError,
    /// The proxy refused a request body over `max_body_size` (413, or a
    /// close once the response had started).
    BodyTooLarge,
    /// A route's `allow`/`deny` refused the client (403).
    Denied,
    /// A route's `redirect` answered (301/302/307/308).
    Redirect,
    /// A route's `respond` answered with its fixed response.
    FixedAnswer,
    /// A route's `rate_limit` refused the client (429).
    RateLimited,
}

impl Termination {
    /// How an exchange ended by `err` is reported (access log, metrics).
    pub(crate) fn of_error(err: &crate::error::ProxyError) -> Termination {
        use crate::error::{ErrorKind as K, Side};
        use crate::http::ParseError;
        match (err.side, &err.kind) {
            (Side::Downstream, K::Parse(ParseError::BodyTooLarge)) => Termination::BodyTooLarge,
            (Side::Downstream, K::Parse(_) | K::NotImplemented) => Termination::ProxyError,
            (Side::Downstream, K::Timeout(_)) => Termination::ClientTimeout,
            (Side::Downstream, _) => Termination::ClientAborted,
            (Side::Upstream, k) if k.is_upstream_tls() => Termination::UpstreamTlsError,
            (Side::Upstream, K::ConnectFailed(_)) => Termination::UpstreamRefused,
            (Side::Upstream, K::Timeout(_)) => Termination::UpstreamTimeout,
            (Side::Upstream, K::Closed | K::Io(_)) => Termination::UpstreamClosedEarly,
            (Side::Upstream, _) => Termination::ProxyError,
        }
    }

    /// Every state, in the outcome table's column order.
    pub(crate) const ALL: [Termination; crate::stats::TERMINATIONS] = [
        Termination::Complete,
        Termination::ClientAborted,
        Termination::ClientTimeout,
        Termination::UpstreamClosedEarly,
        Termination::UpstreamTimeout,
        Termination::UpstreamRefused,
        Termination::DrainCut,
        Termination::ProxyReply,
        Termination::ProxyError,
        Termination::BodyTooLarge,
        Termination::Denied,
        Termination::Redirect,
        Termination::FixedAnswer,
        Termination::UpstreamTlsError,
        Termination::RateLimited,
    ];

    /// The name written in the access log and the metrics' label.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Termination::Complete => "complete",
            Termination::ClientAborted => "client_aborted",
            Termination::ClientTimeout => "client_timeout",
            Termination::UpstreamClosedEarly => "upstream_closed_early",
            Termination::UpstreamTimeout => "upstream_timeout",
            Termination::UpstreamRefused => "upstream_refused",
            Termination::DrainCut => "drain_cut",
            Termination::ProxyReply => "proxy_reply",
            Termination::ProxyError => "proxy_error",
            Termination::BodyTooLarge => "body_too_large",
            Termination::Denied => "denied",
            Termination::Redirect => "redirect",
            Termination::FixedAnswer => "fixed_answer",
            Termination::UpstreamTlsError => "upstream_tls_error",
            Termination::RateLimited => "rate_limited",
        }
    }

    /// Its column in the outcome table.
    fn index(self) -> usize {
        Termination::ALL
            .iter()
            .position(|&t| t == self)
            .unwrap_or(0)
    }
}

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

/// The JSON form of an [`Attempt`].
#[derive(Serialize)]
struct JsonAttempt {
    addr: String,
    status: Option<u16>,
    connect_ms: Option<f64>,
    outcome: &'static str,
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

/// The JSON form, field names as the issue gives them.
#[derive(Serialize)]
struct Json<'a> {
    time: &'a str,
    client: String,
    method: &'a str,
    target: std::borrow::Cow<'a, str>,
    protocol: Option<&'static str>,
    host: Option<std::borrow::Cow<'a, str>>,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    duration_ms: f64,
    upstream: Option<String>,
    upstream_connect_ms: Option<f64>,
    upstream_first_byte_ms: Option<f64>,
    upstream_conn: Option<&'static str>,
    retries: u32,
    tls_version: Option<&'static str>,
    tls_cipher: Option<&'static str>,
    sni: Option<&'a str>,
    tls_resumed: Option<bool>,
    termination: &'static str,
    upstreams: Vec<JsonAttempt>,
    request_id: Option<std::borrow::Cow<'a, str>>,
    stream_id: Option<u32>,
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

    fn write(&self, format: AccessLogFormat, buf: &mut Vec<u8>, time: &str, duration: Duration) {
        match format {
            AccessLogFormat::Text => self.write_text(buf, time, duration),
            AccessLogFormat::Json => self.write_json(buf, time, duration),
        }
    }

    fn protocol(&self) -> Option<&'static str> {
        if self.stream.is_some() {
            return Some("HTTP/2.0");
        }
        self.version
            .map(|v| if v == 0 { "HTTP/1.0" } else { "HTTP/1.1" })
    }

    /// The text record; numbers and addresses through `crate::text`, not
    /// `core::fmt` (issue 11: the access log's cost per request).
    fn write_text(&self, buf: &mut Vec<u8>, time: &str, duration: Duration) {
        buf.extend_from_slice(time.as_bytes());
        buf.extend_from_slice(b" client=");
        text::push_socket_addr(buf, self.client);
        buf.extend_from_slice(b" \"");
        escape_text(buf, self.method.as_bytes());
        buf.push(b' ');
        escape_text(buf, self.target);
        buf.push(b' ');
        buf.extend_from_slice(self.protocol().unwrap_or("-").as_bytes());
        buf.extend_from_slice(b"\" host=");
        match self.host {
            Some(h) => {
                buf.push(b'"');
                escape_text(buf, h);
                buf.push(b'"');
            }
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" status=");
        text::push_uint(buf, self.status);
        buf.extend_from_slice(b" bytes_in=");
        text::push_uint(buf, self.bytes_in);
        buf.extend_from_slice(b" bytes_out=");
        text::push_uint(buf, self.bytes_out);
        buf.extend_from_slice(b" duration_ms=");
        text::push_ms3(buf, duration);
        buf.extend_from_slice(b" upstream=");
        match self.upstream {
            Some(a) => text::push_socket_addr(buf, a),
            None => buf.push(b'-'),
        }
        for (key, value) in [
            (" upstream_connect_ms=", self.connect),
            (" upstream_first_byte_ms=", self.first_byte),
        ] {
            buf.extend_from_slice(key.as_bytes());
            match value {
                Some(d) => text::push_ms3(buf, d),
                None => buf.push(b'-'),
            }
        }
        buf.extend_from_slice(b" upstream_conn=");
        buf.extend_from_slice(conn_name(self.reused).unwrap_or("-").as_bytes());
        buf.extend_from_slice(b" retries=");
        text::push_uint(buf, self.retries);
        // nginx's `$upstream_addr` and `$upstream_status`: one entry per
        // server tried, `, ` between them; `-` for no status.
        buf.extend_from_slice(b" upstream_addr=");
        self.push_list(buf, |buf, a| text::push_socket_addr(buf, a.addr));
        buf.extend_from_slice(b" upstream_status=");
        self.push_list(buf, |buf, a| match a.status {
            0 => buf.push(b'-'),
            s => text::push_uint(buf, s),
        });
        self.push_tls(buf);
        buf.extend_from_slice(b" request_id=");
        match self.request_id {
            Some(id) => escape_text(buf, id),
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" termination=");
        buf.extend_from_slice(self.termination.name().as_bytes());
        buf.push(b'\n');
    }

    /// The TLS fields of the text record: ` tls=TLSv1.3
    /// tls_cipher=TLS13_AES_128_GCM_SHA256 sni="a.example.com"
    /// tls_resumed=false`, each `-` for a plain connection (and `sni=-`
    /// when the client sent none).
    fn push_tls(&self, buf: &mut Vec<u8>) {
        let t = self.tls;
        buf.extend_from_slice(b" tls=");
        buf.extend_from_slice(t.map_or("-", |t| t.version).as_bytes());
        buf.extend_from_slice(b" tls_cipher=");
        buf.extend_from_slice(t.map_or("-", |t| t.cipher).as_bytes());
        buf.extend_from_slice(b" sni=");
        match t.and_then(|t| t.sni) {
            Some(n) => {
                buf.push(b'"');
                escape_text(buf, n.as_bytes());
                buf.push(b'"');
            }
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" tls_resumed=");
        let resumed = t.map(|t| if t.resumed { "true" } else { "false" });
        buf.extend_from_slice(resumed.unwrap_or("-").as_bytes());
    }

    /// The tries as `"a, b"` (`-` when none), each written by `item`.
    fn push_list(&self, buf: &mut Vec<u8>, item: impl Fn(&mut Vec<u8>, &Attempt)) {
        if self.attempts.is_empty() {
            buf.push(b'-');
            return;
        }
        buf.push(b'"');
        for (i, a) in self.attempts.iter().enumerate() {
            if i > 0 {
                buf.extend_from_slice(b", ");
            }
            item(buf, a);
        }
        buf.push(b'"');
    }

    fn write_json(&self, buf: &mut Vec<u8>, time: &str, duration: Duration) {
        let record = Json {
            time,
            client: self.client.to_string(),
            method: self.method,
            target: String::from_utf8_lossy(self.target),
            protocol: self.protocol(),
            host: self.host.map(String::from_utf8_lossy),
            status: self.status,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            duration_ms: round3(ms(duration)),
            upstream: self.upstream.map(|a| a.to_string()),
            upstream_connect_ms: self.connect.map(|d| round3(ms(d))),
            upstream_first_byte_ms: self.first_byte.map(|d| round3(ms(d))),
            upstream_conn: conn_name(self.reused),
            retries: self.retries,
            tls_version: self.tls.map(|t| t.version),
            tls_cipher: self.tls.map(|t| t.cipher),
            sni: self.tls.and_then(|t| t.sni),
            tls_resumed: self.tls.map(|t| t.resumed),
            termination: self.termination.name(),
            upstreams: self
                .attempts
                .iter()
                .map(|a| JsonAttempt {
                    addr: a.addr.to_string(),
                    status: (a.status != 0).then_some(a.status),
                    connect_ms: a.connect.map(|d| round3(ms(d))),
                    outcome: a.outcome,
                })
                .collect(),
            request_id: self.request_id.map(String::from_utf8_lossy),
            stream_id: self.stream,
        };
        if serde_json::to_writer(&mut *buf, &record).is_ok() {
            buf.push(b'\n');
        }
    }
}

fn conn_name(reused: Option<bool>) -> Option<&'static str> {
    reused.map(|r| if r { "reused" } else { "new" })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Rounds to 3 decimals (µs), so JSON numbers stay short.
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Appends `bytes` with `"`, `\`, control bytes and bytes outside
/// 0x20..=0x7e written as `\xHH` (nginx's `escape=default`).
pub(crate) fn escape_text(buf: &mut Vec<u8>, mut bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let escaped = |b: u8| b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b);
    // Runs of bytes that need no escape (all of them, mostly) go in one copy.
    while let Some(at) = bytes.iter().position(|&b| escaped(b)) {
        let (run, rest) = bytes.split_at(at);
        buf.extend_from_slice(run);
        let Some((&b, rest)) = rest.split_first() else {
            return;
        };
        let hex = |n: u8| HEX.get(usize::from(n & 0xf)).copied().unwrap_or(b'0');
        buf.extend_from_slice(&[b'\\', b'x', hex(b >> 4), hex(b)]);
        bytes = rest;
    }
    buf.extend_from_slice(bytes);
}

/// `time` as RFC 3339 in UTC with milliseconds (`2026-01-02T03:04:05.678Z`);
/// the epoch if the clock is before it.
pub(crate) fn rfc3339_ms(time: Option<SystemTime>) -> String {
    let mut out = [0u8; 24];
    StampCache::default().stamp(time, &mut out).to_string()
}

/// The second last written as RFC 3339 (`YYYY-MM-DDTHH:MM:SS`): the
/// records of one second share it, so the calendar date is worked out
/// once a second, not per record, and no record allocates its time.
#[derive(Debug, Default)]
pub(crate) struct StampCache {
    /// Seconds since the epoch of `text`, if set.
    secs: Option<u64>,
    text: [u8; 19],
}

impl StampCache {
    /// `time` as RFC 3339 in UTC with milliseconds
    /// (`2026-01-02T03:04:05.678Z`), written into `out`; the epoch if the
    /// clock is before it.
    pub(crate) fn stamp<'a>(&mut self, time: Option<SystemTime>, out: &'a mut [u8; 24]) -> &'a str {
        let since = time
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        let secs = since.as_secs();
        if self.secs != Some(secs) {
            let rem = secs % 86_400;
            let (y, m, d) = crate::http::date::civil_from_days(secs / 86_400);
            let mut text = std::io::Cursor::new(&mut self.text[..]);
            let _ = write!(
                text,
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            );
            self.secs = Some(secs);
        }
        let (head, tail) = out.split_at_mut(19);
        head.copy_from_slice(&self.text);
        let ms = u64::from(since.subsec_millis());
        let digits = [
            b'.',
            text::digit(ms / 100),
            text::digit(ms / 10),
            text::digit(ms),
            b'Z',
        ];
        for (slot, b) in tail.iter_mut().zip(digits) {
            *slot = b;
        }
        std::str::from_utf8(out).unwrap_or_default()
    }
}

/// Method and target sniffed from the bytes of a head that could not be
/// parsed (too large, malformed, timed out): the first word (at most 32
/// bytes, `-` if none) and the second (at most 512 bytes), for the record
/// of the 4xx it got.
pub(crate) fn sniff_request_line(bytes: &[u8]) -> (String, Vec<u8>) {
    let line = bytes
        .split(|&b| b == b'\n' || b == b'\r')
        .next()
        .unwrap_or_default();
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
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

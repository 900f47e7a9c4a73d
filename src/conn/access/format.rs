//! An [`Access`] record written out, in the format the log is set to
//! (docs/observability.md, "Access log"): `text`, fields as `key=value`,
//! the ones that may hold spaces `"`-quoted, with `"`, `\`, control bytes
//! and bytes above 0x7e escaped as `\xHH` (nginx's `escape=default`);
//! `json`, one object per line with the field names the issue fixed
//! (`time`, `client`, `method`, `target`, `protocol`, `host`, `status`,
//! `bytes_in`, `bytes_out`, `duration_ms`, `upstream`,
//! `upstream_connect_ms`, `upstream_first_byte_ms`, `upstream_conn`,
//! `retries`, `termination`), and `upstreams`: every server tried, in
//! order, as `{"addr", "status", "connect_ms", "outcome"}` (issue 27). The
//! text form lists the tries as nginx's `$upstream_addr` and
//! `$upstream_status` do: `upstream_addr="A, B" upstream_status="502, 200"`.
//!
//! What it must not know: sockets, the log's buffer and its bounds (the
//! caller hands it the line to append to), the outcome table.

use std::time::Duration;

use serde::Serialize;

use super::{Access, Attempt};
use crate::config::AccessLogFormat;
use crate::text;

/// The JSON form of an [`Attempt`].
#[derive(Serialize)]
struct JsonAttempt {
    addr: String,
    status: Option<u16>,
    connect_ms: Option<f64>,
    outcome: &'static str,
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
    pub(super) fn write(
        &self,
        format: AccessLogFormat,
        buf: &mut Vec<u8>,
        time: &str,
        duration: Duration,
    ) {
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
        // A missing value is `-` (docs/observability.md), not an empty
        // field two spaces wide.
        for (i, field) in [self.method.as_bytes(), self.target]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                buf.push(b' ');
            }
            if field.is_empty() {
                buf.push(b'-');
            } else {
                escape_text(buf, field);
            }
        }
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

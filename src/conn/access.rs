//! The access-log record: one line per request whose head was read, for
//! exchanges and for the proxy's own answers alike (ARCHITECTURE.md §11).
//!
//! What it must not know: sockets, buffers; it formats what it is given.
//! Nothing is formatted (nor allocated) when the `info` level is off.

use std::net::SocketAddr;
use std::time::Instant;

use log::info;

/// What one access line says.
pub(crate) struct Access<'a> {
    /// The client's address.
    pub client: SocketAddr,
    /// Request method.
    pub method: &'a str,
    /// Request target as forwarded.
    pub target: &'a str,
    /// Request minor version (0 or 1).
    pub version: u8,
    /// Status the client got (499: it left before any answer).
    pub status: u16,
    /// The upstream peer, `None` for the proxy's own answer.
    pub upstream: Option<SocketAddr>,
    /// `(reused, local port)` of the upstream connection, if one was used.
    pub upconn: Option<(bool, u16)>,
    /// Request body bytes taken from the client.
    pub req_body: u64,
    /// Response bytes queued toward the client (head and body).
    pub resp_bytes: u64,
    /// When the request head was complete.
    pub started: Instant,
}

impl Access<'_> {
    /// Writes the line at `info` (target `sluice`), with the duration up to
    /// `now` in milliseconds.
    pub(crate) fn log(&self, now: Instant) {
        if !log::log_enabled!(log::Level::Info) {
            return;
        }
        let upstream = match self.upstream {
            Some(a) => a.to_string(),
            None => "-".to_string(),
        };
        let upconn = match self.upconn {
            Some((reused, port)) => format!("{}:{port}", if reused { "reused" } else { "new" }),
            None => "none".to_string(),
        };
        info!(
            "access client={} \"{} {} HTTP/1.{}\" status={} upstream={} upconn={} req_body={} resp_bytes={} ms={:.2}",
            self.client,
            self.method,
            self.target,
            self.version,
            self.status,
            upstream,
            upconn,
            self.req_body,
            self.resp_bytes,
            now.saturating_duration_since(self.started).as_secs_f64() * 1000.0
        );
    }
}

//! `Config`: every knob of the proxy, with the defaults of DESIGN.md §9.
//!
//! This module knows no sockets and no HTTP; it holds values and checks that
//! they fit together (`Config::validate`). The binary fills it from the
//! command line; the library takes it as it is.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Largest `high_watermark` accepted, bytes.
pub const MAX_WATERMARK: usize = 64 * 1024 * 1024;
/// Largest `max_head_size` accepted, bytes.
pub const MAX_HEAD_SIZE: usize = 1024 * 1024;
/// Largest `max_header_count` accepted.
pub const MAX_HEADER_COUNT: usize = 10_000;
/// Largest `max_retries` accepted (retries run back to back on the loop).
pub const MAX_RETRIES: usize = 10;
/// Largest `max_connections` and pool caps accepted.
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// Most worker processes.
pub const MAX_WORKERS: usize = 1024;

/// All settings of one proxy process. Durations are wall-clock spans;
/// sizes are bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Address the downstream listener binds (`127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// Upstream peer that the default filter sends every request to.
    pub upstream: SocketAddr,
    /// Idle time allowed between two requests on a keep-alive downstream
    /// connection before it is closed silently (default 60 s; nginx 75 s).
    pub keepalive_timeout: Duration,
    /// Time allowed for a whole request head to arrive, counted from accept
    /// for the first request and from its first byte for later ones
    /// (default 10 s). 408 if part of a head came, silent close otherwise.
    pub request_head_timeout: Duration,
    /// Longest gap between two reads of a request body (default 60 s;
    /// nginx `client_body_timeout`).
    pub client_body_timeout: Duration,
    /// Longest time the downstream may accept no byte of pending response
    /// data before it is closed (default 60 s; nginx `send_timeout`).
    pub client_send_timeout: Duration,
    /// Largest request or response head, in bytes (default 64 KiB); a larger
    /// request head gets 431, a larger response head 502.
    pub max_head_size: usize,
    /// Most header fields in one head (default 100); more gets 431.
    pub max_header_count: usize,
    /// Pending bytes per direction at which the source's read interest is
    /// removed (default 64 KiB). DESIGN.md §4.
    pub high_watermark: usize,
    /// Pending bytes per direction at or below which the source's read
    /// interest comes back (default 16 KiB). Must be below `high_watermark`.
    pub low_watermark: usize,
    /// Time allowed for a non-blocking connect to an upstream (default 3 s);
    /// then 504.
    pub upstream_connect_timeout: Duration,
    /// Longest wait for the response head and longest gap between reads of
    /// the response body (default 60 s; nginx `proxy_read_timeout`).
    pub upstream_read_timeout: Duration,
    /// Longest time the upstream may accept no byte of pending request data
    /// (default 60 s; nginx `proxy_send_timeout`).
    pub upstream_write_timeout: Duration,
    /// How long an idle pooled upstream connection is kept (default 60 s).
    pub pool_idle_timeout: Duration,
    /// Most idle pooled connections per upstream peer (default 128).
    pub pool_max_idle_per_peer: usize,
    /// Most idle pooled connections in the process (default 4096); above it
    /// the globally oldest idle connection is closed.
    pub pool_max_idle_total: usize,
    /// How many times a failed request may be sent again on a new upstream
    /// connection (default 1). DESIGN.md §7.
    pub max_retries: u32,
    /// Most downstream connections open at once; above it the listener stops
    /// accepting until one closes (default 10 000).
    pub max_connections: usize,
    /// Longest time a graceful drain (SIGTERM) waits for in-flight exchanges
    /// before the process exits anyway (default 30 s).
    pub drain_timeout: Duration,
    /// Worker processes to run (`--workers N|auto`); 0 (`auto`) means one
    /// per CPU. With 1 (the default) the loop runs in the process itself.
    pub workers: usize,
    /// Append `Via: 1.1 sluice` to requests going upstream (RFC 9110 §7.6.3).
    pub add_via: bool,
    /// Append the client's address to `X-Forwarded-For`.
    pub add_x_forwarded_for: bool,
    /// Set `X-Forwarded-Proto: http` on requests going upstream.
    pub add_x_forwarded_proto: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            upstream: SocketAddr::from(([127, 0, 0, 1], 8000)),
            keepalive_timeout: Duration::from_secs(60),
            request_head_timeout: Duration::from_secs(10),
            client_body_timeout: Duration::from_secs(60),
            client_send_timeout: Duration::from_secs(60),
            max_head_size: 64 * 1024,
            max_header_count: 100,
            high_watermark: 64 * 1024,
            low_watermark: 16 * 1024,
            upstream_connect_timeout: Duration::from_secs(3),
            upstream_read_timeout: Duration::from_secs(60),
            upstream_write_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_peer: 128,
            pool_max_idle_total: 4096,
            max_retries: 1,
            max_connections: 10_000,
            drain_timeout: Duration::from_secs(30),
            workers: 1,
            add_via: true,
            add_x_forwarded_for: true,
            add_x_forwarded_proto: true,
        }
    }
}

/// A setting that does not fit: the knob's name and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Name of the knob, as spelled on the command line without `--`.
    pub key: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.key, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Checks that the values fit together.
    ///
    /// Errors: `low-watermark` not below `high-watermark`, a zero size or
    /// count where one is needed, a zero timeout.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key, reason: &str| {
            Err(ConfigError {
                key,
                reason: reason.to_string(),
            })
        };
        if self.high_watermark == 0 {
            return err("high-watermark", "must be at least 1 byte");
        }
        if self.low_watermark >= self.high_watermark {
            return err("low-watermark", "must be below high-watermark");
        }
        if self.max_head_size < 64 {
            return err("max-head-size", "must be at least 64 bytes");
        }
        if self.max_header_count == 0 {
            return err("max-header-count", "must be at least 1");
        }
        if self.max_connections == 0 {
            return err("max-connections", "must be at least 1");
        }
        // Upper bounds: each is allocated or repeated per connection or per
        // request, so a typo must not become an abort or a busy loop.
        let caps: [(&'static str, usize, usize, &str); 7] = [
            (
                "high-watermark",
                self.high_watermark,
                MAX_WATERMARK,
                "64 MiB (a buffer of this size per direction of each busy connection)",
            ),
            ("max-head-size", self.max_head_size, MAX_HEAD_SIZE, "1 MiB"),
            (
                "max-header-count",
                self.max_header_count,
                MAX_HEADER_COUNT,
                "10000",
            ),
            ("max-retries", self.max_retries as usize, MAX_RETRIES, "10"),
            (
                "max-connections",
                self.max_connections,
                MAX_CONNECTIONS,
                "1000000",
            ),
            (
                "pool-max-idle-per-peer",
                self.pool_max_idle_per_peer,
                MAX_CONNECTIONS,
                "1000000",
            ),
            (
                "pool-max-idle-total",
                self.pool_max_idle_total,
                MAX_CONNECTIONS,
                "1000000",
            ),
        ];
        for (key, value, max, text) in caps {
            if value > max {
                return err(key, &format!("must be at most {text}"));
            }
        }
        if self.workers > MAX_WORKERS {
            return err("workers", "must be at most 1024 (0 means one per CPU)");
        }
        let timeouts = [
            ("keepalive-timeout", self.keepalive_timeout),
            ("request-head-timeout", self.request_head_timeout),
            ("client-body-timeout", self.client_body_timeout),
            ("client-send-timeout", self.client_send_timeout),
            ("upstream-connect-timeout", self.upstream_connect_timeout),
            ("upstream-read-timeout", self.upstream_read_timeout),
            ("upstream-write-timeout", self.upstream_write_timeout),
            ("pool-idle-timeout", self.pool_idle_timeout),
            ("drain-timeout", self.drain_timeout),
        ];
        for (key, value) in timeouts {
            if value.is_zero() {
                return err(key, "must be longer than 0 ms");
            }
        }
        Ok(())
    }
}

//! `Config`: every knob of the proxy, each declared once.
//!
//! This module knows no sockets and no HTTP; it holds values and checks that
//! they fit together (`Config::validate`). The binary fills it from the
//! command line and the config file; the library takes it as it is.
//!
//! # One declaration per knob
//!
//! Each field of [`Config`] is the whole declaration of its knob:
//!
//! - its **doc comment**: the first paragraph is the `--help` line (clap
//!   derive), the rest is documentation;
//! - `#[arg(..)]` (clap): the flag (`long` = the field name in kebab-case,
//!   `--keepalive-timeout`), the value's name in the help and its parser;
//! - `#[serde(..)]`: the TOML key is the field name (`keepalive_timeout`),
//!   with the codec for values that are not plain integers or booleans;
//!   the same codec writes the `--check-config` output (`Serialize`);
//! - `= default`: the default, a typed Rust expression. The help text shows
//!   it (rendered through `Serialize`), serde fills missing keys with it
//!   (`#[serde(default)]`), and `Config::default()` returns it.
//!
//! A new knob is one such field (plus the code that uses its value, and a
//! check in [`Config::validate`] if it has limits).
//!
//! The defaults are Rust expressions, not clap `default_value = "60s"`
//! strings, so that `Config::default()` cannot fail: building it from
//! clap's defaults would mean parsing strings at run time and handling an
//! error that cannot be returned from `Default` without a panic. The small
//! `settings!` macro below exists only to carry that `= default` next to
//! each field and to write `impl Default` from it; everything else is plain
//! clap and serde derive on the one struct.
//!
//! Layering (defaults < file < flags) lives in the binary: the file is
//! deserialized into a `Config`, then clap's
//! [`FromArgMatches::update_from_arg_matches`](clap::FromArgMatches) writes
//! over it the flags that came from the command line. No clap default is
//! declared here, so a flag that was not given never overwrites the file
//! (the binary also drops any match whose source is not the command line,
//! such as the implicit `true` of the `--no-via` style flags).
//!
//! What it must not know: sockets, HTTP; it holds values and checks that
//! they fit together.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use clap::ArgAction;
use serde::{Deserialize, Serialize};

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

/// Declares a struct whose fields are written `field: Type = default,` and
/// its `impl Default` from those defaults. Attributes (docs, derives, clap,
/// serde) pass through unchanged.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $default,)*
                }
            }
        }
    };
}

settings! {
    /// All settings of one proxy process. Durations are wall-clock spans;
    /// sizes are bytes.
    ///
    /// Each field is one knob: flag `--field-name`, config file key
    /// `field_name`, help line, default (see the module documentation).
    #[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
    #[group(skip)]
    #[serde(default, deny_unknown_fields)]
    pub struct Config {
        /// Address to accept clients on.
        ///
        /// The downstream listener binds it with `SO_REUSEADDR` and
        /// `SO_REUSEPORT`, so several processes can share it.
        #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
        #[serde(with = "addr")]
        pub listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8080)),

        /// Upstream peer for every request.
        ///
        /// The default filter sends every request to it.
        #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
        #[serde(with = "addr")]
        pub upstream: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8000)),

        /// Idle time between requests.
        ///
        /// Idle time allowed between two requests on a keep-alive downstream
        /// connection before it is closed silently (nginx: 75 s).
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub keepalive_timeout: Duration = Duration::from_secs(60),

        /// Time for a whole request head.
        ///
        /// Counted from accept for the first request and from its first byte
        /// for later ones. 408 if part of a head came, silent close otherwise.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub request_head_timeout: Duration = Duration::from_secs(10),

        /// Longest gap between request body reads.
        ///
        /// nginx: `client_body_timeout`.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub client_body_timeout: Duration = Duration::from_secs(60),

        /// Longest time the client may accept nothing.
        ///
        /// Longest time the downstream may accept no byte of pending response
        /// data before it is closed (nginx: `send_timeout`).
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub client_send_timeout: Duration = Duration::from_secs(60),

        /// Largest request/response head.
        ///
        /// In bytes; a larger request head gets 431, a larger response head
        /// 502.
        #[arg(long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub max_head_size: usize = 64 * 1024,

        /// Most fields in a head.
        ///
        /// More gets 431.
        #[arg(long, value_name = "N", value_parser = whole::<usize>)]
        pub max_header_count: usize = 100,

        /// Pending bytes that pause the source.
        ///
        /// Pending bytes per direction at which the source's read interest is
        /// removed. ARCHITECTURE.md §4.
        #[arg(long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub high_watermark: usize = 64 * 1024,

        /// Pending bytes that resume it.
        ///
        /// Pending bytes per direction at or below which the source's read
        /// interest comes back. Must be below `high_watermark`.
        #[arg(long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub low_watermark: usize = 16 * 1024,

        /// Upstream connect, then 504.
        ///
        /// Time allowed for a non-blocking connect to an upstream.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_connect_timeout: Duration = Duration::from_secs(3),

        /// Response head wait / body read gap.
        ///
        /// Longest wait for the response head, counted from the last request
        /// byte written, and longest gap between reads of the response body
        /// (nginx: `proxy_read_timeout`).
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_read_timeout: Duration = Duration::from_secs(60),

        /// Longest time the upstream may accept nothing.
        ///
        /// Longest time the upstream may accept no byte of pending request
        /// data (nginx: `proxy_send_timeout`).
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_write_timeout: Duration = Duration::from_secs(60),

        /// Idle pooled upstream connection lifetime.
        ///
        /// How long an idle pooled upstream connection is kept.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub pool_idle_timeout: Duration = Duration::from_secs(60),

        /// Idle upstream connections per peer.
        ///
        /// Most idle pooled connections per upstream peer.
        #[arg(long, value_name = "N", value_parser = whole::<usize>)]
        pub pool_max_idle_per_peer: usize = 128,

        /// Idle upstream connections in all.
        ///
        /// Most idle pooled connections in the process; above it the
        /// globally oldest idle connection is closed.
        #[arg(long, value_name = "N", value_parser = whole::<usize>)]
        pub pool_max_idle_total: usize = 4096,

        /// Resends of a failed request.
        ///
        /// How many times a failed request may be sent again on a new
        /// upstream connection. ARCHITECTURE.md §7.
        #[arg(long, value_name = "N", value_parser = whole::<u32>)]
        pub max_retries: u32 = 1,

        /// Open client connections.
        ///
        /// Most downstream connections open at once (lowered to half of the
        /// open-file limit minus 32: two descriptors per client); at it the
        /// longest-idle keep-alive client is closed for a waiting one, else
        /// the listener stops accepting until one closes.
        #[arg(long, value_name = "N", value_parser = whole::<usize>)]
        pub max_connections: usize = 10_000,

        /// Longest graceful drain after SIGTERM.
        ///
        /// Longest time a graceful drain (SIGTERM) waits for in-flight
        /// exchanges before the process exits anyway.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub drain_timeout: Duration = Duration::from_secs(30),

        /// Worker processes; auto = one per CPU.
        ///
        /// 0 (`auto`) means one per CPU. With 1 the loop runs in the process
        /// itself.
        #[arg(long, value_name = "N|auto", value_parser = parse_workers)]
        #[serde(with = "workers")]
        pub workers: usize = 1,

        /// Append `Via: 1.1 sluice` to requests going upstream (RFC 9110
        /// §7.6.3).
        #[arg(long = "no-via", action = ArgAction::SetFalse,
              help = "Do not add Via: 1.1 sluice")]
        pub add_via: bool = true,

        /// Append the client's address to `X-Forwarded-For`.
        #[arg(long = "no-x-forwarded-for", action = ArgAction::SetFalse,
              help = "Do not add X-Forwarded-For")]
        pub add_x_forwarded_for: bool = true,

        /// Set `X-Forwarded-Proto: http` on requests going upstream.
        #[arg(long = "no-x-forwarded-proto", action = ArgAction::SetFalse,
              help = "Do not set X-Forwarded-Proto")]
        pub add_x_forwarded_proto: bool = true,
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

// --- value syntax: the command line's parsers and the file's codecs ----------

/// Parses an address like `127.0.0.1:8080`.
fn parse_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not an address like 127.0.0.1:8080"))
}

/// Parses `500ms`, `10s`, `2m`, `1h` (a bare number is seconds).
fn parse_duration(v: &str) -> Result<Duration, String> {
    let bad = || format!("{v:?} is not a duration like 500ms, 10s or 2m");
    let split = v.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" | "" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    };
    ms.map(Duration::from_millis).ok_or_else(bad)
}

/// Writes a duration the way [`parse_duration`] reads it back: whole
/// seconds as `60s`, anything else in milliseconds.
fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Parses a worker count: a whole number or `auto` (0: one per CPU).
fn parse_workers(v: &str) -> Result<usize, String> {
    if v == "auto" {
        return Ok(0);
    }
    v.parse()
        .map_err(|_| format!("{v:?} is not a number of workers (1, 2, … or \"auto\")"))
}

/// Parses a whole number (a size or a count).
fn whole<T: FromStr>(v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

/// An address in the file: a string (`"127.0.0.1:8080"`, `"[::1]:80"`).
mod addr {
    use std::fmt;
    use std::net::SocketAddr;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(a: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(a)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SocketAddr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address string like \"127.0.0.1:8080\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SocketAddr, E> {
                super::parse_addr(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration in the file: a string with a unit (`"500ms"`, `"10s"`).
mod duration {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string like \"500ms\", \"10s\" or \"2m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                super::parse_duration(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A worker count in the file: an integer, or `"auto"` (stored as 0).
mod workers {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(n: &usize, s: S) -> Result<S::Ok, S::Error> {
        match *n {
            0 => s.serialize_str("auto"),
            n => s.serialize_u64(n as u64),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of workers or \"auto\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
                usize::try_from(v).map_err(|_| {
                    E::custom(format!(
                        "{v} is not a number of workers (1, 2, … or \"auto\")"
                    ))
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
                usize::try_from(v).map_err(|_| E::custom(format!("{v} is too many workers")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
                super::parse_workers(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::default();
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(c.upstream, SocketAddr::from(([127, 0, 0, 1], 8000)));
        assert_eq!(c.keepalive_timeout, Duration::from_secs(60));
        assert_eq!(c.request_head_timeout, Duration::from_secs(10));
        assert_eq!(c.upstream_connect_timeout, Duration::from_secs(3));
        assert_eq!(c.drain_timeout, Duration::from_secs(30));
        assert_eq!((c.max_head_size, c.max_header_count), (65536, 100));
        assert_eq!((c.high_watermark, c.low_watermark), (65536, 16384));
        assert_eq!(
            (c.pool_max_idle_per_peer, c.pool_max_idle_total),
            (128, 4096)
        );
        assert_eq!(
            (c.max_retries, c.max_connections, c.workers),
            (1, 10_000, 1)
        );
        assert!(c.add_via && c.add_x_forwarded_for && c.add_x_forwarded_proto);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn the_file_form_reads_back_the_same() {
        let c = Config {
            keepalive_timeout: Duration::from_millis(1500),
            workers: 0,
            upstream: "[::1]:80".parse().unwrap(),
            add_via: false,
            ..Config::default()
        };
        let text = toml::to_string(&c).unwrap();
        assert!(text.contains("keepalive_timeout = \"1500ms\"\n"), "{text}");
        assert!(text.contains("workers = \"auto\"\n"), "{text}");
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), c);
        assert_eq!(toml::from_str::<Config>("").unwrap(), Config::default());
    }

    #[test]
    fn value_syntax() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\""));
        assert!(parse_duration("99999999999999999999h").is_err());
        assert_eq!(format_duration(Duration::from_secs(120)), "120s");
        assert_eq!(parse_workers("auto"), Ok(0));
        assert!(parse_workers("-2").is_err());
        assert_eq!(whole::<u32>("3"), Ok(3));
        assert!(whole::<usize>("-1").is_err());
    }
}

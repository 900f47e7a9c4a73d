//! The configuration file (TOML) and the settings it shares with the
//! command line.
//!
//! [`Settings`] holds every knob of [`Config`] as an `Option`: `None` means
//! "not given here". The file and the command line each fill one, and
//! [`Settings::apply`] lays them over the defaults in that order, so a flag
//! overrides the file. Keys are the `Config` field names (snake_case);
//! durations are strings (`"500ms"`, `"10s"`, `"2m"`), sizes and counts are
//! integers, `workers` is an integer or `"auto"`.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use sluice::{Config, ConfigError};

/// Every knob of [`Config`], each optional. Deserialized from the file with
/// unknown keys rejected; the command line fills one too.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub listen: Option<Addr>,
    pub upstream: Option<Addr>,
    pub keepalive_timeout: Option<Dur>,
    pub request_head_timeout: Option<Dur>,
    pub client_body_timeout: Option<Dur>,
    pub client_send_timeout: Option<Dur>,
    pub max_head_size: Option<usize>,
    pub max_header_count: Option<usize>,
    pub high_watermark: Option<usize>,
    pub low_watermark: Option<usize>,
    pub upstream_connect_timeout: Option<Dur>,
    pub upstream_read_timeout: Option<Dur>,
    pub upstream_write_timeout: Option<Dur>,
    pub pool_idle_timeout: Option<Dur>,
    pub pool_max_idle_per_peer: Option<usize>,
    pub pool_max_idle_total: Option<usize>,
    pub max_retries: Option<u32>,
    pub max_connections: Option<usize>,
    pub drain_timeout: Option<Dur>,
    pub workers: Option<Workers>,
    pub add_via: Option<bool>,
    pub add_x_forwarded_for: Option<bool>,
    pub add_x_forwarded_proto: Option<bool>,
}

impl Settings {
    /// Writes every knob given here into `c`, leaving the others alone.
    pub fn apply(&self, c: &mut Config) {
        fn set<T: Clone, U>(dst: &mut U, src: &Option<T>, f: impl Fn(T) -> U) {
            if let Some(v) = src {
                *dst = f(v.clone());
            }
        }
        let id = |v| v;
        set(&mut c.listen, &self.listen, |a| a.0);
        set(&mut c.upstream, &self.upstream, |a| a.0);
        set(&mut c.keepalive_timeout, &self.keepalive_timeout, |d| d.0);
        set(
            &mut c.request_head_timeout,
            &self.request_head_timeout,
            |d| d.0,
        );
        set(&mut c.client_body_timeout, &self.client_body_timeout, |d| {
            d.0
        });
        set(&mut c.client_send_timeout, &self.client_send_timeout, |d| {
            d.0
        });
        set(&mut c.max_head_size, &self.max_head_size, id);
        set(&mut c.max_header_count, &self.max_header_count, id);
        set(&mut c.high_watermark, &self.high_watermark, id);
        set(&mut c.low_watermark, &self.low_watermark, id);
        set(
            &mut c.upstream_connect_timeout,
            &self.upstream_connect_timeout,
            |d| d.0,
        );
        set(
            &mut c.upstream_read_timeout,
            &self.upstream_read_timeout,
            |d| d.0,
        );
        set(
            &mut c.upstream_write_timeout,
            &self.upstream_write_timeout,
            |d| d.0,
        );
        set(&mut c.pool_idle_timeout, &self.pool_idle_timeout, |d| d.0);
        set(
            &mut c.pool_max_idle_per_peer,
            &self.pool_max_idle_per_peer,
            id,
        );
        set(&mut c.pool_max_idle_total, &self.pool_max_idle_total, id);
        set(&mut c.max_retries, &self.max_retries, |v| v);
        set(&mut c.max_connections, &self.max_connections, id);
        set(&mut c.drain_timeout, &self.drain_timeout, |d| d.0);
        set(&mut c.workers, &self.workers, |w| w.0);
        set(&mut c.add_via, &self.add_via, |v| v);
        set(&mut c.add_x_forwarded_for, &self.add_x_forwarded_for, |v| v);
        set(
            &mut c.add_x_forwarded_proto,
            &self.add_x_forwarded_proto,
            |v| v,
        );
    }
}

/// A socket address written as a string (`"127.0.0.1:8080"`, `"[::1]:80"`).
#[derive(Debug, Clone, Copy)]
pub struct Addr(pub SocketAddr);

/// A duration written as a string with a unit (`"500ms"`, `"10s"`, `"2m"`).
#[derive(Debug, Clone, Copy)]
pub struct Dur(pub Duration);

/// A worker count: a whole number, or `"auto"` (stored as 0: one per CPU).
#[derive(Debug, Clone, Copy)]
pub struct Workers(pub usize);

impl<'de> Deserialize<'de> for Addr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Addr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address string like \"127.0.0.1:8080\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Addr, E> {
                parse_addr(v).map(Addr).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string like \"500ms\", \"10s\" or \"2m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Workers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Workers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of workers or \"auto\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Workers, E> {
                usize::try_from(v).map(Workers).map_err(|_| {
                    E::custom(format!(
                        "{v} is not a number of workers (1, 2, … or \"auto\")"
                    ))
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Workers, E> {
                usize::try_from(v)
                    .map(Workers)
                    .map_err(|_| E::custom(format!("{v} is too many workers")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Workers, E> {
                parse_workers(v).map(Workers).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses an address like `127.0.0.1:8080`.
pub fn parse_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not an address like 127.0.0.1:8080"))
}

/// Parses `500ms`, `10s`, `2m`, `1h` (a bare number is seconds).
pub fn parse_duration(v: &str) -> Result<Duration, String> {
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

/// Parses a worker count: a whole number or `auto` (0: one per CPU).
pub fn parse_workers(v: &str) -> Result<usize, String> {
    if v == "auto" {
        return Ok(0);
    }
    v.parse()
        .map_err(|_| format!("{v:?} is not a number of workers (1, 2, … or \"auto\")"))
}

/// Writes a duration the way [`parse_duration`] reads it back: whole
/// seconds as `"60s"`, anything else in milliseconds.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Reads and parses a configuration file. The error names the file, the
/// line and the key.
pub fn load(path: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("config file {}{e}", path.display()))
}

/// Parses the text of a configuration file. The error starts with `:LINE: `
/// when the line is known, then names the key.
pub fn parse(text: &str) -> Result<Settings, String> {
    toml::from_str(text).map_err(|e| describe(text, &e))
}

/// One line for a TOML or serde error: where, which key, what is wrong.
fn describe(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    let unknown = msg
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    let Some(span) = e.span() else {
        return match unknown {
            Some(k) => format!(": unknown key `{k}`"),
            None => format!(": {msg}"),
        };
    };
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let line_no = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    if let Some(k) = unknown {
        return format!(
            ":{line_no}: unknown key `{k}` (the keys are listed in examples/sluice.toml \
             and by sluice --check-config)"
        );
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty() && !k.starts_with('#') && !k.starts_with('['));
    match key {
        Some(k) => format!(":{line_no}: key `{k}`: {msg}"),
        None => format!(":{line_no}: {msg}"),
    }
}

/// `Config::validate`'s error with the knob in both spellings: the file's
/// key and the command line's flag.
pub fn describe_invalid(e: &ConfigError) -> String {
    format!(
        "invalid {} (--{} / {} in the config file): {}",
        e.key,
        e.key,
        e.key.replace('-', "_"),
        e.reason
    )
}

/// The effective configuration as a TOML document with every key, in the
/// form [`parse`] reads back.
pub fn render(c: &Config) -> String {
    let mut s =
        String::from("# sluice: effective configuration (defaults < config file < command line)\n");
    let mut put = |key: &str, value: String| {
        let _ = writeln!(s, "{key} = {value}");
    };
    let q = |v: String| toml::Value::String(v).to_string();
    let d = |v: Duration| q(format_duration(v));
    put("listen", q(c.listen.to_string()));
    put("upstream", q(c.upstream.to_string()));
    put("keepalive_timeout", d(c.keepalive_timeout));
    put("request_head_timeout", d(c.request_head_timeout));
    put("client_body_timeout", d(c.client_body_timeout));
    put("client_send_timeout", d(c.client_send_timeout));
    put("max_head_size", c.max_head_size.to_string());
    put("max_header_count", c.max_header_count.to_string());
    put("high_watermark", c.high_watermark.to_string());
    put("low_watermark", c.low_watermark.to_string());
    put("upstream_connect_timeout", d(c.upstream_connect_timeout));
    put("upstream_read_timeout", d(c.upstream_read_timeout));
    put("upstream_write_timeout", d(c.upstream_write_timeout));
    put("pool_idle_timeout", d(c.pool_idle_timeout));
    put(
        "pool_max_idle_per_peer",
        c.pool_max_idle_per_peer.to_string(),
    );
    put("pool_max_idle_total", c.pool_max_idle_total.to_string());
    put("max_retries", c.max_retries.to_string());
    put("max_connections", c.max_connections.to_string());
    put("drain_timeout", d(c.drain_timeout));
    let workers = match c.workers {
        0 => format!("\"auto\"  # {} on this machine", resolve_workers(0)),
        n => n.to_string(),
    };
    put("workers", workers);
    put("add_via", c.add_via.to_string());
    put("add_x_forwarded_for", c.add_x_forwarded_for.to_string());
    put("add_x_forwarded_proto", c.add_x_forwarded_proto.to_string());
    s
}

/// The number of worker processes to run: `n`, or one per CPU for 0.
pub fn resolve_workers(n: usize) -> usize {
    match n {
        0 => std::thread::available_parallelism().map_or(1, |p| p.get()),
        n => n,
    }
}

//! `Config::validate` and its error: the bounds and relations every knob
//! must keep (ARCHITECTURE.md §9), checked once the file and the flags
//! were laid over the defaults.
//!
//! What it must not know: where a value came from (file or flag), sockets,
//! HTTP.

use std::fmt;

use super::*;
use crate::upstreams::spec::Scheme;

/// A setting that does not fit: the knob's name, where its value is in
/// the file's terms, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Name of the knob, as spelled on the command line without `--`.
    pub key: &'static str,
    /// What is wrong with its value.
    pub reason: String,
    /// The key path of the value at fault inside the knob's tables
    /// (`upstream[0].health_check.rise`, `route[2].host`,
    /// `certificate[0].key`); `None` when it is the knob's own key
    /// ([`ConfigError::path`]).
    pub path: Option<String>,
}

impl ConfigError {
    /// An error about knob `key`'s own value.
    pub(crate) fn new(key: &'static str, reason: impl Into<String>) -> Self {
        ConfigError {
            key,
            reason: reason.into(),
            path: None,
        }
    }

    /// An error about the value at key path `path` inside knob `key`.
    pub(crate) fn at(
        key: &'static str,
        path: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        ConfigError {
            key,
            reason: reason.into(),
            path: Some(path.into()),
        }
    }

    /// The key path of the value at fault, in the config file's terms:
    /// [`ConfigError::path`] when set, else the knob's key
    /// (`high-watermark` is `high_watermark`).
    pub fn path(&self) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| self.key.replace('-', "_"))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.path(), self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// A setting that is valid but almost surely not what was meant: where
/// (a key path in the config file's terms, as [`ConfigError::path`]) and
/// one sentence. Printed at start, on reload and by `--check-config`;
/// nothing is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The key path the warning is about (`route[1].path_prefix`).
    pub path: String,
    /// What looks wrong, and what happens because of it.
    pub text: String,
}

impl ConfigWarning {
    /// A warning about the value at `path`.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        ConfigWarning {
            path: path.into(),
            text: text.into(),
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.text)
    }
}

/// Whether a listener on `a` would take connections meant for `b`: the
/// same port, and the same address or either one unspecified (port 0 asks
/// the kernel for a free port: never a clash).
fn overlaps(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip().to_canonical() == b.ip().to_canonical()
            || a.ip().is_unspecified()
            || b.ip().is_unspecified())
}

impl Config {
    /// Checks that the values fit together.
    ///
    /// Errors: `high-watermark` under 1 KiB, `low-watermark` not below
    /// `high-watermark`, a zero size or
    /// count where one is needed, a zero timeout; no listener, two that
    /// overlap, a TLS listener without a certificate, `tls_client_auth`
    /// other than `off` without `tls_client_ca`. (The TLS files are
    /// loaded by `tls::check`, which needs I/O.)
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key, reason: &str| Err(ConfigError::new(key, reason));
        if self.high_watermark < MIN_WATERMARK {
            // Below this each read moves a handful of bytes: slower, and
            // no safer (a 1-byte mark took 25 times as long for 1 MB).
            return err("high-watermark", "must be at least 1024 bytes");
        }
        if self.low_watermark >= self.high_watermark {
            // Name both values: the low one may be a default the user
            // never wrote.
            return err(
                "low-watermark",
                &format!(
                    "must be below high-watermark: it is {} bytes, high-watermark {} bytes \
                     (lowering --high-watermark may need --low-watermark too)",
                    self.low_watermark, self.high_watermark
                ),
            );
        }
        if self.max_head_size < 64 {
            return err("max-head-size", "must be at least 64 bytes");
        }
        if self.max_header_count == 0 {
            return err("max-header-count", "must be at least 1");
        }
        if self.max_response_head_size < 64 {
            return err("max-response-head-size", "must be at least 64 bytes");
        }
        if self.max_response_header_count == 0 {
            return err("max-response-header-count", "must be at least 1");
        }
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if self.via_name.len() > 64 || !self.via_name.bytes().all(token) {
            return err(
                "via-name",
                "must be a token (letters, digits, -._~ ...) of at most 64 bytes",
            );
        }
        if self.max_connections == 0 {
            return err("max-connections", "must be at least 1");
        }
        for (gi, g) in self.upstream.iter().enumerate() {
            if let Some(si) = g.servers.get_ref().iter().position(|srv| srv.port == 0) {
                return Err(ConfigError::at(
                    "upstream",
                    format!("upstream[{gi}].servers[{si}]"),
                    "port 0 is not a port a peer listens on",
                ));
            }
        }
        // Upper bounds: each is allocated or repeated per connection or per
        // request, so a typo must not become an abort or a busy loop.
        let caps: [(&'static str, usize, usize, &str); 9] = [
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
            (
                "max-response-head-size",
                self.max_response_head_size,
                MAX_HEAD_SIZE,
                "1 MiB",
            ),
            (
                "max-response-header-count",
                self.max_response_header_count,
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
        if self.h2_max_concurrent_streams == 0 || self.h2_max_concurrent_streams > 10_000 {
            return err("h2-max-concurrent-streams", "must be from 1 to 10000");
        }
        // RFC 9113 §6.5.2: at most 2^31 - 1; below 1,024 a stream could not
        // carry one full header of DATA.
        if !(1024..=0x7fff_ffff).contains(&self.h2_initial_window_size) {
            return err(
                "h2-initial-window-size",
                "must be from 1024 to 2147483647 (RFC 9113 §6.5.2)",
            );
        }
        if let Some(a) = self.admin
            && !a.ip().is_loopback()
            && !self.admin_public
        {
            return err(
                "admin",
                &format!(
                    "{a} is not a loopback address (the admin read endpoints have no \
                     authentication); set admin_public = true (--admin-public) to serve them \
                     there anyway"
                ),
            );
        }
        let all_listeners = self.listen.iter().chain(&self.listen_tls);
        if let Some(a) = self.admin
            && let Some(l) = all_listeners.clone().find(|l| overlaps(a, **l))
        {
            return err(
                "admin",
                &format!(
                    "{a} overlaps the proxy's own listen address {l}: the admin endpoints \
                     need a port of their own"
                ),
            );
        }
        for (i, a) in all_listeners.clone().enumerate() {
            if let Some(b) = all_listeners.clone().take(i).find(|b| overlaps(*a, **b)) {
                // The later of the two, where it was written.
                let (key, path) = match i.checked_sub(self.listen.len()) {
                    Some(t) => ("listen-tls", format!("listen_tls[{t}]")),
                    None => ("listen", format!("listen[{i}]")),
                };
                return Err(ConfigError::at(
                    key,
                    path,
                    format!("{a} overlaps {b}, given before it (listen and listen_tls together)"),
                ));
            }
        }
        if self.listen.is_empty() && self.listen_tls.is_empty() {
            return err("listen", "no listen or listen_tls address is given");
        }
        if !self.listen_tls.is_empty() && self.certificate.is_empty() {
            return err(
                "listen-tls",
                "a TLS listener needs a certificate (--tls-cert FILE --tls-key FILE, or \
                 [[certificate]] in the config file)",
            );
        }
        if self.tls_client_auth != ClientAuth::Off && self.tls_client_ca.is_none() {
            return err(
                "tls-client-auth",
                "needs tls_client_ca (the CA certificates client certificates must chain to)",
            );
        }
        if self.workers > MAX_WORKERS {
            return err("workers", "must be at most 1024 (or \"auto\": one per CPU)");
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
            ("tunnel-idle-timeout", self.tunnel_idle_timeout),
            ("tls-handshake-timeout", self.tls_handshake_timeout),
        ];
        for (key, value) in timeouts {
            if value.is_zero() {
                return err(key, "must be longer than 0 ms");
            }
        }
        crate::upstreams::spec::check(&self.upstream, &self.route)
    }

    /// Settings that are valid but almost surely not what was meant, one
    /// sentence each with the key path it is about (printed as warnings
    /// at start, on reload and by `--check-config`; nothing is refused):
    /// - a route `path_prefix` that does not start with `/` (a request
    ///   target's path always does: the route never matches);
    /// - a route after one that matches every request ([`RouteSpec::is_catch_all`]):
    ///   it is never reached (the first match wins);
    /// - routes none of which matches every request: a request that
    ///   matches none of them gets `404`;
    /// - a health check whose `timeout` is not shorter than its `interval`;
    /// - a server listed twice in one group (give it a `weight` instead);
    /// - a group no route names, when there are routes: it gets no request;
    /// - certificates without a TLS listener (`listen_tls`): nothing serves
    ///   them, and whoever forgot `--listen-tls` believes HTTPS is on;
    /// - more `workers` than the CPUs this process may run on
    ///   (`std::thread::available_parallelism`: affinity and cgroup quota
    ///   included): each worker is one busy thread, the extra ones only
    ///   share cores.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        let cpus = std::thread::available_parallelism().map_or(1, |p| p.get());
        if self.workers > cpus {
            out.push(ConfigWarning::new(
                "workers".to_string(),
                format!(
                    "{} workers on the {cpus} CPU(s) this process may use: each worker is one \
                     busy thread, so the extra ones only share cores (more context switches, no \
                     more throughput); workers = \"auto\" starts one per CPU",
                    self.workers
                ),
            ));
        }
        if !self.certificate.is_empty() && self.listen_tls.is_empty() {
            out.push(ConfigWarning::new(
                "certificate[0]".to_string(),
                "certificates are given but no TLS listener (listen_tls, --listen-tls): \
                 nothing serves them, the proxy speaks plain HTTP only",
            ));
        }
        // The first route that takes every request of a scheme (no host,
        // no path but `/`), per scheme: [http, https].
        let mut catch_all: [Option<usize>; 2] = [None, None];
        let served = [!self.listen.is_empty(), !self.listen_tls.is_empty()];
        for (i, r) in self.route.iter().enumerate() {
            if let Some(p) = r.path_prefix.as_deref().filter(|p| !p.starts_with('/')) {
                out.push(ConfigWarning::new(
                    format!("route[{i}].path_prefix"),
                    format!("{p:?} does not start with \"/\": the route never matches"),
                ));
            }
            if r.answers_itself() && !r.upstream.get_ref().is_empty() {
                let what = if r.redirect.is_some() {
                    "redirect"
                } else {
                    "respond"
                };
                out.push(ConfigWarning::new(
                    format!("route[{i}].upstream"),
                    format!("is not used: the route answers every request itself ({what})"),
                ));
            }
            let schemes = match r.scheme {
                None => [true, true],
                Some(Scheme::Http) => [true, false],
                Some(Scheme::Https) => [false, true],
            };
            let unserved = match r.scheme {
                Some(Scheme::Http) if self.listen.is_empty() => Some(("http", "listen")),
                Some(Scheme::Https) if self.listen_tls.is_empty() => Some(("https", "listen_tls")),
                _ => None,
            };
            if let Some((name, key)) = unserved {
                out.push(ConfigWarning::new(
                    format!("route[{i}].scheme"),
                    format!(
                        "no {key} address: no request comes over {name}, the route never matches"
                    ),
                ));
            }
            // Never reached: every scheme it matches is taken before it.
            let taken: Vec<usize> = schemes
                .iter()
                .zip(&catch_all)
                .filter(|(matched, _)| **matched)
                .map(|(_, first)| *first)
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default();
            if let Some(&first) = taken.iter().max() {
                out.push(ConfigWarning::new(
                    format!("route[{i}]"),
                    format!(
                        "this route is never reached: route[{first}] before it matches every \
                         request (the first route that matches wins)"
                    ),
                ));
            } else if r.host.is_none() && r.path_prefix.as_deref().is_none_or(|p| p == "/") {
                for (matched, first) in schemes.iter().zip(catch_all.iter_mut()) {
                    if *matched && first.is_none() {
                        *first = Some(i);
                    }
                }
            }
        }
        let uncovered = served
            .iter()
            .zip(&catch_all)
            .any(|(served, first)| *served && first.is_none());
        if let (true, Some(last)) = (uncovered, self.route.len().checked_sub(1)) {
            out.push(ConfigWarning::new(
                format!("route[{last}]"),
                "no route matches every request (one without host, path_prefix and scheme, \
                 or one such route per scheme): a request that matches none gets 404; end the \
                 routes with one that has only `upstream` if they should go somewhere",
            ));
        }
        for (gi, g) in self.upstream.iter().enumerate() {
            let name = g.name.get_ref();
            if !self.route.is_empty() && !self.route.iter().any(|r| r.upstream.get_ref() == name) {
                out.push(ConfigWarning::new(
                    format!("upstream[{gi}].name"),
                    format!(
                        "no route sends requests to group {name:?}: it gets none (its servers \
                         are still resolved and health-checked)"
                    ),
                ));
            }
            if let Some(hc) = g
                .health_check
                .as_ref()
                .filter(|hc| hc.timeout >= hc.interval)
            {
                // A timeout left out is the default: say so, since the
                // file has no timeout line to look at.
                let default = hc.timeout == crate::upstreams::spec::default_check_timeout();
                out.push(ConfigWarning::new(
                    format!("upstream[{gi}].health_check.timeout"),
                    format!(
                        "{:?}{} is not shorter than the interval {:?}: a slow answer delays the next check; \
                         set a timeout below the interval",
                        hc.timeout,
                        if default { " (the default, if not set)" } else { "" },
                        hc.interval
                    ),
                ));
            }
            let servers = g.servers.get_ref();
            for (i, s) in servers.iter().enumerate() {
                let same = |t: &&crate::upstreams::spec::ServerSpec| {
                    t.host.eq_ignore_ascii_case(&s.host) && t.port == s.port
                };
                if servers.iter().take(i).any(|t| same(&t)) {
                    out.push(ConfigWarning::new(
                        format!("upstream[{gi}].servers[{i}]"),
                        format!(
                            "server {}:{} is listed twice in group {:?} (use weight instead)",
                            s.host,
                            s.port,
                            g.name.get_ref()
                        ),
                    ));
                }
            }
        }
        out
    }
}

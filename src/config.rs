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
//! The syntax of values (durations with a required unit, addresses, worker
//! counts) is one rule each, in `config/values.rs`. The small value types
//! (certificate pairs, TLS versions, access log targets) are `config/kinds.rs`.
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

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgAction;
use serde::{Deserialize, Serialize};

use crate::cidr::Cidr;
use crate::upstreams::spec::{DEFAULT_GROUP, GroupSpec, RouteSpec, ServerSpec};
mod kinds;
mod validate;
mod values;
pub use kinds::{
    AccessLogFormat, AccessLogTarget, CertificateSpec, ClientAuth, TlsVersion, UnknownSni,
};
use kinds::{access_log, parse_access_log, parse_server, parse_tls_version};
pub use validate::{ConfigError, ConfigWarning};
use values::{addrs, parse_addr, parse_duration, parse_workers, whole, workers};
pub(crate) use values::{duration, opt_duration};

/// Smallest `high_watermark` accepted, bytes.
pub const MIN_WATERMARK: usize = 1024;
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
        /// Plain-HTTP address; repeatable.
        ///
        /// The downstream listener binds it with `SO_REUSEADDR` and
        /// `SO_REUSEPORT` (for this process's own workers), after checking
        /// that nothing else listens on it (see `takeover`). In the file a
        /// string or an array; empty when the file gives `listen_tls` and
        /// no `listen` (then no plain listener is opened).
        #[arg(help_heading = "Listening", long, value_name = "ADDR", value_parser = parse_addr, action = ArgAction::Append)]
        #[serde(with = "addrs")]
        pub listen: Vec<SocketAddr> = vec![SocketAddr::from(([127, 0, 0, 1], 8080))],

        /// Address to accept HTTPS clients on; repeatable.
        ///
        /// Needs a certificate (`--tls-cert`/`--tls-key`, `[[certificate]]`).
        /// In the file a string or an array. Its certificates are loaded
        /// and checked at start (docs/configuration.md, "TLS").
        #[arg(help_heading = "Listening", long, value_name = "ADDR", value_parser = parse_addr, action = ArgAction::Append)]
        #[serde(with = "addrs", skip_serializing_if = "Vec::is_empty")]
        pub listen_tls: Vec<SocketAddr> = Vec::new(),

        /// Certificates of the TLS listeners, in order; the first is the
        /// default.
        ///
        /// `[[certificate]]` tables with `cert` (a PEM chain, leaf first:
        /// certbot's `fullchain.pem`) and `key` (PKCS#8, PKCS#1 or SEC1
        /// PEM); on the command line `--tls-cert FILE --tls-key FILE`,
        /// repeatable, paired in order. Each serves the DNS names of its
        /// subjectAltName (`tls/sni.rs`).
        #[arg(skip)]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub certificate: Vec<CertificateSpec> = Vec::new(),

        /// Oldest TLS version accepted: 1.2 or 1.3.
        ///
        /// 1.2 (the default) accepts TLS 1.2 and 1.3 (Mozilla
        /// "intermediate"); nothing older is ever spoken (RFC 8996).
        #[arg(help_heading = "TLS", long, value_name = "1.2|1.3", value_parser = parse_tls_version)]
        pub tls_min_version: TlsVersion = TlsVersion::V1_2,

        /// Time for a whole TLS handshake.
        ///
        /// From accept to the handshake's end; then the connection is
        /// closed and counted (HAProxy `timeout client`).
        #[arg(help_heading = "TLS", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub tls_handshake_timeout: Duration = Duration::from_secs(10),

        /// Unknown or no SNI: default or reject.
        ///
        /// `default`: the first certificate; `reject`: the alert
        /// `unrecognized_name` (RFC 6066 §3). A ClientHello without SNI
        /// is treated the same way.
        #[arg(help_heading = "TLS", long, value_name = "MODE", value_enum)]
        pub tls_unknown_sni: UnknownSni = UnknownSni::Default,

        /// CA certificates (PEM) that client certificates must chain to.
        ///
        /// Needed when `tls_client_auth` is not `off`.
        #[arg(help_heading = "TLS", long, value_name = "FILE", value_parser = clap::value_parser!(PathBuf))]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tls_client_ca: Option<PathBuf> = None,

        /// Client certificates: off, optional, required.
        ///
        /// `optional`: a client without one is served, one with an invalid
        /// one is refused; `required`: every client must present one that
        /// chains to `tls_client_ca` (RFC 8446 §4.3.2).
        #[arg(help_heading = "TLS", long, value_name = "MODE", value_enum)]
        pub tls_client_auth: ClientAuth = ClientAuth::Off,

        /// Upstream server; repeatable.
        ///
        /// Repeated `--upstream` flags build one group named `default`
        /// (`HOST:PORT`, optionally `"HOST:PORT weight=N"`). In the file:
        /// `upstream = "ADDR"`, an array of them, or `[[upstream]]` tables
        /// (groups with balancing and health checks, ARCHITECTURE.md §13).
        #[arg(help_heading = "Upstreams", long, value_name = "ADDR", value_parser = parse_server, action = ArgAction::Append)]
        #[serde(with = "crate::upstreams::spec::groups_codec")]
        pub upstream: Vec<GroupSpec> = vec![GroupSpec::new(
            DEFAULT_GROUP,
            vec![ServerSpec { host: "127.0.0.1".into(), port: 8000, weight: 1, backup: false }],
        )],

        /// Routes: which group serves a request, by host and path.
        ///
        /// `[[route]]` tables (file only); the first match wins; with none,
        /// every request goes to the first group (ARCHITECTURE.md §13).
        #[arg(skip)]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub route: Vec<RouteSpec> = Vec::new(),

        /// Idle time between requests.
        ///
        /// Idle time allowed between two requests on a keep-alive downstream
        /// connection before it is closed silently (nginx: 75 s).
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub keepalive_timeout: Duration = Duration::from_secs(60),

        /// Time for a whole request head.
        ///
        /// Counted from accept for the first request and from its first byte
        /// for later ones. 408 if part of a head came, silent close otherwise.
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub request_head_timeout: Duration = Duration::from_secs(10),

        /// Longest gap between request body reads.
        ///
        /// nginx: `client_body_timeout`.
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub client_body_timeout: Duration = Duration::from_secs(60),

        /// Longest time the client may accept nothing.
        ///
        /// Longest time the downstream may accept no byte of pending response
        /// data before it is closed (nginx: `send_timeout`).
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub client_send_timeout: Duration = Duration::from_secs(60),

        /// Largest request head.
        ///
        /// In bytes; a larger request head gets 431 (414 if the request line
        /// alone is longer).
        #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub max_head_size: usize = 64 * 1024,

        /// Most fields in a request head.
        ///
        /// More gets 431.
        #[arg(help_heading = "Limits", long, value_name = "N", value_parser = whole::<usize>)]
        pub max_header_count: usize = 100,

        /// Largest response head.
        ///
        /// In bytes; a larger response head gets 502. The 1xx interim heads
        /// before a final one share one such budget, summed.
        #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub max_response_head_size: usize = 64 * 1024,

        /// Most fields in a response head.
        ///
        /// More gets 502. Larger than the request limit: responses carry
        /// many `Set-Cookie` fields.
        #[arg(help_heading = "Limits", long, value_name = "N", value_parser = whole::<usize>)]
        pub max_response_header_count: usize = 256,

        /// Pending bytes that pause the source.
        ///
        /// Pending bytes per direction at which the source's read interest is
        /// removed, once a body buffer has grown to its full size; a body
        /// buffer starts at 16 KiB (or this, if smaller) with both marks
        /// scaled down, and grows only while its sink keeps up
        /// (ARCHITECTURE.md §4, `buffer.rs`).
        #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub high_watermark: usize = 32 * 1024,

        /// Pending bytes that resume it.
        ///
        /// Pending bytes per direction at or below which the source's read
        /// interest comes back. Must be below `high_watermark`; a smaller
        /// body buffer uses the same fraction of its size.
        #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = whole::<usize>)]
        pub low_watermark: usize = 8 * 1024,

        /// Upstream connect, then 504.
        ///
        /// Time allowed for a non-blocking connect to an upstream.
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_connect_timeout: Duration = Duration::from_secs(3),

        /// Response head wait / body read gap.
        ///
        /// Longest wait for the response head, counted from the last request
        /// byte written, and longest gap between reads of the response body
        /// (nginx: `proxy_read_timeout`).
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_read_timeout: Duration = Duration::from_secs(60),

        /// Longest time the upstream may accept nothing.
        ///
        /// Longest time the upstream may accept no byte of pending request
        /// data (nginx: `proxy_send_timeout`).
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub upstream_write_timeout: Duration = Duration::from_secs(60),

        /// Idle pooled upstream connection lifetime.
        ///
        /// How long an idle pooled upstream connection is kept.
        #[arg(help_heading = "Pool", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub pool_idle_timeout: Duration = Duration::from_secs(60),

        /// Idle upstream connections per peer.
        ///
        /// Most idle pooled connections per upstream peer.
        #[arg(help_heading = "Pool", long, value_name = "N", value_parser = whole::<usize>)]
        pub pool_max_idle_per_peer: usize = 1024,

        /// Idle upstream connections in all.
        ///
        /// Most idle pooled connections in the process; above it the
        /// globally oldest idle connection is closed.
        #[arg(help_heading = "Pool", long, value_name = "N", value_parser = whole::<usize>)]
        pub pool_max_idle_total: usize = 4096,

        /// Resends of a failed request.
        ///
        /// How many times a failed request may be sent again on a new
        /// upstream connection. ARCHITECTURE.md §7.
        #[arg(help_heading = "Upstreams", long, value_name = "N", value_parser = whole::<u32>)]
        pub max_retries: u32 = 1,

        /// Open client connections.
        ///
        /// Most downstream connections open at once (lowered to half of the
        /// open-file limit minus 32: two descriptors per client); at it the
        /// longest-idle keep-alive client is closed for a waiting one, else
        /// the listener stops accepting until one closes.
        #[arg(help_heading = "Limits", long, value_name = "N", value_parser = whole::<usize>)]
        pub max_connections: usize = 10_000,

        /// Access log: PATH, stdout, stderr or off.
        ///
        /// One record per request whose head was read
        /// (docs/observability.md, "Access log"), independent of `RUST_LOG`. A file is opened for appending
        /// and reopened on SIGUSR1 (logrotate).
        #[arg(help_heading = "Logs", long, value_name = "WHERE", value_parser = parse_access_log)]
        #[serde(with = "access_log")]
        pub access_log: AccessLogTarget = AccessLogTarget::Stdout,

        /// Access record format: text or json.
        #[arg(help_heading = "Logs", long, value_name = "text|json", value_enum)]
        pub access_log_format: AccessLogFormat = AccessLogFormat::Text,

        /// Admin listener for /metrics, /healthz, /readyz, /status.
        ///
        /// Off unless given. Only a loopback address unless `admin_public`.
        #[arg(help_heading = "Admin", long, value_name = "ADDR", value_parser = parse_addr)]
        pub admin: Option<SocketAddr> = None,

        /// Allow a non-loopback --admin address.
        ///
        /// The admin endpoints have no authentication.
        #[arg(help_heading = "Admin", long, action = ArgAction::SetTrue)]
        pub admin_public: bool = false,

        /// Allow POST /servers/GROUP/ADDR/state on the admin listener.
        ///
        /// Off by default. On, a peer on loopback may set a server's state
        /// (`drain`, `maintenance`, `ready`); any other peer needs the
        /// bearer token of `admin_token_file`.
        #[arg(help_heading = "Admin", long, action = ArgAction::SetTrue)]
        pub admin_write: bool = false,

        /// File holding the bearer token for admin writes from non-loopback peers.
        ///
        /// Its first line, read at start and on reload; without it only
        /// loopback peers may write.
        #[arg(help_heading = "Admin", long, value_name = "FILE", value_parser = clap::value_parser!(PathBuf))]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub admin_token_file: Option<PathBuf> = None,

        /// Longest graceful drain after SIGTERM.
        ///
        /// Longest time a graceful drain (SIGTERM) waits for in-flight
        /// exchanges before the process exits anyway.
        #[arg(help_heading = "Processes", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub drain_timeout: Duration = Duration::from_secs(30),

        /// Worker processes; auto = one per CPU.
        ///
        /// `auto` (stored as 0) means one per CPU; a literal 0 is refused.
        /// With 1 the loop runs in the process itself.
        #[arg(help_heading = "Processes", long, value_name = "N|auto", value_parser = parse_workers)]
        #[serde(with = "workers")]
        pub workers: usize = 1,

        /// Idle time of a tunnel (after a 101).
        ///
        /// Once an upgrade (WebSocket) turned the connection into a byte
        /// tunnel, no HTTP timeout applies; the tunnel closes after this long
        /// without a byte in either direction (HAProxy `timeout tunnel`).
        #[arg(help_heading = "Timeouts", long, value_name = "DUR", value_parser = parse_duration)]
        #[serde(with = "duration")]
        pub tunnel_idle_timeout: Duration = Duration::from_secs(3600),

        /// Share the address with a running sluice (zero-downtime swap).
        ///
        /// Without it, sluice refuses to start when something already
        /// listens on `listen`. With it, the new process shares the address
        /// (`SO_REUSEPORT`); SIGTERM to the old one then drains it.
        #[arg(help_heading = "Listening", long, action = ArgAction::SetTrue)]
        pub takeover: bool = false,

        /// Accept a connection once its first bytes arrived.
        ///
        /// The listener gets `TCP_DEFER_ACCEPT` (1 s): the kernel hands a
        /// connection to sluice with its request already there (one wake-up
        /// instead of two), or after 1 s without a byte (nginx `listen …
        /// deferred`, HAProxy `defer-accept`).
        #[arg(help_heading = "Listening", long = "no-defer-accept", action = ArgAction::SetFalse,
              help = "Accept connections before their first byte arrives")]
        pub defer_accept: bool = true,

        /// Write the PID to signal into FILE.
        ///
        /// Written once the listeners are up (the supervisor's PID with
        /// `--workers`), removed at exit if it still holds that PID.
        #[arg(help_heading = "Processes", long, value_name = "FILE", value_parser = clap::value_parser!(PathBuf))]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub pid_file: Option<PathBuf> = None,

        /// Append `Via: 1.1 <via-name>` to requests going upstream (RFC 9110
        /// §7.6.3).
        #[arg(help_heading = "Forwarding", long = "no-via", action = ArgAction::SetFalse,
              help = "Do not add Via (loops are still detected)")]
        pub add_via: bool = true,

        /// Pseudonym in Via, loop check (empty: derived).
        ///
        /// Written as `Via: 1.1 <name>` (RFC 9110 §7.6.3); a request whose
        /// `Via` already names it is answered 508 Loop Detected. Empty: a
        /// name `sluice-xxxxxxxx` hashed from the host name and the listen
        /// address, shared by the workers of one instance. A token of at
        /// most 64 bytes.
        #[arg(help_heading = "Forwarding", long, value_name = "NAME")]
        pub via_name: String = String::new(),

        /// Append the client's address to `X-Forwarded-For`.
        #[arg(help_heading = "Forwarding", long = "no-x-forwarded-for", action = ArgAction::SetFalse,
              help = "Do not add X-Forwarded-For")]
        pub add_x_forwarded_for: bool = true,

        /// Give each request an `X-Request-Id` (kept from trusted proxies).
        ///
        /// A request from a peer in `trusted_proxies` keeps the id it
        /// came with (1 to 64 token characters); any other gets a new one,
        /// 32 hex digits (128 random bits, nginx's `$request_id` form),
        /// replacing what the client sent. The id goes upstream, into the
        /// access record (`request_id`) and into `$request_id`.
        #[arg(help_heading = "Forwarding", long = "no-request-id", action = ArgAction::SetFalse,
              help = "Do not add X-Request-Id")]
        pub request_id: bool = true,

        /// Set `X-Forwarded-Proto: http` on requests going upstream.
        #[arg(help_heading = "Forwarding", long = "no-x-forwarded-proto", action = ArgAction::SetFalse,
              help = "Do not set X-Forwarded-Proto")]
        pub add_x_forwarded_proto: bool = true,

        /// Sources whose connections start with a PROXY header; repeatable.
        ///
        /// CIDRs (`10.0.0.0/8`, `::1/128`, or one address). A connection
        /// from one of them must open with a PROXY protocol header (v1 or
        /// v2, HAProxy's spec) within the request head timeout, else it is
        /// closed; the header's source address is then the client's
        /// address everywhere (`X-Forwarded-For`, the access record,
        /// `hash_key = "client_ip"`); v2 `LOCAL` (a balancer's health
        /// check) keeps the socket's. From any other source a PROXY
        /// header is never trusted: 400, close. Plain listener only (HAProxy
        /// `accept-proxy`, nginx `listen … proxy_protocol`).
        #[arg(help_heading = "Listening", long, value_name = "CIDR", value_parser = crate::cidr::parse_cidr, action = ArgAction::Append)]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub accept_proxy_protocol: Vec<Cidr> = Vec::new(),

        /// Peers whose `X-Forwarded-For` is believed; repeatable.
        ///
        /// CIDRs. When the peer (after the PROXY header) is in one, the
        /// client address is the rightmost `X-Forwarded-For` entry that is
        /// not trusted (nginx `set_real_ip_from` + `real_ip_recursive on`);
        /// an entry that is not an address stops the walk there. From any
        /// other peer the field is kept and appended to, never believed.
        #[arg(help_heading = "Forwarding", long, value_name = "CIDR", value_parser = crate::cidr::parse_cidr, action = ArgAction::Append)]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub trusted_proxies: Vec<Cidr> = Vec::new(),

        /// Largest request body in bytes; 0 = no limit.
        ///
        /// Body payload only (chunk framing not counted), inclusive. A
        /// larger `Content-Length` gets 413 before anything goes upstream;
        /// a chunked body that crosses it gets 413 if no response started,
        /// else both connections close. A route's `max_body_size` replaces
        /// it. nginx `client_max_body_size` (default 1 MiB there: sluice
        /// keeps HAProxy's none, so an upgrade never starts refusing
        /// uploads that passed before).
        #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = whole::<u64>)]
        pub max_body_size: u64 = 0,

        /// Per-client connection cap; 0 = none.
        ///
        /// A client address (after the PROXY header) that already holds
        /// this many connections has its new one closed at once, before
        /// any byte is read from it (counted in
        /// `sluice_downstream_refused_per_client`). Per worker: each
        /// worker counts its own connections (nginx `limit_conn`, HAProxy
        /// `src_conn_cur` in a stick table without peers).
        #[arg(help_heading = "Limits", long, value_name = "N", value_parser = whole::<usize>)]
        pub max_connections_per_client: usize = 0,

        /// Requests per client connection; 0 = no cap.
        ///
        /// A count of requests. HTTP/1.1: the N-th request on a connection
        /// is served and its response says `Connection: close`; the
        /// connection closes once it is written (requests pipelined
        /// behind it are not served: the client sends them again on a new
        /// connection, RFC 9112 §9.6). HTTP/2: once N streams were
        /// opened, GOAWAY (NO_ERROR) names the N-th as the last; the open
        /// streams finish, later ones are not served (RFC 9113 §6.8), and
        /// the connection closes. So clients behind an L4 balancer move to
        /// a host that came back. Upstream connections are pooled as
        /// usual. A reload's value counts on the connections accepted
        /// after it (the older ones drain). nginx `keepalive_requests`
        /// (default 1000 there), Envoy `max_requests_per_connection`;
        /// HAProxy has none.
        #[arg(help_heading = "Limits", long, value_name = "N", value_parser = whole::<u32>)]
        pub max_requests_per_connection: u32 = 0,

        /// Offer HTTP/2 (`h2`) by ALPN on TLS listeners.
        ///
        /// On by default: a TLS client that offers `h2` (every browser,
        /// curl) speaks HTTP/2 to sluice; upstreams stay HTTP/1.1.
        /// `--no-http2` offers `http/1.1` only.
        #[arg(help_heading = "HTTP/2", long = "no-http2", action = ArgAction::SetFalse,
              help = "Do not offer HTTP/2 (h2) on TLS listeners")]
        pub http2: bool = true,

        /// Serve prior-knowledge HTTP/2 (h2c) on plain listeners.
        ///
        /// A connection that starts with the HTTP/2 connection preface
        /// (RFC 9113 §3.3) speaks HTTP/2; any other speaks HTTP/1.1 on the
        /// same port. Off: the preface gets 505. The `Upgrade: h2c`
        /// mechanism is not offered (RFC 9113 deprecates it).
        #[arg(help_heading = "HTTP/2", long = "http2-cleartext", action = ArgAction::SetTrue)]
        pub http2_cleartext: bool = false,

        /// Most concurrent streams per HTTP/2 connection.
        ///
        /// Sent as SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2); a
        /// stream over it is refused (RST_STREAM REFUSED_STREAM). Each
        /// stream may hold up to a body buffer per direction.
        #[arg(help_heading = "HTTP/2", long, value_name = "N", value_parser = whole::<u32>)]
        pub h2_max_concurrent_streams: u32 = 128,

        /// HTTP/2 stream receive window, bytes.
        ///
        /// Sent as SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.9.2): how
        /// many request body bytes a client may send on a stream before
        /// sluice grants more, which it does as the bytes drain to the
        /// upstream. 65,535 is the protocol's default.
        #[arg(help_heading = "HTTP/2", long, value_name = "BYTES", value_parser = whole::<u32>)]
        pub h2_initial_window_size: u32 = 65535,
    }
}

#[cfg(test)]
mod tests;

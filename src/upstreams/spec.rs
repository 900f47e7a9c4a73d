//! The declarations of upstream groups and routes (`[[upstream]]`,
//! `[[route]]` in the config file, `--upstream` on the command line): plain
//! values with their defaults (ARCHITECTURE.md §13); their text forms and
//! serde codecs are in `spec_codec.rs`, the checks that they fit together
//! in `spec_check.rs`. They are fields of `Config` (`upstream`, `route`);
//! this module only holds their shapes.
//!
//! What it must not know: sockets, the loop, how a server is chosen.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::cidr::Cidr;
use crate::header_rules::Rules;

/// The name of the group the command line's `--upstream` shortcut (and a
/// plain `upstream = "ADDR"` in the file) builds.
pub const DEFAULT_GROUP: &str = "default";

/// Largest weight of one server (its share of virtual nodes and of the
/// round-robin cycle).
pub const MAX_WEIGHT: u32 = 1000;

/// One group of servers that serve the same application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// The group's name, which routes and `Filter::upstream_peer` use.
    pub name: Spanned<String>,
    /// Its servers: `"IP:port"` or `"host:port"`, each with an optional
    /// `weight=N` (1 by default).
    pub servers: Spanned<Vec<ServerSpec>>,
    /// How a server is chosen.
    #[serde(default)]
    pub balance: Balance,
    /// What `balance = "hash"` hashes.
    #[serde(default)]
    pub hash_key: HashKey,
    /// Passive health: consecutive failures that eject a server (0: never).
    #[serde(default = "default_max_fails")]
    pub max_fails: u32,
    /// Passive health: how long an ejected server stays out the first
    /// time (doubling on each repeated ejection, at most 8 times this).
    #[serde(default = "default_fail_timeout", with = "crate::config::duration")]
    pub fail_timeout: Duration,
    /// Statuses that count as passive failures besides the connection
    /// failures (off by default; 502, 503 and 504 are the usual ones).
    #[serde(default)]
    pub fail_on_status: Vec<u16>,
    /// How often host names are resolved again.
    #[serde(default = "default_resolve_interval", with = "crate::config::duration")]
    pub resolve_interval: Duration,
    /// When host names must resolve: at start (else exit 2), or lazily.
    #[serde(default)]
    pub resolve: Resolve,
    /// Active health checks (off when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// Speak TLS to the servers (`--upstream https://HOST:PORT`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// The name sent as SNI and verified; default: each server's host (an
    /// IP literal is verified as an IP address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// PEM file of the CA certificates to trust; default: the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Verify the servers' certificates (false: accept any, warned about).
    #[serde(default = "default_tls_verify", skip_serializing_if = "Clone::clone")]
    pub tls_verify: bool,
    /// A client certificate chain (PEM) for mTLS to the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_key: Option<PathBuf>,
    /// Write a PROXY protocol header (`"v1"` or `"v2"`) at the start of
    /// every new connection to the group's servers, giving the client's
    /// address; such connections serve one client's request each and are
    /// never pooled (docs/edge.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_proxy_protocol: Option<ProxyVersion>,
}

/// The PROXY protocol version a group sends (`send_proxy_protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyVersion {
    /// The text line (`PROXY TCP4 …\r\n`; HAProxy `send-proxy`).
    V1,
    /// The binary header (HAProxy `send-proxy-v2`).
    V2,
}

fn default_tls_verify() -> bool {
    true
}

fn default_max_fails() -> u32 {
    3
}
fn default_fail_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_resolve_interval() -> Duration {
    Duration::from_secs(30)
}

impl GroupSpec {
    /// A group `name` of `servers` with every other setting at its default.
    pub fn new(name: &str, servers: Vec<ServerSpec>) -> Self {
        GroupSpec {
            name: Spanned::new(0..0, name.to_string()),
            servers: Spanned::new(0..0, servers),
            balance: Balance::default(),
            hash_key: HashKey::default(),
            max_fails: default_max_fails(),
            fail_timeout: default_fail_timeout(),
            fail_on_status: Vec::new(),
            resolve_interval: default_resolve_interval(),
            resolve: Resolve::default(),
            health_check: None,
            tls: false,
            tls_server_name: None,
            tls_ca: None,
            tls_verify: true,
            tls_client_cert: None,
            tls_client_key: None,
            send_proxy_protocol: None,
        }
    }
}

/// How a group chooses a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Smooth weighted round-robin (nginx's algorithm).
    #[default]
    RoundRobin,
    /// Fewest requests in flight relative to weight; ties by smooth
    /// weighted round-robin.
    LeastConn,
    /// Consistent hashing on `hash_key` (a ring with virtual nodes).
    Hash,
}

/// When a group's host names must resolve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolve {
    /// At start: a name that does not resolve stops sluice (exit 2).
    #[default]
    Start,
    /// Later: the server stays down until its name resolves.
    Lazy,
}

/// What `balance = "hash"` hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HashKey {
    /// The client's whole IP address.
    #[default]
    ClientIp,
    /// The value of a request field (absent: the empty value).
    Header(String),
    /// The request target's path (without the query).
    Path,
}

/// One server of a group: a host (an IP literal or a name) and a port,
/// with a weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// An IP literal (`127.0.0.1`, `::1`) or a host name.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// Relative share of requests, 1..=1000.
    pub weight: u32,
    /// A backup server (nginx's and HAProxy's `backup`): it gets requests
    /// only while no other server of its group may take them.
    pub backup: bool,
}

impl From<std::net::SocketAddr> for ServerSpec {
    fn from(a: std::net::SocketAddr) -> Self {
        ServerSpec {
            host: a.ip().to_string(),
            port: a.port(),
            weight: 1,
            backup: false,
        }
    }
}

impl ServerSpec {
    /// The host is an IP literal: nothing to resolve.
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        self.host.parse().ok()
    }
}

/// The method of a health check's request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckMethod {
    /// `GET` (the default).
    #[default]
    #[serde(rename = "GET")]
    Get,
    /// `HEAD`: no body, so no `expect_body`.
    #[serde(rename = "HEAD")]
    Head,
}

impl CheckMethod {
    /// The method's token as it goes on the request line.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckMethod::Get => "GET",
            CheckMethod::Head => "HEAD",
        }
    }
}

/// Active health checks of a group's servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Path of the request.
    #[serde(default = "default_check_path")]
    pub path: String,
    /// Method of the request: `GET` or `HEAD`.
    #[serde(default)]
    pub method: CheckMethod,
    /// The `Host` the check sends. Absent: the server's host name as
    /// written in `servers` (with `:port` unless the port is 80), or for
    /// an IP literal its address `IP:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// More request fields, name to value (`{ "X-Check" = "1" }`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// A substring the response body must contain to pass (read up to
    /// [`MAX_CHECK_BODY`] bytes); absent: the status alone decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_body: Option<String>,
    /// Time between two checks of one server (spread with jitter).
    #[serde(default = "default_check_interval", with = "crate::config::duration")]
    pub interval: Duration,
    /// Time for connect + answer; longer is a failure.
    #[serde(default = "default_check_timeout", with = "crate::config::duration")]
    pub timeout: Duration,
    /// Consecutive successes that mark a down server up.
    #[serde(default = "default_rise")]
    pub rise: u32,
    /// Consecutive failures that mark an up server down.
    #[serde(default = "default_fall")]
    pub fall: u32,
    /// Statuses that pass, `"200-399"` or `"200"`.
    #[serde(default)]
    pub expect_status: StatusRange,
}

/// Most bytes of a check's answer (head and body) read to find
/// `expect_body` (a health page is small; HAProxy's `http-check expect
/// string` reads one buffer, 16 KiB by default).
pub const MAX_CHECK_BODY: usize = 16 * 1024;

fn default_check_path() -> String {
    "/".to_string()
}
fn default_check_interval() -> Duration {
    Duration::from_secs(5)
}
/// `timeout` of a `[upstream.health_check]` that sets none: 1 s.
pub(crate) fn default_check_timeout() -> Duration {
    Duration::from_secs(1)
}
fn default_rise() -> u32 {
    2
}
fn default_fall() -> u32 {
    3
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            path: default_check_path(),
            method: CheckMethod::default(),
            host: None,
            headers: std::collections::BTreeMap::new(),
            expect_body: None,
            interval: default_check_interval(),
            timeout: default_check_timeout(),
            rise: default_rise(),
            fall: default_fall(),
            expect_status: StatusRange::default(),
        }
    }
}

/// An inclusive range of status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRange {
    /// Lowest status that passes.
    pub lo: u16,
    /// Highest status that passes.
    pub hi: u16,
}

impl Default for StatusRange {
    fn default() -> Self {
        StatusRange { lo: 200, hi: 399 }
    }
}

impl StatusRange {
    /// `status` is in the range.
    pub fn contains(&self, status: u16) -> bool {
        (self.lo..=self.hi).contains(&status)
    }
}

/// One routing rule: requests whose host and path match go to `upstream`.
/// The first matching route wins; one with neither field matches all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// `api.example.com` (exact, ASCII case ignored) or `*.example.com`
    /// (one or more labels before `.example.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The target's path starts with it (bytes, case kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// The group's name; may be left out when `redirect` or `respond`
    /// answers every request of the route.
    #[serde(default = "no_group", skip_serializing_if = "names_no_group")]
    pub upstream: Spanned<String>,
    /// Matches only requests that came over this scheme (`http`: the
    /// plain listener, `https`: the TLS one); any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    /// Answer with a redirect to this location (variables: `$host`,
    /// `$request_uri`, `$scheme`, `$remote_addr`); no upstream is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<String>,
    /// The redirect's status: 301 (default), 302, 307 or 308.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_status: Option<u16>,
    /// Answer with this fixed response; no upstream is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub respond: Option<RespondSpec>,
    /// Largest request body in bytes for this route (0: none), replacing
    /// the top level's `max_body_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_size: Option<u64>,
    /// Client networks that may use this route; with a list, any other
    /// client gets 403. Checked after `deny`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<Cidr>,
    /// Client networks refused on this route (403), checked first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<Cidr>,
    /// Request fields replaced before the request goes upstream (values
    /// may use the variables of `redirect`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_request_headers: BTreeMap<String, String>,
    /// Request fields appended.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add_request_headers: BTreeMap<String, String>,
    /// Request fields removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_request_headers: Vec<String>,
    /// Response fields replaced before the response goes to the client.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_response_headers: BTreeMap<String, String>,
    /// Response fields appended.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add_response_headers: BTreeMap<String, String>,
    /// Response fields removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_response_headers: Vec<String>,
    /// Requests per client address: a token bucket of `burst` refilled
    /// at `requests_per_second`; over it, 429 with `Retry-After`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitSpec>,
    /// This route's `upstream_read_timeout`, replacing the top level's.
    #[serde(
        default,
        with = "crate::config::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub upstream_read_timeout: Option<Duration>,
    /// This route's `upstream_connect_timeout`, replacing the top level's.
    #[serde(
        default,
        with = "crate::config::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub upstream_connect_timeout: Option<Duration>,
    /// This route's `client_body_timeout`, replacing the top level's.
    #[serde(
        default,
        with = "crate::config::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub client_body_timeout: Option<Duration>,
}

/// A route's `rate_limit = { requests_per_second = 10, burst = 20 }`:
/// per client address, a token bucket of `burst` tokens refilled at
/// `requests_per_second` (nginx `limit_req zone=… rate=10r/s burst=20
/// nodelay`; HAProxy a stick table's `http_req_rate`). Both ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    /// Tokens added per second.
    pub requests_per_second: u32,
    /// The bucket's capacity: requests a client may send at once.
    pub burst: u32,
}

/// An absent `upstream` of a route: the empty name, no span.
fn no_group() -> Spanned<String> {
    Spanned::new(0..0, String::new())
}

/// A route that names no group (one that answers by itself) prints no
/// `upstream` key in `--check-config`'s output.
fn names_no_group(upstream: &Spanned<String>) -> bool {
    upstream.get_ref().is_empty()
}

/// The scheme a route matches (`scheme = "http" | "https"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Requests from the plain listener.
    Http,
    /// Requests from the TLS listener.
    Https,
}

/// A route's fixed answer: `respond = { status = 503, body =
/// "maintenance\n", content_type = "text/plain" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondSpec {
    /// Its status, 200..=599.
    pub status: u16,
    /// Its body (empty by default).
    #[serde(default)]
    pub body: String,
    /// Its `Content-Type` (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

impl RouteSpec {
    /// The rules for request fields.
    pub(crate) fn request_rules(&self) -> Rules<'_> {
        Rules {
            set: &self.set_request_headers,
            add: &self.add_request_headers,
            remove: &self.remove_request_headers,
        }
    }

    /// The rules for response fields.
    pub(crate) fn response_rules(&self) -> Rules<'_> {
        Rules {
            set: &self.set_response_headers,
            add: &self.add_response_headers,
            remove: &self.remove_response_headers,
        }
    }

    /// The route matches every request: no `host`, no `scheme`, and no
    /// `path_prefix` or `"/"` (every origin-form target starts with `/`).
    /// Routes after it are never reached; without one, a request that no
    /// route matches gets `404`.
    pub fn is_catch_all(&self) -> bool {
        self.host.is_none()
            && self.scheme.is_none()
            && self.path_prefix.as_deref().is_none_or(|p| p == "/")
    }

    /// The route answers every request itself (`redirect` or `respond`).
    pub fn answers_itself(&self) -> bool {
        self.redirect.is_some() || self.respond.is_some()
    }

    /// A route of every request to group `upstream`, every other key at
    /// its default (`RouteSpec { host, ..RouteSpec::to("app") }`).
    pub fn to(upstream: &str) -> Self {
        RouteSpec {
            host: None,
            path_prefix: None,
            upstream: Spanned::new(0..0, upstream.to_string()),
            scheme: None,
            redirect: None,
            redirect_status: None,
            respond: None,
            max_body_size: None,
            allow: Vec::new(),
            deny: Vec::new(),
            set_request_headers: BTreeMap::new(),
            add_request_headers: BTreeMap::new(),
            remove_request_headers: Vec::new(),
            set_response_headers: BTreeMap::new(),
            add_response_headers: BTreeMap::new(),
            remove_response_headers: Vec::new(),
            rate_limit: None,
            upstream_read_timeout: None,
            upstream_connect_timeout: None,
            client_body_timeout: None,
        }
    }
}

pub(crate) use super::spec_check::check;
pub(crate) use super::spec_codec::groups_codec;

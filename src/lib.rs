//! sluice: an HTTP/1.1 and HTTP/2 reverse proxy built on one `mio` poll loop per
//! process, with a `slab` of connection state machines, an upstream
//! keep-alive pool and per-direction watermarks. ARCHITECTURE.md (at the
//! repository's root) tells the design; each module's opening doc says
//! its one job and what it must not know.
//!
//! Layers, from the bytes up (all private; the public API is re-exported
//! below):
//! - `http`: the sans-IO codec (heads, hop-by-hop rules, framing, chunked
//!   scanning) and the request/response plans; no sockets, no clock.
//! - `h2`: the sans-IO HTTP/2 codec (frames, HPACK, settings, windows,
//!   stream states, the mapping to and from `http`'s heads).
//! - `buffer`: one direction's pending bytes with high/low watermarks.
//! - `pool`: idle upstream connections by peer, LIFO, caps, deadlines.
//! - `upstreams`: groups of servers, balancing, health, routes, DNS.
//! - `conn`: the client and upstream connection machines, the exchange,
//!   the relay.
//! - `event_loop`: the only caller of `poll()`; [`Server`] is its handle.
//! - [`tls`]: certificates, SNI, ticket keys, rustls configurations
//!   (sans-IO; `conn`'s transport drives the sessions over sockets).
//!
//! The user's hooks are the [`Filter`] trait.

#![warn(missing_docs)]

mod access_log;
mod buffer;
mod cidr;
mod config;
mod conn;
mod conn_limit;
mod error;
mod event_loop;
mod filter;
// The HTTP/2 codec: used by the HTTP/2 connection machine, which lands
// on its own branch; until then nothing outside its tests (and the fuzz
// target) calls it.
#[allow(dead_code, unused_imports)]
mod h2;
mod header_rules;
mod http;
mod idle_limit;
mod metrics;
mod pool;
mod proxy_protocol;
mod rate_limit;
mod request_id;
mod shm;
mod stats;
mod template;
mod text;
mod tier_board;
pub mod tls;
mod upstreams;
mod warn_limit;

pub use cidr::Cidr;
pub use config::{
    AccessLogFormat, AccessLogTarget, CertificateSpec, ClientAuth, Config, ConfigError,
    ConfigWarning, TlsVersion, UnknownSni,
};
pub use event_loop::{Server, ServerHandle, check_token_file};
pub use filter::{ByRoutes, Filter, Forward, Peer, Reply, Target};
pub use http::{Headers, RequestHead, ResponseHead};
pub use metrics::{
    ADMIN_FD_ENV, GroupMetrics, METRICS_FD_ENV, Observer, Region as MetricsRegion, SLOT_ENV,
};
pub use stats::{Stats, StatsSnapshot};
pub use tier_board::{TIER_ENV, TierBoard};
pub use upstreams::dns::{Resolver, SystemResolver};
pub use upstreams::spec::{
    Balance, CheckMethod, DEFAULT_GROUP, GroupSpec, HashKey, HealthCheck, ProxyVersion,
    RateLimitSpec, Resolve, RespondSpec, RouteSpec, Scheme, ServerSpec, StatusRange,
};

/// Standard error as a writer that never blocks on a stalled reader, for
/// the binary's error log (`env_logger`'s pipe target).
pub mod stderr_log {
    pub use crate::access_log::output::StderrLog;
}

/// The listener's bind rules, for a supervisor that checks and holds the
/// address before its workers bind it (ARCHITECTURE.md §12).
pub mod listen {
    pub use crate::event_loop::listen::{bind_error, check_free, reuse_port_socket};
}

/// The sans-IO codec's entry points, and the TLS transport's server side
/// over loopback sockets, for the fuzz targets in `fuzz/`
/// (cargo feature `fuzzing`, off by default): not an API, may change any
/// time.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz_api {
    pub use crate::conn::transport::feed::{End, FeedSession, ServerFeed};
    pub use crate::h2::PREFACE;
    pub use crate::h2::decode::{Frame, FrameDecoder};
    pub use crate::h2::hpack::{Decoder as HpackDecoder, FieldList, HpackError};
    pub use crate::h2::map::map_request;
    pub use crate::h2::settings::PeerSettings;
    pub use crate::http::chunked::ChunkedScanner;
    pub use crate::http::framing::{request_framing, response_framing};
    pub use crate::http::sniff::check_request_start;
    pub use crate::http::target::{check_authority, check_origin_form, normalize_absolute_form};
    pub use crate::http::{
        BodyDecoder, BodyKind, Forwarding, ParseError, ParseHead, ResponseContext, ResponsePlan,
        plan_request, plan_response,
    };
}
#[cfg(test)]
mod tests;

//! sluice: an HTTP/1.1 reverse proxy built on one `mio` poll loop per
//! process, with a `slab` of connection state machines, an upstream
//! keep-alive pool and per-direction watermarks. ARCHITECTURE.md (at the
//! repository's root) tells the design; each module's opening doc says
//! its one job and what it must not know.
//!
//! Layers, from the bytes up (all private; the public API is re-exported
//! below):
//! - `http`: the sans-IO codec (heads, hop-by-hop rules, framing, chunked
//!   scanning) and the request/response plans; no sockets, no clock.
//! - `buffer`: one direction's pending bytes with high/low watermarks.
//! - `pool`: idle upstream connections by peer, LIFO, caps, deadlines.
//! - `conn`: the client and upstream connection machines, the exchange,
//!   the relay.
//! - `event_loop`: the only caller of `poll()`; [`Server`] is its handle.
//!
//! The user's hooks are the [`Filter`] trait.

#![warn(missing_docs)]

mod buffer;
mod config;
mod conn;
mod error;
mod event_loop;
mod filter;
mod http;
mod idle_limit;
mod pool;
mod stats;

pub use config::{Config, ConfigError};
pub use event_loop::{Server, ServerHandle};
pub use filter::{Filter, Forward, Peer, Reply};
pub use http::{Headers, RequestHead, ResponseHead};
pub use stats::{Stats, StatsSnapshot};
#[cfg(test)]
mod tests;

//! sluice: an HTTP/1.1 reverse proxy built on one `mio` poll loop per
//! process, with a `slab` of connection state machines, an upstream
//! keep-alive pool and per-direction watermarks (see DESIGN.md).
//!
//! Layers, from the bytes up:
//! - [`http`]: the sans-IO codec (heads, hop-by-hop rules, framing, chunked
//!   scanning); no sockets, no clock.
//! - [`buffer`]: one direction's pending bytes with high/low watermarks.
//! - [`pool`]: idle upstream connections by peer, LIFO, caps, deadlines.
//! - `conn`: the downstream session and its exchange with an upstream.
//! - [`event_loop`]: the only caller of `poll()`; [`Server`] is its handle.
//!
//! The user's hooks are the [`Filter`] trait.

#![warn(missing_docs)]

pub mod buffer;
pub mod config;
mod conn;
pub mod error;
pub mod event_loop;
mod filter;
pub mod http;
pub mod pool;
pub mod stats;
mod timer;

pub use config::{Config, ConfigError};
pub use event_loop::{Server, ServerHandle};
pub use filter::{Filter, Forward, Peer, Reply};
pub use http::{Headers, RequestHead, ResponseHead};
pub use stats::Stats;
#[cfg(test)]
mod tests;

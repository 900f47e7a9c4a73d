//! HTTP/2 to clients (ARCHITECTURE.md §14): prior-knowledge h2c through
//! the in-process proxy with `http2_cleartext`, checked by a client that
//! writes frames itself (`util::h2`) in front of scripted HTTP/1.1
//! upstreams. Streams, request and response mapping (RFC 9113 §8), flow
//! control coupled to the watermarks, the lifecycle, and the known
//! attacks, each with the answer the RFC or the peers give.

#[path = "../util/mod.rs"]
mod util;

mod answered;
mod attacks;
mod cut;
mod drain;
mod streams;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use util::*;

const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const PROTOCOL_ERROR: u32 = 0x1;
const ENHANCE_YOUR_CALM: u32 = 0xb;
const NO_ERROR: u32 = 0x0;

/// A proxy to `up` serving h2c, with JSON access records in a file.
fn h2_proxy(up: std::net::SocketAddr, tweak: impl FnOnce(&mut Config)) -> (Proxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_forward_proxy(up, move |c| {
        c.http2_cleartext = true;
        c.access_log = sluice::AccessLogTarget::File(path.into());
        c.access_log_format = sluice::AccessLogFormat::Json;
        tweak(c);
    });
    (proxy, log)
}

/// An upstream answering every request with `body`, keeping its
/// connections.
fn answering(body: &'static str) -> Upstream {
    Upstream::start(respond_forever(ok_response(body)))
}

/// The JSON access records written so far.
fn records(log: &TempFile, n: usize) -> Vec<serde_json::Value> {
    wait_access_lines(log.path(), n)
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

/// `n` bytes of a pattern that a shifted or repeated run would break.
fn patterned(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// The GOAWAY among `frames`, if one came.
fn goaway(frames: &[H2Frame]) -> Option<&H2Frame> {
    frames.iter().find(|f| f.kind == kind::GOAWAY)
}

//! Test support, std only, split by role:
//!
//! - [`proxy`]: the proxy under test in process (`Proxy`, `start_proxy`);
//! - [`binary`]: the proxy under test as the built binary (`SluiceProcess`,
//!   `run_sluice`, `free_port`, `TempFile`);
//! - [`client`]: the raw HTTP/1.1 test client (`Client`, `get`);
//! - [`h2`]: the HTTP/2 test client (`H2Client`), frames written on
//!   purpose and responses collected per stream;
//! - [`upstream`]: scripted upstreams that misbehave on purpose
//!   (`Upstream`, `UpConn`, behaviours, `refused_addr`, `Blackhole`);
//! - [`wire`]: the buffered socket with bounded reads both sides share;
//! - [`oracle`]: the independent HTTP parsing that checks the bytes
//!   (`Request`, `Response`, `Framing`, `chunked_end`, `preview`);
//! - [`tls`]: certificates made for the test (`TestCert`), client
//!   configurations that trust them, a TLS client stream;
//! - here: the timeouts and the bounded waits (`wait_until`,
//!   `assert_eventually`, `assert_stays`).
//!
//! Test files say `mod util;` and `use util::*;`. Every socket is on
//! 127.0.0.1, every client socket has a read and a write timeout, every
//! wait has a bound, and every process started is killed on drop: a test
//! that goes wrong fails within seconds instead of hanging. Helpers that
//! assert carry `#[track_caller]` so a failure points at the test line.

// Each test binary uses only part of this.
#![allow(dead_code)]

pub mod binary;
pub mod client;
pub mod h2;
pub mod oracle;
pub mod proxy;
pub mod tls;
pub mod upstream;
pub mod wire;

use std::thread;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use self::{binary::*, client::*, h2::*, oracle::*, proxy::*, tls::*, upstream::*, wire::*};
#[allow(unused_imports)]
pub use sluice::{
    ByRoutes, Config, Filter, Forward, GroupSpec, Headers, Peer, Reply, RequestHead, ResponseHead,
    RouteSpec, Server, ServerHandle, ServerSpec, Stats, Target,
};

/// Longest a client waits for any one read before the test fails.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest an upstream connection waits for its next read before it gives up
/// (ends its thread quietly). Longer than any test.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(8);
/// Default bound of `assert_eventually` and friends.
pub const WAIT: Duration = Duration::from_secs(3);

/// Polls `cond` every 2 ms until it holds or `within` has passed; returns
/// whether it held.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Fails unless `cond` holds within [`WAIT`].
#[track_caller]
pub fn assert_eventually(what: &str, cond: impl FnMut() -> bool) {
    assert!(wait_until(WAIT, cond), "not within {WAIT:?}: {what}");
}

/// Fails if `cond` stops holding at any point during `during` (for negative
/// assertions such as "no upstream connection is made").
#[track_caller]
pub fn assert_stays(during: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + during;
    loop {
        assert!(cond(), "stopped holding: {what}");
        if Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

//! The upstream keep-alive pool as users meet it (ARCHITECTURE.md §7, §8):
//! upstreams that close idle connections, close on the next request, send
//! stray bytes while idle, never accept or never answer; the LIFO order;
//! the per-peer and global caps under concurrency.
//!
//! Every upstream here is hand-written. Each connection answers with an
//! `X-Conn: <index>` field (the upstream's accept order), so a test can tell
//! which upstream connection served a request, and is tracked by [`Conns`]
//! (how many are open now, which ones ended). Tests assert on what the
//! client sees, on `proxy.stats.snapshot()` and on those upstream counts;
//! every wait is bounded.

#[path = "../util/mod.rs"]
mod util;

mod caps;
mod eviction;
mod lifo;
mod retry;
mod timeouts;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use sluice::StatsSnapshot;
use util::*;

// ---------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------

/// `200 OK` naming the upstream connection (`X-Conn`) with `body`.
fn tagged_ok(index: usize, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nX-Conn: {index}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The upstream connection index a response names in `X-Conn`.
#[track_caller]
fn conn_of(resp: &Response) -> usize {
    resp.header("x-conn")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no X-Conn in {}", preview(&resp.head)))
}

/// Upstream-side bookkeeping: connections open now and those that ended
/// (the proxy closed them, or the behaviour gave up), by index.
#[derive(Clone, Default)]
struct Conns {
    open: Arc<AtomicUsize>,
    ended: Arc<Mutex<Vec<usize>>>,
}

impl Conns {
    /// Runs `behaviour` on each connection and keeps the counts. A
    /// connection counts as ended once the behaviour returned and its
    /// socket was dropped.
    fn track(
        &self,
        behaviour: impl Fn(UpConn) + Send + Sync + 'static,
    ) -> impl Fn(UpConn) + Send + Sync + 'static {
        let me = self.clone();
        move |conn: UpConn| {
            me.open.fetch_add(1, Ordering::SeqCst);
            let index = conn.index;
            behaviour(conn); // consumes and drops the socket
            me.open.fetch_sub(1, Ordering::SeqCst);
            me.ended.lock().unwrap().push(index);
        }
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn ended(&self) -> Vec<usize> {
        let mut v = self.ended.lock().unwrap().clone();
        v.sort_unstable();
        v
    }
}

/// Holds upstream answers to targets starting with `/hold` until the test
/// releases them (one by one or all at once). Bounded: an answer never
/// waits more than [`WAIT`].
#[derive(Clone, Default)]
struct Gate {
    arrived: Arc<AtomicUsize>,
    released: Arc<Mutex<HashSet<String>>>,
    all: Arc<AtomicBool>,
}

impl Gate {
    /// Called by the upstream before answering `target`.
    fn pass(&self, target: &str) {
        if !target.starts_with("/hold") {
            return;
        }
        self.arrived.fetch_add(1, Ordering::SeqCst);
        wait_until(WAIT, || {
            self.all.load(Ordering::SeqCst) || self.released.lock().unwrap().contains(target)
        });
    }

    fn release(&self, target: &str) {
        self.released.lock().unwrap().insert(target.to_string());
    }

    fn release_all(&self) {
        self.all.store(true, Ordering::SeqCst);
    }

    /// Waits until `n` held requests reached the upstream.
    #[track_caller]
    fn wait_arrived(&self, n: usize) {
        assert_eventually(&format!("{n} held requests reach the upstream"), || {
            self.arrived.load(Ordering::SeqCst) >= n
        });
    }
}

/// Answers every request with [`tagged_ok`] (body: the target), holding
/// `/hold...` targets at `gate`, until the proxy closes the connection.
fn tagged(gate: Gate) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            gate.pass(&req.target);
            if !conn.send(tagged_ok(conn.index, &req.target)) {
                return;
            }
        }
    }
}

/// Routes by path prefix; the first matching prefix wins, else `default`.
struct ByPath {
    routes: Vec<(&'static str, SocketAddr)>,
    default: SocketAddr,
}

impl Filter for ByPath {
    fn upstream_peer(&self, req: &RequestHead) -> Target {
        let addr = self
            .routes
            .iter()
            .find(|(prefix, _)| req.target.starts_with(prefix))
            .map_or(self.default, |&(_, addr)| addr);
        Peer::new(addr).into()
    }
}

/// Waits (bounded) until `field` of the proxy's stats reads `want`.
#[track_caller]
fn wait_stat(proxy: &Proxy, what: &str, want: u64, field: impl Fn(&StatsSnapshot) -> u64) {
    let ok = wait_until(WAIT, || field(&proxy.stats.snapshot()) == want);
    assert!(
        ok,
        "{what} != {want} within {WAIT:?}; stats {:?}",
        proxy.stats.snapshot()
    );
}

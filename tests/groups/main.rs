//! Upstream groups (ARCHITECTURE.md §13) with scripted upstreams: the
//! balancing spread, least_conn, hash stability, passive ejection with
//! retries on another server, active checks (down, back up, a check that
//! is never answered), DNS changes, and routing by host and path.

#[path = "../util/mod.rs"]
mod util;

mod balancing;
mod dns;
mod ejection;
mod health_checks;
mod retries;
mod routing;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use sluice::{Balance, ByRoutes, Resolver, Server};
use util::*;

fn group(name: &str, servers: &[&str], tweak: impl FnOnce(&mut GroupSpec)) -> GroupSpec {
    let mut g = GroupSpec::new(name, servers.iter().map(|s| s.parse().unwrap()).collect());
    tweak(&mut g);
    g
}

fn route(host: Option<&str>, prefix: Option<&str>, to: &str) -> RouteSpec {
    RouteSpec {
        host: host.map(str::to_string),
        path_prefix: prefix.map(str::to_string),
        ..RouteSpec::to(to)
    }
}

fn proxy_with(groups: Vec<GroupSpec>, routes: Vec<RouteSpec>) -> Proxy {
    start_proxy(
        |c| {
            c.upstream = groups;
            c.route = routes;
        },
        ByRoutes,
    )
}

/// An upstream answering every request with its `name` while `alive`;
/// once not alive it closes each connection on its next request.
fn named(name: &'static str, alive: Arc<AtomicBool>) -> Upstream {
    Upstream::start(move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            if !alive.load(Ordering::SeqCst) {
                return;
            }
            conn.record(req);
            if !conn.send(ok_response(name)) {
                return;
            }
        }
    })
}

/// An upstream that closes each connection on its request, and a proxy
/// to the group `app` of it then `second` (smooth round-robin with equal
/// weights starts with the first server).
fn closer_then(second: &Upstream) -> (Upstream, Proxy) {
    let closer = Upstream::start(close_on_request());
    let servers = [closer.addr.to_string(), second.addr.to_string()];
    let app = group("app", &[&servers[0], &servers[1]], |_| {});
    (closer, proxy_with(vec![app], vec![]))
}

fn alive() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(true))
}

/// `n` sequential GETs from each of `clients` connections: bodies counted.
fn spread(
    proxy: SocketAddr,
    clients: usize,
    n: usize,
    req: fn(usize) -> Vec<u8>,
) -> HashMap<String, usize> {
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            thread::spawn(move || {
                let mut c = Client::connect(proxy);
                let mut seen: HashMap<String, usize> = HashMap::new();
                for i in 0..n {
                    let r = c.round_trip(req(i));
                    assert_eq!(r.status, 200, "request {i}");
                    *seen.entry(r.body_str().to_string()).or_default() += 1;
                }
                seen
            })
        })
        .collect();
    let mut all = HashMap::new();
    for h in handles {
        for (k, v) in h.join().unwrap() {
            *all.entry(k).or_default() += v;
        }
    }
    all
}

//! The proxy under test, in process: a `sluice::Server` on 127.0.0.1:0
//! running on a thread of its own ([`start_proxy`], [`start_forward_proxy`]),
//! stopped when its [`Proxy`] drops, and [`ReplyFilter`], a filter that
//! answers some requests itself and forwards the rest.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use sluice::{
    ByRoutes, Config, DEFAULT_GROUP, Filter, Forward, GroupSpec, HealthCheck, Peer, Reply,
    RequestHead, RouteSpec, Server, ServerHandle, Stats, Target,
};

use super::binary::TempFile;
use super::client::Client;
use super::wait_until;

/// A running proxy on 127.0.0.1:0. Dropping it shuts the server down.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Where TLS clients connect, when the config has `listen_tls`.
    pub tls: Option<SocketAddr>,
    /// The server's counters.
    pub stats: Arc<Stats>,
    /// Stops the server.
    pub handle: ServerHandle,
    join: Option<JoinHandle<io::Result<()>>>,
}

impl Proxy {
    /// A new raw client connected to this proxy.
    #[track_caller]
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Shuts the server down and waits (bounded) for `run` to return:
    /// `None` if it did not return within `within`.
    pub fn stop(mut self, within: Duration) -> Option<io::Result<()>> {
        self.handle.shutdown();
        let join = self.join.take()?;
        if wait_until(within, || join.is_finished()) {
            Some(join.join().expect("loop thread panicked"))
        } else {
            None
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(join) = self.join.take() {
            // Bounded: a server that does not stop is left behind, not waited for.
            if wait_until(Duration::from_secs(2), || join.is_finished()) {
                let _ = join.join();
            }
        }
    }
}

/// Starts a proxy with `Config::default()` changed by `tweak` (its `listen`
/// is forced to 127.0.0.1:0 first) and `filter`.
#[track_caller]
pub fn start_proxy(tweak: impl FnOnce(&mut Config), filter: impl Filter + Send + 'static) -> Proxy {
    let mut config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        // The test harness's stdout is no place for access records; tests
        // that read them set a file.
        access_log: sluice::AccessLogTarget::Off,
        ..Config::default()
    };
    tweak(&mut config);
    config.listen = vec!["127.0.0.1:0".parse().unwrap()];
    let server = Server::bind(config, filter).expect("Server::bind");
    let addr = server.local_addr();
    let tls = server.tls_addr();
    let stats = server.stats();
    let handle = server.handle();
    let join = thread::Builder::new()
        .name("sluice-loop".into())
        .spawn(move || server.run())
        .expect("spawn loop thread");
    Proxy {
        addr,
        tls,
        stats,
        handle,
        join: Some(join),
    }
}

/// A proxy whose filter is `Forward::new(upstream)`.
#[track_caller]
pub fn start_forward_proxy(upstream: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Proxy {
    start_proxy(
        |c| {
            c.upstream = vec![GroupSpec::new(DEFAULT_GROUP, vec![upstream.into()])];
            tweak(c);
        },
        Forward::new(upstream),
    )
}

/// A proxy by routes (`ByRoutes`) to one group `app` holding `up`, with
/// `routes`, JSON access records in a file of its own, then `tweak`.
#[track_caller]
pub fn start_routed_proxy(
    up: SocketAddr,
    routes: Vec<RouteSpec>,
    tweak: impl FnOnce(&mut Config),
) -> (Proxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_proxy(
        move |c| {
            c.upstream = vec![GroupSpec::new("app", vec![up.into()])];
            c.route = routes;
            c.access_log = sluice::AccessLogTarget::File(path.into());
            c.access_log_format = sluice::AccessLogFormat::Json;
            tweak(c);
        },
        ByRoutes,
    );
    (proxy, log)
}

/// A filter that forwards to `upstream` and lets `on_request` answer first.
pub struct ReplyFilter<F> {
    /// Where every request that is not answered goes.
    pub upstream: SocketAddr,
    /// `request_filter`.
    pub on_request: F,
}

impl<F> Filter for ReplyFilter<F>
where
    F: Fn(&mut RequestHead) -> Option<Reply> + Send + 'static,
{
    fn request_filter(&self, req: &mut RequestHead) -> Option<Reply> {
        (self.on_request)(req)
    }

    fn upstream_peer(&self, _req: &RequestHead) -> Target {
        Peer::new(self.upstream).into()
    }
}

/// A group tweak: active checks every `interval_ms` with `timeout_ms`,
/// rise 2, fall 2, the other check settings at their defaults.
pub fn checked(interval_ms: u64, timeout_ms: u64) -> impl FnOnce(&mut GroupSpec) {
    move |g: &mut GroupSpec| {
        g.health_check = Some(HealthCheck {
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(timeout_ms),
            rise: 2,
            fall: 2,
            ..HealthCheck::default()
        });
    }
}

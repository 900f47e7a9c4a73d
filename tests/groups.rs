//! Upstream groups (ARCHITECTURE.md §13) with scripted upstreams: the
//! balancing spread, least_conn, hash stability, passive ejection with
//! retries on another server, active checks (down, back up, a check that
//! is never answered), DNS changes, and routing by host and path.

mod util;

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

#[test]
fn round_robin_spreads_requests_by_weight() {
    let (a, b, c) = (
        named("a", alive()),
        named("b", alive()),
        named("c", alive()),
    );
    let servers = [
        format!("{} weight=2", a.addr),
        b.addr.to_string(),
        c.addr.to_string(),
    ];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, |_| {})], vec![]);
    let seen = spread(proxy.addr, 4, 750, |_| get("/"));
    for (name, want) in [("a", 1500.0), ("b", 750.0), ("c", 750.0)] {
        let got = seen.get(name).copied().unwrap_or(0) as f64;
        assert!(
            (got - want).abs() <= want * 0.05,
            "{name}: {got} of 3000, want {want}: {seen:?}"
        );
    }
}

#[test]
fn least_conn_sends_new_requests_away_from_a_server_holding_slow_ones() {
    let slow = |name: &'static str| {
        Upstream::start(move |mut conn: UpConn| {
            while let Some(req) = conn.read_request() {
                let hold = req.target.starts_with("/slow");
                conn.record(req);
                if hold {
                    conn.hold_until_closed();
                    return;
                }
                if !conn.send(ok_response(name)) {
                    return;
                }
            }
        })
    };
    let (a, b, c) = (slow("a"), slow("b"), slow("c"));
    let servers = [a.addr.to_string(), b.addr.to_string(), c.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(
        vec![group("app", &refs, |g| g.balance = Balance::LeastConn)],
        vec![],
    );
    let mut held = proxy.client();
    held.send(get("/slow"));
    let holder = [("a", &a), ("b", &b), ("c", &c)];
    assert!(wait_until(WAIT, || holder
        .iter()
        .any(|(_, u)| !u.requests().is_empty())));
    let busy = holder
        .iter()
        .find(|(_, u)| !u.requests().is_empty())
        .unwrap()
        .0;
    let seen = spread(proxy.addr, 1, 30, |_| get("/fast"));
    assert_eq!(
        seen.get(busy),
        None,
        "{busy} holds a slow request: {seen:?}"
    );
    assert_eq!(seen.len(), 2, "the other two share the rest: {seen:?}");
}

#[test]
fn hash_keeps_most_keys_on_their_server_when_one_of_three_is_removed() {
    let (a, b, c) = (
        named("a", alive()),
        named("b", alive()),
        named("c", alive()),
    );
    let keyed = |g: &mut GroupSpec| {
        g.balance = Balance::Hash;
        g.hash_key = "header:X-Key".parse().unwrap();
    };
    let key_req =
        |i: usize| format!("GET / HTTP/1.1\r\nHost: h\r\nX-Key: user{i}\r\n\r\n").into_bytes();
    let owners = |servers: &[String]| {
        let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
        let proxy = proxy_with(vec![group("app", &refs, keyed)], vec![]);
        let mut cl = proxy.client();
        (0..1000)
            .map(|i| cl.round_trip(key_req(i)).body_str().to_string())
            .collect::<Vec<String>>()
    };
    let before = owners(&[a.addr.to_string(), b.addr.to_string(), c.addr.to_string()]);
    let after = owners(&[a.addr.to_string(), c.addr.to_string()]);
    let stayed = before.iter().zip(&after).filter(|(x, y)| x == y).count();
    // Exactly the keys b did not own stay. How many that is depends on b's
    // share of a ring placed by this run's random ports: 1/3 on average,
    // standard deviation about 0.027 with the 1000-key sample (0.022 from
    // the ring alone, simulated over 400 port triples). The 60%
    // bound is held on fixed addresses by the unit test
    // `ring_hash_moves_only_the_removed_servers_keys`; here 55% is > 4 sigma.
    let on_b = before.iter().filter(|s| s.as_str() == "b").count();
    assert_eq!(stayed, 1000 - on_b, "every key a or c owned stays");
    assert!(stayed >= 550, "{stayed} of 1000 keys stayed");
    let moved: Vec<&String> = before
        .iter()
        .zip(&after)
        .filter(|(x, y)| x != y)
        .map(|(_, y)| y)
        .collect();
    assert!(
        before.iter().zip(&after).all(|(x, y)| x == y || x == "b"),
        "only b's keys move"
    );
    let to_a = moved.iter().filter(|s| s.as_str() == "a").count();
    assert!(
        to_a > 0 && to_a < moved.len(),
        "moved keys are spread: {to_a} of {}",
        moved.len()
    );
}

#[test]
fn a_killed_server_is_ejected_and_no_idempotent_request_fails() {
    let (live_a, live_b, live_c) = (alive(), alive(), alive());
    let (a, b, c) = (
        named("a", live_a),
        named("b", live_b.clone()),
        named("c", live_c),
    );
    let servers = [a.addr.to_string(), b.addr.to_string(), c.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, |g| g.max_fails = 2)], vec![]);
    spread(proxy.addr, 3, 30, |_| get("/"));
    // Kill b: its pooled connections close on the next request, new
    // connects are refused.
    live_b.store(false, Ordering::SeqCst);
    drop(b);
    let seen = spread(proxy.addr, 3, 200, |_| get("/"));
    assert!(!seen.contains_key("b"), "{seen:?}");
    assert!(proxy.stats.snapshot().ejections >= 1, "b was ejected");
    assert_eq!(proxy.stats.snapshot().status_502, 0);
}

#[test]
fn a_server_that_takes_requests_and_never_answers_is_ejected() {
    // nginx counts a timeout toward max_fails too: without that, every
    // other request would wait the whole read timeout on the silent one.
    let silent = Upstream::start(never_answer());
    let good = named("good", alive());
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group(
                "app",
                &[&silent.addr.to_string(), &good.addr.to_string()],
                |g| g.max_fails = 1,
            )];
            c.upstream_read_timeout = Duration::from_millis(200);
        },
        ByRoutes,
    );
    // Smooth round-robin starts with the first server: the silent one.
    let first = proxy.client().round_trip(get("/"));
    assert_eq!(first.status, 504);
    for _ in 0..10 {
        let r = proxy.client().round_trip(get("/"));
        assert_eq!((r.status, r.body_str()), (200, "good".to_string()));
    }
    assert_eq!(proxy.stats.snapshot().ejections, 1);
}

#[test]
fn a_post_to_a_refused_server_goes_to_another_and_a_sent_post_is_502() {
    let good = named("good", alive());
    let refused = refused_addr().to_string();
    let proxy = proxy_with(
        vec![group(
            "app",
            &[refused.as_str(), &good.addr.to_string()],
            |_| {},
        )],
        vec![],
    );
    let post = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    for _ in 0..4 {
        let r = proxy.client().round_trip(&post);
        assert_eq!((r.status, r.body_str()), (200, "good".to_string()));
    }
    let (_closer, proxy) = closer_then(&good);
    // Smooth round-robin with equal weights starts with the first server.
    let r = proxy.client().round_trip(&post);
    assert_eq!(
        r.status, 502,
        "the POST reached a server that may have read it"
    );
}

#[test]
fn refused_connects_try_every_server_of_the_group_whatever_max_retries() {
    let good = named("good", alive());
    let dead: Vec<String> = (0..3).map(|_| refused_addr().to_string()).collect();
    let mut servers: Vec<&str> = dead.iter().map(String::as_str).collect();
    let good_addr = good.addr.to_string();
    servers.push(&good_addr);
    let proxy = proxy_with(vec![group("app", &servers, |_| {})], vec![]);
    // Smooth round-robin starts with the first server: three refusals,
    // then the live one, with the default max_retries (1).
    let post = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    let r = proxy.client().round_trip(&post);
    assert_eq!((r.status, r.body_str()), (200, "good".to_string()));
    assert_eq!(proxy.stats.snapshot().status_502, 0);
}

#[test]
fn a_retry_after_a_refused_connect_reuses_the_live_servers_pooled_connection() {
    // A server that refuses every connect but is never ejected
    // (max_fails = 0) makes every other request retry on the live one;
    // nothing reached the refusing server, so the retry may take a pooled
    // connection like a first try. Before, each retry opened a new one and
    // the live server's idle connections piled up to the per-peer cap.
    let good = named("good", alive());
    let dead = refused_addr().to_string();
    let good_addr = good.addr.to_string();
    let proxy = proxy_with(
        vec![group("app", &[dead.as_str(), good_addr.as_str()], |g| {
            g.max_fails = 0
        })],
        vec![],
    );
    all_answered_by_good(proxy.addr, 40, |i| get(&format!("/{i}")));
    let s = proxy.stats.snapshot();
    assert_eq!(s.status_502, 0);
    assert!(
        s.retries >= 10,
        "the refusing server was never tried: {s:?}"
    );
    assert!(
        good.accepted() <= 2,
        "40 sequential requests, {} retries, {} connections to the live server",
        s.retries,
        good.accepted()
    );
}

#[test]
fn a_connect_timeout_goes_on_to_an_untried_server_of_the_group() {
    // A server that drops SYNs (a full accept queue) is the usual "down":
    // nothing reached it, so the request goes on to the next server, as
    // nginx's `proxy_next_upstream timeout` does, instead of a 504.
    let silent = Blackhole::start();
    let good = named("good", alive());
    let servers = [silent.addr.to_string(), good.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group("app", &refs, |g| g.max_fails = 0)];
            c.upstream_connect_timeout = Duration::from_millis(200);
        },
        ByRoutes,
    );
    all_answered_by_good(proxy.addr, 4, |i| {
        if i % 2 == 0 {
            get("/")
        } else {
            b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi".to_vec()
        }
    });
    let s = proxy.stats.snapshot();
    assert_eq!(s.status_504, 0);
    assert!(
        s.timeouts_connect >= 1,
        "the silent server was never tried: {s:?}"
    );
}

/// Sends `n` requests `req(i)` one after the other on one connection;
/// each must get 200 from the server named "good".
fn all_answered_by_good(proxy: SocketAddr, n: usize, req: impl Fn(usize) -> Vec<u8>) {
    let mut c = Client::connect(proxy);
    for i in 0..n {
        let r = c.round_trip(req(i));
        assert_eq!(
            (r.status, r.body_str()),
            (200, "good".to_string()),
            "request {i}"
        );
    }
}

#[test]
fn a_connect_timeout_to_the_only_server_is_not_retried() {
    let silent = Blackhole::start();
    let addr = silent.addr.to_string();
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![group("app", &[addr.as_str()], |_| {})];
            c.upstream_connect_timeout = Duration::from_millis(200);
        },
        ByRoutes,
    );
    let r = proxy.client().round_trip(get("/"));
    assert_eq!(r.status, 504);
    let s = proxy.stats.snapshot();
    assert_eq!((s.timeouts_connect, s.retries), (1, 0), "{s:?}");
}

#[test]
fn active_checks_take_a_dead_server_out_and_bring_it_back_after_rise() {
    let a = named("a", alive());
    let b = named("b", alive());
    let b_addr = b.addr;
    let servers = [a.addr.to_string(), b_addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, checked(50, 500))], vec![]);
    drop(b);
    assert_eventually("b marked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    let seen = spread(proxy.addr, 1, 20, |_| get("/"));
    assert_eq!(seen.get("b"), None, "{seen:?}");
    // b comes back on the same port.
    let _b2 = restart_on(b_addr, "b");
    assert_eventually("b used again", || {
        spread(proxy.addr, 1, 4, |_| get("/")).contains_key("b")
    });
}

/// A server answering with `name` on `addr` (a port freed a moment ago).
fn restart_on(addr: SocketAddr, name: &'static str) -> thread::JoinHandle<()> {
    let mut l = std::net::TcpListener::bind(addr);
    // The killed server's accept thread lets go of the port a moment later.
    wait_until(WAIT, || {
        l = std::net::TcpListener::bind(addr);
        l.is_ok()
    });
    let l = l.expect("rebind the killed server's port");
    thread::spawn(move || {
        for s in l.incoming().take(50) {
            let Ok(s) = s else { continue };
            thread::spawn(move || {
                let mut w = Wire::new(s, Duration::from_secs(2));
                while let Ok(Some(_)) = w.read_head() {
                    if w.write(&ok_response(name)).is_err() {
                        return;
                    }
                }
            });
        }
    })
}

#[test]
fn a_health_check_that_is_never_answered_times_out_and_counts() {
    let silent = Upstream::start(never_answer());
    let a = named("a", alive());
    let servers = [silent.addr.to_string(), a.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, checked(50, 100))], vec![]);
    assert_eventually("the silent server marked down", || {
        let s = proxy.stats.snapshot();
        s.health_checks_failed >= 2 && s.servers_marked_down >= 1
    });
    let seen = spread(proxy.addr, 1, 10, |_| get("/"));
    assert_eq!(seen.get("a"), Some(&10));
}

/// A resolver whose answers the test changes.
struct Hosts(Mutex<Vec<SocketAddr>>);

impl Resolver for Hosts {
    fn resolve(&self, _host: &str, _port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(self.0.lock().unwrap().clone())
    }
}

/// A server for one group `app` of one name, `app.test:80`, that `hosts`
/// resolves (looked up again every 50 ms).
fn resolving_server(hosts: Arc<Hosts>) -> Server {
    let mut config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        ..Config::default()
    };
    config.upstream = vec![group("app", &["app.test:80"], |g| {
        g.resolve_interval = Duration::from_millis(50)
    })];
    Server::bind_with_resolver(config, ByRoutes, hosts).unwrap()
}

#[test]
fn a_changed_dns_answer_moves_new_requests_to_the_new_address() {
    let (a, b) = (named("a", alive()), named("b", alive()));
    let hosts = Arc::new(Hosts(Mutex::new(vec![a.addr])));
    let server = resolving_server(hosts.clone());
    let addr = server.local_addr();
    let handle = server.handle();
    let join = thread::spawn(move || server.run());
    assert_eq!(spread(addr, 1, 3, |_| get("/")).get("a"), Some(&3));
    *hosts.0.lock().unwrap() = vec![b.addr];
    assert_eventually("requests reach the new address", || {
        spread(addr, 1, 1, |_| get("/")).contains_key("b")
    });
    assert_eq!(spread(addr, 1, 5, |_| get("/")).get("b"), Some(&5));
    handle.shutdown();
    let _ = join.join();
}

/// An upstream answering `name`; a request for `/slow` waits (bounded)
/// until `release` is set. Reports on `ends` each connection's index and
/// whether the proxy closed it (EOF), rather than a read timeout or error.
fn reports_ends(
    name: &'static str,
    release: Arc<AtomicBool>,
    ends: mpsc::Sender<(usize, bool)>,
) -> Upstream {
    let ends = Mutex::new(ends);
    Upstream::start(move |mut conn: UpConn| {
        let closed_by_proxy = loop {
            match conn.wire.read_head() {
                Ok(Some(head)) => {
                    let req = Request::from_head(head).expect("request head");
                    if req.target == "/slow" {
                        wait_until(WAIT, || release.load(Ordering::SeqCst));
                    }
                    conn.record(req);
                    if !conn.send(ok_response(name)) {
                        break false;
                    }
                }
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        let _ = ends.lock().unwrap().send((conn.index, closed_by_proxy));
    })
}

#[test]
fn a_dns_answer_that_drops_an_address_closes_its_idle_connections_and_lets_in_flight_finish() {
    let release = Arc::new(AtomicBool::new(false));
    let (ends_tx, ends) = mpsc::channel();
    let a = reports_ends("a", release.clone(), ends_tx);
    let b = named("b", alive());
    let hosts = Arc::new(Hosts(Mutex::new(vec![a.addr])));
    let server = resolving_server(hosts.clone());
    let (addr, stats, handle) = (server.local_addr(), server.stats(), server.handle());
    let join = thread::spawn(move || server.run());

    // Connection 0 at `a` holds a slow exchange; connection 1 is parked idle.
    let slow = thread::spawn(move || Client::connect(addr).round_trip(get("/slow")));
    assert_eventually("the slow request reached a", || a.accepted() == 1);
    assert_eq!(spread(addr, 1, 1, |_| get("/")).get("a"), Some(&1));
    assert_eventually("one idle pooled connection", || {
        stats.snapshot().pool_idle == 1
    });
    assert_eq!(a.accepted(), 2);

    *hosts.0.lock().unwrap() = vec![b.addr];
    assert_eventually("requests reach the new address", || {
        spread(addr, 1, 1, |_| get("/")).contains_key("b")
    });
    let (index, by_proxy) = ends.recv_timeout(WAIT).expect("a connection to a ends");
    assert_eq!(
        (index, by_proxy),
        (1, true),
        "the idle one, closed by sluice"
    );

    // The exchange in flight on the removed address finishes...
    release.store(true, Ordering::SeqCst);
    let r = slow.join().unwrap();
    assert_eq!((r.status, r.body_str()), (200, "a".to_string()));
    // ...and its connection is then closed, not parked.
    let (index, by_proxy) = ends.recv_timeout(WAIT).expect("the other connection ends");
    assert_eq!((index, by_proxy), (0, true));
    assert_eq!(a.accepted(), 2, "no new connection to the removed address");
    assert_eq!(stats.snapshot().pool_evicted_idle_timeout, 0);
    handle.shutdown();
    let _ = join.join();
}

#[test]
fn a_name_that_does_not_resolve_stops_the_start_unless_lazy() {
    let hosts = Arc::new(Hosts(Mutex::new(vec![])));
    let mut config = Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        ..Config::default()
    };
    config.upstream = vec![group("app", &["nowhere.test:80"], |_| {})];
    let err = Server::bind_with_resolver(config.clone(), ByRoutes, hosts.clone())
        .err()
        .unwrap();
    assert!(err.to_string().contains("nowhere.test"), "{err}");
    config.upstream[0].resolve = sluice::Resolve::Lazy;
    assert!(Server::bind_with_resolver(config, ByRoutes, hosts).is_ok());
}

#[test]
fn routes_by_exact_host_wildcard_path_prefix_and_default() {
    let (a, b, c, d) = (
        named("a", alive()),
        named("b", alive()),
        named("c", alive()),
        named("d", alive()),
    );
    let g = |n: &str, u: &Upstream| group(n, &[&u.addr.to_string()], |_| {});
    let proxy = proxy_with(
        vec![
            g("api", &a),
            g("wild", &b),
            g("static", &c),
            g("fallback", &d),
        ],
        vec![
            route(Some("api.example.com"), Some("/v1/"), "api"),
            route(Some("*.example.com"), None, "wild"),
            route(None, Some("/static/"), "static"),
            route(None, None, "fallback"),
        ],
    );
    let at = |host: &str, target: &str| {
        let r = proxy
            .client()
            .round_trip(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"));
        r.body_str().to_string()
    };
    assert_eq!(at("API.example.com:8080", "/v1/users"), "a");
    assert_eq!(at("api.example.com", "/v2/"), "b");
    assert_eq!(at("x.y.example.com", "/"), "b");
    assert_eq!(at("example.com", "/static/app.css"), "c");
    assert_eq!(at("example.com", "/"), "d");
    let abs = proxy
        .client()
        .round_trip("GET http://api.example.com/v1/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    assert_eq!(abs.body_str(), "a");
}

#[test]
fn no_matching_route_is_a_404_from_sluice() {
    let a = named("a", alive());
    let proxy = proxy_with(
        vec![group("api", &[&a.addr.to_string()], |_| {})],
        vec![route(Some("api.example.com"), None, "api")],
    );
    let r = proxy.client().round_trip(get("/"));
    assert_eq!(r.status, 404);
    assert!(r.body_str().contains("no route"), "{}", r.body_str());
    assert!(a.requests().is_empty());
}

#[test]
fn upstream_peer_may_name_a_group() {
    struct ToGroup;
    impl Filter for ToGroup {
        fn upstream_peer(&self, req: &RequestHead) -> Target {
            if req.target.starts_with("/b") {
                Target::group("bee")
            } else {
                Target::Routes
            }
        }
    }
    let (a, b) = (named("a", alive()), named("b", alive()));
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![
                group("ay", &[&a.addr.to_string()], |_| {}),
                group("bee", &[&b.addr.to_string()], |_| {}),
            ];
        },
        ToGroup,
    );
    assert_eq!(proxy.client().round_trip(get("/b")).body_str(), "b");
    assert_eq!(proxy.client().round_trip(get("/x")).body_str(), "a");
}

#[test]
fn a_get_whose_new_connection_closes_before_an_answer_goes_to_another_server() {
    let good = named("good", alive());
    let (closer, proxy) = closer_then(&good);
    // Smooth round-robin with equal weights starts with the first server:
    // the closer reads the GET and closes; the GET goes on to the other.
    let r = proxy.client().round_trip(get("/g"));
    assert_eq!((r.status, r.body_str()), (200, "good".to_string()));
    assert_eq!(closer.accepted(), 1, "the closing server was tried first");
}

#[test]
fn a_get_sent_on_a_failed_new_connection_never_goes_back_to_that_server() {
    let closer = Upstream::start(close_on_request());
    let servers = [closer.addr.to_string(), refused_addr().to_string()];
    let app = group("app", &[&servers[0], &servers[1]], |_| {});
    // Retries to spare: after the closer (which may have acted on the GET)
    // and the refusing server, only a server never tried could take it.
    let proxy = start_proxy(
        |c| {
            c.upstream = vec![app];
            c.max_retries = 3;
        },
        ByRoutes,
    );
    let r = proxy.client().round_trip(get("/once"));
    assert_eq!(r.status, 502);
    assert_eq!(
        closer.accepted(),
        1,
        "the GET went back to the server that closed"
    );
}

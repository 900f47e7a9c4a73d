//! DNS changes: new requests follow the answer, a dropped address's connections close.

use super::*;

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

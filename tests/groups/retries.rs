//! Where a failed try goes: another server of the group, never back; a sent POST is 502.

use super::*;

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

//! An upstream that closes on the next request: a GET retried on a new connection, else 502.

use super::*;

/// Connection 0 answers its first request, then reads the next request's
/// head, records it and closes without answering. Later connections answer
/// everything (tagged).
fn answer_once_then_close_on_next() -> impl Fn(UpConn) + Send + Sync + 'static {
    let rest = tagged(Gate::default());
    move |mut conn: UpConn| {
        if conn.index > 0 {
            return rest(conn);
        }
        if conn.read_request().is_none() || !conn.send(tagged_ok(0, "first")) {
            return;
        }
        if let Some(req) = conn.read_request_head() {
            conn.record(req);
        }
        conn.close();
    }
}

#[test]
fn reused_connection_closed_on_get_is_retried_on_new_connection() {
    let upstream = Upstream::start(answer_once_then_close_on_next());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    let first = client.round_trip(get("/1"));
    assert_eq!((first.status, conn_of(&first)), (200, 0));
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    let second = client.round_trip(get("/2"));
    assert_eq!(second.status, 200, "{}", preview(&second.raw()));
    assert_eq!(conn_of(&second), 1, "the retry goes on a new connection");
    let targets: Vec<String> = upstream
        .wait_requests(3)
        .into_iter()
        .map(|r| r.target)
        .collect();
    assert_eq!(targets, ["/1", "/2", "/2"], "the upstream sees /2 twice");
    assert_eq!(upstream.accepted(), 2);
    let st = proxy.stats.snapshot();
    assert_eq!(st.retries, 1, "{st:?}");
    assert_eq!(st.upstream_reuses, 1, "{st:?}");
    assert_eq!(st.upstream_connects, 2, "{st:?}");
    assert_eq!(st.status_502, 0, "{st:?}");
}

/// GET /1 on connection 0, then `post` on the same (reused) connection,
/// which the upstream closes without answering: 502, sent once.
fn post_on_dying_reused_connection(post: &str) {
    let upstream = Upstream::start(answer_once_then_close_on_next());
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    assert_eq!(client.round_trip(get("/1")).status, 200);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    let resp = client.round_trip(post);
    assert_proxy_error(&resp, 502);
    let reqs = upstream.wait_requests(2);
    assert_stays(Duration::from_millis(200), "no resend of the POST", || {
        upstream.requests().len() == 2 && upstream.accepted() == 1
    });
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].target.as_str()),
        ("POST", "/2")
    );
    let st = proxy.stats.snapshot();
    assert_eq!(st.retries, 0, "{st:?}");
    assert_eq!(st.status_502, 1, "{st:?}");
    assert_eq!(st.upstream_connects, 1, "{st:?}");
}

#[test]
fn reused_connection_closed_on_post_with_body_gives_502_without_resend() {
    post_on_dying_reused_connection(
        "POST /2 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\r\nhello",
    );
}

/// Not idempotent (RFC 9110 §9.2.2): no retry even without body bytes.
#[test]
fn reused_connection_closed_on_bodyless_post_gives_502_without_resend() {
    post_on_dying_reused_connection(
        "POST /2 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n",
    );
}

/// ARCHITECTURE.md §7: the retry goes "on a new connection". With two parked
/// connections that both die on their next request, a retry that took the
/// second parked one would fail again and answer 502.
#[test]
fn retry_uses_a_new_connection_not_another_parked_one() {
    let gate = Gate::default();
    let g = gate.clone();
    // Connections 0 and 1: answer a held first request, then close on the
    // next request without answering. Later connections answer everything.
    let upstream = Upstream::start(move |mut conn: UpConn| {
        if conn.index >= 2 {
            return tagged(g.clone())(conn);
        }
        let Some(req) = conn.read_request() else {
            return;
        };
        g.pass(&req.target);
        if !conn.send(tagged_ok(conn.index, &req.target)) {
            return;
        }
        if let Some(req) = conn.read_request_head() {
            conn.record(req);
        }
        conn.close();
    });
    let proxy = start_forward_proxy(upstream.addr, |c| c.max_retries = 1);
    let mut a = proxy.client();
    let mut b = proxy.client();
    a.send(get("/hold/a"));
    b.send(get("/hold/b"));
    gate.wait_arrived(2);
    gate.release_all();
    assert_eq!(a.read_response().status, 200);
    assert_eq!(b.read_response().status, 200);
    wait_stat(&proxy, "pool_idle", 2, |s| s.pool_idle);

    let resp = a.round_trip(get("/x"));
    let st = proxy.stats.snapshot();
    assert_eq!(
        resp.status,
        200,
        "GET after its reused connection died: {}; stats {st:?}; upstream saw {:?}",
        preview(&resp.raw()),
        upstream
            .requests()
            .iter()
            .map(|r| r.target.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(conn_of(&resp), 2, "answered on a new connection");
    assert_eq!(st.retries, 1, "{st:?}");
}

//! How a group spreads requests: round-robin by weight, least_conn, hash stability.

use super::*;

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

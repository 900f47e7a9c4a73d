//! Unit tests of the groups with plain values: balancing spread, least
//! outstanding, ring-hash stability, passive ejection and its doubling,
//! rise/fall, panic mode, routes, and the spec's syntax.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::balance::{Ring, Slot, least_conn, round_robin};
use super::health::{Change, Health, Verdict};
use super::route::{Route, route};
use super::spec::{Balance, GroupSpec, HashKey, RouteSpec, ServerSpec, StatusRange, check};
use super::{Groups, balance};
use crate::http::{Headers, RequestHead};

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn group(balance: Balance, servers: &[&str]) -> GroupSpec {
    let mut g = GroupSpec::new("app", servers.iter().map(|s| s.parse().unwrap()).collect());
    g.balance = balance;
    g
}

fn groups_of(g: GroupSpec) -> Groups {
    let specs = vec![g];
    let s2 = specs.clone();
    Groups::new(&specs, &[], move |gi, si| {
        let s = &s2[gi].servers.get_ref()[si];
        vec![SocketAddr::new(s.ip().unwrap(), s.port)]
    })
}

#[test]
fn smooth_round_robin_interleaves_by_weight() {
    let mut slots = vec![
        Slot::new(addr(1), 5),
        Slot::new(addr(2), 1),
        Slot::new(addr(3), 1),
    ];
    let picks: Vec<usize> = (0..7)
        .map(|_| round_robin(&mut slots, |_, _| true).unwrap())
        .collect();
    // nginx's example: a a b a c a a.
    assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
}

#[test]
fn round_robin_skips_servers_that_may_not_be_chosen() {
    let mut slots = vec![Slot::new(addr(1), 1), Slot::new(addr(2), 1)];
    for _ in 0..4 {
        assert_eq!(round_robin(&mut slots, |i, _| i == 1), Some(1));
    }
    assert_eq!(round_robin(&mut slots, |_, _| false), None);
}

#[test]
fn least_conn_prefers_fewest_in_flight_and_rotates_ties() {
    let mut slots = vec![
        Slot::new(addr(1), 1),
        Slot::new(addr(2), 1),
        Slot::new(addr(3), 1),
    ];
    slots[0].outstanding = 5;
    let a = least_conn(&mut slots, |_, _| true).unwrap();
    let b = least_conn(&mut slots, |_, _| true).unwrap();
    assert_ne!(a, 0);
    assert_ne!(b, 0);
    assert_ne!(a, b, "ties rotate");
    // Weight 3 with 2 in flight beats weight 1 with 1.
    let mut w = vec![Slot::new(addr(1), 3), Slot::new(addr(2), 1)];
    w[0].outstanding = 2;
    w[1].outstanding = 1;
    assert_eq!(least_conn(&mut w, |_, _| true), Some(0));
    // Nothing in flight: ties go by weight, 3 to 1 over a cycle.
    let mut w = vec![Slot::new(addr(1), 3), Slot::new(addr(2), 1)];
    let picks: Vec<usize> = (0..8)
        .map(|_| least_conn(&mut w, |_, _| true).unwrap())
        .collect();
    assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 6, "{picks:?}");
}

#[test]
fn ring_hash_moves_only_the_removed_servers_keys() {
    let three: Vec<Slot> = (1..=3).map(|p| Slot::new(addr(p), 1)).collect();
    let two: Vec<Slot> = vec![three[0].clone(), three[2].clone()];
    let (r3, r2) = (Ring::new(&three), Ring::new(&two));
    let keys = 10_000u64;
    let mut stayed = 0;
    let mut moved_to: HashMap<SocketAddr, u32> = HashMap::new();
    let mut share: HashMap<SocketAddr, u32> = HashMap::new();
    for k in 0..keys {
        let h = balance::hash_bytes(&k.to_le_bytes());
        let before = three[r3.pick(&three, h, |_, _| true).unwrap()].addr;
        let after = two[r2.pick(&two, h, |_, _| true).unwrap()].addr;
        *share.entry(before).or_default() += 1;
        if before == after {
            stayed += 1;
        } else {
            assert_eq!(before, addr(2), "only the removed server's keys move");
            *moved_to.entry(after).or_default() += 1;
        }
    }
    assert!(stayed >= 6_000, "stayed {stayed}");
    for n in share.values() {
        assert!((2_500..=4_200).contains(n), "share {share:?}");
    }
    let (a, c) = (moved_to[&addr(1)], moved_to[&addr(3)]);
    assert!(
        a.min(c) * 2 > a.max(c),
        "moved keys are spread: {moved_to:?}"
    );
}

#[test]
fn ring_hash_walks_past_servers_that_may_not_be_chosen() {
    let slots: Vec<Slot> = (1..=3).map(|p| Slot::new(addr(p), 1)).collect();
    let ring = Ring::new(&slots);
    for k in 0..100u64 {
        let i = ring.pick(&slots, balance::mix(k), |i, _| i != 1).unwrap();
        assert_ne!(i, 1);
    }
    assert_eq!(ring.pick(&slots, 7, |_, _| false), None);
}

#[test]
fn consecutive_failures_eject_and_the_time_doubles_up_to_eight_times() {
    let t0 = Instant::now();
    let base = Duration::from_secs(10);
    let mut h = Health::default();
    assert_eq!(h.passive(Verdict::Failure, 3, base, t0), None);
    assert_eq!(h.passive(Verdict::Success, 3, base, t0), None);
    assert_eq!(h.passive(Verdict::Failure, 3, base, t0), None);
    assert_eq!(h.passive(Verdict::Failure, 3, base, t0), None);
    assert!(h.available(t0), "a success reset the count");
    assert_eq!(h.passive(Verdict::Failure, 3, base, t0), Some(Change::Out));
    assert!(!h.available(t0));
    assert!(h.available(t0 + base));
    let mut now = t0;
    for factor in [2u32, 4, 8, 8] {
        now += base * 8;
        for _ in 0..2 {
            h.passive(Verdict::Failure, 3, base, now);
        }
        assert_eq!(h.passive(Verdict::Failure, 3, base, now), Some(Change::Out));
        assert!(!h.available(now + base * factor - Duration::from_millis(1)));
        assert!(h.available(now + base * factor));
    }
    assert_eq!(h.passive(Verdict::Neutral, 3, base, now), None);
    let mut off = Health::default();
    for _ in 0..10 {
        assert_eq!(off.passive(Verdict::Failure, 0, base, t0), None);
    }
}

#[test]
fn rise_and_fall_need_consecutive_results() {
    let mut h = Health::default();
    assert_eq!(h.check(false, 2, 3), None);
    assert_eq!(h.check(false, 2, 3), None);
    assert_eq!(h.check(true, 2, 3), None);
    assert_eq!(h.check(false, 2, 3), None);
    assert_eq!(h.check(false, 2, 3), None);
    assert_eq!(h.check(false, 2, 3), Some(Change::Out));
    assert!(!h.available(Instant::now()));
    assert_eq!(h.check(true, 2, 3), None);
    assert_eq!(h.check(true, 2, 3), Some(Change::Up));
    assert!(h.available(Instant::now()));
}

#[test]
fn a_retry_goes_to_another_server_and_panic_mode_tries_each_once() {
    let now = Instant::now();
    let mut g = groups_of(group(
        Balance::RoundRobin,
        &["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"],
    ));
    let first = g.pick(0, 0, &[], now).unwrap();
    assert!(!first.panic);
    let second = g.pick(0, 0, &[first.addr], now).unwrap();
    assert_ne!(first.addr, second.addr);
    // Eject all three.
    for p in 1..=3 {
        for _ in 0..3 {
            let _ = g.pick(0, 0, &[], now);
            g.release(0, addr(p), Verdict::Failure, (0, None), now);
        }
    }
    let mut tried = Vec::new();
    while let Ok(p) = g.pick(0, 0, &tried, now) {
        assert!(p.panic);
        tried.push(p.addr);
    }
    tried.sort();
    assert_eq!(tried, [addr(1), addr(2), addr(3)]);
}

#[test]
fn weighted_round_robin_spreads_exactly_over_a_cycle() {
    let now = Instant::now();
    let mut g = groups_of(group(
        Balance::RoundRobin,
        &["127.0.0.1:1 weight=3", "127.0.0.1:2", "127.0.0.1:3"],
    ));
    let mut n: HashMap<SocketAddr, u32> = HashMap::new();
    for _ in 0..500 {
        let p = g.pick(0, 0, &[], now).unwrap();
        g.release(0, p.addr, Verdict::Success, (200, None), now);
        *n.entry(p.addr).or_default() += 1;
    }
    assert_eq!((n[&addr(1)], n[&addr(2)], n[&addr(3)]), (300, 100, 100));
}

#[test]
fn dns_changes_replace_a_servers_addresses() {
    let mut g = groups_of(group(Balance::RoundRobin, &["127.0.0.1:1"]));
    let removed = g.set_addrs(0, 0, &[addr(5), addr(6)]);
    assert_eq!(removed, [addr(1)]);
    let got: Vec<SocketAddr> = g.get(0).unwrap().addrs().collect();
    assert_eq!(got, [addr(5), addr(6)]);
    assert!(!g.knows(addr(1)) && g.knows(addr(6)));
}

fn req(host: Option<&str>, target: &str) -> RequestHead {
    let mut headers = Headers::new();
    if let Some(h) = host {
        headers.append("Host", h.as_bytes());
    }
    RequestHead {
        method: "GET".into(),
        target: target.into(),
        version: 1,
        headers,
    }
}

#[test]
fn routes_match_host_exactly_by_wildcard_and_by_prefix() {
    let routes = [
        Route::new(Some("api.example.com"), Some("/v1/"), 0),
        Route::new(Some("*.example.com"), None, 1),
        Route::new(None, Some("/static/"), 2),
    ];
    let at = |h: Option<&str>, t: &str| route(&routes, &req(h, t));
    assert_eq!(at(Some("API.Example.com:8080"), "/v1/x"), Some(0));
    assert_eq!(at(Some("api.example.com"), "/v2/x"), Some(1));
    assert_eq!(at(Some("a.b.example.com"), "/"), Some(1));
    assert_eq!(at(Some("example.com"), "/"), None);
    assert_eq!(at(Some("example.com"), "/static/a.css"), Some(2));
    assert_eq!(at(None, "/"), None);
    assert_eq!(at(Some("[::1]:80"), "/static/"), Some(2));
}

#[test]
fn a_prefix_route_cannot_be_slipped_past_by_encoding_dots_or_slashes() {
    let routes = [
        Route::new(None, Some("/admin"), 0),
        Route::new(Some("admin.example.com"), None, 1),
        Route::new(Some("*.example.com"), None, 2),
        Route::new(None, None, 3),
    ];
    let at = |h: Option<&str>, t: &str| route(&routes, &req(h, t));
    for t in [
        "/admin/secret.txt",
        "/%61dmin/secret.txt",
        "/./admin/secret.txt",
        "/x/../admin/secret.txt",
        "//admin/secret.txt",
        "/%2e/admin",
        "/x/..%2fadmin",
        "/public%2F..%2Fadmin",
        "/../admin",
        "/admin",
        "/admin?x=1",
    ] {
        assert_eq!(at(Some("a.test"), t), Some(0), "{t}");
    }
    for t in ["/", "/ADMIN", "/adm", "/x/admin", "/%2561dmin", "/?/admin"] {
        assert_eq!(at(Some("a.test"), t), Some(3), "{t}");
    }
    // `path_prefix = "/"` is a catch-all: `OPTIONS *` too.
    let all = [Route::new(None, Some("/"), 0)];
    assert_eq!(route(&all, &req(Some("a"), "*")), Some(0));
    assert_eq!(
        route(&[Route::new(None, Some("/a"), 0)], &req(Some("a"), "*")),
        None
    );
    // A prefix is matched in the same normalized form.
    let encoded = [Route::new(None, Some("/caf%C3%A9/"), 0)];
    assert_eq!(route(&encoded, &req(Some("a"), "/café/menu")), Some(0));
    assert_eq!(route(&encoded, &req(Some("a"), "/caf%c3%a9/menu")), Some(0));
    let bytes = [Route::new(None, Some("/%FF/"), 0)];
    assert_eq!(route(&bytes, &req(Some("a"), "/%ff/x")), Some(0));
    // One trailing dot on the host is the same name.
    assert_eq!(at(Some("admin.example.com."), "/"), Some(1));
    assert_eq!(at(Some("admin.example.com.:80"), "/"), Some(1));
    assert_eq!(at(Some("x.example.com."), "/"), Some(2));
    assert_eq!(at(Some("example.com."), "/"), Some(3));
    // And on the route's own name (found by a break-it pass: such a
    // route never matched).
    let dotted = [
        Route::new(Some("Example.org."), None, 0),
        Route::new(Some("*.example.net."), None, 1),
    ];
    for (host, want) in [
        ("example.org", Some(0)),
        ("EXAMPLE.ORG.", Some(0)),
        ("a.example.net", Some(1)),
        ("a.example.net.", Some(1)),
        ("example.net", None),
    ] {
        assert_eq!(route(&dotted, &req(Some(host), "/")), want, "{host}");
    }
}

#[test]
fn a_route_host_must_be_a_name_or_a_leading_wildcard() {
    let check = |h: &str| {
        let r = RouteSpec {
            host: Some(h.to_string()),
            ..RouteSpec::to("app")
        };
        let g = GroupSpec::new("app", vec!["127.0.0.1:1".parse().unwrap()]);
        super::spec_check::check(&[g], &[r])
    };
    for good in [
        "example.org",
        "example.org.",
        "*.example.net",
        "a-b_c.x1",
        "127.0.0.1",
    ] {
        assert_eq!(check(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "*",
        "*example.net",
        "a.*.com",
        "*.",
        "ex ample.com",
        "bücher.de",
        "a..b",
        ".a",
        "a.b:80",
        "a/b",
    ] {
        let e = check(bad).expect_err(bad);
        assert!(e.reason.contains("is not a host name"), "{bad}: {e}");
    }
}

#[test]
fn spec_syntax_and_checks() {
    let s: ServerSpec = "app.internal:8080 weight=3".parse().unwrap();
    assert_eq!(
        (s.host.as_str(), s.port, s.weight),
        ("app.internal", 8080, 3)
    );
    assert_eq!(s.to_string(), "app.internal:8080 weight=3");
    let b: ServerSpec = "10.0.0.1:80 backup weight=2".parse().unwrap();
    assert!(b.backup && b.weight == 2);
    assert_eq!(b.to_string(), "10.0.0.1:80 weight=2 backup");
    assert!("h:80 backup backup".parse::<ServerSpec>().is_err());
    let t: GroupSpec = toml::from_str(
        "name = \"g\"\nservers = [{ address = \"10.0.0.1:80\", backup = true }]\n\
         [health_check]\nmethod = \"HEAD\"\nhost = \"app.example\"\n\
         headers = { \"X-Check\" = \"1\" }\n",
    )
    .unwrap();
    assert!(t.servers.get_ref()[0].backup);
    assert!(check(std::slice::from_ref(&t), &[]).is_ok());
    let mut bad = t.clone();
    if let Some(hc) = bad.health_check.as_mut() {
        hc.expect_body = Some("ok".into());
    }
    assert!(check(&[bad], &[]).is_err(), "expect_body with HEAD");
    let v6: ServerSpec = "[::1]:80".parse().unwrap();
    assert_eq!(v6.to_string(), "[::1]:80");
    assert!("localhost".parse::<ServerSpec>().is_err());
    assert!("a b:80".parse::<ServerSpec>().is_err());
    assert!("h:80 weight=x".parse::<ServerSpec>().is_err());
    assert!("h:80 weight=2 weight=3".parse::<ServerSpec>().is_err());
    assert!("header:X-Key".parse::<HashKey>().is_ok());
    assert!("header:bad name".parse::<HashKey>().is_err());
    assert!("header:".parse::<HashKey>().is_err());
    assert_eq!("200-399".parse(), Ok(StatusRange { lo: 200, hi: 399 }));
    assert!("399-200".parse::<StatusRange>().is_err());
    let g = group(Balance::Hash, &["127.0.0.1:1"]);
    let route_to = RouteSpec::to;
    assert!(check(std::slice::from_ref(&g), &[route_to("app")]).is_ok());
    assert!(check(std::slice::from_ref(&g), &[route_to("nope")]).is_err());
    assert!(check(&[g.clone(), g.clone()], &[]).is_err());
    assert!(check(&[group(Balance::Hash, &[])], &[]).is_err());
}

#[test]
fn a_check_sends_its_host_else_the_tls_name_else_the_declared_name_else_the_address() {
    // Every server resolves to 10.0.0.1 on its own port.
    let groups = |g: GroupSpec| {
        let specs = vec![g];
        let s2 = specs.clone();
        Groups::new(&specs, &[], move |gi, si| {
            let s = &s2[gi].servers.get_ref()[si];
            vec![SocketAddr::from(([10, 0, 0, 1], s.port))]
        })
    };
    let at = |port| SocketAddr::from(([10, 0, 0, 1], port));
    let mut g = group(
        Balance::RoundRobin,
        &["10.0.0.1:8080", "app.internal:80", "app.internal:8081"],
    );
    g.health_check = Some(super::spec::HealthCheck::default());
    let plain = groups(g.clone());
    assert_eq!(plain.check_host(0, at(8080)), "10.0.0.1:8080");
    assert_eq!(plain.check_host(0, at(80)), "app.internal");
    assert_eq!(plain.check_host(0, at(8081)), "app.internal:8081");
    // A TLS group's tls_server_name first; 443 is its default port.
    let mut t = group(Balance::RoundRobin, &["10.0.0.1:443", "app.internal:8443"]);
    t.tls = true;
    t.tls_server_name = Some("api.example".into());
    t.health_check = g.health_check.clone();
    let tls = groups(t.clone());
    assert_eq!(tls.check_host(0, at(443)), "api.example");
    assert_eq!(tls.check_host(0, at(8443)), "api.example:8443");
    // The check's own host wins.
    if let Some(hc) = t.health_check.as_mut() {
        hc.host = Some("health.example".into());
    }
    assert_eq!(groups(t).check_host(0, at(443)), "health.example");
}

#[test]
fn a_declared_name_without_an_address_yet_is_shown_resolving() {
    let specs = vec![group(
        Balance::RoundRobin,
        &["10.0.0.1:80", "app.internal:8080"],
    )];
    let s2 = specs.clone();
    let g = Groups::new(&specs, &[], move |gi, si| {
        let s = &s2[gi].servers.get_ref()[si];
        s.ip()
            .map(|ip| SocketAddr::new(ip, s.port))
            .into_iter()
            .collect()
    });
    let now = Instant::now();
    let states: Vec<(String, &str, bool)> = g
        .snapshot(now, |_| 0)
        .iter()
        .map(|c| super::ServerState::of(c, Duration::ZERO, now))
        .map(|s| (s.name, s.state, s.available))
        .collect();
    assert_eq!(
        states,
        [
            ("10.0.0.1:80".to_string(), "up", true),
            ("app.internal:8080".to_string(), "resolving", false),
        ]
    );
}

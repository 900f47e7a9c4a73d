//! Routing by host and path, 404 for no route, and a filter naming a group.

use super::*;

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

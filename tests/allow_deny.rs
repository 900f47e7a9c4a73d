//! A route's `allow`/`deny` (issue 25, IP allow/deny; docs/configuration.md, "Edge
//! rules"): deny first, then allow, with an allow list anything else
//! denied; on the client address after the PROXY header and
//! `trusted_proxies`; an IPv4-mapped IPv6 client matches as IPv4; 403
//! from the proxy, logged as `denied`, the connection kept.

mod util;

use std::net::SocketAddr;

use serde_json::Value;
use sluice::Cidr;
use util::*;

fn nets(list: &[&str]) -> Vec<Cidr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

/// Routes `/admin` (allow 10/8 but deny 10.6.6.0/24) and `/open` (deny
/// 192.0.2.0/24); PROXY headers from 127.0.0.1; 127.0.0.1 is a trusted
/// proxy too.
fn guarded(up: SocketAddr, pp: bool) -> (Proxy, TempFile) {
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/admin".into()),
            allow: nets(&["10.0.0.0/8"]),
            deny: nets(&["10.6.6.0/24"]),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            deny: nets(&["192.0.2.0/24", "2001:db8::/32"]),
            ..RouteSpec::to("app")
        },
    ];
    start_routed_proxy(up, routes, move |c| {
        if pp {
            c.accept_proxy_protocol = nets(&["127.0.0.1"]);
        }
        c.trusted_proxies = nets(&["127.0.0.1"]);
    })
}

/// The status of `GET path` from `client` (an address given by a v1
/// PROXY header).
fn status_from(proxy: &Proxy, client: &str, path: &str) -> u16 {
    let mut c = proxy.client();
    let proto = if client.contains(':') { "TCP6" } else { "TCP4" };
    let dst = if client.contains(':') {
        "::1"
    } else {
        "127.0.0.1"
    };
    let mut wire = format!("PROXY {proto} {client} {dst} 5000 80\r\n").into_bytes();
    wire.extend_from_slice(&get(path));
    c.round_trip(wire).status
}

#[test]
fn deny_first_then_allow_on_the_proxy_header_address() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = guarded(up.addr, true);
    // Each row: client, path, status, why.
    let rows = [
        ("10.1.1.1", "/admin", 200, "in allow"),
        (
            "10.6.6.6",
            "/admin",
            403,
            "in allow but denied: deny goes first",
        ),
        (
            "192.168.1.1",
            "/admin",
            403,
            "an allow list refuses the rest",
        ),
        (
            "::ffff:10.1.1.1",
            "/admin",
            200,
            "IPv4-mapped matches as IPv4",
        ),
        (
            "::ffff:10.6.6.6",
            "/admin",
            403,
            "IPv4-mapped denied as IPv4",
        ),
        ("192.0.2.5", "/open", 403, "denied"),
        ("2001:db8::5", "/open", 403, "denied by an IPv6 network"),
        ("198.51.100.1", "/open", 200, "no allow list: the rest may"),
    ];
    for (client, path, status, why) in rows {
        assert_eq!(status_from(&proxy, client, path), status, "{why}");
    }
    assert_eq!(up.wait_requests(3).len(), 3);
    assert_eq!(proxy.stats.snapshot().status_403, 5);
    let denied = wait_access_lines(log.path(), 8)
        .iter()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["termination"] == "denied" && v["status"] == 403
        })
        .count();
    assert_eq!(denied, 5);
}

#[test]
fn forwarded_for_address_behind_a_trusted_proxy_is_checked() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = guarded(up.addr, false);
    let mut c = proxy.client();
    let req = |xff: &str| {
        format!("GET /admin HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: {xff}\r\n\r\n").into_bytes()
    };
    assert_eq!(c.round_trip(req("10.6.6.6")).status, 403);
    // The 403 keeps the connection (no body was sent).
    assert_eq!(c.round_trip(req("10.1.1.1")).status, 200);
    // No field: the peer, 127.0.0.1, not in allow.
    assert_eq!(c.round_trip(get("/admin")).status, 403);
    assert_eq!(up.wait_requests(1).len(), 1);
}

#[test]
fn an_encoded_or_dotted_path_cannot_slip_past_a_guarded_prefix() {
    // Found by a break-it pass: routes matched the raw target, so
    // `/%61dmin` or `/x/../admin` reached a route's fallback.
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = guarded(up.addr, true);
    for path in [
        "/%61dmin/secret.txt",
        "/./admin/secret.txt",
        "/x/../admin/secret.txt",
        "//admin/secret.txt",
        "/x/..%2fadmin",
    ] {
        assert_eq!(status_from(&proxy, "192.168.1.1", path), 403, "{path}");
    }
    assert!(up.requests().is_empty(), "nothing reached the upstream");
    // A target that is let through goes upstream as the client sent it.
    assert_eq!(status_from(&proxy, "10.1.1.1", "/x/../admin/a"), 200);
    assert_eq!(up.single_request().target, "/x/../admin/a");
}

//! A route's header rules (issue 25; docs/configuration.md, "Edge rules"): set, add and
//! remove on requests going upstream and on responses going to the
//! client, values with variables; `--check-config` refuses framing and
//! hop-by-hop names.

mod util;

use std::collections::BTreeMap;

use util::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn request_and_response_rules_apply_on_their_route() {
    let resp =
        b"HTTP/1.1 200 OK\r\nServer: up/1.0\r\nX-Up: 1\r\nContent-Length: 2\r\n\r\nok".to_vec();
    let up = Upstream::start(respond_forever(resp));
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/app".into()),
            set_request_headers: map(&[("X-Env", "prod"), ("X-Seen-Host", "$host$request_uri")]),
            add_request_headers: map(&[("X-Tag", "two")]),
            remove_request_headers: vec!["X-Debug".into()],
            set_response_headers: map(&[("Strict-Transport-Security", "max-age=63072000")]),
            add_response_headers: map(&[("X-Client", "$remote_addr")]),
            remove_response_headers: vec!["Server".into()],
            ..RouteSpec::to("app")
        },
        RouteSpec::to("app"),
    ];
    let (proxy, _log) = start_routed_proxy(up.addr, routes, |_| {});
    let mut c = proxy.client();
    let req = b"GET /app?q=1 HTTP/1.1\r\nHost: h.example\r\nX-Env: dev\r\nX-Env: qa\r\nX-Debug: 1\r\nX-Tag: one\r\n\r\n";
    let r = c.round_trip(req);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("strict-transport-security"),
        Some("max-age=63072000")
    );
    assert_eq!(r.header("x-client"), Some("127.0.0.1"));
    assert!(!r.has("server"), "Server removed");
    assert_eq!(r.header("x-up"), Some("1"));
    assert_eq!(r.body, b"ok");
    // Another route: untouched.
    let r = c.round_trip(b"GET /other HTTP/1.1\r\nHost: h\r\nX-Debug: 1\r\n\r\n");
    assert_eq!(r.header("server"), Some("up/1.0"));
    let reqs = up.wait_requests(2);
    let first = &reqs[0];
    assert_eq!(first.header_all("x-env"), ["prod"]);
    assert_eq!(first.header("x-seen-host"), Some("h.example/app?q=1"));
    assert_eq!(first.header_all("x-tag"), ["one", "two"]);
    assert!(!first.has("x-debug"));
    assert!(reqs[1].has("x-debug"));
}

#[test]
fn response_rules_apply_to_the_routes_own_answers() {
    // As nginx's `add_header … always`: an HSTS field on a route is on its
    // redirect and its 429 too (found by a break-it pass: they had none).
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let hsts = map(&[("Strict-Transport-Security", "max-age=1")]);
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/r".into()),
            redirect: Some("https://x$request_uri".into()),
            set_response_headers: hsts.clone(),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            rate_limit: Some(sluice::RateLimitSpec {
                requests_per_second: 1,
                burst: 1,
            }),
            set_response_headers: hsts,
            add_response_headers: map(&[("X-Route", "limited")]),
            ..RouteSpec::to("app")
        },
    ];
    let (proxy, _log) = start_routed_proxy(up.addr, routes, |_| {});
    let mut c = proxy.client();
    let r = c.round_trip(b"GET /r/a HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("https://x/r/a"));
    assert_eq!(r.header("strict-transport-security"), Some("max-age=1"));
    let r = c.round_trip(b"GET /u HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("strict-transport-security"), Some("max-age=1"));
    let r = c.round_trip(b"GET /u HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("strict-transport-security"), Some("max-age=1"));
    assert_eq!(r.header("x-route"), Some("limited"));
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[test]
fn host_of_a_request_without_one_is_empty_not_the_server_address() {
    // HTTP/1.0 without Host goes upstream with the server's address as
    // its Host; `$host` in the rules stayed that address, and a response
    // rule showed the client an internal address.
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let routes = vec![RouteSpec {
        set_request_headers: map(&[("X-Seen-Host", "[$host]")]),
        add_response_headers: map(&[("X-Rh", "[$host]")]),
        ..RouteSpec::to("app")
    }];
    let (proxy, _log) = start_routed_proxy(up.addr, routes, |_| {});
    let r = proxy.client().round_trip(b"GET /p HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-rh"), Some("[]"));
    let got = up.single_request();
    assert_eq!(got.header("x-seen-host"), Some("[]"));
    assert_eq!(got.header("host"), Some(up.addr.to_string().as_str()));
}

#[test]
fn check_config_refuses_framing_and_hop_by_hop_names() {
    let rows = [
        "set_request_headers = { \"Content-Length\" = \"0\" }",
        "add_response_headers = { \"Transfer-Encoding\" = \"chunked\" }",
        "remove_request_headers = [\"Connection\"]",
        "remove_response_headers = [\"Keep-Alive\"]",
        "set_response_headers = { \"Upgrade\" = \"h2c\" }",
        "set_request_headers = { \"X-A\" = \"$request\" }",
        "add_request_headers = { \"bad name\" = \"x\" }",
        // One field in two spellings (applied in key order, not the
        // file's), and a request without Host (RFC 9112 §3.2).
        "set_request_headers = { \"X-A\" = \"1\", \"x-a\" = \"2\" }",
        "remove_request_headers = [\"host\"]",
        // A second Host line, which a server must answer with 400.
        "add_request_headers = { \"Host\" = \"internal.example\" }",
        // A control character other than a tab (RFC 9110 §5.5), a tab
        // at either end of a value or in a Host.
        "set_response_headers = { \"X-A\" = \"a\\u0001b\" }",
        "set_response_headers = { \"X-A\" = \"\\tb\" }",
        "add_request_headers = { \"X-A\" = \"a\\t\" }",
        "set_request_headers = { \"Host\" = \"a\\tb\" }",
        // A Host that is not a host: empty, or with a space (it went
        // upstream as it was, which a server must answer with 400).
        "set_request_headers = { \"Host\" = \"\" }",
        "set_request_headers = { \"Host\" = \"a b\" }",
        "set_request_headers = { \"host\" = \"$host, other.example\" }",
    ];
    for keys in rows {
        let f = TempFile::new(&format!(
            "upstream = \"127.0.0.1:9\"\n[[route]]\nupstream = \"default\"\n{keys}\n"
        ));
        let out = run_sluice(&["--check-config", f.path()]);
        assert_eq!(out.status.code(), Some(2), "{keys}: {}", out.stderr);
        assert!(
            out.stderr.contains(":3:") || out.stderr.contains("header rule"),
            "{keys}: {}",
            out.stderr
        );
    }
    let f = TempFile::new(
        "upstream = \"127.0.0.1:9\"\n[[route]]\nupstream = \"default\"\nset_response_headers = { \"Strict-Transport-Security\" = \"max-age=1\" }\nremove_response_headers = [\"Server\"]\n",
    );
    let out = run_sluice(&["--check-config", f.path()]);
    assert!(out.status.success(), "{}", out.stderr);
    // A tab inside a value is a field value's own whitespace (RFC 9110
    // §5.5); it was refused as a control character.
    let f = TempFile::new(
        "upstream = \"127.0.0.1:9\"\n[[route]]\nupstream = \"default\"\nadd_response_headers = { \"X-Tab\" = \"a\\tb\" }\n",
    );
    let out = run_sluice(&["--check-config", f.path()]);
    assert!(out.status.success(), "{}", out.stderr);
}

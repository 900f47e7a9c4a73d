//! A route's own answers (issue 25, redirects and fixed answers;
//! docs/configuration.md, "Edge rules"): `redirect` with `redirect_status` and its variables,
//! `respond`, `scheme` matching; no upstream is contacted; the body of a
//! request answered so is never parsed as a request; `--check-config`
//! refuses bad ones (with the line when the route names an upstream).

mod util;

use serde_json::Value;
use sluice::{RespondSpec, Scheme};
use util::*;

fn routes() -> Vec<RouteSpec> {
    vec![
        // The TLS listener would proxy; plain requests fall through.
        RouteSpec {
            scheme: Some(Scheme::Https),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            path_prefix: Some("/maint".into()),
            respond: Some(RespondSpec {
                status: 503,
                body: "maintenance\n".into(),
                content_type: Some("text/plain".into()),
            }),
            ..RouteSpec::to("")
        },
        RouteSpec {
            path_prefix: Some("/who".into()),
            redirect: Some("http://other.example/$scheme/$remote_addr".into()),
            ..RouteSpec::to("")
        },
        RouteSpec {
            path_prefix: Some("/api".into()),
            ..RouteSpec::to("app")
        },
        RouteSpec {
            scheme: Some(Scheme::Http),
            redirect: Some("https://$host$request_uri".into()),
            redirect_status: Some(308),
            ..RouteSpec::to("")
        },
    ]
}

#[test]
fn plain_requests_are_redirected_with_their_query() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = start_routed_proxy(up.addr, routes(), |_| {});
    let mut c = proxy.client();
    // `$host` is written as nginx writes it: lowercased, without its port
    // and a trailing dot.
    let resp = c.round_trip(b"GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: Example.COM.:8080\r\n\r\n");
    assert_eq!(resp.status, 308);
    assert_eq!(
        resp.header("location"),
        Some("https://example.com/a/b?x=1&y=%20")
    );
    // The connection stays open; the default status is 301.
    let resp = c.round_trip(get("/who"));
    assert_eq!(resp.status, 301);
    assert_eq!(
        resp.header("location"),
        Some("http://other.example/http/127.0.0.1")
    );
    // A route without an answer still proxies.
    assert_eq!(c.round_trip(get("/api")).status, 200);
    assert_eq!(up.wait_requests(1).len(), 1);
    let terms: Vec<String> = wait_access_lines(log.path(), 3)
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["termination"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(terms, ["redirect", "redirect", "complete"]);
}

#[test]
fn a_redirect_that_cannot_be_a_url_is_a_400() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = start_routed_proxy(up.addr, routes(), |_| {});
    // HTTP/1.0 without Host: `https:///p` sends a browser to the host `p`.
    let resp = proxy.client().round_trip(b"GET /p HTTP/1.0\r\n\r\n");
    assert_eq!(resp.status, 400);
    assert_eq!(resp.header("location"), None);
    // `OPTIONS *` is about the server, and `https://a*` is no URL.
    let resp = proxy
        .client()
        .round_trip(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(resp.status, 400);
    assert_eq!(resp.header("location"), None);
    // A template that does not use them still answers: `/who` names its
    // own host.
    let resp = proxy.client().round_trip(b"GET /who HTTP/1.0\r\n\r\n");
    assert_eq!(resp.status, 301);
    assert_eq!(up.accepted(), 0, "no upstream is contacted");
}

#[test]
fn fixed_answer_to_a_request_with_a_body_never_reads_the_body_as_a_request() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = start_routed_proxy(up.addr, routes(), |_| {});
    let mut c = proxy.client();
    // Its body looks like a request to a proxied path.
    let smuggled = "GET /api/evil HTTP/1.1\r\nHost: a\r\n\r\n";
    let req = format!(
        "POST /maint HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    );
    let resp = c.round_trip(req);
    assert_eq!(resp.status, 503);
    assert_eq!(resp.body, b"maintenance\n");
    assert_eq!(resp.header("content-type"), Some("text/plain"));
    assert!(resp.says_close());
    c.assert_closed();
    assert_eq!(up.accepted(), 0, "no upstream is contacted");
    let recs = wait_access_lines(log.path(), 1);
    let v: Value = serde_json::from_str(&recs[0]).unwrap();
    assert_eq!(
        (v["status"].as_u64(), v["termination"].as_str()),
        (Some(503), Some("fixed_answer"))
    );
    // A fixed answer to a request without a body keeps the connection.
    let mut c = proxy.client();
    assert_eq!(c.round_trip(get("/maint")).status, 503);
    assert_eq!(c.round_trip(get("/maint")).status, 503);
}

#[test]
fn check_config_refuses_bad_answers() {
    let ok = TempFile::new(
        "upstream = \"127.0.0.1:9\"\n[[route]]\nredirect = \"https://$host$request_uri\"\n",
    );
    let out = run_sluice(&["--check-config", ok.path()]);
    assert!(out.status.success(), "{}", out.stderr);
    // The effective configuration names no group for the route that
    // answers by itself (it printed `upstream = ""`), and validates again.
    let route = out.stdout.split("[[route]]").nth(1).unwrap_or_default();
    assert!(route.contains("redirect = "), "{}", out.stdout);
    assert!(!route.contains("upstream"), "{}", out.stdout);
    let printed = TempFile::new(&out.stdout);
    let again = run_sluice(&["--check-config", printed.path()]);
    assert!(again.status.success(), "{}", again.stderr);
    // 303 See Other (a POST answered with a GET elsewhere), as nginx and
    // HAProxy allow.
    let see_other = TempFile::new(
        "upstream = \"127.0.0.1:9\"\n[[route]]\nredirect = \"/x\"\nredirect_status = 303\n",
    );
    let out = run_sluice(&["--check-config", see_other.path()]);
    assert!(out.status.success(), "{}", out.stderr);
    // Each row: the route's keys, and what the error names.
    let rows = [
        ("redirect = \"https://$hostname$uri\"", "unknown variable"),
        ("redirect = \"/x\"\nredirect_status = 300", "300"),
        ("redirect = \"\"", "redirect is empty"),
        (
            "respond = { status = 205, body = \"x\" }",
            "205 has no content",
        ),
        (
            "redirect_status = 301\nupstream = \"default\"",
            "without redirect",
        ),
        ("redirect = \"/x\"\nrespond = { status = 200 }", "not both"),
        ("respond = { status = 204 }", "204"),
        ("path_prefix = \"/x\"", "a route needs upstream"),
    ];
    for (keys, says) in rows {
        let f = TempFile::new(&format!("upstream = \"127.0.0.1:9\"\n[[route]]\n{keys}\n"));
        let out = run_sluice(&["--check-config", f.path()]);
        assert_eq!(out.status.code(), Some(2), "{keys}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{keys}: {}", out.stderr);
    }
}

//! Request ids (issue 25, item 3; docs/edge.md "Request ids"): on by
//! default, every request goes upstream with an `X-Request-Id`: the one
//! it came with from a peer in `trusted_proxies`, else a new one (32 hex
//! digits) in place of the client's; the same id is in the access record
//! and in `$request_id`; `request_id = false` turns it off.

mod util;

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use sluice::{Cidr, RespondSpec};
use util::*;

fn is_new_id(v: &str) -> bool {
    v.len() == 32
        && v.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn with_id(path: &str, id: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: a\r\nX-Request-Id: {id}\r\n\r\n").into_bytes()
}

fn ids_in_log(log: &TempFile, n: usize) -> Vec<String> {
    wait_access_lines(log.path(), n)
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["request_id"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

#[test]
fn each_request_gets_a_new_id_upstream_and_in_the_access_record() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = start_routed_proxy(up.addr, vec![RouteSpec::to("app")], |_| {});
    let mut c = proxy.client();
    for _ in 0..3 {
        assert_eq!(c.round_trip(get("/")).status, 200);
    }
    // From an untrusted client, its own id is replaced.
    assert_eq!(c.round_trip(with_id("/", "spoofed")).status, 200);
    let sent: Vec<String> = up
        .wait_requests(4)
        .iter()
        .map(|r| {
            let all = r.header_all("x-request-id");
            assert_eq!(all.len(), 1, "one field");
            all[0].clone()
        })
        .collect();
    assert!(sent.iter().all(|id| is_new_id(id)), "{sent:?}");
    assert_eq!(sent.iter().collect::<HashSet<_>>().len(), 4, "all differ");
    assert_eq!(
        ids_in_log(&log, 4),
        sent,
        "the access record names the id sent"
    );
}

#[test]
fn a_client_cannot_strip_the_id_by_naming_it_in_connection() {
    // Found by a break-it pass: `Connection: X-Request-Id` removed the
    // proxy's own id (hop-by-hop removal ran after it was stamped).
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = start_routed_proxy(up.addr, vec![RouteSpec::to("app")], |_| {});
    let mut c = proxy.client();
    let r = c.round_trip(
        &b"GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: mine\r\nConnection: X-Request-Id, Via\r\n\r\n"[..],
    );
    assert_eq!(r.status, 200);
    let all = up.single_request().header_all("x-request-id");
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(is_new_id(&all[0]), "{all:?}");
    assert_eq!(ids_in_log(&log, 1), all);
}

#[test]
fn a_trusted_peer_keeps_its_id_and_the_variable_carries_it() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let routes = vec![
        RouteSpec {
            path_prefix: Some("/own".into()),
            respond: Some(RespondSpec {
                status: 200,
                body: "own\n".into(),
                content_type: None,
            }),
            ..RouteSpec::to("")
        },
        RouteSpec {
            set_response_headers: BTreeMap::from([(
                "X-Trace".to_string(),
                "id=$request_id".to_string(),
            )]),
            ..RouteSpec::to("app")
        },
    ];
    let (proxy, log) = start_routed_proxy(up.addr, routes, |c| {
        c.trusted_proxies = vec!["127.0.0.1".parse::<Cidr>().unwrap()];
    });
    let mut c = proxy.client();
    let r = c.round_trip(with_id("/", "edge-7f3a"));
    assert_eq!(r.header("X-Trace"), Some("id=edge-7f3a"));
    assert_eq!(
        up.single_request().header("x-request-id"),
        Some("edge-7f3a")
    );
    // Not a token (a space), or over 64 bytes: replaced even from a
    // trusted peer.
    for bad in ["two words", &"a".repeat(65)] {
        let r = c.round_trip(with_id("/", bad));
        let got = r
            .header("X-Trace")
            .unwrap()
            .trim_start_matches("id=")
            .to_string();
        assert!(is_new_id(&got), "{bad:?} -> {got}");
    }
    // The proxy's own answers have one too, in the record.
    assert_eq!(c.round_trip(with_id("/own", "own-1")).status, 200);
    let ids = ids_in_log(&log, 4);
    assert_eq!(ids[0], "edge-7f3a");
    assert_eq!(ids[3], "own-1");
}

#[test]
fn with_ids_off_a_client_id_that_is_not_a_token_is_no_request_id() {
    // Ids off: the client's field passes upstream as it came, but only a
    // token is `$request_id` and the record's id; "x status=200
    // upstream=evil" forged fields of a text record and reached a
    // `Location` as it was.
    let up = Upstream::start(respond_forever(ok_response("x")));
    let routes = vec![RouteSpec {
        set_response_headers: BTreeMap::from([(
            "X-Trace".to_string(),
            "id=$request_id".to_string(),
        )]),
        ..RouteSpec::to("app")
    }];
    let (proxy, log) = start_routed_proxy(up.addr, routes, |c| c.request_id = false);
    let mut c = proxy.client();
    let forged = "x status=200 upstream=evil";
    assert_eq!(
        c.round_trip(with_id("/", forged)).header("X-Trace"),
        Some("id=")
    );
    assert_eq!(
        c.round_trip(with_id("/", "edge-1")).header("X-Trace"),
        Some("id=edge-1")
    );
    let got = up.wait_requests(2);
    assert_eq!(got[0].header("x-request-id"), Some(forged));
    assert_eq!(ids_in_log(&log, 2), ["", "edge-1"]);
}

#[test]
fn request_id_off_adds_nothing() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, _log) = start_routed_proxy(up.addr, vec![RouteSpec::to("app")], |c| {
        c.request_id = false
    });
    let mut c = proxy.client();
    assert_eq!(c.round_trip(get("/")).status, 200);
    assert!(!up.single_request().has("x-request-id"));
    let f = TempFile::new("upstream = \"127.0.0.1:9\"\nrequest_id = false\n");
    let out = run_sluice(&["--check-config", f.path()]);
    assert!(out.status.success(), "{}", out.stderr);
}

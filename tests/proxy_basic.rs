//! Heads on their way through: what the upstream sees of a request (names,
//! order, hop-by-hop removal, version, the proxy's own fields) and what the
//! client sees of a response; `request_filter` replies. ARCHITECTURE.md §6, §10.

mod util;

use std::time::Duration;

use util::*;

/// Fields the proxy itself sets on requests going upstream.
const PROXY_FIELDS: [&str; 5] = [
    "connection",
    "via",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-request-id",
];

/// The request's fields minus those the proxy sets itself.
fn client_fields(req: &Request) -> Vec<(String, String)> {
    req.fields
        .iter()
        .filter(|(n, _)| !PROXY_FIELDS.iter().any(|p| n.eq_ignore_ascii_case(p)))
        .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Sends `request` through a proxy (configured by `tweak`) to an upstream
/// answering 200 "ok"; returns what the upstream received and the response.
#[track_caller]
fn proxied(request: &[u8], tweak: impl FnOnce(&mut Config)) -> (Request, Response) {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, tweak);
    let mut client = proxy.client();
    let resp = client.round_trip(request);
    assert_eq!(resp.status, 200, "response {}", preview(&resp.raw()));
    assert_eq!(resp.body, b"ok");
    (upstream.single_request(), resp)
}

#[test]
fn field_names_keep_their_case_and_order() {
    let (req, _) = proxied(
        b"GET /path?q=1 HTTP/1.1\r\n\
          Host: example.test\r\n\
          x-lower: a\r\n\
          X-UPPER: b\r\n\
          X-MiXeD-CaSe: c\r\n\
          Accept: */*\r\n\
          x-lower: a2\r\n\
          User-Agent: raw-client\r\n\
          \r\n",
        |_| {},
    );
    assert_eq!(req.method, "GET");
    assert_eq!(req.target, "/path?q=1");
    assert_eq!(
        client_fields(&req),
        pairs(&[
            ("Host", "example.test"),
            ("x-lower", "a"),
            ("X-UPPER", "b"),
            ("X-MiXeD-CaSe", "c"),
            ("Accept", "*/*"),
            ("x-lower", "a2"),
            ("User-Agent", "raw-client"),
        ]),
        "upstream head {}",
        preview(&req.head)
    );
}

#[test]
fn hop_by_hop_fields_do_not_reach_upstream() {
    let (req, _) = proxied(
        b"GET / HTTP/1.1\r\n\
          Host: example.test\r\n\
          Connection: keep-alive\r\n\
          Keep-Alive: timeout=5, max=100\r\n\
          Proxy-Connection: keep-alive\r\n\
          TE: trailers\r\n\
          Upgrade: h2c\r\n\
          X-End-To-End: stays\r\n\
          \r\n",
        |_| {},
    );
    let head = String::from_utf8_lossy(&req.head).into_owned();
    for name in ["keep-alive", "proxy-connection", "te", "upgrade"] {
        assert!(!req.has(name), "{name} reached the upstream: {head:?}");
    }
    for value in req.header_all("connection") {
        assert!(
            value.eq_ignore_ascii_case("keep-alive"),
            "Connection {value:?} upstream"
        );
    }
    assert_eq!(
        client_fields(&req),
        pairs(&[("Host", "example.test"), ("X-End-To-End", "stays")]),
        "{head:?}"
    );
}

#[test]
fn fields_named_by_connection_do_not_reach_upstream() {
    let (req, _) = proxied(
        b"GET / HTTP/1.1\r\n\
          Host: example.test\r\n\
          X-Private: one\r\n\
          Connection: x-private, X-Other\r\n\
          x-other: two\r\n\
          Connection: X-THIRD\r\n\
          X-Third: three\r\n\
          X-Public: four\r\n\
          \r\n",
        |_| {},
    );
    let head = String::from_utf8_lossy(&req.head).into_owned();
    for name in ["x-private", "x-other", "x-third"] {
        assert!(
            !req.has(name),
            "{name} (named by Connection) reached the upstream: {head:?}"
        );
    }
    for value in req.header_all("connection") {
        assert!(
            value.eq_ignore_ascii_case("keep-alive"),
            "Connection {value:?} upstream"
        );
    }
    assert_eq!(
        client_fields(&req),
        pairs(&[("Host", "example.test"), ("X-Public", "four")]),
        "{head:?}"
    );
}

#[test]
fn http10_request_arrives_upstream_as_http11() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET /old HTTP/1.0\r\nHost: example.test\r\n\r\n");
    let resp = client.read_response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok");
    let req = upstream.single_request();
    assert_eq!(
        req.version,
        "HTTP/1.1",
        "upstream head {}",
        preview(&req.head)
    );
    assert_eq!(req.target, "/old");
    assert_eq!(req.header("host"), Some("example.test"));
}

#[test]
fn proxy_appends_via_forwarded_for_and_proto_after_client_fields() {
    // `--via-name` names the proxy in Via (default: `sluice-` + a hash).
    let (req, _) = proxied(
        b"GET / HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n",
        |c| c.via_name = "edge-1".into(),
    );
    let head = String::from_utf8_lossy(&req.head).into_owned();
    assert_eq!(req.header_all("via"), vec!["1.1 edge-1"], "{head:?}");
    assert_eq!(
        req.header_all("x-forwarded-for"),
        vec!["127.0.0.1"],
        "{head:?}"
    );
    assert_eq!(
        req.header_all("x-forwarded-proto"),
        vec!["http"],
        "{head:?}"
    );
    // Appended at the end: the client's fields keep the first places.
    let names: Vec<String> = req.names().iter().map(|n| n.to_ascii_lowercase()).collect();
    let without_connection: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| *n != "connection")
        .collect();
    assert_eq!(&without_connection[..2], ["host", "accept"], "{head:?}");
    let mut appended = without_connection[2..].to_vec();
    appended.sort();
    assert_eq!(
        appended,
        [
            "via",
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-request-id"
        ],
        "{head:?}"
    );
}

#[test]
fn existing_x_forwarded_for_gets_client_address_appended_in_place() {
    let (req, _) = proxied(
        b"GET / HTTP/1.1\r\n\
          Host: example.test\r\n\
          X-Forwarded-For: 10.0.0.1\r\n\
          Accept: */*\r\n\
          \r\n",
        |_| {},
    );
    let head = String::from_utf8_lossy(&req.head).into_owned();
    assert_eq!(
        req.header_all("x-forwarded-for"),
        vec!["10.0.0.1, 127.0.0.1"],
        "{head:?}"
    );
    assert_eq!(
        client_fields(&req),
        pairs(&[("Host", "example.test"), ("Accept", "*/*")]),
        "{head:?}"
    );
    // In place: still between Host and Accept.
    let names: Vec<String> = req.names().iter().map(|n| n.to_ascii_lowercase()).collect();
    assert_eq!(
        &names[..3],
        ["host", "x-forwarded-for", "accept"],
        "{head:?}"
    );
}

#[test]
fn add_via_false_sends_no_via() {
    let (req, _) = proxied(&get("/"), |c| c.add_via = false);
    assert!(!req.has("via"), "{}", preview(&req.head));
    assert!(req.has("x-forwarded-for"));
    assert!(req.has("x-forwarded-proto"));
}

#[test]
fn add_x_forwarded_for_false_sends_no_x_forwarded_for() {
    let (req, _) = proxied(&get("/"), |c| c.add_x_forwarded_for = false);
    assert!(!req.has("x-forwarded-for"), "{}", preview(&req.head));
    assert!(req.has("via"));
    assert!(req.has("x-forwarded-proto"));
}

#[test]
fn add_x_forwarded_proto_false_sends_no_x_forwarded_proto() {
    let (req, _) = proxied(&get("/"), |c| c.add_x_forwarded_proto = false);
    assert!(!req.has("x-forwarded-proto"), "{}", preview(&req.head));
    assert!(req.has("via"));
    assert!(req.has("x-forwarded-for"));
}

#[test]
fn host_passes_unchanged() {
    let (req, _) = proxied(b"GET / HTTP/1.1\r\nHost: Example.TEST:8080\r\n\r\n", |_| {});
    assert_eq!(req.header_all("host"), vec!["Example.TEST:8080"]);
}

#[test]
fn response_goes_downstream_without_hop_by_hop_fields() {
    let upstream = Upstream::start(respond_forever(
        b"HTTP/1.1 200 OK\r\n\
          Server: up\r\n\
          Connection: X-Hop\r\n\
          Keep-Alive: timeout=5\r\n\
          X-Hop: secret\r\n\
          Proxy-Connection: keep-alive\r\n\
          X-End: 1\r\n\
          Content-Length: 5\r\n\
          \r\n\
          hello"
            .to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let resp = proxy.client().round_trip(get("/"));
    let head = String::from_utf8_lossy(&resp.head).into_owned();
    assert_eq!(resp.version, "HTTP/1.1", "{head:?}");
    assert_eq!(resp.status, 200);
    for name in ["keep-alive", "x-hop", "proxy-connection"] {
        assert!(!resp.has(name), "{name} reached the client: {head:?}");
    }
    for value in resp.header_all("connection") {
        assert!(!value.to_ascii_lowercase().contains("x-hop"), "{head:?}");
    }
    assert_eq!(resp.header("server"), Some("up"));
    assert_eq!(resp.header("x-end"), Some("1"));
    assert_eq!(resp.header("content-length"), Some("5"));
    assert_eq!(resp.body, b"hello");
}

#[test]
fn http10_upstream_response_goes_downstream_as_http11() {
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let resp = proxy.client().round_trip(get("/"));
    assert!(
        resp.head.starts_with(b"HTTP/1.1 200"),
        "{}",
        preview(&resp.head)
    );
    assert_eq!(resp.body, b"ok");
}

fn deny_filter(upstream: std::net::SocketAddr) -> impl Filter + Send + 'static {
    ReplyFilter {
        upstream,
        on_request: |req: &mut RequestHead| {
            req.target
                .starts_with("/deny")
                .then(|| Reply::new(403, "denied"))
        },
    }
}

#[test]
fn request_filter_reply_then_next_request_reaches_upstream() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_proxy(|_| {}, deny_filter(upstream.addr));
    let mut client = proxy.client();

    let denied = client.round_trip(get("/deny"));
    assert_eq!(denied.status, 403, "{}", preview(&denied.raw()));
    assert_eq!(denied.header("content-length"), Some("6"));
    assert_eq!(denied.body, b"denied");

    let ok = client.round_trip(get("/fine"));
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, b"ok");
    let req = upstream.single_request();
    assert_eq!(req.target, "/fine");
}

#[test]
fn request_filter_reply_to_request_with_body_closes_connection() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_proxy(|_| {}, deny_filter(upstream.addr));
    let mut client = proxy.client();
    // The body looks like a request: it must never be parsed as one.
    let body = "GET /smuggled HTTP/1.1\r\nHost: example.test\r\n\r\n";
    client.send(format!(
        "POST /deny HTTP/1.1\r\nHost: example.test\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let denied = client.read_response();
    assert_eq!(denied.status, 403);
    assert_eq!(denied.body, b"denied");
    assert!(denied.says_close(), "{}", preview(&denied.head));
    client.assert_closed();
    assert_stays(Duration::from_millis(100), "no upstream connection", || {
        upstream.accepted() == 0
    });
    assert!(upstream.requests().is_empty());
}

#[test]
fn http10_client_gets_chunked_response_as_plain_body_delimited_by_close() {
    // RFC 9112 §7.1: an HTTP/1.0 recipient knows no chunked coding.
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n\
          5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Sum: 12\r\n\r\n"
            .to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    assert!(!head.has("transfer-encoding"), "{}", preview(&head.head));
    assert!(!head.has("trailer"), "{}", preview(&head.head));
    assert!(head.says_close(), "{}", preview(&head.head));
    let body = client.read_until_closed(Duration::from_secs(3));
    assert_eq!(String::from_utf8_lossy(&body), "hello, world");
}

#[test]
fn http10_client_gets_large_chunked_response_dechunked_byte_for_byte() {
    let mut raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut want = Vec::new();
    for i in 0..300u32 {
        let chunk: Vec<u8> = (0..(1000 + i * 7)).map(|j| (i + j) as u8).collect();
        raw.extend_from_slice(format!("{:x};n={i}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(&chunk);
        raw.extend_from_slice(b"\r\n");
        want.extend_from_slice(&chunk);
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let upstream = Upstream::start(respond_n(1, raw));
    let proxy = start_forward_proxy(upstream.addr, |c| {
        c.high_watermark = 4096;
        c.low_watermark = 1024;
    });
    let mut client = proxy.client();
    client.send(b"GET / HTTP/1.0\r\nHost: a\r\n\r\n");
    let head = client.read_response_head();
    assert_eq!(head.status, 200);
    let body = client.read_until_closed(Duration::from_secs(3));
    assert_eq!(body.len(), want.len());
    assert!(body == want, "body differs from the chunk data");
}

#[test]
fn http10_client_never_sees_transfer_encoding_and_gzip_chunked_gets_502() {
    // A bodiless answer to HEAD still names its codings: not for HTTP/1.0.
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n".to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"HEAD / HTTP/1.0\r\nHost: a\r\n\r\n");
    let head = client.read_head_response();
    assert!(!head.has("transfer-encoding"), "{}", preview(&head.head));
    assert!(!head.has("trailer"), "{}", preview(&head.head));
    // A coding besides chunked cannot be undone for HTTP/1.0 (nginx: 502).
    let upstream = Upstream::start(respond_n(
        1,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            .to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let resp = proxy
        .client()
        .round_trip(b"GET / HTTP/1.0\r\nHost: a\r\n\r\n");
    assert_eq!(resp.status, 502);
    // Nor can chunked that is not the final coding (`chunked, identity`:
    // the body runs until close, still chunk-coded); it went on as if the
    // chunk framing were the content.
    let upstream = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            .to_vec(),
    ));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET / HTTP/1.0\r\nHost: a\r\n\r\n");
    let got = client.read_until_closed(CLIENT_TIMEOUT);
    assert!(got.starts_with(b"HTTP/1.1 502 "), "{}", preview(&got));
}

#[test]
fn options_absolute_form_without_path_goes_upstream_as_asterisk() {
    let upstream = Upstream::start(respond_n(1, ok_response("x")));
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let resp = proxy
        .client()
        .round_trip(b"OPTIONS http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(resp.status, 200);
    let req = upstream.single_request();
    assert_eq!(req.target, "*", "RFC 9112 §3.2.4");
}

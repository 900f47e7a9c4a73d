//! The user's hooks (ARCHITECTURE.md §10): what `request_filter` and
//! `response_filter` change reaches the other side; an upgrade request
//! keeps its upgrade fields and becomes a tunnel (ARCHITECTURE.md §6).

mod util;

use std::net::SocketAddr;

use util::*;

/// Rewrites `/old` to `/new`, adds a request field and a response field.
struct Rewrite {
    upstream: SocketAddr,
}

impl Filter for Rewrite {
    fn request_filter(&self, req: &mut RequestHead) -> Option<Reply> {
        if req.target == "/old" {
            req.target = "/new".to_string();
        }
        req.headers.append("X-Added", b"request");
        None
    }

    fn upstream_peer(&self, _req: &RequestHead) -> Target {
        Peer::new(self.upstream).into()
    }

    fn response_filter(&self, req: &RequestHead, resp: &mut ResponseHead) {
        resp.headers.append("X-Seen-Target", req.target.as_bytes());
    }
}

#[test]
fn request_filter_changes_reach_upstream() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_proxy(
        |_| {},
        Rewrite {
            upstream: upstream.addr,
        },
    );
    assert_eq!(proxy.client().round_trip(get("/old")).status, 200);
    let req = upstream.single_request();
    assert_eq!(req.target, "/new");
    assert_eq!(req.header("x-added"), Some("request"));
}

#[test]
fn response_filter_changes_reach_client() {
    let upstream = Upstream::start(respond_forever(ok_response("ok")));
    let proxy = start_proxy(
        |_| {},
        Rewrite {
            upstream: upstream.addr,
        },
    );
    let resp = proxy.client().round_trip(get("/old"));
    assert_eq!(resp.header("x-seen-target"), Some("/new"));
    assert_eq!(resp.body, b"ok");
}

#[test]
fn upgrade_request_keeps_upgrade_fields_and_tunnels_bytes() {
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_none() {
            return;
        }
        conn.send(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        );
        loop {
            match conn.wire.read_some(1024) {
                Ok(data) if !data.is_empty() => {
                    if !conn.send([b"echo:".as_slice(), &data].concat()) {
                        return;
                    }
                }
                _ => return,
            }
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(
        b"GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    let resp = client.read_response();
    assert_eq!(resp.status, 101, "{}", preview(&resp.raw()));
    assert_eq!(resp.header("upgrade"), Some("websocket"));
    let req = upstream.single_request();
    assert_eq!(
        req.header("upgrade"),
        Some("websocket"),
        "{}",
        preview(&req.head)
    );
    assert!(
        req.header_all("connection")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("upgrade")),
        "{}",
        preview(&req.head)
    );

    client.send(b"ping");
    assert_eq!(client.read_bytes(9), b"echo:ping");
    client.send(b"pong!");
    assert_eq!(client.read_bytes(10), b"echo:pong!");
}

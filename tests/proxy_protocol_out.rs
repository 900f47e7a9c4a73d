//! PROXY protocol out (issue 25, item 1 "Out"; docs/edge.md "PROXY
//! protocol to upstreams"): a group's `send_proxy_protocol = "v1" | "v2"`
//! writes the header first on every new upstream connection, giving the
//! client's address (after a PROXY header in); such connections are never
//! pooled (one client's address each); health checks of the group send a
//! `LOCAL` header.

mod util;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sluice::{Cidr, ProxyVersion};
use util::*;

/// What the upstream saw before each connection's first request: the v1
/// line, or the v2 header rendered as `v2 SRC DST`.
type Seen = Arc<Mutex<Vec<String>>>;

/// Reads a PROXY header (v1 or v2) by hand, records it, then answers
/// every request of the connection with 200.
fn proxy_reader(seen: Seen) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut c: UpConn| {
        let Ok(first) = c.wire.read_exact_bytes(12) else {
            return;
        };
        let header = if first.starts_with(b"PROXY ") {
            let mut line = first;
            while !line.ends_with(b"\r\n") && line.len() <= 107 {
                match c.wire.read_exact_bytes(1) {
                    Ok(b) => line.extend_from_slice(&b),
                    Err(_) => return,
                }
            }
            String::from_utf8_lossy(&line).trim_end().to_string()
        } else if first == b"\r\n\r\n\0\r\nQUIT\n" {
            let Ok(fixed) = c.wire.read_exact_bytes(4) else {
                return;
            };
            let len = u16::from_be_bytes([fixed[2], fixed[3]]) as usize;
            let Ok(body) = c.wire.read_exact_bytes(len) else {
                return;
            };
            match (fixed[0], fixed[1], len) {
                (0x21, 0x11, 12) => {
                    let ip = |b: &[u8]| std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]);
                    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
                    format!(
                        "v2 {}:{} {}:{}",
                        ip(&body[0..4]),
                        port(&body[8..10]),
                        ip(&body[4..8]),
                        port(&body[10..12])
                    )
                }
                (0x20, _, 0) => "v2 LOCAL".to_string(),
                other => format!("v2 unexpected {other:?}"),
            }
        } else {
            format!("no header: {}", preview(&first))
        };
        seen.lock().unwrap().push(header);
        while let Some(req) = c.read_request() {
            let _ = req;
            if !c.send(ok_response("ok")) {
                return;
            }
        }
    }
}

fn proxy_to(up: SocketAddr, version: ProxyVersion, checks: bool) -> Proxy {
    start_proxy(
        move |c| {
            let mut g = GroupSpec::new("app", vec![up.into()]);
            g.send_proxy_protocol = Some(version);
            if checks {
                checked(50, 500)(&mut g);
            }
            c.upstream = vec![g];
            c.accept_proxy_protocol = vec!["127.0.0.1".parse::<Cidr>().unwrap()];
        },
        ByRoutes,
    )
}

#[test]
fn v1_names_the_client_of_the_proxy_header_in_on_every_new_connection() {
    let seen = Seen::default();
    let up = Upstream::start(proxy_reader(seen.clone()));
    let proxy = proxy_to(up.addr, ProxyVersion::V1, false);
    let mut c = proxy.client();
    c.send("PROXY TCP4 192.0.2.7 127.0.0.1 40000 80\r\n");
    // Three requests on one keep-alive client connection: three upstream
    // connections, each with the header (none pooled).
    for _ in 0..3 {
        assert_eq!(c.round_trip(get("/")).status, 200);
    }
    let to = proxy.addr;
    let want = format!("PROXY TCP4 192.0.2.7 127.0.0.1 40000 {}", to.port());
    assert_eventually("three headers seen", || seen.lock().unwrap().len() == 3);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![want.clone(), want.clone(), want]
    );
    assert_eq!(up.accepted(), 3);
    let st = proxy.stats.snapshot();
    assert_eq!((st.upstream_connects, st.pool_puts), (3, 0));
}

#[test]
fn v2_names_a_direct_client_by_its_socket_address() {
    let seen = Seen::default();
    let up = Upstream::start(proxy_reader(seen.clone()));
    let proxy = start_proxy(
        move |c| {
            let mut g = GroupSpec::new("app", vec![up.addr.into()]);
            g.send_proxy_protocol = Some(ProxyVersion::V2);
            c.upstream = vec![g];
        },
        ByRoutes,
    );
    let mut c = proxy.client();
    let local = c.wire.stream.local_addr().unwrap();
    assert_eq!(c.round_trip(get("/")).status, 200);
    assert_eventually("a header seen", || seen.lock().unwrap().len() == 1);
    assert_eq!(
        seen.lock().unwrap()[0],
        format!("v2 {local} {}", proxy.addr)
    );
}

#[test]
fn health_checks_of_the_group_send_a_local_header() {
    let seen = Seen::default();
    let up = Upstream::start(proxy_reader(seen.clone()));
    let _proxy = proxy_to(up.addr, ProxyVersion::V2, true);
    assert_eventually("a check came", || !seen.lock().unwrap().is_empty());
    assert_eq!(seen.lock().unwrap()[0], "v2 LOCAL");
}

#[test]
fn health_checks_of_a_tls_group_send_the_header_before_the_client_hello() {
    // The header is below TLS, as on the group's request connections
    // (HAProxy's `check-send-proxy` with `check-ssl`): a server behind
    // `accept-proxy` reads it before the handshake.
    let firsts: Seen = Seen::default();
    let seen = firsts.clone();
    let up = Upstream::start(move |mut c: UpConn| {
        if let Ok(b) = c.wire.read_exact_bytes(13) {
            seen.lock().unwrap().push(preview(&b));
        }
    });
    let _proxy = start_proxy(
        move |c| {
            let mut g = GroupSpec::new("app", vec![up.addr.into()]);
            g.send_proxy_protocol = Some(ProxyVersion::V2);
            g.tls = true;
            g.tls_verify = false;
            checked(50, 500)(&mut g);
            c.upstream = vec![g];
        },
        ByRoutes,
    );
    assert_eventually("a check came", || !firsts.lock().unwrap().is_empty());
    let v2_then_local = preview(b"\r\n\r\n\0\r\nQUIT\n\x20");
    assert_eq!(firsts.lock().unwrap()[0], v2_then_local);
}

#[test]
fn check_config_takes_v1_and_v2_only() {
    for (v, ok) in [("v1", true), ("v2", true), ("v3", false), ("2", false)] {
        let f = TempFile::new(&format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\nsend_proxy_protocol = \"{v}\"\n"
        ));
        let out = run_sluice(&["--check-config", f.path()]);
        assert_eq!(out.status.success(), ok, "{v}: {}", out.stderr);
        if !ok {
            assert!(out.stderr.contains(":4:"), "{v}: {}", out.stderr);
        }
    }
}

//! The clients a TLS listener meets (issue 23's test list), over real
//! sockets with a rustls client: TLS 1.2-only and 1.3-only clients (and
//! the 1.3 minimum), each counted by version with its handshake's
//! duration in `/metrics`; SNI choosing among several certificates
//! (exact before wildcard, the first for an unknown name or none); a
//! ClientHello dripped a byte at a time, closed at the handshake deadline
//! however steadily it drips.
//!
//! Loopback only; every wait is bounded; no timed assertion.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use util::*;

/// One `GET target` on `s`: the status and body.
#[track_caller]
fn get_on(s: &mut TlsStream, target: &str) -> (u16, Vec<u8>) {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let (status, _, body) = read_length_response(s);
    (status, body)
}

#[test]
fn tls_1_2_only_and_1_3_only_clients_are_served_and_counted_by_version() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("versions");
    let admin = loopback(free_port());
    let proxy = start_tls_proxy(upstream.addr, &cert, |c| c.admin = Some(admin));
    let versions = [
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
    ];
    for (only, negotiated) in versions {
        let cfg = trusting_with(&[&cert.der], &[only], &[b"http/1.1"]);
        let mut s = tls_connect(proxy.tls, &cfg);
        assert_eq!(get_on(&mut s, "/v"), (200, b"/v".to_vec()));
        assert_eq!(s.conn.protocol_version(), Some(negotiated));
    }
    // Neither a failed handshake nor plain HTTP on the TLS port is a TLS
    // connection or a handshake duration.
    let spdy = trusting_with(&[&cert.der], rustls::DEFAULT_VERSIONS, &[b"spdy/3"]);
    let err = first_error(&mut tls_connect(proxy.tls, &spdy));
    assert!(err.contains("NoApplicationProtocol"), "{err}");
    let r = Client::connect(proxy.tls).round_trip(get_close("/"));
    assert_eq!(r.status, 400);

    let st = proxy.stats.snapshot();
    assert_eq!(
        (st.tls_connections_tls12, st.tls_connections_tls13),
        (1, 1),
        "{st:?}"
    );
    assert_eq!(
        (st.tls_handshakes, st.tls_handshakes_failed),
        (2, 1),
        "{st:?}"
    );
    assert_eq!(proxy.stats.tls_handshake_duration.count(), 2);
    let (_, m) = http_get(admin, "/metrics");
    let m = String::from_utf8_lossy(&m);
    for want in [
        "sluice_tls_connections_total{worker=\"0\",version=\"TLSv1.2\"} 1",
        "sluice_tls_connections_total{worker=\"0\",version=\"TLSv1.3\"} 1",
        "sluice_tls_handshake_duration_seconds_count{worker=\"0\"} 2",
    ] {
        assert!(m.contains(want), "{want}\n{m}");
    }
    assert!(
        m.contains("sluice_tls_handshake_duration_seconds_bucket{worker=\"0\",le=\"0.001\"}"),
        "{m}"
    );
    assert!(assert_histograms_whole(&m) >= 3, "{m}");
}

#[test]
fn with_tls_min_version_1_3_a_tls_1_2_only_client_is_refused() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("min13");
    let proxy = start_tls_proxy(upstream.addr, &cert, |c| {
        c.tls_min_version = sluice::TlsVersion::V1_3;
    });
    let v12 = trusting_with(&[&cert.der], &[&rustls::version::TLS12], &[]);
    let err = first_error(&mut tls_connect(proxy.tls, &v12));
    assert!(err.contains("ProtocolVersion"), "{err}");
    let v13 = trusting_with(&[&cert.der], &[&rustls::version::TLS13], &[]);
    let mut s = tls_connect(proxy.tls, &v13);
    assert_eq!(get_on(&mut s, "/13").0, 200);
    let st = proxy.stats.snapshot();
    assert_eq!(
        (st.tls_connections_tls12, st.tls_connections_tls13),
        (0, 1),
        "{st:?}"
    );
}

#[test]
fn sni_serves_the_exact_name_before_a_wildcard_and_the_first_certificate_otherwise() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    // The default first, a wildcard, then an exact name the wildcard
    // covers too: the exact one wins although listed after it.
    let default = TestCert::for_names("sni-default", &["default.test"]);
    let wildcard = TestCert::for_names("sni-wild", &["*.example.net"]);
    let exact = TestCert::for_names("sni-exact", &["api.example.net"]);
    let (w, e) = (wildcard.spec(), exact.spec());
    let proxy = start_tls_proxy(upstream.addr, &default, move |c| {
        c.certificate.extend([w, e]);
    });
    let any = accepting_any();
    let cases: [(&str, &TestCert); 6] = [
        ("api.example.net", &exact),
        ("API.Example.NET", &exact),
        ("www.example.net", &wildcard),
        // One label only: not the wildcard's, so the default.
        ("a.b.example.net", &default),
        ("example.net", &default),
        // An IP address: no SNI at all.
        ("127.0.0.1", &default),
    ];
    for (name, want) in cases {
        let mut s = tls_connect_as(proxy.tls, &any, name);
        assert_eq!(get_on(&mut s, "/sni").0, 200, "{name}");
        assert!(served_leaf(&s) == want.der, "{name}: another certificate");
    }
    // A client that verifies: the exact name checks out against its own
    // certificate alone.
    let mut s = tls_connect_as(proxy.tls, &exact.client(), "api.example.net");
    assert_eq!(get_on(&mut s, "/verified").0, 200);
}

/// A ClientHello as rustls sends it (a few hundred bytes).
fn client_hello(cert: &TestCert) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(cert.client(), name).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    hello
}

#[test]
fn a_client_hello_dripped_a_byte_at_a_time_is_closed_at_the_handshake_deadline() {
    let upstream = Upstream::start(never_answer());
    let cert = TestCert::new("drip");
    let proxy = start_tls_proxy(upstream.addr, &cert, |c| {
        c.tls_handshake_timeout = Duration::from_secs(1);
    });
    let hello = client_hello(&cert);
    assert!(hello.len() > 100, "{}", hello.len());
    let mut sock = TcpStream::connect(proxy.tls).unwrap();
    // The read's timeout paces the drip: a byte every 100 ms at most,
    // each one arriving well inside the deadline of the one before.
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut sent = 0;
    let mut answer = Vec::new();
    let closed = loop {
        if sent == hello.len() {
            break false;
        }
        if sock.write_all(&hello[sent..sent + 1]).is_err() {
            break true;
        }
        sent += 1;
        let mut buf = [0u8; 512];
        match sock.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break true,
        }
    };
    assert!(closed, "the whole {}-byte hello went in", hello.len());
    assert!(
        sent < hello.len(),
        "closed after {sent} of {} bytes",
        hello.len()
    );
    assert!(answer.is_empty(), "{}", preview(&answer));
    let done =
        |st: &sluice::StatsSnapshot| st.tls_handshakes_timeout == 1 && st.downstream_active == 0;
    assert!(
        wait_until(WAIT, || done(&proxy.stats.snapshot())),
        "{:?}",
        proxy.stats.snapshot()
    );
    assert_eq!(proxy.stats.snapshot().tls_handshakes, 0);
}

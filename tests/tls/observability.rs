//! The TLS fields of access records, /status's certificates and the TLS metrics.

use super::*;

#[test]
fn access_records_carry_the_tls_fields_and_a_second_session_is_resumed() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("record");
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| {
        c.access_log = sluice::AccessLogTarget::File(path.into());
        c.access_log_format = sluice::AccessLogFormat::Json;
    });
    // One client configuration: its session cache keeps the ticket.
    two_sessions_the_second_resumed(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    let mut c = Client::connect(proxy.plain);
    assert_eq!(c.round_trip(get("/plain")).status, 200);
    let records: Vec<serde_json::Value> = wait_access_lines(log.path(), 3)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_target = |t: &str| {
        records
            .iter()
            .find(|r| r["target"] == t)
            .unwrap_or_else(|| panic!("{t}: {records:#?}"))
    };
    for (target, resumed) in [("/0", false), ("/1", true)] {
        let r = by_target(target);
        assert_eq!(r["tls_version"], "TLSv1.3", "{r}");
        assert!(
            r["tls_cipher"].as_str().unwrap().starts_with("TLS13_"),
            "{r}"
        );
        assert_eq!(r["sni"], "localhost", "{r}");
        assert_eq!(r["tls_resumed"], resumed, "{r}");
    }
    let plain = by_target("/plain");
    for field in ["tls_version", "tls_cipher", "sni", "tls_resumed"] {
        assert!(plain[field].is_null(), "{field}: {plain}");
    }
    assert_eq!(handshakes(&proxy), (1, 1, 0));
}

#[test]
fn status_lists_the_certificates_and_metrics_have_their_expiry_and_the_handshakes() {
    let upstream = Upstream::start(serve(|req| ok_response(&req.target)));
    let cert = TestCert::new("status");
    let admin = loopback(free_port());
    let proxy = start_tls_proxy(upstream.addr, &cert, move |c| c.admin = Some(admin));
    let mut s = tls_connect(proxy.tls, &client_config(&cert, &[b"http/1.1"]));
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_length_response(&mut s).0, 200);
    let (code, body) = http_get(admin, "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let certs = status["certificates"].as_array().expect("certificates");
    assert_eq!(certs.len(), 1, "{status}");
    assert_eq!(certs[0]["names"], serde_json::json!(["localhost"]));
    assert!(certs[0]["file"].as_str().unwrap().ends_with("cert.pem"));
    assert!(certs[0]["not_after"].is_string());
    // rcgen's default validity ends in 4096: no warning.
    assert!(certs[0]["seconds_left"].as_i64().unwrap() > 14 * 86_400);
    assert!(certs[0].get("warning").is_none(), "{status}");
    let (_, metrics) = http_get(admin, "/metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("sluice_tls_certificate_expiry_seconds{worker=\"0\",file="),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_tls_handshakes_total{worker=\"0\",result=\"ok\"} 1"),
        "{metrics}"
    );
}

//! Unit tests of `Config`: the documented defaults and the file form.

use super::*;
use crate::config::kinds::parse_server;

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::default();
    assert_eq!(c.listen, [SocketAddr::from(([127, 0, 0, 1], 8080))]);
    assert!(c.listen_tls.is_empty() && c.certificate.is_empty());
    assert_eq!(c.tls_min_version, TlsVersion::V1_2);
    assert_eq!(c.tls_handshake_timeout, Duration::from_secs(10));
    assert_eq!(
        (c.tls_unknown_sni, c.tls_client_auth),
        (UnknownSni::Default, ClientAuth::Off)
    );
    assert_eq!(
        c.upstream[0].servers.get_ref()[0].to_string(),
        "127.0.0.1:8000"
    );
    assert_eq!(c.keepalive_timeout, Duration::from_secs(60));
    assert_eq!(c.request_head_timeout, Duration::from_secs(10));
    assert_eq!(c.upstream_connect_timeout, Duration::from_secs(3));
    assert_eq!(c.drain_timeout, Duration::from_secs(30));
    assert_eq!((c.max_head_size, c.max_header_count), (65536, 100));
    assert_eq!(
        (c.max_response_head_size, c.max_response_header_count),
        (65536, 256)
    );
    assert_eq!(c.via_name, "");
    assert_eq!((c.high_watermark, c.low_watermark), (32768, 8192));
    assert_eq!(
        (c.pool_max_idle_per_peer, c.pool_max_idle_total),
        (1024, 4096)
    );
    assert_eq!(
        (c.max_retries, c.max_connections, c.workers),
        (1, 10_000, 1)
    );
    assert!(c.add_via && c.add_x_forwarded_for && c.add_x_forwarded_proto);
    assert_eq!(c.max_requests_per_connection, 0, "no cap");
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn the_file_form_reads_back_the_same() {
    let c = Config {
        keepalive_timeout: Duration::from_millis(1500),
        workers: 0,
        upstream: vec![parse_server("[::1]:80").unwrap()],
        add_via: false,
        ..Config::default()
    };
    let text = toml::to_string(&c).unwrap();
    assert!(text.contains("keepalive_timeout = \"1500ms\"\n"), "{text}");
    assert!(text.contains("workers = \"auto\"\n"), "{text}");
    assert_eq!(toml::from_str::<Config>(&text).unwrap(), c);
    assert_eq!(toml::from_str::<Config>("").unwrap(), Config::default());
}

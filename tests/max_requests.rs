//! `max_requests_per_connection`: a client connection serves at most N
//! requests, then closes, so a keep-alive client behind an L4 balancer
//! connects again and may land on another host (nginx
//! `keepalive_requests`, Envoy `max_requests_per_connection`). HTTP/1.1:
//! the N-th response says `Connection: close` and the connection closes
//! after it (requests pipelined behind it are not served, RFC 9112 §9.6);
//! HTTP/2: GOAWAY (NO_ERROR) names the N-th stream as the last, the open
//! streams finish, a later one is not served (RFC 9113 §6.8), and the
//! connection closes. The upstream side is pooled as usual. 0 (the
//! default) is no cap.

mod util;

use std::io;
use std::time::{Duration, Instant};

use util::*;

/// An upstream answering each request with its target, keeping its
/// connections.
fn echo_target() -> Upstream {
    Upstream::start(serve(|req| ok_response(&req.target)))
}

#[test]
fn the_third_response_says_close_then_the_connection_closes_and_the_upstream_is_pooled() {
    let up = echo_target();
    let proxy = start_forward_proxy(up.addr, |c| c.max_requests_per_connection = 3);
    let mut c = proxy.client();
    for i in 1..=3 {
        let target = format!("/{i}");
        let r = c.round_trip(get(&target));
        assert_eq!((r.status, r.body_str()), (200, target.clone()));
        assert_eq!(r.says_close(), i == 3, "response {i}: {}", preview(&r.head));
    }
    // EOF with nothing after the third response.
    c.assert_closed();
    assert_eq!(up.accepted(), 1, "one upstream connection for the three");
    // It went back to the pool: a new client's request reuses it.
    let r = proxy.client().round_trip(get("/4"));
    assert_eq!((r.status, r.body_str()), (200, "/4".to_string()));
    assert!(!r.says_close(), "{}", preview(&r.head));
    assert_eq!(up.accepted(), 1, "the pooled connection was reused");
    let s = proxy.stats.snapshot();
    assert_eq!(s.downstream_accepted, 2);
}

#[test]
fn requests_pipelined_behind_the_cap_are_not_served() {
    let up = echo_target();
    let proxy = start_forward_proxy(up.addr, |c| c.max_requests_per_connection = 3);
    let mut c = proxy.client();
    let five: Vec<u8> = (1..=5).flat_map(|i| get(&format!("/{i}"))).collect();
    c.send(five);
    for i in 1..=3 {
        let r = c.read_response();
        assert_eq!((r.status, r.body_str()), (200, format!("/{i}")));
        assert_eq!(r.says_close(), i == 3, "response {i}: {}", preview(&r.head));
    }
    // No fourth response: EOF right after the third.
    c.assert_closed();
    let targets: Vec<String> = up.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(
        targets,
        ["/1", "/2", "/3"],
        "only the first three went upstream"
    );
}

#[test]
fn no_cap_by_default_fifty_requests_on_one_connection() {
    let up = echo_target();
    let proxy = start_forward_proxy(up.addr, |c| {
        assert_eq!(c.max_requests_per_connection, 0, "the default");
    });
    let mut c = proxy.client();
    for i in 0..50 {
        let target = format!("/n/{i}");
        let r = c.round_trip(get(&target));
        assert_eq!((r.status, r.body_str()), (200, target));
        assert!(!r.says_close(), "response {i}: {}", preview(&r.head));
    }
    c.assert_open(Duration::from_millis(100));
    assert_eq!(proxy.stats.snapshot().downstream_accepted, 1);
    assert_eq!(up.accepted(), 1);
}

/// Reads frames until the proxy closes the connection (EOF or reset:
/// true) or `within` passes (false).
fn frames_until_closed(c: &mut H2Client, within: Duration) -> (Vec<H2Frame>, bool) {
    let deadline = Instant::now() + within;
    let mut frames = Vec::new();
    while Instant::now() < deadline {
        match c.read_frame() {
            Ok(f) => frames.push(f),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (frames, true),
        }
    }
    (frames, false)
}

#[test]
fn h2_goaway_names_the_second_stream_and_a_third_is_not_served() {
    let up = echo_target();
    let proxy = start_forward_proxy(up.addr, |c| {
        c.http2_cleartext = true;
        c.max_requests_per_connection = 2;
    });
    let mut c = H2Client::connect(proxy.addr);
    let first = c.send_get("/1");
    let second = c.send_get("/2");
    // GOAWAY NO_ERROR once the second stream opened, naming it as the
    // last (one step: no PING round trip as in a drain).
    let goaway = c
        .read_until(Duration::from_secs(3), |f| f.kind == kind::GOAWAY)
        .expect("a GOAWAY");
    assert_eq!(goaway.stream, 0);
    assert_eq!(&goaway.payload[..4], &second.to_be_bytes());
    assert_eq!(goaway.error_code(), Some(0), "NO_ERROR");
    // Both streams are served to the end.
    let r = c.responses(&[first, second], Duration::from_secs(5));
    assert_eq!((r[&first].status, &r[&first].body[..]), (200, &b"/1"[..]));
    assert_eq!((r[&second].status, &r[&second].body[..]), (200, &b"/2"[..]));
    // A third stream opened after the GOAWAY is not served (RFC 9113
    // §6.8: ignored, or refused), and the connection closes.
    let third = c.next_stream();
    let block = c.block(&get_fields("/3"));
    c.write_lossy(&H2Client::frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        third,
        &block,
    ));
    let (frames, closed) = frames_until_closed(&mut c, Duration::from_secs(5));
    assert!(closed, "the connection stays open; frames: {frames:?}");
    for f in frames.iter().filter(|f| f.stream == third) {
        assert_eq!(
            (f.kind, f.error_code()),
            (kind::RST_STREAM, Some(0x7)),
            "the third stream got more than REFUSED_STREAM: {frames:?}"
        );
    }
    assert!(
        frames
            .iter()
            .all(|f| f.kind != kind::GOAWAY || f.error_code() == Some(0)),
        "{frames:?}"
    );
    // The two streams ran at once (one upstream connection each, or one
    // reused); the third never went upstream.
    let mut targets: Vec<String> = up.requests().into_iter().map(|r| r.target).collect();
    targets.sort();
    assert_eq!(targets, ["/1", "/2"]);
    assert_eq!(proxy.stats.snapshot().h2_goaways_no_error, 1, "one GOAWAY");
}

#[test]
fn h2_without_a_cap_serves_streams_past_any_count() {
    let up = echo_target();
    let proxy = start_forward_proxy(up.addr, |c| c.http2_cleartext = true);
    let mut c = H2Client::connect(proxy.addr);
    for i in 0..20 {
        let r = c.get(&format!("/s/{i}"));
        assert_eq!((r.status, r.body), (200, format!("/s/{i}").into_bytes()));
    }
    assert_eq!(proxy.stats.snapshot().h2_goaways_no_error, 0, "no GOAWAY");
}

// --- configuration, with the built binary ------------------------------------

/// The value printed for `key` by `--check-config` (the effective
/// configuration, one `key = value` line each).
fn printed(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("{key} not printed in {out}"))
        .to_string()
}

#[test]
fn the_key_parses_from_the_file_the_flag_overrides_it_and_a_typo_gets_did_you_mean() {
    let o = run_sluice(&["--check-config", TempFile::new("").path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(printed(&o.stdout, "max_requests_per_connection"), "0");

    let f = TempFile::new("max_requests_per_connection = 1000\n");
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(printed(&o.stdout, "max_requests_per_connection"), "1000");

    let o = run_sluice(&[
        "--check-config",
        f.path(),
        "--max-requests-per-connection",
        "7",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(printed(&o.stdout, "max_requests_per_connection"), "7");

    let typo = TempFile::new("\nmax_request_per_connection = 3\n");
    let o = run_sluice(&["--check-config", typo.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "config file {}:2: max_request_per_connection: ",
            typo.path()
        )) && o
            .stderr
            .contains("did you mean `max_requests_per_connection`?"),
        "{}",
        o.stderr
    );

    let bad = TempFile::new("max_requests_per_connection = -1\n");
    let o = run_sluice(&["--check-config", bad.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("max_requests_per_connection"),
        "{}",
        o.stderr
    );
    let o = run_sluice(&["--max-requests-per-connection", "many"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("--max-requests-per-connection"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_reload_applies_a_new_cap_to_new_connections() {
    let up = echo_target();
    let port = free_port();
    let text = |cap: u32| {
        format!(
            "listen = \"127.0.0.1:{port}\"\nupstream = \"{}\"\naccess_log = \"off\"\n\
             drain_timeout = \"5s\"\nmax_requests_per_connection = {cap}\n",
            up.addr
        )
    };
    let cfg = TempFile::new(&text(0));
    let p = SluiceProcess::start_env(&["--config", cfg.path()], &[("RUST_LOG", "debug")]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    let mut before = Client::connect(loopback(port));
    for i in 0..5 {
        let r = before.round_trip(get(&format!("/before/{i}")));
        assert!(r.status == 200 && !r.says_close(), "{}", preview(&r.head));
    }
    std::fs::write(cfg.path(), text(2)).unwrap();
    p.signal(libc::SIGHUP);
    p.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
    // A new connection is served by the new loop: the second response
    // is its last.
    let mut after = Client::connect(loopback(port));
    let r = after.round_trip(get("/after/1"));
    assert!(r.status == 200 && !r.says_close(), "{}", preview(&r.head));
    let r = after.round_trip(get("/after/2"));
    assert!(r.status == 200 && r.says_close(), "{}", preview(&r.head));
    after.assert_closed();
    p.wait_line(WAIT, |l| {
        l.contains("request 2 reached max_requests_per_connection")
    });
}

//! The access log (issue 13, seen problems 1 and 2): one record for every
//! request whose head was read — the proxy's own 400/408/414/431 included —
//! with the termination state, body bytes without chunk framing, escaped
//! targets, real durations, in the text and JSON formats.

mod util;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use sluice::{AccessLogFormat, AccessLogTarget};
use util::*;

/// A proxy to `upstream` writing JSON records to a file of its own.
fn logged_proxy(upstream: SocketAddr, format: AccessLogFormat) -> (Proxy, TempFile) {
    let log = TempFile::new("");
    let path = log.path().to_string();
    let proxy = start_forward_proxy(upstream, move |c| {
        c.access_log = AccessLogTarget::File(path.into());
        c.access_log_format = format;
        c.request_head_timeout = Duration::from_millis(300);
    });
    (proxy, log)
}

/// Waits (bounded) for `n` records and returns them.
#[track_caller]
fn records(log: &TempFile, n: usize) -> Vec<String> {
    wait_access_lines(log.path(), n)
}

#[track_caller]
fn json_records(log: &TempFile, n: usize) -> Vec<Value> {
    records(log, n)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn heads_the_proxy_cannot_read_get_a_record_with_their_status() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let big_field = format!("X: {}\r\n", "a".repeat(70_000));
    let cases: [(Vec<u8>, u16); 3] = [
        (
            format!("GET /big HTTP/1.1\r\n{big_field}\r\n").into_bytes(),
            431,
        ),
        (
            format!("GET /{} HTTP/1.1\r\n", "l".repeat(70_000)).into_bytes(),
            414,
        ),
        (b"GET / HTTP/1.1\r\nbad field\r\n\r\n".to_vec(), 400),
    ];
    for (req, status) in &cases {
        let mut c = proxy.client();
        c.send_lossy(req);
        assert_eq!(c.read_response().status, *status);
    }
    // A partial head that times out: 408.
    let mut c = proxy.client();
    c.send(b"GET /partial HTTP/1.1\r\nHost: a\r\n");
    assert_eq!(c.read_response().status, 408);
    let recs = json_records(&log, 4);
    let got: Vec<(u64, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["status"].as_u64().unwrap(),
                r["termination"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (431, "proxy_error"),
            (414, "proxy_error"),
            (400, "proxy_error"),
            (408, "client_timeout")
        ]
    );
    assert_eq!(recs[0]["method"], "GET");
    assert_eq!(recs[0]["target"], "/big");
    assert_eq!(recs[3]["target"], "/partial");
}

/// Bytes that are not HTTP/1.x (an HTTP/2 preface, a TLS ClientHello) get
/// their answer at once, and a record with it.
#[test]
fn http2_and_tls_bytes_get_a_record() {
    let up = Upstream::start(respond_forever(ok_response("x")));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    for (bytes, status) in [
        (&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], 505),
        (&b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..], 400),
    ] {
        let mut c = proxy.client();
        c.send(bytes);
        assert_eq!(c.read_response().status, status);
    }
    let recs = json_records(&log, 2);
    assert_eq!(recs[0]["status"], 505, "{}", recs[0]);
    assert_eq!(recs[1]["status"], 400, "{}", recs[1]);
}

#[test]
fn json_records_have_every_field_named_in_the_issue() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let mut c = proxy.client();
    c.round_trip(get("/a"));
    c.round_trip(get("/b")); // the upstream connection is reused
    let recs = json_records(&log, 2);
    let keys: Vec<&str> = recs[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = [
        "time",
        "client",
        "method",
        "target",
        "protocol",
        "host",
        "status",
        "bytes_in",
        "bytes_out",
        "duration_ms",
        "upstream",
        "upstream_connect_ms",
        "upstream_first_byte_ms",
        "upstream_conn",
        "retries",
        "tls_version",
        "tls_cipher",
        "sni",
        "tls_resumed",
        "termination",
        "upstreams",
        "request_id",
        "stream_id",
    ];
    let mut keys_sorted = keys.clone();
    keys_sorted.sort_unstable();
    want.sort_unstable();
    assert_eq!(keys_sorted, want);
    let (a, b) = (&recs[0], &recs[1]);
    assert_eq!(a["upstream_conn"], "new");
    assert_eq!(b["upstream_conn"], "reused");
    assert_eq!(a["bytes_out"], 5);
    assert_eq!(a["host"], "example.test");
    assert_eq!(a["protocol"], "HTTP/1.1");
    assert_eq!(a["stream_id"], Value::Null);
    assert_eq!(a["termination"], "complete");
    assert!(a["time"].as_str().unwrap().ends_with('Z'));
    // A real round trip on a reused connection takes more than 0 ms.
    assert!(b["duration_ms"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["upstream_first_byte_ms"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["upstream_connect_ms"].is_null(), "{b}");
}

#[test]
fn a_chunked_upload_counts_body_bytes_not_framing() {
    let up = Upstream::start(respond_forever(ok_response("ok")));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let mut c = proxy.client();
    c.round_trip(
        b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
    );
    let rec = &json_records(&log, 1)[0];
    assert_eq!(rec["bytes_in"], 11, "{rec}");
}

#[test]
fn an_upstream_closing_mid_body_is_logged_as_cut() {
    let up = Upstream::start(send_raw_and_close(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf".to_vec(),
    ));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let mut c = proxy.client();
    c.send(get("/"));
    let _ = c.read_until_closed(Duration::from_secs(3));
    let rec = &json_records(&log, 1)[0];
    assert_eq!(rec["status"], 200);
    assert_eq!(rec["termination"], "upstream_closed_early", "{rec}");
    assert_eq!(rec["bytes_out"], 4);
}

#[test]
fn a_client_leaving_before_the_answer_is_logged_499_client_aborted() {
    let up = Upstream::start(never_answer());
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let mut c = proxy.client();
    c.send(get("/wait"));
    up.wait_requests(1);
    // A reset (linger 0), not a half-close: the client is gone.
    socket2::SockRef::from(&c.wire.stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
    let rec = &json_records(&log, 1)[0];
    assert_eq!(rec["status"], 499);
    assert_eq!(rec["termination"], "client_aborted", "{rec}");
}

/// A client that closes (FIN) in the middle of its request body, before
/// any answer: 499 and `client_aborted`, as with a reset.
#[test]
fn a_client_closing_mid_body_is_logged_499_client_aborted() {
    let up = Upstream::start(never_answer());
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Json);
    let mut c = proxy.client();
    c.send(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nabc");
    c.shutdown_write();
    let rec = &json_records(&log, 1)[0];
    assert_eq!(rec["status"], 499, "{rec}");
    assert_eq!(rec["termination"], "client_aborted", "{rec}");
}

#[test]
fn text_records_escape_quotes_and_control_bytes() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (proxy, log) = logged_proxy(up.addr, AccessLogFormat::Text);
    proxy
        .client()
        .round_trip(b"GET /ok HTTP/1.1\r\nHost: h\r\n\r\n");
    // A quote in the target is refused (RFC 3986: not a path character,
    // ARCHITECTURE.md §8) and still logged, escaped.
    proxy
        .client()
        .round_trip(b"GET /a\"b HTTP/1.1\r\nHost: h\r\n\r\n");
    // An invalid Host (a quote) is refused, and still logged escaped.
    proxy
        .client()
        .round_trip(b"GET /c HTTP/1.1\r\nHost: h\"x\r\n\r\n");
    let lines = records(&log, 3);
    let (ok, quoted, bad) = (&lines[0], &lines[1], &lines[2]);
    assert!(
        ok.contains(r#" "GET /ok HTTP/1.1" host="h" status=200"#),
        "{ok}"
    );
    assert!(ok.contains(" upstream_conn=new "), "{ok}");
    assert!(ok.ends_with(" termination=complete"), "{ok}");
    assert!(
        quoted.contains(r#" "GET /a\x22b HTTP/1.1" host="h" status=400"#),
        "{quoted}"
    );
    assert!(bad.contains(r#" host="h\x22x" status=400 "#), "{bad}");
    assert!(bad.ends_with(" termination=proxy_error"), "{bad}");
}

/// At `RUST_LOG=warn` a 502 still has its access record (the access log
/// does not go through `RUST_LOG`), and its cause is a warning.
#[test]
fn at_rust_log_warn_a_502_has_its_record_and_a_warning() {
    let log = TempFile::new("");
    let listen = loopback(free_port()).to_string();
    let upstream = refused_addr().to_string();
    let mut p = SluiceProcess::start_with_env(
        &[
            "--listen",
            &listen,
            "--upstream",
            &upstream,
            "--access-log",
            log.path(),
        ],
        &[("RUST_LOG", "warn")],
    );
    let addr: SocketAddr = listen.parse().unwrap();
    assert!(wait_until(Duration::from_secs(5), || Client::try_connect(
        addr
    )
    .is_ok()));
    let resp = Client::connect(addr).round_trip(get("/x"));
    assert_eq!(resp.status, 502);
    let line = &records(&log, 1)[0];
    assert!(line.contains(" status=502 "), "{line}");
    assert!(line.ends_with(" termination=upstream_refused"), "{line}");
    p.wait_line(Duration::from_secs(5), |l| {
        l.contains("WARN") && l.contains("connect failed")
    });
    p.signal(libc::SIGTERM);
    p.wait_exit(Duration::from_secs(5));
}

/// A FIFO at a fresh path, and its read end opened (without waiting for a
/// writer) but not read: a log reader that stalls until the test reads.
fn stalled_fifo() -> (String, std::fs::File) {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::env::temp_dir().join(format!(
        "sluice-fifo-{}-{}",
        std::process::id(),
        free_port()
    ));
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap();
    (path.to_str().unwrap().to_string(), reader)
}

/// Reads `reader` (non-blocking) until `n` lines came, waiting at most 20 s.
fn read_lines(reader: &mut std::fs::File, n: usize) -> Vec<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 65536];
    wait_until(Duration::from_secs(20), || {
        while let Ok(k) = reader.read(&mut chunk) {
            if k == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..k]);
        }
        bytes.iter().filter(|&&b| b == b'\n').count() >= n
    });
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_stalled_log_reader_does_not_stop_the_proxy_and_gets_every_record_later() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (path, mut reader) = stalled_fifo();
    let log = path.clone();
    let proxy = start_forward_proxy(up.addr, move |c| {
        c.access_log = AccessLogTarget::File(log.into());
    });
    // About 250 bytes a record: 2,000 of them are eight times what the
    // pipe holds (64 KiB) while nobody reads it.
    let mut c = proxy.client();
    for i in 0..2000 {
        let r = c.round_trip(get(&format!("/r{i}")));
        assert_eq!(r.status, 200, "request {i}");
    }
    // A target longer than PIPE_BUF: its record is shortened to fit.
    let long = format!("/{}", "a".repeat(6000));
    assert_eq!(c.round_trip(get(&long)).status, 200);
    let lines = read_lines(&mut reader, 2001);
    assert_eq!(lines.len(), 2001);
    for (i, line) in lines.iter().take(2000).enumerate() {
        assert!(line.contains(&format!("\"GET /r{i} HTTP/1.1\"")), "{line}");
        assert!(line.ends_with("termination=complete"), "{line}");
    }
    let last = lines.last().unwrap();
    assert!(last.len() < 4096, "{} bytes", last.len());
    assert!(
        last.contains(&format!("\"GET /{}... HTTP/1.1\"", "a".repeat(383))),
        "{last}"
    );
    assert!(last.contains(" status=200 "), "{last}");
    drop(proxy);
    let _ = std::fs::remove_file(&path);
}

/// 2,000 GETs on one keep-alive connection to the proxy on `port`, each
/// answered 200 (about 500 KB of access records).
fn two_thousand_requests(port: u16) {
    let mut c = Client::connect(loopback(port));
    for i in 0..2000 {
        let r = c.round_trip(get(&format!("/r{i}")));
        assert_eq!(r.status, 200, "request {i}");
    }
}

#[test]
fn sigterm_ends_the_proxy_within_its_drain_timeout_while_stdout_is_a_stalled_pipe() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let port = free_port();
    let (listen, upstream) = (format!("127.0.0.1:{port}"), up.addr.to_string());
    let mut p = SluiceProcess::start_stdout_piped(&[
        "--listen",
        &listen,
        "--upstream",
        &upstream,
        "--drain-timeout",
        "1s",
    ]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    // The access log's reader (the default: standard output) never reads.
    let _stalled = p.stdout();
    two_thousand_requests(port);
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}; log:\n{}", p.log());
    assert_eq!(
        p.count(|l| l.contains("records not written")),
        1,
        "{}",
        p.log()
    );
}

#[test]
fn a_stalled_reader_of_both_stdout_and_stderr_stops_neither_serving_nor_sigterm() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::{Command, Stdio};
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let port = free_port();
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (_unread, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // One pipe for both, as `2>&1` or systemd's journal stream: nobody
    // reads it while the test runs.
    let mut child = Command::new(SLUICE)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--upstream", &up.addr.to_string(), "--drain-timeout", "1s"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write.try_clone().unwrap()))
        .stderr(Stdio::from(write))
        .spawn()
        .unwrap();
    assert!(wait_until(STARTUP, || std::net::TcpStream::connect(
        loopback(port)
    )
    .is_ok()));
    two_thousand_requests(port);
    // Every line the proxy logs now finds the pipe full.
    send_signal(child.id() as i32, libc::SIGTERM);
    let mut status = None;
    wait_until(Duration::from_secs(15), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let _ = child.kill();
    let status = status.expect("still running 15 s after SIGTERM with a stalled stderr");
    assert!(status.success(), "{status:?}");
}

#[test]
fn reopening_a_fifo_whose_reader_left_keeps_serving() {
    let up = Upstream::start(respond_forever(ok_response("hello")));
    let (path, reader) = stalled_fifo();
    let log = path.clone();
    let proxy = start_forward_proxy(up.addr, move |c| {
        c.access_log = AccessLogTarget::File(log.into());
    });
    let mut c = proxy.client();
    assert_eq!(c.round_trip(get("/before")).status, 200);
    // No reader: a blocking open of the FIFO would wait for one.
    drop(reader);
    proxy.handle.reopen_access_log();
    for i in 0..3 {
        assert_eq!(c.round_trip(get(&format!("/after{i}"))).status, 200);
    }
    drop(proxy);
    let _ = std::fs::remove_file(&path);
}

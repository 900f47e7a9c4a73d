//! The process model, with the built binary: several processes on one port
//! (SO_REUSEPORT), `--workers N` restarting a killed worker, and the
//! graceful drain on SIGTERM (a second signal stops at once).
//!
//! Loopback only; every wait is bounded; every process started here is
//! killed when its guard drops (workers of a supervisor too).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

// --- helpers -----------------------------------------------------------------

/// A running `sluice` whose stderr lines are collected; killed on drop.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// Other pids to kill on drop (a supervisor's workers).
    extra: Vec<i32>,
}

impl Proc {
    fn start(args: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("SLUICE_WORKER")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sluice");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = lines.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Proc {
            child,
            lines,
            extra: Vec::new(),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    fn count(&self, pred: impl Fn(&str) -> bool) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| pred(l))
            .count()
    }

    /// The first line that matches, waiting up to `within`.
    fn wait_line(&self, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + within;
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| pred(l)) {
                return l.clone();
            }
            assert!(
                Instant::now() < end,
                "no matching log line within {within:?}; log:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: i32) {
        unsafe { libc::kill(self.pid(), sig) };
    }

    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let end = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < end,
                "sluice still running after {within:?}; log:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        for &pid in &self.extra {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Body of `/slow/MS`: `SLOW_CHUNKS` chunks of `SLOW_CHUNK` bytes spread
/// over MS milliseconds.
const SLOW_CHUNKS: usize = 10;
const SLOW_CHUNK: usize = 1000;

fn slow_body() -> Vec<u8> {
    (0..SLOW_CHUNKS * SLOW_CHUNK)
        .map(|i| b'a' + (i % 26) as u8)
        .collect()
}

/// A keep-alive HTTP/1.1 upstream on a thread per connection. `/slow/MS`
/// sends its body slowly; any other path answers `hello` at once.
fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            thread::spawn(move || {
                let _ = serve_upstream(s);
            });
        }
    });
    addr
}

fn serve_upstream(mut s: TcpStream) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some(end) = read_head(&mut s, &mut buf)? else {
            return Ok(());
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        if let Some(ms) = path.strip_prefix("/slow/") {
            let total: u64 = ms.parse().unwrap_or(1000);
            let body = slow_body();
            write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )?;
            for chunk in body.chunks(SLOW_CHUNK) {
                s.write_all(chunk)?;
                thread::sleep(Duration::from_millis(total / SLOW_CHUNKS as u64));
            }
        } else {
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")?;
        }
    }
}

/// Reads until a whole head is in `buf`: its length, or None at EOF.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(i + 4));
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn connect(port: u16) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    Ok(s)
}

/// Reads one response with a Content-Length body: (status, head, body).
fn read_response(s: &mut TcpStream) -> io::Result<(u16, String, Vec<u8>)> {
    let mut buf = Vec::new();
    let end = read_head(s, &mut buf)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no response head"))?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("short body: {} of {len}", body.len()),
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok((status, head, body))
}

/// One GET on a new connection with `Connection: close`.
fn get(port: u16, path: &str) -> io::Result<(u16, Vec<u8>)> {
    let mut s = connect(port)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )?;
    let (status, _, body) = read_response(&mut s)?;
    Ok((status, body))
}

fn get_ok(port: u16) {
    match get(port, "/") {
        Ok((200, body)) => assert_eq!(body, b"hello\n"),
        other => panic!("GET / through 127.0.0.1:{port}: {other:?}"),
    }
}

fn start_single(port: u16, up: SocketAddr, more: &[&str]) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let up = up.to_string();
    let mut args = vec!["--listen", &listen, "--upstream", &up];
    args.extend_from_slice(more);
    let p = Proc::start(&args);
    p.wait_line(Duration::from_secs(5), |l| l.contains("listening on"));
    p
}

fn pid_after(line: &str, marker: &str) -> i32 {
    let rest = &line[line.find(marker).expect("marker") + marker.len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().expect("pid")
}

// --- tests -------------------------------------------------------------------

/// Two separate sluice processes bind the same port (SO_REUSEPORT) and the
/// kernel hands new connections to both: each logs access lines under its
/// own pid.
#[test]
fn two_processes_on_one_port_both_serve() {
    let up = upstream();
    let port = free_port();
    let a = start_single(port, up, &[]);
    let b = start_single(port, up, &[]);
    let tag = |p: &Proc| format!("[w0 {}] access client=", p.pid());
    let (ta, tb) = (tag(&a), tag(&b));
    let end = Instant::now() + Duration::from_secs(10);
    let mut sent = 0;
    while a.count(|l| l.contains(&ta)) == 0 || b.count(|l| l.contains(&tb)) == 0 {
        assert!(
            Instant::now() < end,
            "after {sent} connections not both served;\nA:\n{}\nB:\n{}",
            a.log(),
            b.log()
        );
        for _ in 0..20 {
            get_ok(port);
            sent += 1;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (na, nb) = (a.count(|l| l.contains(&ta)), b.count(|l| l.contains(&tb)));
    assert!(
        na + nb <= sent,
        "{na} + {nb} access lines for {sent} requests"
    );
}

/// `--workers 2`: SIGKILL one worker; the supervisor logs it, starts a new
/// one (which serves), the port answers throughout, and SIGTERM to the
/// supervisor drains both workers and exits 0.
#[test]
fn workers_killed_worker_is_restarted() {
    let up = upstream().to_string();
    let mut sup = Proc::start(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &up,
        "--workers",
        "2",
    ]);
    let first = sup.wait_line(Duration::from_secs(5), |l| {
        l.contains("workers on 127.0.0.1:")
    });
    assert!(first.contains(&format!("[sup {}]", sup.pid())), "{first}");
    let port = pid_after(&first, "workers on 127.0.0.1:") as u16;
    let w0 = pid_after(
        &sup.wait_line(Duration::from_secs(5), |l| {
            l.contains("worker 0 started pid=")
        }),
        "pid=",
    );
    let w1 = pid_after(
        &sup.wait_line(Duration::from_secs(5), |l| {
            l.contains("worker 1 started pid=")
        }),
        "pid=",
    );
    sup.extra.extend([w0, w1]);
    for w in [(0, w0), (1, w1)] {
        let tag = format!("[w{} {}] listening on", w.0, w.1);
        sup.wait_line(Duration::from_secs(5), |l| l.contains(&tag));
    }
    for _ in 0..10 {
        get_ok(port);
    }

    unsafe { libc::kill(w1, libc::SIGKILL) };
    let died = format!("worker 1 pid={w1} died unexpectedly");
    sup.wait_line(Duration::from_secs(5), |l| l.contains(&died));
    for _ in 0..20 {
        get_ok(port); // worker 0 answers while worker 1 is away
    }
    let again = sup.wait_line(Duration::from_secs(5), |l| {
        l.contains("worker 1 started pid=") && !l.contains(&format!("pid={w1}"))
    });
    let w1b = pid_after(&again, "pid=");
    sup.extra.push(w1b);
    assert!(alive(w0), "worker 0 must not be touched");

    // The new worker 1 serves too.
    let tag = format!("[w1 {w1b}] access client=");
    let end = Instant::now() + Duration::from_secs(10);
    while sup.count(|l| l.contains(&tag)) == 0 {
        assert!(
            Instant::now() < end,
            "restarted worker never served:\n{}",
            sup.log()
        );
        for _ in 0..10 {
            get_ok(port);
        }
    }

    sup.signal(libc::SIGTERM);
    let status = sup.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "supervisor: {status:?}\n{}", sup.log());
    assert!(
        sup.count(|l| l.contains("exited: exit status 0")) == 2,
        "{}",
        sup.log()
    );
    assert!(!alive(w0) && !alive(w1b), "workers left behind");
}

/// SIGTERM while a response streams slowly (~1 s): it completes in full,
/// the listener is closed (new connections fail), an idle keep-alive
/// client is closed by the proxy, and the process exits 0 afterwards.
#[test]
fn sigterm_drains_in_flight_response_then_exits_0() {
    let up = upstream();
    let port = free_port();
    let mut p = start_single(port, up, &["--drain-timeout", "10s"]);

    // An idle keep-alive client (one request done, connection kept).
    let mut idle = connect(port).unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut idle).unwrap();
    assert_eq!((status, &body[..]), (200, &b"hello\n"[..]));

    // A slow in-flight exchange: wait until its first bytes arrived.
    let mut slow = connect(port).unwrap();
    slow.write_all(b"GET /slow/1000 HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 1];
    slow.read_exact(&mut first).unwrap();
    let t0 = Instant::now();

    p.signal(libc::SIGTERM);
    p.wait_line(Duration::from_secs(5), |l| l.contains("draining"));

    // New connections are not served: refused (listener closed) or, at
    // worst, closed without an answer.
    match connect(port) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(mut s) => {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            assert!(got.is_empty(), "served after drain began: {got:?}");
        }
    }

    // The idle keep-alive connection is closed by the proxy.
    idle.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut b = [0u8; 64];
    match idle.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("idle keep-alive connection not closed: {other:?}"),
    }

    // The in-flight response arrives whole.
    let mut rest = Vec::new();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    slow.read_to_end(&mut rest).unwrap();
    let mut all = first.to_vec();
    all.extend_from_slice(&rest);
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..split]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(&all[split..], &slow_body()[..], "slow body incomplete");
    assert!(t0.elapsed() >= Duration::from_millis(500));

    let status = p.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "exit {status:?}\n{}", p.log());
    assert!(p.log().contains("drained"), "{}", p.log());
}

/// A second SIGTERM during a drain stops the process at once: a 5 s
/// response is cut short and the process is gone within a second.
#[test]
fn second_sigterm_stops_at_once() {
    let up = upstream();
    let port = free_port();
    let mut p = start_single(port, up, &["--drain-timeout", "20s"]);
    let mut slow = connect(port).unwrap();
    slow.write_all(b"GET /slow/5000 HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 1];
    slow.read_exact(&mut first).unwrap();

    p.signal(libc::SIGTERM);
    p.wait_line(Duration::from_secs(5), |l| l.contains("draining"));
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "drain must wait for the exchange"
    );
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    p.wait_exit(Duration::from_secs(2));
    assert!(t0.elapsed() < Duration::from_secs(2));

    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(
        rest.len() + 1 < SLOW_CHUNKS * SLOW_CHUNK,
        "the slow response should have been cut"
    );
}

//! Scripted upstreams: a listener on 127.0.0.1:0 that runs a behaviour on
//! every connection it accepts ([`Upstream`], [`UpConn`]), ready-made
//! behaviours that misbehave on purpose, and addresses that refuse
//! ([`refused_addr`]) or never answer ([`Blackhole`]) a connect.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::oracle::{Framing, Request};
use super::wire::Wire;
use super::{UPSTREAM_TIMEOUT, WAIT, wait_until};

/// `HTTP/1.1 200 OK` with `Content-Length` and `body`.
pub fn ok_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One accepted upstream connection handed to a behaviour.
pub struct UpConn {
    pub wire: Wire,
    /// 0 for the first connection the upstream accepted, 1 for the next...
    pub index: usize,
    log: Arc<Mutex<Vec<Request>>>,
}

impl UpConn {
    /// Reads one request head (not its body). `None` if the proxy closed
    /// (or went silent for [`UPSTREAM_TIMEOUT`]) before a byte of it.
    pub fn read_request_head(&mut self) -> Option<Request> {
        let head = self.wire.read_head().ok()??;
        Request::from_head(head)
    }

    /// Reads one whole request (head and body, raw) and records it.
    pub fn read_request(&mut self) -> Option<Request> {
        let mut req = self.read_request_head()?;
        req.body = self.wire.read_body(req.framing()).ok()?;
        self.record(req.clone());
        Some(req)
    }

    /// Adds `req` to the upstream's log (for behaviours that read by hand).
    pub fn record(&self, req: Request) {
        self.log.lock().unwrap().push(req);
    }

    /// Writes all of `bytes`; errors are ignored (the proxy may be gone).
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) -> bool {
        self.wire.write(bytes.as_ref()).is_ok()
    }

    /// Waits for the proxy to close this connection (or the timeout).
    pub fn hold_until_closed(&mut self) {
        let _ = self.wire.read_to_eof();
    }

    /// Closes both directions now.
    pub fn close(self) {
        let _ = self.wire.stream.shutdown(Shutdown::Both);
    }

    /// Resets the connection now (RST, not FIN: a cut, not an end).
    pub fn reset(self) {
        super::wire::reset_stream(self.wire.stream);
    }
}

type Behaviour = dyn Fn(UpConn) + Send + Sync + 'static;

/// A listener on 127.0.0.1:0 that runs `behaviour` on every connection, in a
/// thread of its own, counting connections and recording requests.
pub struct Upstream {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub fn start(behaviour: impl Fn(UpConn) + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let behaviour: Arc<Behaviour> = Arc::new(behaviour);
        let (acc, log, stp) = (accepted.clone(), requests.clone(), stop.clone());
        thread::Builder::new()
            .name(format!("upstream-{addr}"))
            .spawn(move || {
                for stream in listener.incoming() {
                    if stp.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let index = acc.fetch_add(1, Ordering::SeqCst);
                    let conn = UpConn {
                        wire: Wire::new(stream, UPSTREAM_TIMEOUT),
                        index,
                        log: log.clone(),
                    };
                    let b = behaviour.clone();
                    thread::spawn(move || b(conn));
                }
            })
            .expect("spawn upstream");
        Upstream {
            addr,
            accepted,
            requests,
            stop,
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Requests recorded so far, in the order they were read.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits (bounded) until `n` requests were recorded and returns them all.
    #[track_caller]
    pub fn wait_requests(&self, n: usize) -> Vec<Request> {
        let ok = wait_until(WAIT, || self.requests.lock().unwrap().len() >= n);
        let got = self.requests();
        assert!(ok, "upstream recorded {} requests, expected {n}", got.len());
        got
    }

    /// The only request recorded (waits for it).
    #[track_caller]
    pub fn single_request(&self) -> Request {
        let mut got = self.wait_requests(1);
        assert_eq!(got.len(), 1, "upstream requests: {got:?}");
        got.remove(0)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// A port on 127.0.0.1 with no listener: connecting is refused.
pub fn refused_addr() -> SocketAddr {
    // From `free_port`: no `:0` bind of another test can take it, and a
    // connect to it cannot open a connection to itself (both need a port
    // of the ephemeral range).
    SocketAddr::from(([127, 0, 0, 1], super::binary::free_port()))
}

/// A listener whose accept queue is full, so a new connect to it stays
/// unanswered (Linux drops the SYN): for connect timeouts. Keep the value
/// alive while the test runs.
pub struct Blackhole {
    pub addr: SocketAddr,
    _listener: TcpListener,
    _fillers: Vec<TcpStream>,
}

impl Blackhole {
    #[track_caller]
    pub fn start() -> Blackhole {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let mut fillers = Vec::new();
        // std listens with a backlog of 128; fill the queue until a connect
        // no longer completes.
        for _ in 0..5000 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                Ok(s) => fillers.push(s),
                Err(_) => {
                    return Blackhole {
                        addr,
                        _listener: listener,
                        _fillers: fillers,
                    };
                }
            }
        }
        panic!("could not fill the accept queue of {addr}");
    }
}

// --- ready-made behaviours --------------------------------------------------

/// Answers every request on the connection with `answer(&request)`, until
/// the proxy closes it.
pub fn serve(
    answer: impl Fn(&Request) -> Vec<u8> + Send + Sync + 'static,
) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        while let Some(req) = conn.read_request() {
            if !conn.send(answer(&req)) {
                return;
            }
        }
    }
}

/// Answers up to `n` requests per connection with `response`, then closes.
pub fn respond_n(n: usize, response: Vec<u8>) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        for _ in 0..n {
            if conn.read_request().is_none() || !conn.send(&response) {
                return;
            }
        }
        conn.close();
    }
}

/// Answers every request with `response`, keeping the connection alive.
pub fn respond_forever(response: Vec<u8>) -> impl Fn(UpConn) + Send + Sync + 'static {
    respond_n(usize::MAX, response)
}

/// Answers requests with `response`; closes once no request arrived for `idle`.
pub fn close_when_idle(
    idle: Duration,
    response: Vec<u8>,
) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        let _ = conn.wire.stream.set_read_timeout(Some(idle));
        while let Some(req) = conn.read_request_head() {
            let _ = conn.wire.stream.set_read_timeout(Some(UPSTREAM_TIMEOUT));
            let mut req = req;
            match conn.wire.read_body(req.framing()) {
                Ok(body) => req.body = body,
                Err(_) => return,
            }
            conn.record(req);
            if !conn.send(&response) {
                return;
            }
            let _ = conn.wire.stream.set_read_timeout(Some(idle));
        }
        conn.close();
    }
}

/// Reads a request head and closes without answering.
pub fn close_on_request() -> impl Fn(UpConn) + Send + Sync + 'static {
    |mut conn: UpConn| {
        if let Some(req) = conn.read_request_head() {
            conn.record(req);
        }
        conn.close();
    }
}

/// Reads a request head and writes `response` before reading any of the
/// body; then reads the body and records the request.
pub fn answer_early(response: Vec<u8>) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        let Some(mut req) = conn.read_request_head() else {
            return;
        };
        if !conn.send(&response) {
            return;
        }
        if let Ok(body) = conn.wire.read_body(req.framing()) {
            req.body = body;
            conn.record(req);
        }
        conn.hold_until_closed();
    }
}

/// Reads each request body at most `chunk` bytes per read with `pause`
/// before each read, then answers with `response`.
pub fn read_slowly(
    chunk: usize,
    pause: Duration,
    response: Vec<u8>,
) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        while let Some(mut req) = conn.read_request_head() {
            let Framing::Length(mut left) = req.framing() else {
                panic!("read_slowly wants Content-Length bodies")
            };
            let mut body = Vec::new();
            while left > 0 {
                // Pacing, not synchronisation: this upstream is slow on purpose.
                thread::sleep(pause);
                match conn.wire.read_some(chunk.min(left)) {
                    Ok(part) if !part.is_empty() => {
                        left -= part.len();
                        body.extend_from_slice(&part);
                    }
                    _ => return,
                }
            }
            req.body = body;
            conn.record(req);
            if !conn.send(&response) {
                return;
            }
        }
    }
}

/// Reads a request and never answers; holds the connection until the proxy
/// closes it.
pub fn never_answer() -> impl Fn(UpConn) + Send + Sync + 'static {
    |mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.hold_until_closed();
        }
    }
}

/// Answers every request with `response` immediately followed (same write)
/// by `extra`, bytes that belong to no response.
pub fn bytes_after_body(
    response: Vec<u8>,
    extra: Vec<u8>,
) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        let mut all = response.clone();
        all.extend_from_slice(&extra);
        while conn.read_request().is_some() {
            if !conn.send(&all) {
                return;
            }
        }
    }
}

/// Reads one request, writes `bytes` raw, then closes.
pub fn send_raw_and_close(bytes: Vec<u8>) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(&bytes);
        }
        conn.close();
    }
}

/// Reads one request, writes `bytes` raw, then waits for the proxy to close.
pub fn send_raw_and_hold(bytes: Vec<u8>) -> impl Fn(UpConn) + Send + Sync + 'static {
    move |mut conn: UpConn| {
        if conn.read_request().is_some() {
            conn.send(&bytes);
        }
        conn.hold_until_closed();
    }
}

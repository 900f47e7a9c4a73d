//! Test support: a proxy on an ephemeral port, a raw HTTP/1.1 client, and
//! scripted upstreams that misbehave on purpose.
//!
//! Everything here is std only. Every socket is on 127.0.0.1:0, every client
//! socket has a read and a write timeout, and every wait has a bound: a test
//! that goes wrong fails within seconds instead of hanging. Helpers that
//! assert carry `#[track_caller]` so a failure points at the test line.
//!
//! Messages are kept raw on both sides: a [`Request`] recorded by an upstream
//! and a [`Response`] read by a client hold the exact head and body bytes
//! (a chunked body keeps its chunk sizes, extensions and trailers), so tests
//! can assert byte for byte.

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use sluice::{
    Config, Filter, Forward, Headers, Peer, Reply, RequestHead, ResponseHead, Server, ServerHandle,
    Stats,
};

/// Longest a client waits for any one read before the test fails.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest an upstream connection waits for its next read before it gives up
/// (ends its thread quietly). Longer than any test.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(8);
/// Default bound of `assert_eventually` and friends.
pub const WAIT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------
// Bounded waits
// ---------------------------------------------------------------------------

/// Polls `cond` every 2 ms until it holds or `within` has passed; returns
/// whether it held.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Fails unless `cond` holds within [`WAIT`].
#[track_caller]
pub fn assert_eventually(what: &str, cond: impl FnMut() -> bool) {
    assert!(wait_until(WAIT, cond), "not within {WAIT:?}: {what}");
}

/// Fails if `cond` stops holding at any point during `during` (for negative
/// assertions such as "no upstream connection is made").
#[track_caller]
pub fn assert_stays(during: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + during;
    loop {
        assert!(cond(), "stopped holding: {what}");
        if Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------------------
// The proxy
// ---------------------------------------------------------------------------

/// A running proxy on 127.0.0.1:0. Dropping it shuts the server down.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// The server's counters.
    pub stats: Arc<Stats>,
    /// Stops the server.
    pub handle: ServerHandle,
    join: Option<JoinHandle<io::Result<()>>>,
}

impl Proxy {
    /// A new raw client connected to this proxy.
    #[track_caller]
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Shuts the server down and waits (bounded) for `run` to return:
    /// `None` if it did not return within `within`.
    pub fn stop(mut self, within: Duration) -> Option<io::Result<()>> {
        self.handle.shutdown();
        let join = self.join.take()?;
        if wait_until(within, || join.is_finished()) {
            Some(join.join().expect("loop thread panicked"))
        } else {
            None
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(join) = self.join.take() {
            // Bounded: a server that does not stop is left behind, not waited for.
            if wait_until(Duration::from_secs(2), || join.is_finished()) {
                let _ = join.join();
            }
        }
    }
}

/// Starts a proxy with `Config::default()` changed by `tweak` (its `listen`
/// is forced to 127.0.0.1:0 first) and `filter`.
#[track_caller]
pub fn start_proxy(tweak: impl FnOnce(&mut Config), filter: impl Filter + Send + 'static) -> Proxy {
    let mut config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Config::default()
    };
    tweak(&mut config);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::bind(config, filter).expect("Server::bind");
    let addr = server.local_addr();
    let stats = server.stats();
    let handle = server.handle();
    let join = thread::Builder::new()
        .name("sluice-loop".into())
        .spawn(move || server.run())
        .expect("spawn loop thread");
    Proxy {
        addr,
        stats,
        handle,
        join: Some(join),
    }
}

/// A proxy whose filter is `Forward::new(upstream)`.
#[track_caller]
pub fn start_forward_proxy(upstream: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Proxy {
    start_proxy(
        |c| {
            c.upstream = upstream;
            tweak(c);
        },
        Forward::new(upstream),
    )
}

/// A filter that forwards to `upstream` and lets `on_request` answer first.
pub struct ReplyFilter<F> {
    /// Where every request that is not answered goes.
    pub upstream: SocketAddr,
    /// `request_filter`.
    pub on_request: F,
}

impl<F> Filter for ReplyFilter<F>
where
    F: Fn(&mut RequestHead) -> Option<Reply> + Send + 'static,
{
    fn request_filter(&self, req: &mut RequestHead) -> Option<Reply> {
        (self.on_request)(req)
    }

    fn upstream_peer(&self, _req: &RequestHead) -> Peer {
        Peer::new(self.upstream)
    }
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/// Header fields as they arrived: names in their spelling, in order.
pub type Fields = Vec<(String, Vec<u8>)>;

/// At most the first 300 bytes of `bytes`, lossily as text, with the total
/// length: for failure messages.
pub fn preview(bytes: &[u8]) -> String {
    const MAX: usize = 300;
    if bytes.len() <= MAX {
        format!("{:?}", String::from_utf8_lossy(bytes))
    } else {
        format!(
            "{:?}... ({} bytes)",
            String::from_utf8_lossy(&bytes[..MAX]),
            bytes.len()
        )
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Splits a complete head (ending in CRLF CRLF) into its start line and
/// fields. `None` if it does not look like HTTP/1.x.
fn parse_head(head: &[u8]) -> Option<(String, Fields)> {
    let text = std::str::from_utf8(head).ok()?;
    let text = text.strip_suffix("\r\n\r\n")?;
    let mut lines = text.split("\r\n");
    let start = lines.next()?.to_string();
    let mut fields = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        fields.push((name.to_string(), value.trim().as_bytes().to_vec()));
    }
    Some((start, fields))
}

fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| std::str::from_utf8(v).unwrap_or("<non-utf8>"))
}

fn field_all(fields: &Fields, name: &str) -> Vec<String> {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// Whether the comma-separated list `name` contains `token` (any case).
fn has_token(fields: &Fields, name: &str, token: &str) -> bool {
    field_all(fields, name)
        .iter()
        .flat_map(|v| {
            v.split(',')
                .map(|t| t.trim().to_string())
                .collect::<Vec<_>>()
        })
        .any(|t| t.eq_ignore_ascii_case(token))
}

/// How a body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(usize),
    /// Chunked, kept raw up to and including the final CRLF after trailers.
    Chunked,
    /// Until the connection closes.
    UntilClose,
}

fn last_coding_is_chunked(fields: &Fields) -> Option<bool> {
    let all = field_all(fields, "transfer-encoding");
    if all.is_empty() {
        return None;
    }
    let joined = all.join(",");
    let last = joined.split(',').map(str::trim).rfind(|s| !s.is_empty());
    Some(last.is_some_and(|c| c.eq_ignore_ascii_case("chunked")))
}

fn content_length(fields: &Fields) -> Option<usize> {
    field(fields, "content-length").map(|v| {
        v.split(',')
            .next()
            .unwrap_or("")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("bad Content-Length {v:?}"))
    })
}

/// Where a complete chunked body ends in `buf` (length of the body,
/// trailers and final CRLF included), or `None` if more bytes are needed.
pub fn chunked_end(buf: &[u8]) -> Option<usize> {
    let mut pos = 0;
    loop {
        let line_end = pos + find(&buf[pos..], b"\r\n")?;
        let line = std::str::from_utf8(&buf[pos..line_end]).expect("chunk size line not UTF-8");
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
        pos = line_end + 2;
        if size == 0 {
            // Trailer section: fields until an empty line.
            loop {
                let end = pos + find(&buf[pos..], b"\r\n")?;
                let empty = end == pos;
                pos = end + 2;
                if empty {
                    return Some(pos);
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return None;
        }
        assert_eq!(
            &buf[pos + size..pos + size + 2],
            b"\r\n",
            "chunk data not followed by CRLF"
        );
        pos += size + 2;
    }
}

/// One request as an upstream received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub target: String,
    /// "HTTP/1.1", "HTTP/1.0".
    pub version: String,
    pub fields: Fields,
    /// The raw head, request line to final CRLF CRLF.
    pub head: Vec<u8>,
    /// The raw body (chunked bodies stay chunked).
    pub body: Vec<u8>,
}

impl Request {
    /// First value of `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.fields, name)
    }
    /// Every value of `name`, in order.
    pub fn header_all(&self, name: &str) -> Vec<String> {
        field_all(&self.fields, name)
    }
    /// Field names in order and spelling.
    pub fn names(&self) -> Vec<&str> {
        self.fields.iter().map(|(n, _)| n.as_str()).collect()
    }
    /// Whether a field `name` (any case) is present.
    pub fn has(&self, name: &str) -> bool {
        self.header(name).is_some()
    }
    /// How the body of this request is delimited (RFC 9112 §6.3, request side).
    pub fn framing(&self) -> Framing {
        match last_coding_is_chunked(&self.fields) {
            Some(true) => Framing::Chunked,
            Some(false) => Framing::UntilClose,
            None => match content_length(&self.fields) {
                Some(n) => Framing::Length(n),
                None => Framing::Empty,
            },
        }
    }
}

/// One response as a client received it.
#[derive(Debug, Clone)]
pub struct Response {
    /// "HTTP/1.1".
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub fields: Fields,
    /// The raw head, status line to final CRLF CRLF.
    pub head: Vec<u8>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.fields, name)
    }
    pub fn header_all(&self, name: &str) -> Vec<String> {
        field_all(&self.fields, name)
    }
    pub fn has(&self, name: &str) -> bool {
        self.header(name).is_some()
    }
    /// `Connection` lists `close`.
    pub fn says_close(&self) -> bool {
        has_token(&self.fields, "connection", "close")
    }
    /// Head and body, as they came.
    pub fn raw(&self) -> Vec<u8> {
        let mut v = self.head.clone();
        v.extend_from_slice(&self.body);
        v
    }
    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// How the body of this response is delimited (RFC 9112 §6.3), given
    /// whether the request was `HEAD`.
    pub fn framing(&self, to_head: bool) -> Framing {
        if to_head || (100..200).contains(&self.status) || self.status == 204 || self.status == 304
        {
            return Framing::Empty;
        }
        match last_coding_is_chunked(&self.fields) {
            Some(true) => Framing::Chunked,
            Some(false) => Framing::UntilClose,
            None => match content_length(&self.fields) {
                Some(n) => Framing::Length(n),
                None => Framing::UntilClose,
            },
        }
    }
}

/// `HTTP/1.1 200 OK` with `Content-Length` and `body`.
pub fn ok_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A plain GET of `target` with a Host field.
pub fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: example.test\r\n\r\n").into_bytes()
}

// ---------------------------------------------------------------------------
// A buffered socket with bounded reads, shared by clients and upstreams
// ---------------------------------------------------------------------------

/// A TCP stream plus the bytes read from it and not yet consumed.
pub struct Wire {
    pub stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

impl Wire {
    pub fn new(stream: TcpStream, timeout: Duration) -> Wire {
        stream
            .set_read_timeout(Some(timeout))
            .expect("set_read_timeout");
        stream
            .set_write_timeout(Some(timeout))
            .expect("set_write_timeout");
        let _ = stream.set_nodelay(true);
        Wire {
            stream,
            buf: Vec::new(),
            eof: false,
        }
    }

    /// Bytes read and not consumed yet.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Reads once more into the buffer. `Ok(0)` at EOF (a reset counts as
    /// EOF); a timeout is an error.
    pub fn fill(&mut self) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        let mut tmp = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_reset(&e) => {
                    self.eof = true;
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        self.buf.drain(..n).collect()
    }

    /// A complete head (through CRLF CRLF). `Ok(None)` if the peer closed
    /// before any byte of it; `UnexpectedEof` if it closed in the middle.
    pub fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                return Ok(Some(self.take(i + 4)));
            }
            if self.fill()? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("EOF inside a head: {}", preview(&self.buf)),
                ));
            }
        }
    }

    /// Exactly `n` bytes.
    pub fn read_exact_bytes(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("EOF after {} of {n} bytes", self.buf.len()),
                ));
            }
        }
        Ok(self.take(n))
    }

    /// A whole chunked body, raw.
    pub fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(end) = chunked_end(&self.buf) {
                return Ok(self.take(end));
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("EOF inside a chunked body: {}", preview(&self.buf)),
                ));
            }
        }
    }

    /// At most `max` bytes: what is buffered, else one read. Empty at EOF.
    pub fn read_some(&mut self, max: usize) -> io::Result<Vec<u8>> {
        if self.buf.is_empty() {
            let mut tmp = vec![0u8; max];
            loop {
                match self.stream.read(&mut tmp) {
                    Ok(n) => return Ok(tmp[..n].to_vec()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_reset(&e) => return Ok(Vec::new()),
                    Err(e) => return Err(e),
                }
            }
        }
        let n = max.min(self.buf.len());
        Ok(self.take(n))
    }

    /// Everything until EOF (or reset).
    pub fn read_to_eof(&mut self) -> io::Result<Vec<u8>> {
        while self.fill()? > 0 {}
        Ok(std::mem::take(&mut self.buf))
    }

    /// A body with `framing`.
    pub fn read_body(&mut self, framing: Framing) -> io::Result<Vec<u8>> {
        match framing {
            Framing::Empty => Ok(Vec::new()),
            Framing::Length(n) => self.read_exact_bytes(n),
            Framing::Chunked => self.read_chunked(),
            Framing::UntilClose => self.read_to_eof(),
        }
    }

    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }
}

// ---------------------------------------------------------------------------
// The raw client
// ---------------------------------------------------------------------------

/// A raw HTTP/1.1 client: writes bytes as given, reads responses raw.
pub struct Client {
    pub wire: Wire,
}

impl Client {
    /// Connects with [`CLIENT_TIMEOUT`] on reads and writes.
    #[track_caller]
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect to proxy {addr}: {e}"));
        Client {
            wire: Wire::new(stream, CLIENT_TIMEOUT),
        }
    }

    /// Writes all of `bytes` in one `write_all`.
    #[track_caller]
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.wire
            .write(bytes.as_ref())
            .unwrap_or_else(|e| panic!("client write: {e}"));
    }

    /// Writes, ignoring errors (the proxy may close before reading it all).
    pub fn send_lossy(&mut self, bytes: impl AsRef<[u8]>) {
        let _ = self.wire.write(bytes.as_ref());
    }

    /// Reads a response head only; the body stays unread.
    pub fn try_read_head(&mut self) -> io::Result<Response> {
        let head = self.wire.read_head()?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            )
        })?;
        let (start, fields) = parse_head(&head).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a response head: {}", preview(&head)),
            )
        })?;
        let mut parts = start.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {start:?}"),
            )
        })?;
        let reason = parts.next().unwrap_or("").to_string();
        Ok(Response {
            version,
            status,
            reason,
            fields,
            head,
            body: Vec::new(),
        })
    }

    /// Reads one whole response; `to_head` says the request was `HEAD`.
    pub fn try_read_response(&mut self, to_head: bool) -> io::Result<Response> {
        let mut resp = self.try_read_head()?;
        resp.body = self.wire.read_body(resp.framing(to_head))?;
        Ok(resp)
    }

    /// One whole response to a non-HEAD request.
    #[track_caller]
    pub fn read_response(&mut self) -> Response {
        self.try_read_response(false)
            .unwrap_or_else(|e| panic!("reading a response: {e}"))
    }

    /// One whole response to a `HEAD` request (no body whatever it says).
    #[track_caller]
    pub fn read_head_response(&mut self) -> Response {
        self.try_read_response(true)
            .unwrap_or_else(|e| panic!("reading a response to HEAD: {e}"))
    }

    /// A response head; its body stays unread.
    #[track_caller]
    pub fn read_response_head(&mut self) -> Response {
        self.try_read_head()
            .unwrap_or_else(|e| panic!("reading a response head: {e}"))
    }

    /// Exactly `n` bytes.
    #[track_caller]
    pub fn read_bytes(&mut self, n: usize) -> Vec<u8> {
        self.wire
            .read_exact_bytes(n)
            .unwrap_or_else(|e| panic!("reading {n} bytes: {e}"))
    }

    /// Sends `request` and reads its response.
    #[track_caller]
    pub fn round_trip(&mut self, request: impl AsRef<[u8]>) -> Response {
        self.send(request);
        self.read_response()
    }

    /// Everything until the proxy closes (EOF or reset), within `within`.
    #[track_caller]
    pub fn read_until_closed(&mut self, within: Duration) -> Vec<u8> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "connection still open after {within:?}; got {}",
                preview(self.wire.buffered())
            );
            self.wire
                .stream
                .set_read_timeout(Some(left))
                .expect("set_read_timeout");
            match self.wire.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!(
                        "connection still open after {within:?}; got {}",
                        preview(self.wire.buffered())
                    )
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        let _ = self.wire.stream.set_read_timeout(Some(CLIENT_TIMEOUT));
        std::mem::take(&mut self.wire.buf)
    }

    /// The proxy closes this connection within [`CLIENT_TIMEOUT`] and sends
    /// nothing more before it.
    #[track_caller]
    pub fn assert_closed(&mut self) {
        let rest = self.read_until_closed(CLIENT_TIMEOUT);
        assert!(
            rest.is_empty(),
            "bytes after the last response: {}",
            preview(&rest)
        );
    }

    /// The connection is still open: nothing arrives and no EOF within `during`.
    #[track_caller]
    pub fn assert_open(&mut self, during: Duration) {
        assert!(self.wire.buffered().is_empty(), "unexpected bytes buffered");
        self.wire
            .stream
            .set_read_timeout(Some(during))
            .expect("set_read_timeout");
        let r = self.wire.fill();
        let _ = self.wire.stream.set_read_timeout(Some(CLIENT_TIMEOUT));
        match r {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Ok(0) => panic!("connection closed"),
            Ok(_) => panic!("unexpected bytes: {}", preview(self.wire.buffered())),
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Half-closes the write side (the proxy sees EOF from the client).
    pub fn shutdown_write(&mut self) {
        let _ = self.wire.stream.shutdown(Shutdown::Write);
    }
}

/// Asserts a proxy-written error: `status`, `Connection: close` and a
/// `Content-Length` that matches its body.
#[track_caller]
pub fn assert_proxy_error(resp: &Response, status: u16) {
    assert_eq!(
        resp.status,
        status,
        "status; response {}",
        preview(&resp.raw())
    );
    assert_eq!(resp.version, "HTTP/1.1", "status line version");
    assert!(
        resp.says_close(),
        "no Connection: close in {}",
        preview(&resp.head)
    );
    let cl = resp
        .header("content-length")
        .unwrap_or_else(|| panic!("no Content-Length in {}", preview(&resp.head)));
    assert_eq!(
        cl.parse::<usize>().ok(),
        Some(resp.body.len()),
        "Content-Length vs body"
    );
}

// ---------------------------------------------------------------------------
// Scripted upstreams
// ---------------------------------------------------------------------------

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
        let (start, fields) = parse_head(&head)?;
        let mut parts = start.split(' ');
        let method = parts.next()?.to_string();
        let target = parts.next()?.to_string();
        let version = parts.next()?.to_string();
        Some(Request {
            method,
            target,
            version,
            fields,
            head,
            body: Vec::new(),
        })
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
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    drop(l);
    addr
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

// ---------------------------------------------------------------------------
// Ready-made behaviours
// ---------------------------------------------------------------------------

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

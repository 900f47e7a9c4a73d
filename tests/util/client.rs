//! The test client: a raw HTTP/1.1 client that writes bytes exactly as
//! given and reads responses raw, with a bounded wait on every read, plus
//! the request builders and response checks the tests share.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::CLIENT_TIMEOUT;
use super::oracle::{Response, preview};
use super::wire::Wire;

/// A raw HTTP/1.1 client: writes bytes as given, reads responses raw.
pub struct Client {
    pub wire: Wire,
}

impl Client {
    /// Connects with [`CLIENT_TIMEOUT`] on reads and writes.
    #[track_caller]
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap_or_else(|e| panic!("connect to proxy {addr}: {e}"))
    }

    /// [`Client::connect`] that returns the error (for a listener that may
    /// be closed).
    pub fn try_connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT)?;
        Ok(Client {
            wire: Wire::new(stream, CLIENT_TIMEOUT),
        })
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
        Response::from_head(head)
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

    /// Reads until the proxy closes (EOF or reset: `Ok(true)`) or `within`
    /// has passed (`Ok(false)`); what arrived stays buffered.
    fn fill_until_closed(&mut self, within: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + within;
        let closed = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Ok(false);
            }
            self.wire
                .stream
                .set_read_timeout(Some(left))
                .expect("set_read_timeout");
            match self.wire.fill() {
                Ok(0) => break Ok(true),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break Ok(false);
                }
                Err(e) => break Err(e),
            }
        };
        let _ = self.wire.stream.set_read_timeout(Some(CLIENT_TIMEOUT));
        closed
    }

    /// Everything until the proxy closes (EOF or reset), within `within`.
    #[track_caller]
    pub fn read_until_closed(&mut self, within: Duration) -> Vec<u8> {
        match self.fill_until_closed(within) {
            Ok(true) => self.wire.take_all(),
            Ok(false) => panic!(
                "connection still open after {within:?}; got {}",
                preview(self.wire.buffered())
            ),
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Whatever arrives until the proxy closes, `within` passes or a read
    /// fails, whichever comes first; never fails (for a response that is
    /// expected to be cut short or never sent).
    pub fn read_what_arrives(&mut self, within: Duration) -> Vec<u8> {
        let _ = self.fill_until_closed(within);
        self.wire.take_all()
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
    if !resp.body.is_empty() {
        assert_eq!(
            resp.header("content-type"),
            Some("text/plain"),
            "the type of the body in {}",
            preview(&resp.head)
        );
    }
}

/// A plain GET of `target` with a Host field.
pub fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: example.test\r\n\r\n").into_bytes()
}

/// A GET of `target` with a Host field and `Connection: close`.
pub fn get_close(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n").into_bytes()
}

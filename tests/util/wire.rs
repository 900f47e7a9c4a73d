//! [`Wire`]: a TCP stream with a read buffer and bounded reads, shared by
//! the test client and the scripted upstreams. It reads heads and bodies
//! as the [oracle](super::oracle) delimits them and never interprets them.
//!
//! A reset counts as EOF (a peer that closes with unread bytes resets);
//! a read that times out is an error, so a stuck peer fails the test
//! within the timeout given to [`Wire::new`].

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::oracle::{Framing, chunked_end, find, preview};

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

    /// Everything buffered, leaving the buffer empty.
    pub fn take_all(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
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
        Ok(self.take_all())
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

/// One response with a `Content-Length` body (or none) read from any
/// stream, e.g. a rustls stream whose bytes a [`Wire`] cannot see: the head
/// byte by byte (up to 64 KiB), then the body. (status, head, body).
#[track_caller]
pub fn read_length_response(s: &mut impl Read) -> (u16, String, Vec<u8>) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).expect("reading a response head");
        assert_eq!(n, 1, "closed inside a head: {}", preview(&raw));
        raw.push(byte[0]);
        assert!(raw.len() < 64 * 1024, "no end of head: {}", preview(&raw));
    }
    let head = String::from_utf8_lossy(&raw).to_string();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).expect("reading a body");
    (status, head, body)
}

/// Resets a socket (SO_LINGER 0 then close): the peer sees RST, not FIN.
pub fn reset_stream(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

/// A PROXY protocol v2 header (HAProxy's spec §2.2): the signature,
/// `ver_cmd` (0x21 PROXY, 0x20 LOCAL), `fam` (0x11 TCP over IPv4) and
/// `body` (addresses, ports, TLVs) with its length.
pub fn proxy_v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.push(ver_cmd);
    h.push(fam);
    h.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    h.extend_from_slice(body);
    h
}

/// A v2 PROXY header for 198.51.100.9:40000 -> 10.0.0.1:`dport` with an
/// ALPN and a NOOP TLV, as a balancer sends it.
pub fn proxy_v2_with_tlvs(dport: u16) -> Vec<u8> {
    let mut body = vec![198, 51, 100, 9, 10, 0, 0, 1];
    body.extend_from_slice(&40000u16.to_be_bytes());
    body.extend_from_slice(&dport.to_be_bytes());
    body.extend_from_slice(&[0x01, 0, 8]);
    body.extend_from_slice(b"http/1.1");
    body.extend_from_slice(&[0x04, 0, 5, 0, 0, 0, 0, 0]);
    proxy_v2(0x21, 0x11, &body)
}

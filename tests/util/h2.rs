//! A small HTTP/2 client for tests (RFC 9113), std only but for HPACK
//! (the `hpack` crate: an implementation independent of sluice's decodes
//! what the proxy sends). It speaks prior-knowledge h2c over a
//! `TcpStream`, writes any frame on purpose (the attacks), reads frames
//! with a bound on every read, and collects a stream's response.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::CLIENT_TIMEOUT;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
}

/// One frame as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl H2Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            kind::RST_STREAM => 0,
            kind::GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// A response collected on one stream.
#[derive(Debug, Default, Clone)]
pub struct H2Response {
    /// `:status` of the final head.
    pub status: u16,
    /// The final head's fields (lower-case names), without `:status`.
    pub headers: Vec<(String, String)>,
    /// Interim (1xx) statuses, in order.
    pub interim: Vec<u16>,
    /// The DATA payloads joined.
    pub body: Vec<u8>,
    /// The trailer fields, if a trailing HEADERS came.
    pub trailers: Vec<(String, String)>,
    /// The stream was reset, with this code.
    pub reset: Option<u32>,
}

impl H2Response {
    /// The first value of field `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/2 client connection.
pub struct H2Client {
    pub stream: TcpStream,
    enc: hpack::Encoder<'static>,
    dec: hpack::Decoder<'static>,
    buf: Vec<u8>,
    /// Frames read and not yet claimed by `response`.
    pub backlog: Vec<H2Frame>,
    next_id: u32,
    /// Give the server window back as DATA arrives.
    pub auto_window: bool,
    /// What the server lets us send on the connection, and per stream
    /// (its SETTINGS_INITIAL_WINDOW_SIZE for a stream not listed).
    conn_window: i64,
    stream_windows: HashMap<u32, i64>,
    initial_window: i64,
}

impl H2Client {
    /// Connects, sends the preface and an empty SETTINGS frame, and reads
    /// the server's SETTINGS (acknowledged).
    #[track_caller]
    pub fn connect(addr: SocketAddr) -> H2Client {
        H2Client::connect_with(addr, &[])
    }

    /// As [`H2Client::connect`], with these SETTINGS parameters.
    #[track_caller]
    pub fn connect_with(addr: SocketAddr, settings: &[(u16, u32)]) -> H2Client {
        let mut c = H2Client::handshake_only(addr, settings);
        let f = c.read_frame().expect("the server's SETTINGS");
        assert_eq!(f.kind, kind::SETTINGS, "server preface: {f:?}");
        c.on_frame(&f);
        c.send_frame(kind::SETTINGS, flag::ACK, 0, &[]);
        c
    }

    /// Connects and sends the preface and SETTINGS, reading nothing.
    #[track_caller]
    pub fn handshake_only(addr: SocketAddr, settings: &[(u16, u32)]) -> H2Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut c = H2Client {
            stream,
            enc: hpack::Encoder::new(),
            dec: hpack::Decoder::new(),
            buf: Vec::new(),
            backlog: Vec::new(),
            next_id: 1,
            auto_window: true,
            conn_window: 65_535,
            stream_windows: HashMap::new(),
            initial_window: 65_535,
        };
        c.write(PREFACE);
        let mut payload = Vec::new();
        for (id, v) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&v.to_be_bytes());
        }
        c.send_frame(kind::SETTINGS, 0, 0, &payload);
        c
    }

    /// Writes raw bytes.
    #[track_caller]
    pub fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the proxy");
    }

    /// Writes raw bytes, ignoring a failure (the proxy may have closed).
    pub fn write_lossy(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// The bytes of one frame.
    pub fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// Writes one frame.
    #[track_caller]
    pub fn send_frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let f = H2Client::frame_bytes(kind, flags, stream, payload);
        self.write(&f);
    }

    /// An HPACK block of `fields`.
    pub fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let list: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        self.enc.encode(list)
    }

    /// The next client stream id.
    pub fn next_stream(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        id
    }

    /// Sends a request head on a new stream; returns its id.
    #[track_caller]
    pub fn send_headers(&mut self, fields: &[(&str, &str)], end_stream: bool) -> u32 {
        let id = self.next_stream();
        let block = self.block(fields);
        let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
        self.send_frame(kind::HEADERS, flags, id, &block);
        id
    }

    /// `GET path` (with `:authority` `host`) on a new stream.
    #[track_caller]
    pub fn send_get(&mut self, path: &str) -> u32 {
        self.send_headers(&get_fields(path), true)
    }

    /// Sends DATA on `stream` in frames of at most 16,384 bytes, within
    /// the server's windows: when they are closed, frames are read (and
    /// kept in the backlog) until a WINDOW_UPDATE opens them.
    #[track_caller]
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) {
        let mut rest = data;
        let deadline = Instant::now() + CLIENT_TIMEOUT * 3;
        loop {
            let window = self.conn_window.min(
                *self
                    .stream_windows
                    .get(&stream)
                    .unwrap_or(&self.initial_window),
            );
            let n = rest.len().min(16_384).min(window.max(0) as usize);
            if n == 0 && !rest.is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "the server never opened its window"
                );
                let f = self.read_frame().expect("a WINDOW_UPDATE");
                self.on_frame(&f);
                self.backlog.push(f);
                continue;
            }
            let (chunk, after) = rest.split_at(n);
            let flags = if end_stream && after.is_empty() {
                flag::END_STREAM
            } else {
                0
            };
            self.send_frame(kind::DATA, flags, stream, chunk);
            self.conn_window -= n as i64;
            *self
                .stream_windows
                .entry(stream)
                .or_insert(self.initial_window) -= n as i64;
            rest = after;
            if rest.is_empty() {
                return;
            }
        }
    }

    /// Reads one frame (bounded by the socket's read timeout).
    pub fn read_frame(&mut self) -> io::Result<H2Frame> {
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let f = H2Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([
                            self.buf[5] & 0x7f,
                            self.buf[6],
                            self.buf[7],
                            self.buf[8],
                        ]),
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Ok(f);
                }
            }
            let mut chunk = [0u8; 65_536];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads frames until `pred` matches one (returned) or `within` passes
    /// or the connection ends (`None`); every frame read is kept in the
    /// backlog too. PINGs are answered.
    pub fn read_until(
        &mut self,
        within: Duration,
        mut pred: impl FnMut(&H2Frame) -> bool,
    ) -> Option<H2Frame> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let f = self.read_frame().ok()?;
            self.on_frame(&f);
            self.backlog.push(f.clone());
            if pred(&f) {
                return Some(f);
            }
        }
        None
    }

    /// What a well-behaved client does with a frame it reads: answer a
    /// PING, give DATA's window back.
    fn on_frame(&mut self, f: &H2Frame) {
        if f.kind == kind::WINDOW_UPDATE && f.payload.len() == 4 {
            let inc = i64::from(u32::from_be_bytes([
                f.payload[0] & 0x7f,
                f.payload[1],
                f.payload[2],
                f.payload[3],
            ]));
            if f.stream == 0 {
                self.conn_window += inc;
            } else {
                *self
                    .stream_windows
                    .entry(f.stream)
                    .or_insert(self.initial_window) += inc;
            }
        }
        if f.kind == kind::SETTINGS && f.flags & flag::ACK == 0 {
            for p in f.payload.chunks(6) {
                if p.len() == 6 && u16::from_be_bytes([p[0], p[1]]) == 0x4 {
                    self.initial_window = i64::from(u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
                }
            }
        }
        if f.kind == kind::PING && f.flags & flag::ACK == 0 {
            let payload = f.payload.clone();
            let _ =
                self.stream
                    .write_all(&H2Client::frame_bytes(kind::PING, flag::ACK, 0, &payload));
        }
        if f.kind == kind::DATA && self.auto_window && !f.payload.is_empty() {
            let inc = (f.payload.len() as u32).to_be_bytes();
            let mut w = H2Client::frame_bytes(kind::WINDOW_UPDATE, 0, 0, &inc);
            w.extend_from_slice(&H2Client::frame_bytes(
                kind::WINDOW_UPDATE,
                0,
                f.stream,
                &inc,
            ));
            let _ = self.stream.write_all(&w);
        }
    }

    /// Reads until the connection closes (or `within`): the frames read.
    pub fn read_to_close(&mut self, within: Duration) -> Vec<H2Frame> {
        let deadline = Instant::now() + within;
        let mut frames = Vec::new();
        while Instant::now() < deadline {
            match self.read_frame() {
                Ok(f) => {
                    self.on_frame(&f);
                    frames.push(f)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => continue,
                Err(_) => break,
            }
        }
        frames
    }

    /// Collects the responses of `ids` (each until END_STREAM or a reset),
    /// within `within` in all.
    #[track_caller]
    pub fn responses(&mut self, ids: &[u32], within: Duration) -> HashMap<u32, H2Response> {
        let mut out: HashMap<u32, H2Response> = HashMap::new();
        let mut done: Vec<u32> = Vec::new();
        // Frames already read for these streams first.
        let backlog = std::mem::take(&mut self.backlog);
        let mut pending: std::collections::VecDeque<H2Frame> = backlog.into();
        let deadline = Instant::now() + within;
        while done.len() < ids.len() {
            let f = match pending.pop_front() {
                Some(f) => f,
                None => {
                    assert!(
                        Instant::now() < deadline,
                        "responses {ids:?}: only {done:?} done within {within:?}"
                    );
                    let f = self.read_frame().unwrap_or_else(|e| {
                        panic!("responses {ids:?}: read failed: {e}; done {done:?}")
                    });
                    self.on_frame(&f);
                    f
                }
            };
            if !ids.contains(&f.stream) {
                if f.stream != 0 {
                    self.backlog.push(f);
                }
                continue;
            }
            let r = out.entry(f.stream).or_default();
            match f.kind {
                kind::HEADERS => {
                    let block = header_block(&f);
                    let fields = self.dec.decode(&block).expect("HPACK from the proxy");
                    let fields: Vec<(String, String)> = fields
                        .into_iter()
                        .map(|(n, v)| {
                            (
                                String::from_utf8_lossy(&n).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            )
                        })
                        .collect();
                    let status = fields
                        .iter()
                        .find(|(n, _)| n == ":status")
                        .and_then(|(_, v)| v.parse::<u16>().ok());
                    match status {
                        Some(s) if (100..200).contains(&s) => r.interim.push(s),
                        Some(s) => {
                            r.status = s;
                            r.headers =
                                fields.into_iter().filter(|(n, _)| n != ":status").collect();
                        }
                        None => r.trailers = fields,
                    }
                }
                kind::DATA => r.body.extend_from_slice(&data_payload(&f)),
                kind::RST_STREAM => r.reset = f.error_code(),
                _ => {}
            }
            let ended = f.flags & flag::END_STREAM != 0
                && (f.kind == kind::DATA || f.kind == kind::HEADERS);
            if (ended || f.kind == kind::RST_STREAM) && !done.contains(&f.stream) {
                done.push(f.stream);
            }
        }
        out
    }

    /// Sends `GET path` and collects its response.
    #[track_caller]
    pub fn get(&mut self, path: &str) -> H2Response {
        let id = self.send_get(path);
        self.responses(&[id], CLIENT_TIMEOUT * 2)
            .remove(&id)
            .unwrap_or_default()
    }
}

/// The fields of `GET path` to `test.example`.
pub fn get_fields(path: &str) -> Vec<(&'static str, &str)> {
    request_fields("GET", path)
}

/// The fields of `method path` to `test.example` over `http`.
pub fn request_fields<'a>(method: &'a str, path: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        (":method", method),
        (":scheme", "http"),
        (":authority", "test.example"),
        (":path", path),
    ]
}

/// A HEADERS frame's block without padding and priority fields.
fn header_block(f: &H2Frame) -> Vec<u8> {
    let mut p: &[u8] = &f.payload;
    let mut pad = 0;
    if f.flags & flag::PADDED != 0 {
        pad = usize::from(p[0]);
        p = &p[1..];
    }
    if f.flags & 0x20 != 0 {
        p = &p[5..];
    }
    p[..p.len() - pad].to_vec()
}

/// A DATA frame's payload without padding.
fn data_payload(f: &H2Frame) -> Vec<u8> {
    if f.flags & flag::PADDED != 0 {
        let pad = usize::from(f.payload[0]);
        f.payload[1..f.payload.len() - pad].to_vec()
    } else {
        f.payload.clone()
    }
}

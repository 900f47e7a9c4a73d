//! The test oracle: a small HTTP/1.1 message reader written independently
//! of sluice, used to check the bytes that cross a socket.
//!
//! Messages stay raw: a [`Request`] recorded by an upstream and a
//! [`Response`] read by a client hold the exact head and body bytes (a
//! chunked body keeps its chunk sizes, extensions and trailers), so tests
//! can assert byte for byte. [`Framing`] says where a body ends
//! (RFC 9112 §6.3); nothing here shares code with `src/`.

use std::io;

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

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
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

/// The data and the trailer section of a chunked body.
pub fn dechunk(mut raw: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk line");
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap(), 16)
            .expect("a hex size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            let end = raw.len() - 2;
            return (data, raw[..end].to_vec());
        }
        data.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
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
    /// A request from a complete head (request line to CRLF CRLF), with an
    /// empty body. `None` if it does not look like an HTTP/1.x request.
    pub fn from_head(head: Vec<u8>) -> Option<Request> {
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
    /// A response from a complete head (status line to CRLF CRLF), with an
    /// empty body. `InvalidData` if it is not an HTTP/1.x response head.
    pub fn from_head(head: Vec<u8>) -> io::Result<Response> {
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

/// Checks every histogram of a Prometheus text exposition: its `+Inf`
/// bucket is its `_count` (the buckets are cumulative once, not twice),
/// and its buckets never decrease. Returns how many histograms it checked.
#[track_caller]
pub fn assert_histograms_whole(metrics: &str) -> usize {
    let value = |series: &str| -> Option<f64> {
        metrics.lines().find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
        })
    };
    let mut checked = 0;
    let mut last: Option<(String, f64)> = None;
    for line in metrics.lines().filter(|l| l.contains("_bucket{")) {
        let (series, v) = line.rsplit_once(' ').expect("a sample line");
        let v: f64 = v.parse().expect("a number");
        let (name, labels) = series.split_once("_bucket{").expect("a bucket");
        let (labels, le) = labels.rsplit_once("le=\"").expect("an le label");
        let family = format!("{name}{{{labels}");
        if let Some((f, prev)) = &last
            && *f == family
        {
            assert!(v >= *prev, "{line}: below the bucket before it ({prev})");
        }
        last = Some((family, v));
        if le.starts_with("+Inf") {
            let labels = labels.trim_end_matches(',');
            let count = value(&format!("{name}_count{{{labels}}}"))
                .unwrap_or_else(|| panic!("no {name}_count{{{labels}}}"));
            assert_eq!(v, count, "{line}: +Inf bucket vs _count");
            checked += 1;
        }
    }
    checked
}

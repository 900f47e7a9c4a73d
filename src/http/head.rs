//! Heads: [`RequestHead`] and [`ResponseHead`], parsed with httparse into
//! owned, reused storage and encoded back.
//!
//! Why it exists: the proxy reads a head, lets the filter see and change it,
//! and writes it to the other side. Parsing is httparse's (strict settings:
//! no obs-fold, no whitespace before a colon, one SP between start-line
//! parts); this file copies what httparse borrowed into owned storage and
//! encodes it back (RFC 9112 §2-§5).
//!
//! What it must not know: sockets, mio, time, body framing (`framing.rs`),
//! hop-by-hop policy (`hop.rs`).
//!
//! Invariant: the fields of a parsed head are stored by [`Headers`] (see
//! `headers.rs` for its rules); start-line parts a filter changed are
//! sanitized when encoded, so they cannot start a new line.

use std::mem::MaybeUninit;

use super::error::ParseError;
use super::headers::Headers;
use super::syntax::push_sanitized;

/// How many httparse field slots live on the stack during a parse; larger
/// `max_fields` values use a heap vector for that one call. 256 covers the
/// default limits of 100 request and 256 response fields (ARCHITECTURE.md
/// §9) with 8 KiB of stack. The slots are uninitialized: a parse costs
/// neither an allocation nor a fill of 8 KiB (the heap vector for 256
/// response slots, filled on every response, was the hot path's largest
/// allocation until 2026-12-01).
const STACK_SLOTS: usize = 256;

/// One httparse field slot, written only by httparse.
type Slot<'b> = MaybeUninit<httparse::Header<'b>>;

/// httparse's error as ours: `TooManyHeaders` is the field-count limit,
/// everything else a syntax error in the head.
fn from_httparse(e: httparse::Error) -> ParseError {
    match e {
        httparse::Error::TooManyHeaders => ParseError::TooManyFields,
        httparse::Error::HeaderName => ParseError::Malformed("invalid field name"),
        httparse::Error::HeaderValue => ParseError::Malformed("invalid field value"),
        httparse::Error::NewLine => ParseError::Malformed("invalid line ending"),
        httparse::Error::Status => ParseError::Malformed("invalid status line"),
        httparse::Error::Token => ParseError::Malformed("invalid method or request-target"),
        httparse::Error::Version => ParseError::Malformed("invalid HTTP version"),
    }
}

/// `n` httparse slots: from `stack` when they fit, else from `heap`.
fn field_slots<'s, 'b>(
    stack: &'s mut [Slot<'b>],
    heap: &'s mut Vec<Slot<'b>>,
    n: usize,
) -> &'s mut [Slot<'b>] {
    if n <= stack.len() {
        stack.get_mut(..n).unwrap_or_default()
    } else {
        heap.resize_with(n, MaybeUninit::uninit);
        heap.as_mut_slice()
    }
}

/// Runs `f` over `max_fields` uninitialized httparse field slots: on the
/// stack up to `STACK_SLOTS`, else in a heap vector for this one call.
fn with_slots<'b, T>(max_fields: usize, f: impl FnOnce(&mut [Slot<'b>]) -> T) -> T {
    let mut stack: [Slot<'b>; STACK_SLOTS] = [const { MaybeUninit::uninit() }; STACK_SLOTS];
    let mut heap = Vec::new();
    f(field_slots(&mut stack, &mut heap, max_fields))
}

/// httparse's answer as a head length: `None` while the head is partial.
fn complete(r: httparse::Result<usize>) -> Result<Option<usize>, ParseError> {
    match r.map_err(from_httparse)? {
        httparse::Status::Complete(len) => Ok(Some(len)),
        httparse::Status::Partial => Ok(None),
    }
}

/// Whether the request line (after any leading empty lines, RFC 9112
/// §2.2) ends in a well-formed HTTP-version (`HTTP/` DIGIT `.` DIGIT, RFC
/// 9112 §2.3) whose major version is not 1: a version this proxy does not
/// speak (505), not a malformed line (400).
fn other_major_version(buf: &[u8]) -> bool {
    let line = buf
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor] => {
            major.is_ascii_digit() && minor.is_ascii_digit() && *major != b'1'
        }
        _ => false,
    }
}

/// A head httparse fills: [`RequestHead`] or [`ResponseHead`].
pub trait ParseHead: Default + Sized {
    /// Parses a complete head at the start of `buf` with httparse, with
    /// `max_fields` field slots.
    ///
    /// `Ok(None)`: the head is not complete in `buf` yet. `Ok(Some((head,
    /// len)))`: `len` bytes of `buf` are the head, including the blank line
    /// that ends it; body bytes may follow. Leading empty lines before the
    /// start line are skipped (RFC 9112 §2.2) and count in `len`.
    ///
    /// Errors: `TooManyFields` (more than `max_fields` fields); `Malformed`
    /// for any syntax error, including obs-fold (RFC 9112 §5.2), whitespace
    /// between a field name and its colon (RFC 9112 §5.1), a version other
    /// than HTTP/1.0 or 1.1, and a status code outside 100..=599 (RFC 9110
    /// §15).
    ///
    /// Each call parses from byte 0: call it once [`HeadScanner`] has found
    /// the end, not on every read.
    ///
    /// [`HeadScanner`]: super::HeadScanner
    #[cfg(test)]
    fn parse(buf: &[u8], max_fields: usize) -> Result<Option<(Self, usize)>, ParseError> {
        let mut head = Self::default();
        Ok(head.parse_into(buf, max_fields)?.map(|len| (head, len)))
    }

    /// `ParseHead::parse` into this head, reusing its storage (no
    /// allocation once it has held a head as large): `Ok(Some(len))` when
    /// a whole head was parsed. After `Ok(None)` or an error the head's
    /// contents are unspecified.
    fn parse_into(&mut self, buf: &[u8], max_fields: usize) -> Result<Option<usize>, ParseError>;
}

/// The minor version httparse read, checked to be 0 or 1: the proxy only
/// speaks HTTP/1.x (RFC 9112 §2.3).
fn version_ok(minor: Option<u8>) -> Result<u8, ParseError> {
    match minor {
        Some(v @ (0 | 1)) => Ok(v),
        _ => Err(ParseError::Malformed("invalid HTTP version")),
    }
}

/// A request head: request-line and header section (RFC 9112 §3, §5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// The method, case-sensitive (RFC 9110 §9.1), e.g. `GET`.
    pub method: String,
    /// The request-target as it arrived (RFC 9112 §3.2), e.g. `/a?b`.
    pub target: String,
    /// The minor version of HTTP/1.x: 0 or 1.
    pub version: u8,
    /// The header fields, in arrival order.
    pub headers: Headers,
}

impl ParseHead for RequestHead {
    fn parse_into(&mut self, buf: &[u8], max_fields: usize) -> Result<Option<usize>, ParseError> {
        with_slots(max_fields, |slots| {
            let mut req = httparse::Request::new(&mut []);
            let parsed = httparse::ParserConfig::default()
                .parse_request_with_uninit_headers(&mut req, buf, slots);
            if matches!(parsed, Err(httparse::Error::Version)) && other_major_version(buf) {
                return Err(ParseError::UnsupportedVersion);
            }
            let Some(len) = complete(parsed)? else {
                return Ok(None);
            };
            self.version = version_ok(req.version)?;
            let method = req.method.ok_or(ParseError::Malformed("missing method"))?;
            let target = req
                .path
                .ok_or(ParseError::Malformed("missing request-target"))?;
            self.method.clear();
            self.method.push_str(method);
            self.target.clear();
            self.target.push_str(target);
            self.headers.refill(req.headers, buf);
            Ok(Some(len))
        })
    }
}

impl RequestHead {
    /// Writes `METHOD target HTTP/1.1\r\n`, the fields, and the blank line.
    ///
    /// Always HTTP/1.1: the proxy speaks 1.1 upstream whatever version
    /// arrived (RFC 9110 §6.2: a sender sends its own highest version).
    /// CR, LF and other CTLs a filter may have put in `method` or `target`
    /// are written as SP, so they cannot start a new line.
    pub fn encode_upstream(&self, out: &mut Vec<u8>) {
        push_sanitized(out, self.method.as_bytes());
        out.push(b' ');
        push_sanitized(out, self.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        self.headers.encode(out);
        out.extend_from_slice(b"\r\n");
    }

    /// True if the method is exactly `m` (methods are case-sensitive,
    /// RFC 9110 §9.1).
    pub fn is_method(&self, m: &str) -> bool {
        self.method == m
    }
}

/// A response head: status-line and header section (RFC 9112 §4, §5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// The minor version of HTTP/1.x: 0 or 1.
    pub version: u8,
    /// The status code, 100..=599 (RFC 9110 §15).
    pub status: u16,
    /// The reason phrase; "" if none came, or if it held obs-text (httparse
    /// drops it then; RFC 9112 §4: a client SHOULD ignore it).
    pub reason: String,
    /// The header fields, in arrival order.
    pub headers: Headers,
}

impl ParseHead for ResponseHead {
    fn parse_into(&mut self, buf: &[u8], max_fields: usize) -> Result<Option<usize>, ParseError> {
        with_slots(max_fields, |slots| {
            let mut resp = httparse::Response::new(&mut []);
            let parsed = httparse::ParserConfig::default()
                .parse_response_with_uninit_headers(&mut resp, buf, slots);
            let Some(len) = complete(parsed)? else {
                return Ok(None);
            };
            self.version = version_ok(resp.version)?;
            self.status = match resp.code {
                Some(code @ 100..=599) => code,
                _ => return Err(ParseError::Malformed("status code outside 100-599")),
            };
            self.reason.clear();
            self.reason.push_str(resp.reason.unwrap_or_default());
            self.headers.refill(resp.headers, buf);
            Ok(Some(len))
        })
    }
}

impl ResponseHead {
    /// A head the proxy writes itself: HTTP/1.1, `status`, its standard
    /// reason phrase (`reason_phrase`, "" if unknown), no fields.
    pub fn new(status: u16) -> Self {
        ResponseHead {
            version: 1,
            status,
            reason: reason_phrase(status).to_owned(),
            headers: Headers::new(),
        }
    }

    /// Writes `HTTP/1.1 {status} {reason}\r\n`, the fields, and the blank
    /// line (RFC 9112 §4). Always HTTP/1.1 (RFC 9110 §6.2); the SP before an
    /// empty reason stays, as the grammar requires. CTLs in `reason` are
    /// written as SP.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"HTTP/1.1 ");
        push_decimal(out, self.status);
        out.push(b' ');
        push_sanitized(out, self.reason.as_bytes());
        out.extend_from_slice(b"\r\n");
        self.headers.encode(out);
        out.extend_from_slice(b"\r\n");
    }
}

/// The canonical reason phrase of `status` (RFC 9110 §15, RFC 6585 for
/// 428/429/431/511, RFC 7725 for 451); "" for a code without one.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        508 => "Loop Detected",
        511 => "Network Authentication Required",
        _ => "",
    }
}

/// Appends `n` in decimal without allocating.
fn push_decimal(out: &mut Vec<u8>, n: u16) {
    let mut digits = [0u8; 5];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i = i.saturating_sub(1);
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(i..).unwrap_or_default());
}

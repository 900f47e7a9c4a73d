//! Heads: [`Headers`], [`RequestHead`], [`ResponseHead`], and the
//! incremental end-of-head finder [`HeadScanner`].
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
//! Invariants:
//! - `Headers` keeps fields in arrival order and names in the spelling they
//!   arrived with (RFC 9110 §5.3: order of same-name fields is meaningful);
//!   every lookup ignores ASCII case (RFC 9110 §5.1).
//! - Every stored name is a `token` and no stored value holds a CTL other
//!   than HTAB, so encoding can never inject a line (RFC 9110 §5.5).
//! - [`HeadScanner`] never looks at a byte twice: a client sending one byte
//!   at a time costs O(n) in total.

use std::fmt;

use super::error::ParseError;

/// How many httparse field slots live on the stack during a parse; larger
/// `max_fields` values use a heap vector for that one call. 128 covers the
/// default limit of 100 fields (DESIGN §9) with 4 KiB of stack.
const STACK_SLOTS: usize = 128;

/// One field's position in the two arenas of [`Headers`]: byte offsets,
/// `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    name_start: usize,
    name_end: usize,
    value_start: usize,
    value_end: usize,
}

/// The header (or trailer) fields of one head, in arrival order.
///
/// Names keep the spelling they arrived with; every lookup compares names
/// ignoring ASCII case (RFC 9110 §5.1). Storage is two arenas (names, values)
/// plus one vector of offsets, so [`Headers::clear`] keeps all three
/// allocations for the next head. Removing a field or growing a value in
/// place leaves unreachable bytes in an arena until the next `clear`.
///
/// Equality compares the fields (names byte for byte, values, order), not
/// the arenas.
#[derive(Clone, Default)]
pub struct Headers {
    /// Names of all fields, back to back (ASCII: names are tokens).
    names: String,
    /// Values of all fields, back to back.
    values: Vec<u8>,
    /// One entry per field, in arrival order.
    fields: Vec<Field>,
}

impl Headers {
    /// An empty set of fields; allocates nothing until the first append.
    pub fn new() -> Self {
        Headers::default()
    }

    /// Removes every field and keeps the storage for reuse.
    pub fn clear(&mut self) {
        self.names.clear();
        self.values.clear();
        self.fields.clear();
    }

    /// Number of fields (a name that appears twice counts twice).
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True if there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Adds the field `name: value` after all others.
    ///
    /// `name` must be a `token` (RFC 9110 §5.1); a name that is not is
    /// dropped (and trips a `debug_assert!`): use [`Headers::try_append`] to
    /// see the error. In `value`, every CTL other than HTAB (CR, LF and NUL
    /// included) is replaced with SP, as RFC 9110 §5.5 lets a recipient do,
    /// so no value can inject a line.
    pub fn append(&mut self, name: &str, value: &[u8]) {
        let added = self.try_append(name, value);
        debug_assert!(added.is_ok(), "invalid field name {name:?}");
    }

    /// Like [`Headers::append`], but a `name` that is not a `token`
    /// (RFC 9110 §5.1) returns `Err(ParseError::Malformed)` and adds nothing.
    pub fn try_append(&mut self, name: &str, value: &[u8]) -> Result<(), ParseError> {
        if !is_token(name.as_bytes()) {
            return Err(ParseError::Malformed("invalid field name"));
        }
        let name_start = self.names.len();
        self.names.push_str(name);
        let value_start = self.values.len();
        push_sanitized(&mut self.values, value);
        self.fields.push(Field {
            name_start,
            name_end: self.names.len(),
            value_start,
            value_end: self.values.len(),
        });
        Ok(())
    }

    /// Adds a field that httparse already validated (a token name, a value
    /// of HTAB / SP / VCHAR / obs-text).
    /// Replaces every field with those httparse found, in their order,
    /// keeping this storage's capacity.
    fn refill(&mut self, parsed: &[httparse::Header<'_>]) {
        self.clear();
        for h in parsed {
            self.push_parsed(h.name, h.value);
        }
    }

    fn push_parsed(&mut self, name: &str, value: &[u8]) {
        let name_start = self.names.len();
        self.names.push_str(name);
        let value_start = self.values.len();
        self.values.extend_from_slice(value);
        self.fields.push(Field {
            name_start,
            name_end: self.names.len(),
            value_start,
            value_end: self.values.len(),
        });
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The values of every field named `name` (ASCII case-insensitive), in
    /// arrival order: together they form one list (RFC 9110 §5.3).
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// True if a field named `name` (ASCII case-insensitive) is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Removes every field named `name` (ASCII case-insensitive); returns how
    /// many were removed. The other fields keep their order.
    pub fn remove_all(&mut self, name: &str) -> usize {
        let before = self.fields.len();
        let names = &self.names;
        self.fields
            .retain(|f| !field_name(names, f).eq_ignore_ascii_case(name));
        before.saturating_sub(self.fields.len())
    }

    /// Keeps only the fields for which `f(name, value)` is true; the kept
    /// fields keep their order.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &[u8]) -> bool) {
        let names = &self.names;
        let values = &self.values;
        self.fields
            .retain(|field| f(field_name(names, field), field_value(values, field)));
    }

    /// `(name, value)` of every field in arrival order, names as they arrived.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields
            .iter()
            .map(|f| (field_name(&self.names, f), field_value(&self.values, f)))
    }

    /// Appends `suffix` to the value of the *last* field named `name` (ASCII
    /// case-insensitive); the field keeps its position. Returns false (and
    /// changes nothing) if there is no such field. `suffix` is cleaned like a
    /// value given to [`Headers::append`] (RFC 9110 §5.5).
    pub fn append_to_last(&mut self, name: &str, suffix: &[u8]) -> bool {
        let names = &self.names;
        let Some(field) = self
            .fields
            .iter_mut()
            .rev()
            .find(|f| field_name(names, f).eq_ignore_ascii_case(name))
        else {
            return false;
        };
        let (start, end) = (field.value_start, field.value_end);
        if start > end || end > self.values.len() {
            debug_assert!(false, "field value out of its arena");
            return false;
        }
        if end != self.values.len() {
            // Not the last value in the arena: move it to the end so it can
            // grow; the old bytes stay unreachable until `clear`.
            let new_start = self.values.len();
            self.values.extend_from_within(start..end);
            field.value_start = new_start;
        }
        push_sanitized(&mut self.values, suffix);
        field.value_end = self.values.len();
        true
    }

    /// Writes every field as `Name: value\r\n`, in arrival order, names as
    /// they arrived (RFC 9112 §5).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for (name, value) in self.iter() {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Headers {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (n, String::from_utf8_lossy(v).into_owned())),
            )
            .finish()
    }
}

/// The name of `f`; "" if the offsets are broken (they never are).
fn field_name<'a>(names: &'a str, f: &Field) -> &'a str {
    names.get(f.name_start..f.name_end).unwrap_or_default()
}

/// The value of `f`; empty if the offsets are broken (they never are).
fn field_value<'a>(values: &'a [u8], f: &Field) -> &'a [u8] {
    values.get(f.value_start..f.value_end).unwrap_or_default()
}

/// `tchar` (RFC 9110 §5.6.2).
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `token = 1*tchar` (RFC 9110 §5.6.2).
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// `bytes` without leading and trailing OWS (SP / HTAB, RFC 9110 §5.6.3).
pub(crate) fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i.saturating_add(1));
    bytes.get(start..end).unwrap_or_default()
}

/// The non-empty elements of a comma-separated list field value, without
/// OWS (RFC 9110 §5.6.1: a recipient ignores empty elements). Quoted strings
/// are not special: no list this codec reads needs commas inside quotes.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Appends `bytes` with every CTL except HTAB replaced by SP
/// (RFC 9110 §5.5: CR, LF and NUL MUST be rejected or replaced with SP).
fn push_sanitized(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend(bytes.iter().map(|&b| {
        if (b < 0x20 && b != b'\t') || b == 0x7f {
            b' '
        } else {
            b
        }
    }));
}

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
    stack: &'s mut [httparse::Header<'b>],
    heap: &'s mut Vec<httparse::Header<'b>>,
    n: usize,
) -> &'s mut [httparse::Header<'b>] {
    if n <= stack.len() {
        stack.get_mut(..n).unwrap_or_default()
    } else {
        heap.resize(n, httparse::EMPTY_HEADER);
        heap.as_mut_slice()
    }
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

impl RequestHead {
    /// Parses a complete request head at the start of `buf` with httparse,
    /// with `max_fields` field slots.
    ///
    /// `Ok(None)`: the head is not complete in `buf` yet. `Ok(Some((head,
    /// len)))`: `len` bytes of `buf` are the head, including the blank line
    /// that ends it; body bytes may follow. Leading empty lines before the
    /// request-line are skipped (RFC 9112 §2.2) and count in `len`.
    ///
    /// Errors: `TooManyFields` (more than `max_fields` fields); `Malformed`
    /// for any syntax error, including obs-fold (RFC 9112 §5.2) and
    /// whitespace between a field name and its colon (RFC 9112 §5.1).
    ///
    /// Each call parses from byte 0: call it once [`HeadScanner`] has found
    /// the end, not on every read.
    pub fn parse(
        buf: &[u8],
        max_fields: usize,
    ) -> Result<Option<(RequestHead, usize)>, ParseError> {
        let mut head = RequestHead::default();
        Ok(head.parse_into(buf, max_fields)?.map(|len| (head, len)))
    }

    /// [`RequestHead::parse`] into this head, reusing its storage (no
    /// allocation once it has held a head as large): `Ok(Some(len))` when a
    /// whole head was parsed. After `Ok(None)` or an error the head's
    /// contents are unspecified.
    pub fn parse_into(
        &mut self,
        buf: &[u8],
        max_fields: usize,
    ) -> Result<Option<usize>, ParseError> {
        let mut stack: [httparse::Header<'_>; STACK_SLOTS] = [httparse::EMPTY_HEADER; STACK_SLOTS];
        let mut heap = Vec::new();
        let slots = field_slots(&mut stack, &mut heap, max_fields);
        let mut req = httparse::Request::new(slots);
        let len = match req.parse(buf).map_err(from_httparse)? {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial => return Ok(None),
        };
        let version = version_ok(req.version)?;
        let method = req.method.ok_or(ParseError::Malformed("missing method"))?;
        let target = req
            .path
            .ok_or(ParseError::Malformed("missing request-target"))?;
        self.method.clear();
        self.method.push_str(method);
        self.target.clear();
        self.target.push_str(target);
        self.version = version;
        self.headers.refill(req.headers);
        Ok(Some(len))
    }

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

impl ResponseHead {
    /// Parses a complete response head at the start of `buf`; same contract
    /// as [`RequestHead::parse`]. A status code outside 100..=599 is
    /// `Malformed` (RFC 9110 §15: such values are invalid).
    pub fn parse(
        buf: &[u8],
        max_fields: usize,
    ) -> Result<Option<(ResponseHead, usize)>, ParseError> {
        let mut head = ResponseHead::default();
        Ok(head.parse_into(buf, max_fields)?.map(|len| (head, len)))
    }

    /// [`ResponseHead::parse`] into this head, reusing its storage:
    /// `Ok(Some(len))` when a whole head was parsed. After `Ok(None)` or an
    /// error the head's contents are unspecified.
    pub fn parse_into(
        &mut self,
        buf: &[u8],
        max_fields: usize,
    ) -> Result<Option<usize>, ParseError> {
        let mut stack: [httparse::Header<'_>; STACK_SLOTS] = [httparse::EMPTY_HEADER; STACK_SLOTS];
        let mut heap = Vec::new();
        let slots = field_slots(&mut stack, &mut heap, max_fields);
        let mut resp = httparse::Response::new(slots);
        let len = match resp.parse(buf).map_err(from_httparse)? {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial => return Ok(None),
        };
        let version = version_ok(resp.version)?;
        let status = match resp.code {
            Some(code @ 100..=599) => code,
            _ => return Err(ParseError::Malformed("status code outside 100-599")),
        };
        self.version = version;
        self.status = status;
        self.reason.clear();
        self.reason.push_str(resp.reason.unwrap_or_default());
        self.headers.refill(resp.headers);
        Ok(Some(len))
    }

    /// A head the proxy writes itself: HTTP/1.1, `status`, its standard
    /// reason phrase ([`reason_phrase`], "" if unknown), no fields.
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
        511 => "Network Authentication Required",
        _ => "",
    }
}

/// Where [`HeadScanner`] is in the head's line structure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ScanState {
    /// Before the start line: CR and LF here are empty lines to skip
    /// (RFC 9112 §2.2).
    #[default]
    Leading,
    /// Inside a non-empty line.
    InLine,
    /// Just after the LF that ended a non-empty line.
    LineStart,
    /// A CR at the start of a line: an LF now ends the head.
    LineStartCr,
    /// The head ended; the value is its length in bytes.
    Done(usize),
}

/// Incremental end-of-head finder.
///
/// `buf` is the whole accumulated input: it grows between calls, and the
/// caller calls [`HeadScanner::reset`] after consuming a head. Each call
/// resumes where the previous one stopped and never rescans from 0, so a
/// slow-loris client sending one byte per read costs O(n) in total.
///
/// Skips leading empty lines (CRLF or LF) before the start line
/// (RFC 9112 §2.2). A head ends at the first empty line after the start
/// line; lines may end in CRLF or in a bare LF (RFC 9112 §2.2 lets a
/// recipient accept LF), in any mix, exactly where httparse ends it: when
/// this finds a length, [`RequestHead::parse`] on the same bytes returns
/// that length or an error.
#[derive(Debug, Clone, Default)]
pub struct HeadScanner {
    /// Bytes of `buf` already examined.
    pos: usize,
    state: ScanState,
}

impl HeadScanner {
    /// A scanner at the start of a head.
    pub fn new() -> Self {
        HeadScanner::default()
    }

    /// Forgets the previous head: the next call scans a new buffer from 0.
    pub fn reset(&mut self) {
        *self = HeadScanner::default();
    }

    /// Bytes of the input examined so far (the position the next call
    /// resumes at).
    #[cfg(test)]
    pub fn scanned(&self) -> usize {
        self.pos
    }

    /// `Some(len)`: the head is the first `len` bytes of `buf`, leading
    /// empty lines and the final blank line included. `None`: not complete
    /// yet. Once found, later calls return the same `len`.
    ///
    /// `buf` must start with the bytes of the previous calls; if it is
    /// shorter than what was already scanned, the scan restarts from 0.
    pub fn find_end(&mut self, buf: &[u8]) -> Option<usize> {
        if self.pos > buf.len() {
            debug_assert!(false, "HeadScanner: input shrank without reset()");
            self.reset();
        }
        if let ScanState::Done(len) = self.state {
            return Some(len);
        }
        let mut pos = self.pos;
        while let Some(&b) = buf.get(pos) {
            if self.state == ScanState::InLine {
                // Fast path: jump to the end of the line.
                match buf
                    .get(pos..)
                    .and_then(|rest| rest.iter().position(|&c| c == b'\n'))
                {
                    Some(off) => {
                        pos = pos.saturating_add(off).saturating_add(1);
                        self.state = ScanState::LineStart;
                        continue;
                    }
                    None => {
                        pos = buf.len();
                        break;
                    }
                }
            }
            pos = pos.saturating_add(1);
            self.state = match (self.state, b) {
                (ScanState::Leading, b'\r' | b'\n') => ScanState::Leading,
                (ScanState::LineStart, b'\n') | (ScanState::LineStartCr, b'\n') => {
                    ScanState::Done(pos)
                }
                (ScanState::LineStart, b'\r') => ScanState::LineStartCr,
                (ScanState::Done(len), _) => ScanState::Done(len),
                _ => ScanState::InLine,
            };
            if let ScanState::Done(len) = self.state {
                self.pos = pos;
                return Some(len);
            }
        }
        self.pos = pos;
        None
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

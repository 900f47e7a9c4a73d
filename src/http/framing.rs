//! Body framing: how long a message body is (RFC 9112 §6), one function per
//! role written as the numbered steps of RFC 9112 §6.3, and [`BodyDecoder`],
//! which finds where a body of that kind ends in a stream of bytes.
//!
//! Why it exists: a proxy and its upstream must agree on where each body
//! ends, or bytes of one message are read as another (request smuggling,
//! response splitting). Requests are judged strictly (anything ambiguous is
//! an error: 400, or 501 for an unknown coding, ARCHITECTURE.md §5); responses follow
//! the recipient rules of §6.3, and an ambiguous one is an error the proxy
//! answers with 502.
//!
//! What it must not know: sockets, time, hop-by-hop policy, what the body
//! bytes mean (it changes and copies none of them).
//!
//! Invariants: `BodyKind::Empty` means "zero body bytes" whatever the reason
//! (a request without framing fields, `Content-Length: 0`, a response to
//! HEAD, 1xx/204/304): `Length(0)` is never returned by the framing
//! functions. A decoder never counts a byte past the body's end.

use super::chunked::ChunkedScanner;
use super::error::ParseError;
use super::head::{RequestHead, ResponseHead};
use super::headers::Headers;
use super::known::Known;
use super::syntax::{is_token, list_elements, trim_ows};

/// How a message body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body bytes at all.
    Empty,
    /// Exactly this many bytes (`Content-Length`, RFC 9112 §6.2), > 0 when
    /// returned by the framing functions.
    Length(u64),
    /// The chunked transfer coding (RFC 9112 §7.1).
    Chunked,
    /// Everything until the sender closes the connection (responses only,
    /// RFC 9112 §6.3 steps 2, 4, 8); also the tunnel after a 2xx to CONNECT.
    UntilClose,
}

/// Transfer codings the proxy knows (RFC 9112 §7, IANA HTTP Transfer Coding
/// registry; `x-gzip` and `x-compress` are the §7.2 aliases). It never
/// decodes them: it only needs to tell them from unknown ones (501).
const KNOWN_CODINGS: [&str; 7] = [
    "chunked",
    "gzip",
    "deflate",
    "compress",
    "identity",
    "x-gzip",
    "x-compress",
];

/// The framing of a request (RFC 9112 §6.3; steps 1, 2 and 8 concern
/// responses only).
///
/// - Step 3: `Transfer-Encoding` and `Content-Length` both present →
///   `Err(Framing)` (a request smuggling attempt, ARCHITECTURE.md §5: 400).
/// - Step 4: `Transfer-Encoding` present → [`BodyKind::Chunked`] if its final
///   coding is `chunked`. Errors: an empty list or a coding that is not a
///   token → `Framing`; a coding other than chunked, gzip, deflate,
///   compress, identity, x-gzip, x-compress anywhere → `UnknownCoding`
///   (501, RFC 9112 §6.1; checked before the next rules); `chunked` twice,
///   not last, or with parameters → `Framing`; a known final coding that is
///   not chunked → `Framing` (400, RFC 9112 §6.3 step 4).
/// - Steps 5-6: `Content-Length` present → `Length(n)`, or `Empty` for 0.
///   Several values (fields or a comma-separated list) must be the same
///   number (RFC 9110 §8.6); any that is not 1*DIGIT, overflows u64 or
///   differs → `Framing`.
/// - Step 7: neither → `Empty`.
///
/// Does not know the version: see [`RequestHead::body_kind`] for the
/// HTTP/1.0 rule.
pub fn request_framing(headers: &Headers) -> Result<BodyKind, ParseError> {
    // Step 3: both framing fields on a request is an error, not "TE wins".
    let (has_te, has_cl) = framing_fields(headers)?;
    // Step 4: the final coding must be chunked.
    if has_te {
        return request_codings(headers);
    }
    // Steps 5 and 6: a valid Content-Length is the length. A request
    // carrying several values, even equal ones, is refused (as nginx does)
    // rather than forwarded with a list the upstream may read differently.
    if has_cl {
        let values: usize = headers
            .get_all_known(Known::ContentLength)
            .map(|v| v.split(|&b| b == b',').count())
            .sum();
        if values > 1 {
            return Err(ParseError::Framing("several Content-Length values"));
        }
        return content_length(headers).map(length_kind);
    }
    // Step 7: no framing field, no body.
    Ok(BodyKind::Empty)
}

/// The framing of a response to a request with method `request_method`
/// (exact, case-sensitive) and status `status` (RFC 9112 §6.3).
///
/// 1. A response to HEAD, or status 1xx, 204 or 304 → `Empty`, whatever its
///    fields say (a 101 switches protocols: the caller handles the tunnel),
///    except step 3's error, which comes first: a head with both fields is
///    refused whatever the method and status (a HEAD answer with both was
///    forwarded with both, RFC 9112 §6.3 step 3 forbids that, and its
///    connection went back to the pool).
/// 2. A 2xx response to CONNECT → `UntilClose` (a tunnel).
/// 3. `Transfer-Encoding` and `Content-Length` both → `Err(Framing)` (like
///    nginx from 1.23 on, for any method; the proxy answers 502 and closes
///    the upstream connection).
/// 4. `Transfer-Encoding` whose final coding is `chunked` (no parameters) →
///    `Chunked`; `chunked` more than once (in one field or across fields) →
///    `Err(Framing)` (502, RFC 9112 §6.1; nginx and HAProxy refuse it too);
///    any other list → `UntilClose`.
/// 5. `Content-Length` that is not 1*DIGIT, overflows u64, or has differing
///    values → `Err(Framing)` (502 and close, RFC 9112 §6.3 step 5).
/// 6. `Content-Length` → `Length(n)`, or `Empty` for 0.
/// 8. Neither → `UntilClose`.
pub fn response_framing(
    request_method: &str,
    status: u16,
    headers: &Headers,
) -> Result<BodyKind, ParseError> {
    // Step 3 first: both framing fields: refuse rather than guess, also
    // where no body follows.
    let (has_te, has_cl) = framing_fields(headers)?;
    // Step 1: no body, whatever the head says.
    if request_method == "HEAD" || (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(BodyKind::Empty);
    }
    // Step 2: a successful CONNECT turns the connection into a tunnel.
    if request_method == "CONNECT" && (200..300).contains(&status) {
        return Ok(BodyKind::UntilClose);
    }
    // Step 4: chunked only if it is the final coding; else until close.
    // Chunked applied twice is refused (RFC 9112 §6.1: a sender MUST NOT
    // apply it more than once): the head would go on as it came, and a
    // client or a downstream proxy may frame `chunked, chunked` otherwise.
    if has_te {
        let codings = || {
            headers
                .get_all_known(Known::TransferEncoding)
                .flat_map(list_elements)
        };
        // By coding name: `chunked;x=1, chunked` is chunked twice as well
        // (a parameter does not make it another coding; curl refuses it).
        if codings()
            .filter(|coding| coding_name(coding).eq_ignore_ascii_case(b"chunked"))
            .nth(1)
            .is_some()
        {
            return Err(ParseError::Framing("chunked applied more than once"));
        }
        return Ok(match codings().last() {
            Some(coding) if coding.eq_ignore_ascii_case(b"chunked") => BodyKind::Chunked,
            _ => BodyKind::UntilClose,
        });
    }
    // Steps 5 and 6: a valid Content-Length is the length.
    if has_cl {
        return content_length(headers).map(length_kind);
    }
    // Step 8: read until the upstream closes.
    Ok(BodyKind::UntilClose)
}

/// Which framing fields a message carries: `(Transfer-Encoding,
/// Content-Length)`. Both at once is an error in either role (RFC 9112
/// §6.3 step 3: a proxy must not guess; a request is a smuggling attempt).
pub(crate) fn framing_fields(headers: &Headers) -> Result<(bool, bool), ParseError> {
    let has_te = headers.has_known(Known::TransferEncoding);
    let has_cl = headers.has_known(Known::ContentLength);
    if has_te && has_cl {
        return Err(ParseError::Framing(
            "both Transfer-Encoding and Content-Length",
        ));
    }
    Ok((has_te, has_cl))
}

impl RequestHead {
    /// `request_framing` plus the version rule of RFC 9112 §6.1: an
    /// HTTP/1.0 request with `Transfer-Encoding` has faulty framing →
    /// `Err(Framing)` (nginx answers 400 too).
    pub fn body_kind(&self) -> Result<BodyKind, ParseError> {
        if self.version == 0 && self.headers.has_known(Known::TransferEncoding) {
            return Err(ParseError::Framing(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        request_framing(&self.headers)
    }
}

impl ResponseHead {
    /// `response_framing` for this head, plus the version rule of
    /// RFC 9112 §6.1: an HTTP/1.0 response with `Transfer-Encoding` that may
    /// have a body has faulty framing → `Err(Framing)` (502).
    pub fn body_kind(&self, request_method: &str) -> Result<BodyKind, ParseError> {
        let kind = response_framing(request_method, self.status, &self.headers)?;
        if self.version == 0
            && kind != BodyKind::Empty
            && self.headers.has_known(Known::TransferEncoding)
        {
            return Err(ParseError::Framing(
                "Transfer-Encoding in an HTTP/1.0 response",
            ));
        }
        Ok(kind)
    }
}

/// RFC 9112 §6.3 step 4 for a request: see [`request_framing`].
fn request_codings(headers: &Headers) -> Result<BodyKind, ParseError> {
    let codings = || {
        headers
            .get_all_known(Known::TransferEncoding)
            .flat_map(list_elements)
    };
    // Every element must be a known coding before its position matters.
    let mut count: usize = 0;
    for coding in codings() {
        count = count.saturating_add(1);
        let name = coding_name(coding);
        if !is_token(name) {
            return Err(ParseError::Framing("invalid transfer coding"));
        }
        if !KNOWN_CODINGS
            .iter()
            .any(|k| name.eq_ignore_ascii_case(k.as_bytes()))
        {
            return Err(ParseError::UnknownCoding);
        }
    }
    if count == 0 {
        return Err(ParseError::Framing("empty Transfer-Encoding"));
    }
    let mut chunked_seen = false;
    for coding in codings() {
        if chunked_seen {
            return Err(ParseError::Framing(
                "chunked is not the final transfer coding",
            ));
        }
        if coding_name(coding).eq_ignore_ascii_case(b"chunked") {
            if coding != coding_name(coding) {
                return Err(ParseError::Framing("parameters on the chunked coding"));
            }
            chunked_seen = true;
        }
    }
    if chunked_seen {
        Ok(BodyKind::Chunked)
    } else {
        Err(ParseError::Framing("final transfer coding is not chunked"))
    }
}

/// The coding name of a `transfer-coding` list element: what comes before
/// its first `;`, without OWS (RFC 9112 §7).
fn coding_name(element: &[u8]) -> &[u8] {
    let name = element.split(|&b| b == b';').next().unwrap_or_default();
    trim_ows(name)
}

/// The one length all `Content-Length` values agree on (RFC 9110 §8.6:
/// `1*DIGIT`; a list of identical values is accepted), or `Err(Framing)`.
/// Only called when a Content-Length field is present.
fn content_length(headers: &Headers) -> Result<u64, ParseError> {
    let mut length: Option<u64> = None;
    for value in headers.get_all_known(Known::ContentLength) {
        // Empty elements are not skipped here: "5," is not a valid length.
        for element in value.split(|&b| b == b',') {
            let n = parse_digits(trim_ows(element))?;
            match length {
                Some(prev) if prev != n => {
                    return Err(ParseError::Framing("differing Content-Length values"));
                }
                _ => length = Some(n),
            }
        }
    }
    length.ok_or(ParseError::Framing("empty Content-Length"))
}

/// Largest `Content-Length` accepted: 2^63 - 1, as nginx's `off_t`.
pub const MAX_CONTENT_LENGTH: u64 = i64::MAX as u64;

/// `1*DIGIT` as a u64 with checked arithmetic (RFC 9110 §8.6), at most
/// [`MAX_CONTENT_LENGTH`].
fn parse_digits(s: &[u8]) -> Result<u64, ParseError> {
    let not_digits = ParseError::Framing("Content-Length is not 1*DIGIT");
    if s.is_empty() {
        return Err(not_digits);
    }
    let n = s.iter().try_fold(0u64, |n, &b| {
        // Only ASCII digits: `to_digit(10)` also refuses signs and spaces.
        let d = char::from(b).to_digit(10).ok_or(not_digits.clone())?;
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or(ParseError::Framing("Content-Length overflows u64"))
    })?;
    // What the relay and the access log count in an i64 (nginx's off_t).
    if n > MAX_CONTENT_LENGTH {
        return Err(ParseError::Framing("Content-Length over 2^63 - 1"));
    }
    Ok(n)
}

/// `Length(n)`, with 0 as `Empty` (see the module invariants).
fn length_kind(n: u64) -> BodyKind {
    if n == 0 {
        BodyKind::Empty
    } else {
        BodyKind::Length(n)
    }
}

/// A decoder's progress through one body.
#[derive(Debug, Clone)]
enum Decoding {
    /// Zero bytes: done from the start.
    Empty,
    /// `remaining` bytes still to come; done at 0.
    Length { remaining: u64 },
    /// The chunked scanner decides.
    Chunked(ChunkedScanner),
    /// Everything until EOF; `eof` once the stream ended.
    UntilClose { eof: bool },
}

/// Finds where a body ends in a stream of bytes, without copying or
/// changing them: the caller forwards exactly the bytes `scan` counts.
/// It also counts the body's data bytes ([`BodyDecoder::data_bytes`]):
/// for a chunked body the chunk data alone, without sizes, extensions and
/// trailer section (what the access log reports).
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    decoding: Decoding,
    data: u64,
}

impl BodyDecoder {
    /// A decoder at the start of a body of `kind`. `Empty` and `Length(0)`
    /// are done at once.
    pub fn new(kind: BodyKind) -> Self {
        let decoding = match kind {
            BodyKind::Empty => Decoding::Empty,
            BodyKind::Length(n) => Decoding::Length { remaining: n },
            BodyKind::Chunked => Decoding::Chunked(ChunkedScanner::new()),
            BodyKind::UntilClose => Decoding::UntilClose { eof: false },
        };
        BodyDecoder { decoding, data: 0 }
    }

    /// Data bytes scanned so far: every body byte, except for a chunked
    /// body, where only chunk data counts.
    pub fn data_bytes(&self) -> u64 {
        self.data
    }

    /// Feeds the next bytes of the stream. Returns how many leading bytes of
    /// `bytes` belong to the body: all of them unless the body ends inside
    /// `bytes`. After the body's last byte, [`BodyDecoder::is_done`] is true
    /// and further calls return `Ok(0)`.
    ///
    /// Errors: `Chunk` from the chunked scanner (RFC 9112 §7.1).
    pub fn scan(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        self.scan_data(bytes, |_| {})
    }

    /// Like [`BodyDecoder::scan`], and also pushes onto `redundant` (cleared
    /// first) the ranges of `bytes` the forwarded body leaves out: for a
    /// chunked body, the leading zeros of a chunk size beyond its first
    /// digit ([`ChunkedScanner::scan_forward`]); none for the other kinds.
    /// The bytes counted by the return value include them.
    pub fn scan_forward(
        &mut self,
        bytes: &[u8],
        redundant: &mut Vec<std::ops::Range<usize>>,
    ) -> Result<usize, ParseError> {
        redundant.clear();
        let Decoding::Chunked(scanner) = &mut self.decoding else {
            return self.scan(bytes);
        };
        let count = &mut self.data;
        scanner.scan_forward(bytes, |r| *count += r.len() as u64, |r| redundant.push(r))
    }

    /// [`BodyDecoder::scan`] without counting data bytes.
    fn scan_framing(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        match &mut self.decoding {
            Decoding::Empty | Decoding::UntilClose { eof: true } => Ok(0),
            Decoding::Length { remaining } => {
                let take = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let taken = u64::try_from(take).unwrap_or(u64::MAX);
                *remaining = remaining.saturating_sub(taken);
                Ok(take)
            }
            Decoding::Chunked(scanner) => scanner.scan(bytes),
            Decoding::UntilClose { eof: false } => Ok(bytes.len()),
        }
    }

    /// Like [`BodyDecoder::scan`], and also calls `data` with the ranges
    /// of `bytes` that are body content: for a chunked body, the chunk data
    /// without sizes, extensions and trailer section; for the others, all
    /// the body bytes.
    pub fn scan_data(
        &mut self,
        bytes: &[u8],
        mut data: impl FnMut(std::ops::Range<usize>),
    ) -> Result<usize, ParseError> {
        if let Decoding::Chunked(scanner) = &mut self.decoding {
            let count = &mut self.data;
            return scanner.scan_data(bytes, |r| {
                *count += r.len() as u64;
                data(r)
            });
        }
        let n = self.scan_framing(bytes)?;
        if n > 0 {
            self.data += n as u64;
            data(0..n);
        }
        Ok(n)
    }

    /// Like [`BodyDecoder::scan_data`], and also calls `data` with the
    /// trailer section's field lines of a chunked body (second argument
    /// `true`; `ChunkedScanner::scan_pieces`).
    pub fn scan_pieces(
        &mut self,
        bytes: &[u8],
        mut piece: impl FnMut(std::ops::Range<usize>, bool),
    ) -> Result<usize, ParseError> {
        if let Decoding::Chunked(scanner) = &mut self.decoding {
            let count = &mut self.data;
            return scanner.scan_pieces(bytes, |r, trailer| {
                if !trailer {
                    *count += r.len() as u64;
                }
                piece(r, trailer)
            });
        }
        self.scan_data(bytes, |r| piece(r, false))
    }

    /// True once the body's last byte was scanned (at once for `Empty` and
    /// `Length(0)`; after EOF for `UntilClose`).
    pub fn is_done(&self) -> bool {
        match &self.decoding {
            Decoding::Empty => true,
            Decoding::Length { remaining } => *remaining == 0,
            Decoding::Chunked(scanner) => scanner.is_done(),
            Decoding::UntilClose { eof } => *eof,
        }
    }

    /// For a chunked body, the forwarded bytes at the end of the stream
    /// so far that may be the start of its last chunk
    /// ([`ChunkedScanner::last_chunk_bytes`]); 0 for the other kinds.
    pub fn last_chunk_bytes(&self) -> usize {
        match &self.decoding {
            Decoding::Chunked(scanner) => scanner.last_chunk_bytes(),
            _ => 0,
        }
    }

    /// For a chunked body, the data bytes of the current chunk announced
    /// but not yet scanned ([`ChunkedScanner::chunk_left`]); 0 for the
    /// other kinds.
    pub fn chunk_left(&self) -> u64 {
        match &self.decoding {
            Decoding::Chunked(scanner) => scanner.chunk_left(),
            _ => 0,
        }
    }

    /// For a `Length` body: bytes still to come, so the caller can clamp
    /// reads and never read past the body (0 once done). `None` for the
    /// other kinds.
    pub fn remaining_hint(&self) -> Option<u64> {
        match &self.decoding {
            Decoding::Length { remaining } => Some(*remaining),
            _ => None,
        }
    }

    /// True for a body delimited by the connection's close (RFC 9112 §6.3
    /// step 8): such a connection can never be reused.
    #[cfg(test)]
    pub fn is_until_close(&self) -> bool {
        matches!(self.decoding, Decoding::UntilClose { .. })
    }

    /// The stream hit EOF. `UntilClose`: the body is complete, `Ok`. Already
    /// done: `Ok`. Otherwise `Err(Truncated)` (RFC 9112 §8: an incomplete
    /// message).
    pub fn finish_on_eof(&mut self) -> Result<(), ParseError> {
        if let Decoding::UntilClose { eof } = &mut self.decoding {
            *eof = true;
            return Ok(());
        }
        if self.is_done() {
            Ok(())
        } else {
            Err(ParseError::Truncated)
        }
    }
}

//! `ParseError`: everything the sans-IO codec can reject, as one value.
//!
//! Why it exists: the codec's callers (the connection state machines) turn a
//! rejected request into a status code and a rejected response into a 502
//! (ARCHITECTURE.md §8). This file only names the failure and maps a request failure
//! to its status; it must not know sockets, time or who is at fault.
//!
//! Invariant: every reason is a `&'static str` (no allocation on the error
//! path, values compare with `==` in tests).

use std::fmt;

/// Why the codec rejected a head or a body.
///
/// Request failures answer with [`ParseError::request_status`]; any failure
/// in a response from an upstream means 502 (RFC 9112 §6.3 step 5, ARCHITECTURE.md §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Syntax error in a head: an httparse error, an invalid start line, an
    /// invalid field name or value, an unsupported version (RFC 9112 §2-§5).
    Malformed(&'static str),
    /// The head is longer than the caller's limit in bytes (RFC 6585 §5: 431).
    HeadTooLarge,
    /// The request line alone is longer than the head limit (RFC 9112 §3:
    /// 414 URI Too Long, as nginx answers).
    RequestLineTooLong,
    /// More fields than the caller's limit (httparse `TooManyHeaders`).
    TooManyFields,
    /// Invalid message framing (RFC 9112 §6.1, §6.3): Content-Length and
    /// Transfer-Encoding together on a request, differing or non-1*DIGIT
    /// Content-Length values, a request whose final transfer coding is not
    /// chunked, chunked applied twice or not last.
    Framing(&'static str),
    /// A request's Transfer-Encoding names a coding the proxy does not know
    /// (RFC 9112 §6.1: "SHOULD respond with 501 (Not Implemented)").
    UnknownCoding,
    /// Chunked body syntax error (RFC 9112 §7.1): bad hex, size overflow,
    /// missing CRLF, bare LF, line or trailer section over its limit.
    Chunk(&'static str),
    /// The stream ended (EOF) before the body did (RFC 9112 §8).
    Truncated,
    /// The client opened with the HTTP/2 connection preface (`PRI *
    /// HTTP/2.0`, RFC 9113 §3.4) on this HTTP/1.1 port: 505 (RFC 9110
    /// §15.6.6).
    Http2Preface,
    /// A request line with a well-formed HTTP-version whose major version
    /// is not 1 (`HTTP/2.0`, `HTTP/3.0`; RFC 9112 §2.3): 505 (RFC 9110
    /// §15.6.6), not 400.
    UnsupportedVersion,
    /// A plaintext HTTP request came to a TLS port: 400 with a body that
    /// says so (nginx's 497 page), then a close.
    PlainHttpOnTlsPort,
    /// The bytes before a request from a source listed in
    /// `accept_proxy_protocol` are not a valid PROXY protocol header (or
    /// a longer one than the head buffer holds): 400, close.
    ProxyHeader(&'static str),
    /// A PROXY protocol header came from a source not listed in
    /// `accept_proxy_protocol`: never trusted, 400, close.
    UntrustedProxyHeader,
    /// A request body crossed `max_body_size` (payload bytes, chunk
    /// framing not counted): 413 (RFC 9110 §15.5.14) if no response
    /// started, else both connections close.
    BodyTooLarge,
}

impl ParseError {
    /// The status code the proxy answers a *request* with when this error
    /// came from the request: 400 for `Malformed`, `Framing`, `Chunk`,
    /// `Truncated`; 431 for `HeadTooLarge` and `TooManyFields` (RFC 6585 §5);
    /// 501 for `UnknownCoding` (RFC 9112 §6.1); 505 for `Http2Preface` and
    /// `UnsupportedVersion`.
    pub fn request_status(&self) -> u16 {
        match self {
            ParseError::Malformed(_)
            | ParseError::Framing(_)
            | ParseError::Chunk(_)
            | ParseError::Truncated
            | ParseError::PlainHttpOnTlsPort
            | ParseError::ProxyHeader(_)
            | ParseError::UntrustedProxyHeader => 400,
            ParseError::HeadTooLarge | ParseError::TooManyFields => 431,
            ParseError::RequestLineTooLong => 414,
            ParseError::BodyTooLarge => 413,
            ParseError::UnknownCoding => 501,
            ParseError::Http2Preface | ParseError::UnsupportedVersion => 505,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Malformed(why) => write!(f, "malformed head: {why}"),
            ParseError::HeadTooLarge => f.write_str("head too large"),
            ParseError::RequestLineTooLong => f.write_str("request line too long"),
            ParseError::TooManyFields => f.write_str("too many header fields"),
            ParseError::Framing(why) => write!(f, "invalid message framing: {why}"),
            ParseError::UnknownCoding => f.write_str("unknown transfer coding"),
            ParseError::Chunk(why) => write!(f, "invalid chunked body: {why}"),
            ParseError::Truncated => f.write_str("body truncated by EOF"),
            ParseError::Http2Preface => f.write_str("HTTP/2 preface on the HTTP/1.1 port"),
            ParseError::UnsupportedVersion => f.write_str("HTTP major version not supported"),
            ParseError::PlainHttpOnTlsPort => f.write_str("plain HTTP request on a TLS port"),
            ParseError::ProxyHeader(why) => write!(f, "bad PROXY protocol header: {why}"),
            ParseError::BodyTooLarge => f.write_str("request body over max_body_size"),
            ParseError::UntrustedProxyHeader => {
                f.write_str("PROXY protocol header from a source not in accept_proxy_protocol")
            }
        }
    }
}

impl std::error::Error for ParseError {}

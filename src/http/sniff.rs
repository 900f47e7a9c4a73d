//! Telling, from the first bytes of a client connection's head, that they
//! are not HTTP/1.x at all: a TLS handshake sent to the plain-HTTP port, or
//! the HTTP/2 connection preface (ARCHITECTURE.md §8).
//!
//! Why it exists: such bytes hold no CRLF CRLF, so the head scanner would
//! wait for the head timeout and the client would get silence; nginx
//! answers the mirror case ("plain HTTP request was sent to HTTPS port")
//! at once. Checking the start of the request line as it arrives answers
//! 400 (or 505 for HTTP/2) after the first read.
//!
//! What it must not know: sockets, the clock, the rest of the head's
//! syntax (httparse checks it once the head is complete).

use super::error::ParseError;
use super::syntax::is_tchar;

/// The HTTP/2 connection preface's first line (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// Longest method looked at: past it the head scanner and httparse decide.
const SNIFF_LEN: usize = 32;

/// Checks the start of a request head, complete or not: after the empty
/// lines RFC 9112 §2.2 lets a client send first, the method (`token`,
/// RFC 9110 §9.1) must be followed by SP.
///
/// `Ok(())`: nothing wrong yet (or not enough bytes to tell).
///
/// Errors: `Malformed("TLS handshake on the plain-HTTP port")` for a TLS
/// record header (0x16 0x03), [`ParseError::Http2Preface`] for the HTTP/2
/// preface (or a prefix of it long enough to be sure: `PRI *`), and
/// `Malformed("invalid method")` for any other byte that cannot be in a
/// method.
pub fn check_request_start(buf: &[u8]) -> Result<(), ParseError> {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line = buf.get(start..).unwrap_or_default();
    match line {
        [0x16, 0x03, ..] | [0x16] => {
            return Err(ParseError::Malformed(
                "TLS handshake on the plain-HTTP port",
            ));
        }
        _ => {}
    }
    let n = line.len().min(H2_PREFACE.len());
    if n >= 5 && line.get(..n) == H2_PREFACE.get(..n) {
        return Err(ParseError::Http2Preface);
    }
    for &b in line.iter().take(SNIFF_LEN) {
        if b == b' ' {
            return Ok(());
        }
        if !is_tchar(b) {
            return Err(ParseError::Malformed("invalid method"));
        }
    }
    Ok(())
}

//! One health check in flight moved along (ARCHITECTURE.md §13): the
//! probe's non-blocking connect confirmed, its request written, its
//! answer read (plain, or through `tls.rs`'s session), until the bytes
//! decide what it saw: a status line, and with `expect_body` the body
//! holding the text or its limit reached; or the socket failed. The
//! schedule and the results (`check.rs`) hand it a probe at each event
//! and take the `Seen` it returns.
//!
//! What it must not know: the schedule, health state and its rise/fall,
//! the descriptor budget, exchanges, the pool, client connections.

use std::io::{self, Read, Write};

use log::debug;

use super::tls::Pumped;
use super::{Probe, Seen};
use crate::upstreams::spec::MAX_CHECK_BODY;

/// Most bytes of an answer read to find its status line.
const MAX_STATUS_LINE: usize = 1024;

/// Most bytes of a response head a check reads before its body.
const MAX_CHECK_HEAD: usize = 8 * 1024;

/// Most session steps of one TLS check event (each moves records or
/// plaintext; the answer's limits end it well before).
const MAX_TLS_STEPS: usize = 64;

/// Moves one probe along: connect, write, read. `Some(seen)` once the
/// status line arrived, or with `expect_body` once the body held it, or
/// the answer ended (EOF, or `MAX_CHECK_BODY` bytes of body).
///
/// Errors: the connect failed, or the socket failed before a status line.
pub(super) fn advance(p: &mut Probe) -> io::Result<Option<Seen>> {
    if !p.connected {
        if let Some(e) = p.stream.take_error()? {
            return Err(e);
        }
        match p.stream.peer_addr() {
            Ok(_) => p.connected = true,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    if p.tls.is_some() {
        return advance_tls(p);
    }
    while p.written < p.request.len() {
        match p.stream.write(p.request.get(p.written..).unwrap_or(&[])) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => p.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut buf = [0u8; 2048];
    loop {
        match p.stream.read(&mut buf) {
            Ok(0) => return Ok(Some(judge(p, true))),
            Ok(n) => {
                p.answer.extend_from_slice(buf.get(..n).unwrap_or(&[]));
                if let Some(seen) = decided(p) {
                    return Ok(Some(seen));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if !p.answer.is_empty() => {
                debug!(
                    "health check of {}: {e} after {} bytes",
                    p.addr,
                    p.answer.len()
                );
                return Ok(Some(judge(p, true)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// [`advance`] through the probe's TLS session: the handshake, the
/// request, the answer's plaintext, until the socket blocks or the answer
/// decides.
///
/// Errors: as [`CheckTls::pump`].
fn advance_tls(p: &mut Probe) -> io::Result<Option<Seen>> {
    for _ in 0..MAX_TLS_STEPS {
        let Some(t) = p.tls.as_mut() else {
            return Ok(None);
        };
        match t.pump(&mut p.stream, &p.request, &mut p.written, &mut p.answer)? {
            Pumped::Blocked => return Ok(None),
            Pumped::Progress => {}
            Pumped::Ended => return Ok(Some(judge(p, true))),
            Pumped::Data => {
                if let Some(seen) = decided(p) {
                    return Ok(Some(seen));
                }
            }
        }
    }
    // A server that keeps the session busy past every step: judged on
    // what came.
    Ok(Some(judge(p, false)))
}

/// The result once the bytes so far decide it: a status line without
/// `expect_body`; with it, the body holding the text, or its limit
/// reached. `None`: read on.
fn decided(p: &Probe) -> Option<Seen> {
    let line_done = p.answer.contains(&b'\n') || p.answer.len() >= MAX_STATUS_LINE;
    if !line_done {
        return None;
    }
    let Some(want) = p.expect_body.as_deref() else {
        return Some(judge(p, false));
    };
    let Ok(code) = status_of(&p.answer) else {
        return Some(judge(p, false));
    };
    match body_of(&p.answer) {
        Some(body) if contains(body, want) => Some(Seen::Status(code, Some(true))),
        Some(body) if body.len() >= MAX_CHECK_BODY => Some(Seen::Status(code, Some(false))),
        None if p.answer.len() >= MAX_CHECK_HEAD => Some(Seen::Status(code, Some(false))),
        _ => None,
    }
}

/// The result from the bytes read (`ended`: no more will come).
fn judge(p: &Probe, ended: bool) -> Seen {
    if p.answer.is_empty() && ended {
        return Seen::Failed("closed before a status line".into());
    }
    let Ok(code) = status_of(&p.answer) else {
        return Seen::Failed("not an HTTP response".into());
    };
    let body = p
        .expect_body
        .as_deref()
        .map(|want| body_of(&p.answer).is_some_and(|b| contains(b, want)));
    Seen::Status(code, body)
}

/// The bytes after the response head's blank line, once it came.
fn body_of(answer: &[u8]) -> Option<&[u8]> {
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    answer.get(at + 4..)
}

/// `hay` holds `needle`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The status code of an answer's status line (`HTTP/1.x NNN ...`).
///
/// Errors: `InvalidData` if the bytes do not start with a status line.
pub(crate) fn status_of(answer: &[u8]) -> io::Result<u16> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not an HTTP status line");
    let rest = answer.strip_prefix(b"HTTP/1.").ok_or_else(bad)?;
    let code = rest.get(2..5).ok_or_else(bad)?;
    if rest.get(1) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)
}

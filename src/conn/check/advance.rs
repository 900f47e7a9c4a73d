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
use crate::conn::io::connect_finished;
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
        match connect_finished(p.stream.peer_addr(), || p.stream.local_addr())? {
            Some(_) => p.connected = true,
            None => return Ok(None),
        }
    }
    // The PROXY header goes on the socket first, under TLS if any.
    while !p.preface.is_empty() {
        match p.stream.write(&p.preface) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                p.preface.drain(..n.min(p.preface.len()));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
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
    decide(&p.answer, p.expect_body.as_deref())
}

/// [`decided`] over the answer's bytes and the `expect_body` text.
fn decide(answer: &[u8], expect_body: Option<&[u8]>) -> Option<Seen> {
    // Interim (1xx) heads come before the answer (RFC 9110 §15.2): the
    // check judges the final one.
    let Some(answer) = final_answer(answer) else {
        return (answer.len() >= MAX_CHECK_HEAD).then(|| judge_bytes(answer, expect_body, false));
    };
    let line_done = answer.contains(&b'\n') || answer.len() >= MAX_STATUS_LINE;
    if !line_done {
        return None;
    }
    let Some(want) = expect_body else {
        return Some(judge_bytes(answer, None, false));
    };
    let Ok(code) = status_of(answer) else {
        return Some(judge_bytes(answer, expect_body, false));
    };
    match body_of(answer) {
        Some(b) if contains(&b.data, want) => Some(Seen::Status(code, Some(true))),
        Some(b) if b.whole || b.data.len() >= MAX_CHECK_BODY => {
            Some(Seen::Status(code, Some(false)))
        }
        None if answer.len() >= MAX_CHECK_HEAD => Some(Seen::Status(code, Some(false))),
        _ => None,
    }
}

/// The result from the bytes read (`ended`: no more will come).
fn judge(p: &Probe, ended: bool) -> Seen {
    judge_bytes(&p.answer, p.expect_body.as_deref(), ended)
}

/// [`judge`] over the answer's bytes and the `expect_body` text.
fn judge_bytes(answer: &[u8], expect_body: Option<&[u8]>, ended: bool) -> Seen {
    let whole = answer;
    let answer = final_answer(answer)
        .filter(|a| !a.is_empty())
        .unwrap_or(whole);
    if answer.is_empty() && ended {
        return Seen::Failed("closed before a status line".into());
    }
    let Ok(code) = status_of(answer) else {
        return Seen::Failed("not an HTTP response".into());
    };
    let body = expect_body.map(|want| body_of(answer).is_some_and(|b| contains(&b.data, want)));
    Seen::Status(code, body)
}

/// `answer` past its interim (1xx) heads: the final answer as far as it
/// came. `None` while an interim head is still incomplete, or when the
/// interim heads take more than `MAX_CHECK_HEAD` bytes (then the first
/// one is judged). A 101 is final here: a check asks for no upgrade.
fn final_answer(mut answer: &[u8]) -> Option<&[u8]> {
    let mut skipped = 0;
    while status_of(answer).is_ok_and(|c| (100..200).contains(&c) && c != 101) {
        let end = answer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        skipped += end;
        if skipped > MAX_CHECK_HEAD {
            return None;
        }
        answer = answer.get(end..)?;
    }
    Some(answer)
}

/// A check answer's body as far as it came.
struct BodySoFar {
    /// Its data: a chunked body's chunk data (not its chunk-size lines,
    /// extensions or trailer section), at most the body's length.
    data: Vec<u8>,
    /// Its framing says it ended (a `Content-Length` read, the last
    /// chunk): no need to wait for the close.
    whole: bool,
}

/// The body of `answer` once its head came (RFC 9112 §6.3 framing for a
/// GET: `Content-Length`, chunked, or to the close). A head sluice's codec
/// refuses is read as if its body ran to the close, and bad chunk framing
/// ends the data where it went wrong: the check only looks for a text.
fn body_of(answer: &[u8]) -> Option<BodySoFar> {
    use crate::http::{BodyDecoder, BodyKind, ParseHead, ResponseHead};
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let raw = answer.get(at + 4..).unwrap_or(&[]);
    let mut head = ResponseHead::default();
    let kind = match head.parse_into(answer, 256) {
        Ok(Some(_)) => head.body_kind("GET").unwrap_or(BodyKind::UntilClose),
        _ => BodyKind::UntilClose,
    };
    let mut decoder = BodyDecoder::new(kind);
    let mut data = Vec::new();
    let _ = decoder.scan_pieces(raw, |r, trailer| {
        if !trailer {
            data.extend_from_slice(raw.get(r).unwrap_or(&[]));
        }
    });
    // The text is looked for in the body's first 16 KiB, wherever the
    // reads ended.
    data.truncate(MAX_CHECK_BODY);
    Some(BodySoFar {
        data,
        whole: decoder.is_done(),
    })
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

#[cfg(test)]
mod tests {
    use super::{Seen, decide, judge_bytes};

    const HEAD_CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

    /// What the check decides after each prefix of `answer` (None: reads
    /// on), and at the close.
    fn verdicts(answer: &[u8], want: &[u8]) -> (Option<Seen>, Seen) {
        let early = (1..=answer.len()).find_map(|n| decide(&answer[..n], Some(want)));
        (early, judge_bytes(answer, Some(want), true))
    }

    #[test]
    fn expect_body_is_looked_for_in_the_chunk_data_not_the_framing() {
        let mut split = HEAD_CHUNKED.to_vec();
        split.extend_from_slice(b"3\r\nALI\r\n2\r\nVE\r\n0\r\n\r\n");
        let (early, end) = verdicts(&split, b"ALIVE");
        assert_eq!(early, Some(Seen::Status(200, Some(true))), "across chunks");
        assert_eq!(end, Seen::Status(200, Some(true)));
        // Only in a chunk extension: not in the body.
        let mut ext = HEAD_CHUNKED.to_vec();
        ext.extend_from_slice(b"4;x=ALIVE\r\nDOWN\r\n0\r\n\r\n");
        let (early, end) = verdicts(&ext, b"ALIVE");
        assert_eq!(
            early,
            Some(Seen::Status(200, Some(false))),
            "decided at the last chunk"
        );
        assert_eq!(end, Seen::Status(200, Some(false)));
    }

    #[test]
    fn a_whole_body_decides_without_waiting_for_the_close() {
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nDOWN";
        let (early, _) = verdicts(cl, b"ALIVE");
        assert_eq!(early, Some(Seen::Status(200, Some(false))));
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nALIVE";
        assert_eq!(
            verdicts(cl, b"ALIVE").0,
            Some(Seen::Status(200, Some(true)))
        );
        // Bytes past Content-Length are not body.
        let past = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOKALIVE";
        assert_eq!(verdicts(past, b"ALIVE").1, Seen::Status(200, Some(false)));
        // To the close: only the close ends it.
        let open = b"HTTP/1.1 200 OK\r\n\r\nDOWN";
        let (early, end) = verdicts(open, b"ALIVE");
        assert_eq!(early, None);
        assert_eq!(end, Seen::Status(200, Some(false)));
    }

    #[test]
    fn interim_heads_are_skipped_and_the_final_answer_judged() {
        let answer = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
                       HTTP/1.1 100 Continue\r\n\r\n\
                       HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nALIVE";
        for n in 1..answer.len() {
            // Never the 103 or the 100, at any read boundary.
            if let Some(seen) = decide(&answer[..n], None) {
                assert_eq!(seen, Seen::Status(200, None), "{n}");
            }
            if let Some(seen) = decide(&answer[..n], Some(b"ALIVE")) {
                assert_eq!(seen, Seen::Status(200, Some(true)), "{n}");
            }
        }
        assert_eq!(
            verdicts(answer, b"ALIVE").0,
            Some(Seen::Status(200, Some(true)))
        );
        assert_eq!(judge_bytes(answer, None, true), Seen::Status(200, None));
        // Only an interim head, then the close: that is what was seen.
        let only = b"HTTP/1.1 103 Early Hints\r\n\r\n";
        assert_eq!(judge_bytes(only, None, true), Seen::Status(103, None));
    }

    #[test]
    fn the_text_counts_only_in_the_first_16_kib_of_the_body() {
        use crate::upstreams::spec::MAX_CHECK_BODY;
        for (at, found) in [(MAX_CHECK_BODY - 5, true), (MAX_CHECK_BODY - 4, false)] {
            let mut body = vec![b'.'; MAX_CHECK_BODY + 4096];
            body[at..at + 5].copy_from_slice(b"ALIVE");
            let mut answer =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
            answer.extend_from_slice(&body);
            assert_eq!(
                judge_bytes(&answer, Some(b"ALIVE"), true),
                Seen::Status(200, Some(found)),
                "{at}"
            );
        }
    }

    #[test]
    fn every_split_of_a_chunked_answer_gives_one_verdict() {
        let mut answer = HEAD_CHUNKED.to_vec();
        answer.extend_from_slice(b"2;a=b\r\nAL\r\n3\r\nIVE\r\n0\r\nX-T: 1\r\n\r\n");
        for n in 0..=answer.len() {
            // Whatever prefix was read, the text is found once it came.
            let seen = decide(&answer[..n], Some(b"ALIVE"));
            let body_end = HEAD_CHUNKED.len() + b"2;a=b\r\nAL\r\n3\r\nIVE".len();
            if n >= body_end {
                assert_eq!(seen, Some(Seen::Status(200, Some(true))), "{n}");
            } else {
                assert_eq!(seen, None, "{n}");
            }
        }
    }
}

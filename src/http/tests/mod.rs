//! Unit tests of the codec, with byte strings alone (ARCHITECTURE.md §2), and the
//! split-feeding harness every incremental parser goes through: the same
//! input whole, split in two at every byte, byte by byte, and with trailing
//! bytes after the end; all answers must agree (ARCHITECTURE.md §2).

mod chunked;
mod chunked_data;
mod chunked_rejects;
mod chunked_zeros;
mod decoder;
mod framing;
mod hardening;
mod head;
mod hop;
mod known_fields;
mod path;
mod plan_helpers;
mod request_fields;
mod request_framing;
mod response_connection;
mod response_framing;
mod response_interim;
mod target;

use super::ParseError;

/// What feeding an input to a body scanner came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The body ended after this many bytes of the input.
    Done(usize),
    /// Every byte belonged to the body and it has not ended.
    NeedMore,
    /// The scanner rejected the input.
    Failed(ParseError),
}

/// A body scanner under test: `ChunkedScanner` or `BodyDecoder`.
pub(super) trait Scanner {
    fn scan(&mut self, bytes: &[u8]) -> Result<usize, ParseError>;
    fn is_done(&self) -> bool;
}

impl Scanner for super::chunked::ChunkedScanner {
    fn scan(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        super::chunked::ChunkedScanner::scan(self, bytes)
    }
    fn is_done(&self) -> bool {
        super::chunked::ChunkedScanner::is_done(self)
    }
}

impl Scanner for super::BodyDecoder {
    fn scan(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        super::BodyDecoder::scan(self, bytes)
    }
    fn is_done(&self) -> bool {
        super::BodyDecoder::is_done(self)
    }
}

/// Feeds `pieces` in order to a fresh scanner, checking the `scan`
/// contract on the way: fewer bytes than offered only when the body ended,
/// and `Ok(0)` once done.
#[track_caller]
fn feed<S: Scanner>(mut scanner: S, pieces: &[&[u8]]) -> Outcome {
    let mut total = 0;
    for piece in pieces {
        let was_done = scanner.is_done();
        match scanner.scan(piece) {
            Err(e) => return Outcome::Failed(e),
            Ok(n) => {
                assert!(n <= piece.len(), "scan counted more than it was given");
                if was_done {
                    assert_eq!(n, 0, "scan after the end must return 0");
                }
                total += n;
                if n < piece.len() {
                    assert!(scanner.is_done(), "short count without the end");
                }
            }
        }
    }
    if scanner.is_done() {
        Outcome::Done(total)
    } else {
        Outcome::NeedMore
    }
}

/// Bytes appended after a complete input: they must never be counted.
const TRAILING: &[u8] = b"GET /next HTTP/1.1\r\n\r\n";

/// Runs `input` through scanners from `fresh` whole, split in two at every
/// position, byte by byte, and (if it ends or fails) with [`TRAILING`]
/// appended in each of those ways. Asserts all answers agree and returns it.
#[track_caller]
pub(super) fn agree<S: Scanner>(fresh: impl Fn() -> S, input: &[u8]) -> Outcome {
    let whole = feed(fresh(), &[input]);
    for i in split_points(input.len()) {
        let (a, b) = input.split_at(i);
        assert_eq!(feed(fresh(), &[a, b]), whole, "split at {i} disagrees");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(feed(fresh(), &bytes), whole, "byte by byte disagrees");
    if whole != Outcome::NeedMore {
        let mut longer = input.to_vec();
        longer.extend_from_slice(TRAILING);
        assert_eq!(feed(fresh(), &[&longer]), whole, "trailing bytes, whole");
        for i in split_points(longer.len()) {
            let (a, b) = longer.split_at(i);
            assert_eq!(
                feed(fresh(), &[a, b]),
                whole,
                "trailing bytes, split at {i}"
            );
        }
        let bytes: Vec<&[u8]> = longer.chunks(1).collect();
        assert_eq!(feed(fresh(), &bytes), whole, "trailing bytes, byte by byte");
    }
    whole
}

/// Every position of an input up to 4 KiB; for longer ones (the limit
/// tests) every 257th position plus the first and last 64, so the harness
/// stays linear-ish.
fn split_points(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..=len).collect();
    }
    let mut points: Vec<usize> = (0..=len).step_by(257).collect();
    points.extend(0..64);
    points.extend(len.saturating_sub(64)..=len);
    points
}

//! [`HeadScanner`]: the incremental end-of-head finder (RFC 9112 §2.2).
//!
//! What it must not know: field syntax (httparse parses the head once
//! this found its end), sockets.
//!
//! Invariant: it never looks at a byte twice, so a client sending one byte
//! at a time costs O(n) in total.

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
/// this finds a length, `RequestHead::parse` on the same bytes returns
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
                // Fast path: jump to the end of the line (SIMD search:
                // a byte loop here was ~5 % of a keep-alive request's
                // instructions, issue 11).
                match buf.get(pos..).and_then(|rest| memchr::memchr(b'\n', rest)) {
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

//! [`ChunkedScanner`]: finds where a chunked body ends (RFC 9112 §7.1),
//! changing and copying nothing.
//!
//! Why it exists: the proxy relays chunked bodies byte for byte (ARCHITECTURE.md §5):
//! chunk extensions, the last-chunk and the trailer section go through as
//! they came. It only has to know where the body ends, so that the bytes
//! after it are the next message, and so that a truncated body is seen as
//! one. The one change it asks for: a chunk size's run of leading zeros
//! is forwarded as one zero ([`ChunkedScanner::scan_forward`] names the
//! redundant bytes, the relay leaves them out).
//!
//! Leading zeros (RFC 9112 §7.1: `chunk-size = 1*HEXDIG`, so
//! `000000000000000000000000000000000ea` is 234 bytes) are legal and
//! read by value: they never count toward a digit limit, only toward the
//! line's length ([`MAX_CHUNK_LINE`]). Forwarding them as they came would
//! hand the next hop a size whose digits outnumber any integer's (the
//! Apache truncation HTTPWookiee's test 2030 probes read such a size as 0:
//! the body ended early, and its rest was a second, smuggled request; a
//! parser that caps the digits refuses it). A transfer coding is a
//! property of one hop (RFC 9112 §7: an intermediary may decode and
//! re-encode it), so the proxy may shorten the size line; it drops the
//! zeros that follow the first digit while the value is still zero, and
//! the size goes on as its first digit and its significant digits (`0ea`,
//! a last-chunk `0`): at most 17 digits for any value it accepts. The
//! first zero stays because whether it was leading is known only at the
//! next byte, which may come in a later read, after the zero went on:
//! removing it too would mean holding a byte back across reads in every
//! body path, for one digit every parser reads the same way.
//!
//! What it must not know: sockets, time, what the bytes mean beyond the
//! grammar, where the bytes go.
//!
//! Grammar followed (RFC 9112 §7.1, §7.1.1, §7.1.2; RFC 9110 §5.6):
//!
//! ```text
//! chunked-body   = *chunk last-chunk trailer-section CRLF
//! chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size     = 1*HEXDIG
//! last-chunk     = 1*("0") [ chunk-ext ] CRLF
//! chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-val  = token / quoted-string
//! trailer-section = *( field-line CRLF )
//! ```
//!
//! Strictness, on purpose (request smuggling is a disagreement between two
//! parsers about where a body ends, so this one accepts only what every
//! parser reads the same way):
//! - every line ends in CRLF; a bare LF or a bare CR anywhere is an error
//!   (RFC 9112 §2.2 allows a recipient to accept LF, but it is the classic
//!   smuggling vector for chunk lines);
//! - BWS (SP / HTAB) is accepted after the size and around `;` and `=`,
//!   nothing else outside the grammar;
//! - trailer field lines must be `token ":" value` with no obs-fold and no
//!   CTL in the value (RFC 9112 §5.1, §5.2);
//! - a chunk size over [`MAX_CHUNK_SIZE`] (2^63 - 1, the bound of a
//!   `Content-Length`) is an error: a next hop counting in a signed 64-bit
//!   integer (nginx's `off_t`, curl, Java) could not represent it, and
//!   RFC 9112 §7.1 asks recipients to guard against integer overflow. The
//!   bound is on the value, so it allows at most 16 significant digits
//!   and any number of leading zeros up to the line's limit.
//!
//! Invariants: each byte is examined once; the state is one variant per
//! grammar position; after an error every call returns the same error;
//! after the end every call returns `Ok(0)`.

use super::error::ParseError;
use super::syntax::is_tchar;

/// Longest chunk-size line accepted, in bytes, from the first hex digit to
/// the LF included (size and chunk extensions). hyper and h11 do not bound
/// extensions at all (hyper later capped their total); 4 KiB is far more
/// than any real extension and bounds the work per chunk.
pub const MAX_CHUNK_LINE: usize = 4 * 1024;

/// Largest chunk size accepted, in bytes: 2^63 - 1, the same bound as a
/// `Content-Length` ([`super::framing::MAX_CONTENT_LENGTH`]).
pub const MAX_CHUNK_SIZE: u64 = super::framing::MAX_CONTENT_LENGTH;

/// Longest trailer section accepted, in bytes, from the byte after the
/// last-chunk line to the final CRLF included. Same order as the default
/// request head limit (64 KiB, ARCHITECTURE.md §9): trailers are a late header section.
pub const MAX_TRAILER_SECTION: usize = 64 * 1024;

/// A run of a scanned stream, as [`ChunkedScanner::scan_runs`] reports it.
enum Run {
    /// Chunk data.
    Data(std::ops::Range<usize>),
    /// Bytes the forwarded body leaves out (leading zeros of a size).
    Redundant(std::ops::Range<usize>),
    /// Field lines of the trailer section, each with its CRLF (not the
    /// final empty line).
    Trailer(std::ops::Range<usize>),
}

pub use super::runs::{kept_parts, remove_runs};

/// Position inside a chunk-size line, after its first hex digit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinePos {
    /// In `chunk-size` (more HEXDIG may come).
    Size,
    /// BWS after the size: `;` or CR may come.
    AfterSize,
    /// After `;`: BWS, then the first tchar of `chunk-ext-name`.
    ExtNameStart,
    /// In `chunk-ext-name`.
    ExtName,
    /// BWS after a name: `=`, `;` or CR may come.
    AfterExtName,
    /// After `=`: BWS, then a token or a DQUOTE.
    ExtValueStart,
    /// In a token `chunk-ext-val`.
    ExtToken,
    /// Inside a quoted-string `chunk-ext-val`.
    ExtQuoted,
    /// After a backslash inside the quoted-string (quoted-pair).
    ExtQuotedPair,
    /// BWS after a value: `;` or CR may come.
    AfterExtValue,
}

/// Where the scanner is in the chunked-body grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Start of a chunk: the first HEXDIG of `chunk-size`.
    SizeStart,
    /// Inside a chunk-size line; `size` is the chunk-size so far and `len`
    /// the line's bytes so far.
    Line { size: u64, len: usize, at: LinePos },
    /// The CR that ends the chunk-size line came; LF must follow (`len`
    /// as in `Line`).
    LineLf { size: u64, len: usize },
    /// In `chunk-data`: `remaining` bytes (> 0) of the chunk still to come.
    Data { remaining: u64 },
    /// After chunk-data: CR must follow.
    DataCr,
    /// After chunk-data and CR: LF must follow.
    DataLf,
    /// Start of a trailer field line, or the CR of the final empty line;
    /// `len` is the trailer section's bytes so far (also in the next four).
    TrailerStart { len: usize },
    /// In a trailer field name.
    TrailerName { len: usize },
    /// In a trailer field value (after the colon).
    TrailerValue { len: usize },
    /// The CR that ends a trailer field line came; LF must follow.
    TrailerLf { len: usize },
    /// The CR of the final empty line came; LF must follow.
    FinalLf { len: usize },
    /// The body ended.
    Done,
    /// The body was invalid; the reason repeats on every call.
    Failed(&'static str),
}

/// Incremental scanner that finds where a chunked body ends (RFC 9112 §7.1).
/// Every byte passes through unchanged; see the module doc for the grammar,
/// the limits ([`MAX_CHUNK_LINE`], [`MAX_TRAILER_SECTION`]) and why bare LF
/// is rejected.
#[derive(Debug, Clone)]
pub struct ChunkedScanner {
    state: State,
    /// Bytes forwarded (a size's redundant zeros left out) since the
    /// current chunk-size line began; [`ChunkedScanner::last_chunk_bytes`].
    line_bytes: usize,
}

impl Default for ChunkedScanner {
    fn default() -> Self {
        ChunkedScanner::new()
    }
}

impl ChunkedScanner {
    /// A scanner at the start of a chunked body.
    pub fn new() -> Self {
        ChunkedScanner {
            state: State::SizeStart,
            line_bytes: 0,
        }
    }

    /// Feeds the next bytes of the stream. Returns how many leading bytes of
    /// `bytes` belong to the body: all of them, unless the body ends inside
    /// `bytes` (then the count up to and including the final CRLF). After the
    /// end, [`ChunkedScanner::is_done`] is true and every call returns
    /// `Ok(0)`.
    ///
    /// Errors: `ParseError::Chunk(reason)` at the first byte that breaks
    /// RFC 9112 §7.1 (or the strictness rules of the module doc), whatever
    /// way the stream was split; later calls return the same error.
    pub fn scan(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        self.scan_runs(bytes, |_| {})
    }

    /// Like [`ChunkedScanner::scan`], and also calls `data` with each run of
    /// chunk-data bytes in `bytes` (a range of indexes into `bytes`, in
    /// order; runs are never empty). Whoever must hand the body to an
    /// HTTP/1.0 recipient, which knows no chunked coding (RFC 9112 §7.1),
    /// keeps just these bytes.
    pub fn scan_data(
        &mut self,
        bytes: &[u8],
        mut data: impl FnMut(std::ops::Range<usize>),
    ) -> Result<usize, ParseError> {
        self.scan_runs(bytes, |run| {
            if let Run::Data(r) = run {
                data(r)
            }
        })
    }

    /// Like [`ChunkedScanner::scan_data`], and also calls `redundant` with
    /// each run of bytes in `bytes` that the forwarded body leaves out: the
    /// zeros after a chunk size's first digit while its value is still
    /// zero (module doc). Ranges are indexes into `bytes`, in order,
    /// never empty; the bytes counted by the return value include them.
    pub fn scan_forward(
        &mut self,
        bytes: &[u8],
        mut data: impl FnMut(std::ops::Range<usize>),
        mut redundant: impl FnMut(std::ops::Range<usize>),
    ) -> Result<usize, ParseError> {
        self.scan_runs(bytes, |run| match run {
            Run::Data(r) => data(r),
            Run::Redundant(r) => redundant(r),
            Run::Trailer(_) => {}
        })
    }

    /// Like [`ChunkedScanner::scan_data`], and also reports the bytes of
    /// the trailer section's field lines (each line with its CRLF; not the
    /// final empty line), with `true` as the second argument: an HTTP/2
    /// recipient gets the chunk data as DATA frames and the trailer fields
    /// as a final HEADERS frame (RFC 9113 §8.1).
    pub fn scan_pieces(
        &mut self,
        bytes: &[u8],
        mut piece: impl FnMut(std::ops::Range<usize>, bool),
    ) -> Result<usize, ParseError> {
        self.scan_runs(bytes, |run| match run {
            Run::Data(r) => piece(r, false),
            Run::Trailer(r) => piece(r, true),
            Run::Redundant(_) => {}
        })
    }

    /// The scan, reporting chunk data and redundant bytes as runs.
    fn scan_runs(&mut self, bytes: &[u8], mut runs: impl FnMut(Run)) -> Result<usize, ParseError> {
        let mut used: usize = 0;
        // The redundant zeros found so far and not yet reported.
        let mut zeros: Option<std::ops::Range<usize>> = None;
        // A run of trailer bytes not yet reported: its start.
        let mut trailer_from: Option<usize> = None;
        let result = loop {
            let rest = bytes.get(used..).unwrap_or_default();
            let Some(&b) = rest.first() else {
                break Ok(());
            };
            match self.state {
                State::Done => break Ok(()),
                State::Failed(why) => break Err(ParseError::Chunk(why)),
                State::Data { remaining } => {
                    let avail = u64::try_from(rest.len()).unwrap_or(u64::MAX);
                    let take = remaining.min(avail);
                    let left = remaining.saturating_sub(take);
                    let start = used;
                    used = used.saturating_add(usize::try_from(take).unwrap_or(usize::MAX));
                    if used > start {
                        runs(Run::Data(start..used));
                    }
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { remaining: left }
                    };
                }
                state => {
                    let at = used;
                    // A zero after the size's first digit, the value still
                    // zero: the first digit already stands for it.
                    let leading_zero = b == b'0'
                        && matches!(
                            state,
                            State::Line {
                                size: 0,
                                at: LinePos::Size,
                                ..
                            }
                        );
                    if state == State::SizeStart {
                        self.line_bytes = 0;
                    }
                    if leading_zero {
                        let r = zeros.get_or_insert(used..used);
                        r.end = used + 1;
                    } else {
                        self.line_bytes = self.line_bytes.saturating_add(1);
                        if let Some(r) = zeros.take() {
                            runs(Run::Redundant(r));
                        }
                    }
                    used = used.saturating_add(1);
                    match step(state, b) {
                        Ok(next) => {
                            let in_line = matches!(
                                next,
                                State::TrailerName { .. }
                                    | State::TrailerValue { .. }
                                    | State::TrailerLf { .. }
                            ) || matches!(state, State::TrailerLf { .. });
                            if in_line {
                                trailer_from.get_or_insert(at);
                            } else if let Some(from) = trailer_from.take() {
                                runs(Run::Trailer(from..at));
                            }
                            self.state = next;
                        }
                        Err(why) => {
                            self.state = State::Failed(why);
                            break Err(ParseError::Chunk(why));
                        }
                    }
                }
            }
        };
        if let Some(r) = zeros {
            runs(Run::Redundant(r));
        }
        if let Some(from) = trailer_from {
            runs(Run::Trailer(from..used));
        }
        result?;
        if let State::Failed(why) = self.state {
            return Err(ParseError::Chunk(why));
        }
        Ok(used)
    }

    /// True once the final CRLF of the trailer section was scanned.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The forwarded bytes (a size's redundant zeros left out) at the end
    /// of the stream so far that may be the start of the last chunk: the
    /// chunk-size line while its value is still zero, then the last-chunk
    /// line and the trailer section until the final CRLF; 0 elsewhere
    /// (and once the body ended). A proxy holds them back until the body
    /// is whole: a client that got `0` (or `0\r\n`) and then a close would
    /// take a cut body for a whole one.
    pub fn last_chunk_bytes(&self) -> usize {
        match self.state {
            State::Line { size: 0, .. }
            | State::LineLf { size: 0, .. }
            | State::TrailerStart { .. }
            | State::TrailerName { .. }
            | State::TrailerValue { .. }
            | State::TrailerLf { .. }
            | State::FinalLf { .. } => self.line_bytes,
            _ => 0,
        }
    }

    /// Data bytes of the current chunk announced but not yet scanned:
    /// the chunk-size read so far while its line is still coming (a lower
    /// bound: more digits only make it larger), the rest of the chunk in
    /// its data, 0 elsewhere. With the data bytes already counted, what
    /// the body is known to reach, so a limit can refuse a chunk from its
    /// size line (nginx answers 413 there too).
    pub fn chunk_left(&self) -> u64 {
        match self.state {
            State::Line { size, .. } | State::LineLf { size, .. } => size,
            State::Data { remaining } => remaining,
            _ => 0,
        }
    }
}

/// `SP / HTAB`: the bytes of OWS and BWS (RFC 9110 §5.6.3).
fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `qdtext` (RFC 9110 §5.6.4).
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..=0xff)
}

/// `HTAB / SP / VCHAR / obs-text`: what may follow a backslash in a
/// quoted-pair (RFC 9110 §5.6.4) and what a field value holds
/// (RFC 9110 §5.5).
fn is_text(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff)
}

/// The value of a HEXDIG, upper or lower case (RFC 5234 B.1).
fn hex_value(b: u8) -> Option<u64> {
    char::from(b).to_digit(16).map(u64::from)
}

/// One byte of every state but `Data`, `Done` and `Failed` (which `scan`
/// handles): the next state, or the reason the byte is invalid.
fn step(state: State, b: u8) -> Result<State, &'static str> {
    match state {
        State::SizeStart => match hex_value(b) {
            Some(d) => Ok(State::Line {
                size: d,
                len: 1,
                at: LinePos::Size,
            }),
            None if b == b'\n' => Err("bare LF where a chunk size was expected"),
            None => Err("chunk size is not HEXDIG"),
        },
        State::Line { size, len, at } => {
            let len = len.saturating_add(1);
            if len > MAX_CHUNK_LINE {
                return Err("chunk-size line too long");
            }
            if b == b'\r' {
                // CR ends the line wherever a chunk-ext may end.
                return match at {
                    LinePos::AfterSize => Err("whitespace after the chunk size"),
                    LinePos::Size
                    | LinePos::ExtName
                    | LinePos::AfterExtName
                    | LinePos::ExtToken
                    | LinePos::AfterExtValue => Ok(State::LineLf { size, len }),
                    LinePos::ExtQuoted | LinePos::ExtQuotedPair => {
                        Err("CR inside a quoted chunk extension")
                    }
                    LinePos::ExtNameStart | LinePos::ExtValueStart => {
                        Err("chunk extension ends before its name or value")
                    }
                };
            }
            if b == b'\n' {
                return Err("bare LF in chunk-size line");
            }
            let at = line_step(at, b)?;
            let size = if at == LinePos::Size {
                let d = hex_value(b).ok_or("chunk size is not HEXDIG")?;
                size.checked_mul(16)
                    .and_then(|s| s.checked_add(d))
                    .filter(|s| *s <= MAX_CHUNK_SIZE)
                    .ok_or("chunk size over 2^63 - 1")?
            } else {
                size
            };
            Ok(State::Line { size, len, at })
        }
        State::LineLf { size, len } => {
            if len.saturating_add(1) > MAX_CHUNK_LINE {
                return Err("chunk-size line too long");
            }
            match b {
                b'\n' if size == 0 => Ok(State::TrailerStart { len: 0 }),
                b'\n' => Ok(State::Data { remaining: size }),
                _ => Err("bare CR in chunk-size line"),
            }
        }
        State::DataCr => match b {
            b'\r' => Ok(State::DataLf),
            b'\n' => Err("bare LF after chunk data"),
            _ => Err("chunk data longer than its size (no CRLF after it)"),
        },
        State::DataLf => match b {
            b'\n' => Ok(State::SizeStart),
            _ => Err("bare CR after chunk data"),
        },
        State::TrailerStart { len } => {
            let len = trailer_len(len)?;
            match b {
                b'\r' => Ok(State::FinalLf { len }),
                b'\n' => Err("bare LF in trailer section"),
                b' ' | b'\t' => Err("whitespace at the start of a trailer line (obs-fold)"),
                b if is_tchar(b) => Ok(State::TrailerName { len }),
                _ => Err("invalid trailer field name"),
            }
        }
        State::TrailerName { len } => {
            let len = trailer_len(len)?;
            match b {
                b':' => Ok(State::TrailerValue { len }),
                b if is_tchar(b) => Ok(State::TrailerName { len }),
                b' ' | b'\t' => Err("whitespace before the colon of a trailer field"),
                _ => Err("invalid trailer field name"),
            }
        }
        State::TrailerValue { len } => {
            let len = trailer_len(len)?;
            match b {
                b'\r' => Ok(State::TrailerLf { len }),
                b'\n' => Err("bare LF in trailer section"),
                b if is_text(b) => Ok(State::TrailerValue { len }),
                _ => Err("invalid trailer field value"),
            }
        }
        State::TrailerLf { len } => {
            let len = trailer_len(len)?;
            match b {
                b'\n' => Ok(State::TrailerStart { len }),
                _ => Err("bare CR in trailer section"),
            }
        }
        State::FinalLf { len } => {
            trailer_len(len)?;
            match b {
                b'\n' => Ok(State::Done),
                _ => Err("bare CR at the end of the chunked body"),
            }
        }
        // Handled by `scan`; kept total so no byte is ever mis-stepped.
        State::Data { .. } | State::Done => Err("internal: byte stepped in a non-byte state"),
        State::Failed(why) => Err(why),
    }
}

/// The trailer section's length after one more byte, or the limit error.
fn trailer_len(len: usize) -> Result<usize, &'static str> {
    let len = len.saturating_add(1);
    if len > MAX_TRAILER_SECTION {
        Err("trailer section too long")
    } else {
        Ok(len)
    }
}

/// One byte other than CR/LF inside a chunk-size line: the next position.
fn line_step(at: LinePos, b: u8) -> Result<LinePos, &'static str> {
    use LinePos::*;
    match at {
        Size => match b {
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterSize),
            b if b.is_ascii_hexdigit() => Ok(Size),
            _ => Err("chunk size is not HEXDIG"),
        },
        AfterSize => match b {
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterSize),
            _ => Err("invalid byte after chunk size"),
        },
        ExtNameStart => match b {
            b if is_ws(b) => Ok(ExtNameStart),
            b if is_tchar(b) => Ok(ExtName),
            _ => Err("invalid chunk extension name"),
        },
        ExtName => match b {
            b'=' => Ok(ExtValueStart),
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterExtName),
            b if is_tchar(b) => Ok(ExtName),
            _ => Err("invalid chunk extension name"),
        },
        AfterExtName => match b {
            b'=' => Ok(ExtValueStart),
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterExtName),
            _ => Err("invalid byte after chunk extension name"),
        },
        ExtValueStart => match b {
            b'"' => Ok(ExtQuoted),
            b if is_ws(b) => Ok(ExtValueStart),
            b if is_tchar(b) => Ok(ExtToken),
            _ => Err("invalid chunk extension value"),
        },
        ExtToken => match b {
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterExtValue),
            b if is_tchar(b) => Ok(ExtToken),
            _ => Err("invalid chunk extension value"),
        },
        ExtQuoted => match b {
            b'"' => Ok(AfterExtValue),
            b'\\' => Ok(ExtQuotedPair),
            b if is_qdtext(b) => Ok(ExtQuoted),
            _ => Err("invalid byte in quoted chunk extension"),
        },
        ExtQuotedPair => match b {
            b if is_text(b) => Ok(ExtQuoted),
            _ => Err("invalid quoted-pair in chunk extension"),
        },
        AfterExtValue => match b {
            b';' => Ok(ExtNameStart),
            b if is_ws(b) => Ok(AfterExtValue),
            _ => Err("invalid byte after chunk extension value"),
        },
    }
}

//! `ChunkedScanner` (RFC 9112 §7.1): every input whole, split at each byte,
//! byte by byte, and with bytes after the end; all answers must agree.

use super::{Outcome, agree};
use crate::http::ParseError;
use crate::http::chunked::ChunkedScanner;
use crate::http::chunked::{MAX_CHUNK_LINE, MAX_TRAILER_SECTION};

#[track_caller]
fn outcome(input: &[u8]) -> Outcome {
    agree(ChunkedScanner::new, input)
}

#[test]
fn valid_bodies_end_exactly_after_the_final_crlf() {
    // (body, what it exercises)
    let table: &[(&[u8], &str)] = &[
        (b"0\r\n\r\n", "only the last-chunk"),
        (b"5\r\nhello\r\n0\r\n\r\n", "one chunk"),
        (
            b"5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n",
            "several chunks",
        ),
        (b"A\r\n0123456789\r\n0\r\n\r\n", "upper-case hex"),
        (b"a\r\n0123456789\r\n0\r\n\r\n", "lower-case hex"),
        (
            b"1a\r\n0123456789abcdefghijklmnop\r\n0\r\n\r\n",
            "two hex digits",
        ),
        (
            b"1A\r\n0123456789abcdefghijklmnop\r\n0\r\n\r\n",
            "two hex digits, upper",
        ),
        (
            b"0005\r\nhello\r\n000\r\n\r\n",
            "leading zeros in size and last-chunk",
        ),
        (b"5;foo\r\nhello\r\n0\r\n\r\n", "extension without value"),
        (
            b"5;foo=bar\r\nhello\r\n0\r\n\r\n",
            "extension with token value",
        ),
        (b"5;a=1;b;c=x\r\nhello\r\n0\r\n\r\n", "several extensions"),
        (
            b"5 ; a = 1 ;\tb\r\nhello\r\n0\r\n\r\n",
            "BWS around ; and =",
        ),
        (
            b"5 ;a\r\nhello\r\n0\r\n\r\n",
            "BWS after the size, before ;",
        ),
        (
            b"000000000000000a\r\n0123456789\r\n0\r\n\r\n",
            "16 hex digits, leading zeros included",
        ),
        (
            b"5;q=\"a;b=c\"\r\nhello\r\n0\r\n\r\n",
            "quoted value with ; and =",
        ),
        (
            b"5;q=\"say \\\"hi\\\" \\\\\"\r\nhello\r\n0\r\n\r\n",
            "quoted-pairs",
        ),
        (b"5;q=\"\"\r\nhello\r\n0\r\n\r\n", "empty quoted value"),
        (
            b"5;q=\"caf\xc3\xa9\"\r\nhello\r\n0\r\n\r\n",
            "obs-text in a quoted value",
        ),
        (
            b"5\r\nhello\r\n0;done=1;why=\"last\"\r\n\r\n",
            "last-chunk with extensions",
        ),
        (
            b"0\r\nExpires: never\r\nX-Sum: abc def\r\nx:\r\n\r\n",
            "trailer section, several fields",
        ),
        (
            b"3\r\n\r\n\n\r\n0\r\nA: b\r\n\r\n",
            "CR and LF inside chunk data",
        ),
        (
            b"5\r\n0\r\n\r\n\r\n0\r\n\r\n",
            "a fake last-chunk inside the data",
        ),
    ];
    for (body, why) in table {
        assert_eq!(outcome(body), Outcome::Done(body.len()), "{why}");
    }
}

/// A body of one chunk of 234 bytes whose size has `zeros` leading zeros,
/// and a last-chunk with as many.
fn zero_padded(zeros: usize) -> Vec<u8> {
    let pad = vec![b'0'; zeros];
    [
        pad.as_slice(),
        b"ea\r\n",
        &[b'x'; 0xea],
        b"\r\n",
        &pad,
        b"0\r\n\r\n",
    ]
    .concat()
}

#[test]
fn leading_zeros_are_read_by_value_not_counted() {
    // HTTPWookiee's test 2030 sends 33 zeros before `ea`; RFC 9112 §7.1
    // makes them legal (`1*HEXDIG`). Hundreds of them are still a size.
    for zeros in [1, 16, 33, 300, MAX_CHUNK_LINE - 5] {
        let body = zero_padded(zeros);
        assert_eq!(outcome(&body), Outcome::Done(body.len()), "{zeros} zeros");
    }
}

/// What goes on when `input` is fed in `pieces` through
/// `ChunkedScanner::scan_forward`: each piece without its redundant runs
/// (and without the bytes past the body's end).
fn forwarded(pieces: &[&[u8]]) -> Vec<u8> {
    let mut s = ChunkedScanner::new();
    let mut out = Vec::new();
    for piece in pieces {
        let mut runs = Vec::new();
        let n = s.scan_forward(piece, |_| {}, |r| runs.push(r)).unwrap();
        let mut body = piece[..n].to_vec();
        let removed = crate::http::chunked::remove_runs(&mut body, &runs);
        body.truncate(body.len() - removed);
        let kept: Vec<u8> = crate::http::chunked::kept_parts(&piece[..n], &runs)
            .flatten()
            .copied()
            .collect();
        assert_eq!(body, kept, "remove_runs and kept_parts agree");
        out.extend_from_slice(&body);
    }
    out
}

#[test]
fn a_size_goes_on_without_its_run_of_leading_zeros_however_split() {
    // (received, forwarded, why)
    // The size as its first digit and its significant ones: `0ea`, `0`.
    let one_zero = [b"0ea\r\n".as_slice(), &[b'x'; 0xea], b"\r\n0\r\n\r\n"].concat();
    let table: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
        (zero_padded(33), one_zero.clone(), "33 zeros: one stays"),
        (zero_padded(400), one_zero.clone(), "400 zeros: one stays"),
        (
            zero_padded(1),
            one_zero,
            "`0ea` unchanged, last-chunk `00` is `0`",
        ),
        (zero_padded(0), zero_padded(0), "no leading zero: unchanged"),
        (
            b"0005;ext=000\r\n00000\r\n00\r\nT: 000\r\n\r\n".to_vec(),
            b"05;ext=000\r\n00000\r\n0\r\nT: 000\r\n\r\n".to_vec(),
            "zeros in extensions, data and trailers stay",
        ),
        (
            b"10\r\n0123456789abcdef\r\n0\r\n\r\n".to_vec(),
            b"10\r\n0123456789abcdef\r\n0\r\n\r\n".to_vec(),
            "zeros after a significant digit stay",
        ),
    ];
    for (input, want, why) in table {
        assert_eq!(forwarded(&[&input]), want, "{why}: whole");
        for i in 0..=input.len() {
            let (a, b) = input.split_at(i);
            assert_eq!(forwarded(&[a, b]), want, "{why}: split at {i}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(forwarded(&bytes), want, "{why}: byte by byte");
        let mut longer = input.clone();
        longer.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(forwarded(&[&longer]), want, "{why}: bytes after the end");
    }
}

#[test]
fn remove_runs_moves_the_rest_forward() {
    let mut b = *b"0000ea\r\n";
    let runs = vec![std::ops::Range { start: 1, end: 4 }];
    let removed = crate::http::chunked::remove_runs(&mut b, &runs);
    assert_eq!(removed, 3);
    assert_eq!(&b[..b.len() - removed], b"0ea\r\n");
    let mut b = *b"a00b00c";
    let removed = crate::http::chunked::remove_runs(&mut b, &[1..3, 4..6]);
    assert_eq!(&b[..b.len() - removed], b"abc");
    assert_eq!(crate::http::chunked::remove_runs(&mut b, &[]), 0);
}

#[test]
fn trailing_bytes_are_not_counted() {
    let body = b"4\r\nWiki\r\n0\r\nT: v\r\n\r\n";
    let mut stream = body.to_vec();
    stream.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
    let mut s = ChunkedScanner::new();
    assert_eq!(s.scan(&stream), Ok(body.len()));
    assert!(s.is_done());
    assert_eq!(s.scan(b"more"), Ok(0));
    assert_eq!(s.scan(b""), Ok(0));
}

#[test]
fn incomplete_bodies_need_more() {
    let table: &[(&[u8], &str)] = &[
        (b"", "nothing yet"),
        (b"5", "in the size"),
        (b"5;a=\"x", "inside a quoted extension"),
        (b"5\r\nhel", "inside the data"),
        (b"5\r\nhello\r", "between data and LF"),
        (b"0\r\n", "after the last-chunk"),
        (b"0\r\nA: b\r\n", "inside the trailer section"),
        (b"0\r\n\r", "before the final LF"),
        (b"7FFFFFFFFFFFFFFF\r\n", "the largest size, 2^63 - 1"),
        (
            b"00000000000000000000000000000000007FFFFFFFFFFFFFFF\r\n",
            "the largest size behind 34 leading zeros",
        ),
        (&[b'0'; 500], "500 zeros of a size: still its first digits"),
    ];
    for (body, why) in table {
        assert_eq!(outcome(body), Outcome::NeedMore, "{why}");
    }
}

#[test]
fn bad_bodies_are_rejected_at_the_same_byte() {
    let long_ext = [
        b"5;".as_slice(),
        &[b'a'; MAX_CHUNK_LINE],
        b"\r\nhello\r\n0\r\n\r\n",
    ]
    .concat();
    let long_zeros = [
        vec![b'0'; MAX_CHUNK_LINE + 1],
        b"5\r\nhello\r\n0\r\n\r\n".to_vec(),
    ]
    .concat();
    let long_trailer = [
        b"0\r\nX: ".as_slice(),
        &vec![b'a'; MAX_TRAILER_SECTION],
        b"\r\n\r\n",
    ]
    .concat();
    let many_trailers = [
        b"0\r\n".as_slice(),
        &b"A: b\r\n".repeat(MAX_TRAILER_SECTION / 6 + 1),
        b"\r\n",
    ]
    .concat();
    // (body, expected reason, why it is bad)
    let table: &[(&[u8], &str, &str)] = &[
        (b"x\r\n", "chunk size is not HEXDIG", "non-hex size"),
        (
            b"5x\r\nhello\r\n",
            "chunk size is not HEXDIG",
            "non-hex after hex",
        ),
        (b"0x5\r\nhello\r\n", "chunk size is not HEXDIG", "0x prefix"),
        (b"-5\r\n", "chunk size is not HEXDIG", "sign"),
        (b"+5\r\n", "chunk size is not HEXDIG", "plus sign"),
        (b"\r\n", "chunk size is not HEXDIG", "empty size line"),
        (
            b";a\r\n",
            "chunk size is not HEXDIG",
            "extension without size",
        ),
        (
            b" 5\r\n",
            "chunk size is not HEXDIG",
            "whitespace before the size",
        ),
        (b"10000000000000000\r\n", "chunk size over 2^63 - 1", "2^64"),
        (
            b"5 \r\nhello\r\n0\r\n\r\n",
            "whitespace after the chunk size",
            "BWS after the size without an extension (RFC 9112 §7.1.1)",
        ),
        (
            b"5\t\r\nhello\r\n0\r\n\r\n",
            "whitespace after the chunk size",
            "HTAB after the size",
        ),
        (
            b"5\r\nhello\r\n0 \r\n\r\n",
            "whitespace after the chunk size",
            "SP after the last-chunk",
        ),
        (
            b"00000000000000000000000000000000008000000000000000\r\n",
            "chunk size over 2^63 - 1",
            "2^63 behind 34 leading zeros: the bound is on the value",
        ),
        (
            b"8000000000000000\r\nabc",
            "chunk size over 2^63 - 1",
            "2^63: a signed 64-bit next hop would overflow",
        ),
        (
            b"FFFFFFFFFFFFFFFF\r\n",
            "chunk size over 2^63 - 1",
            "the largest u64",
        ),
        (
            b"10000000000000000\r\n",
            "chunk size over 2^63 - 1",
            "17 significant hex digits",
        ),
        (b"5 6\r\n", "invalid byte after chunk size", "two sizes"),
        (
            b"5\r\nhelloX\r\n0\r\n\r\n",
            "chunk data longer than its size (no CRLF after it)",
            "missing CRLF after data",
        ),
        (
            b"5\r\nhello0\r\n\r\n",
            "chunk data longer than its size (no CRLF after it)",
            "no CRLF at all after data",
        ),
        (
            b"5\r\nhello\rX",
            "bare CR after chunk data",
            "CR without LF after data",
        ),
        (
            b"5\nhello\n0\n\n",
            "bare LF in chunk-size line",
            "LF-only line endings",
        ),
        (
            b"5\r\nhello\n0\r\n\r\n",
            "bare LF after chunk data",
            "LF after data",
        ),
        (
            b"\n",
            "bare LF where a chunk size was expected",
            "LF before the size",
        ),
        (b"0\n\n", "bare LF in chunk-size line", "LF-only last-chunk"),
        (
            b"0\r\n\n",
            "bare LF in trailer section",
            "LF-only end of trailer section",
        ),
        (
            b"0\r\nA: b\n\r\n",
            "bare LF in trailer section",
            "LF-only trailer line",
        ),
        (
            b"5\rhello",
            "bare CR in chunk-size line",
            "CR without LF after size",
        ),
        (
            b"0\r\n\rX",
            "bare CR at the end of the chunked body",
            "CR without LF at the end",
        ),
        (
            b"0\r\nA: b\rX",
            "bare CR in trailer section",
            "CR without LF in a trailer",
        ),
        (
            b"5;\r\n",
            "chunk extension ends before its name or value",
            "; without a name",
        ),
        (
            b"5;a=\r\n",
            "chunk extension ends before its name or value",
            "= without a value",
        ),
        (
            b"5;=x\r\n",
            "invalid chunk extension name",
            "value without a name",
        ),
        (
            b"5;a@b\r\n",
            "invalid chunk extension name",
            "name not a token",
        ),
        (
            b"5;a b\r\n",
            "invalid byte after chunk extension name",
            "two names",
        ),
        (
            b"5;a=b c\r\n",
            "invalid byte after chunk extension value",
            "two values",
        ),
        (
            b"5;a=\"x\r\n",
            "CR inside a quoted chunk extension",
            "unterminated quote",
        ),
        (
            b"5;a=\"x\x01\"\r\n",
            "invalid byte in quoted chunk extension",
            "CTL in quotes",
        ),
        (
            b"5;a=\"x\\\x01\"\r\n",
            "invalid quoted-pair in chunk extension",
            "CTL after backslash",
        ),
        (
            b"5;a=\"x\"y\r\n",
            "invalid byte after chunk extension value",
            "token after a quote",
        ),
        (
            b"5;a=@\r\n",
            "invalid chunk extension value",
            "value not a token",
        ),
        (
            b"5;a=b\nhello",
            "bare LF in chunk-size line",
            "LF after an extension",
        ),
        (
            &long_ext,
            "chunk-size line too long",
            "extension over MAX_CHUNK_LINE",
        ),
        (
            &long_zeros,
            "chunk-size line too long",
            "leading zeros count toward MAX_CHUNK_LINE",
        ),
        (
            &long_trailer,
            "trailer section too long",
            "one trailer over MAX_TRAILER_SECTION",
        ),
        (
            &many_trailers,
            "trailer section too long",
            "many trailers over MAX_TRAILER_SECTION",
        ),
        (
            b"0\r\nA: b\r\n c\r\n\r\n",
            "whitespace at the start of a trailer line (obs-fold)",
            "obs-fold",
        ),
        (
            b"0\r\nA : b\r\n\r\n",
            "whitespace before the colon of a trailer field",
            "space before colon",
        ),
        (
            b"0\r\nNoColon\r\n\r\n",
            "invalid trailer field name",
            "trailer without colon",
        ),
        (
            b"0\r\n@: b\r\n\r\n",
            "invalid trailer field name",
            "trailer name not a token",
        ),
        (
            b"0\r\nA: b\0c\r\n\r\n",
            "invalid trailer field value",
            "NUL in a trailer value",
        ),
    ];
    for (body, reason, why) in table {
        assert_eq!(
            outcome(body),
            Outcome::Failed(ParseError::Chunk(reason)),
            "{why}"
        );
    }
}

#[test]
fn limits_are_inclusive() {
    // A chunk-size line of exactly MAX_CHUNK_LINE bytes (LF included) passes.
    let ext = vec![b'a'; MAX_CHUNK_LINE - 4];
    let body = [b"5;".as_slice(), &ext, b"\r\nhello\r\n0\r\n\r\n"].concat();
    assert_eq!(outcome(&body), Outcome::Done(body.len()));
    // One more byte and the LF is over the limit.
    let ext = vec![b'a'; MAX_CHUNK_LINE - 3];
    let body = [b"5;".as_slice(), &ext, b"\r\nhello\r\n0\r\n\r\n"].concat();
    let too_long = Outcome::Failed(ParseError::Chunk("chunk-size line too long"));
    assert_eq!(outcome(&body), too_long);
    // A trailer section of exactly MAX_TRAILER_SECTION bytes passes.
    let value = vec![b'v'; MAX_TRAILER_SECTION - 7];
    let body = [b"0\r\nX: ".as_slice(), &value, b"\r\n\r\n"].concat();
    assert_eq!(outcome(&body), Outcome::Done(body.len()));
    let value = vec![b'v'; MAX_TRAILER_SECTION - 6];
    let body = [b"0\r\nX: ".as_slice(), &value, b"\r\n\r\n"].concat();
    let too_long = Outcome::Failed(ParseError::Chunk("trailer section too long"));
    assert_eq!(outcome(&body), too_long);
}

#[test]
fn errors_repeat_on_later_calls() {
    let mut s = ChunkedScanner::new();
    let err = Err(ParseError::Chunk("chunk size is not HEXDIG"));
    assert_eq!(s.scan(b"z"), err);
    assert_eq!(s.scan(b"5\r\n"), err);
    assert_eq!(s.scan(b""), err);
    assert!(!s.is_done());
}

#[test]
fn large_chunk_is_counted_without_looking_at_it() {
    let mut s = ChunkedScanner::new();
    assert_eq!(s.scan(b"100000\r\n"), Ok(8));
    let data = vec![0u8; 0x100000];
    assert_eq!(s.scan(&data[..1000]), Ok(1000));
    assert_eq!(s.scan(&data[1000..]), Ok(0x100000 - 1000));
    assert_eq!(s.scan(b"\r\n0\r\n\r\nnext"), Ok(7));
    assert!(s.is_done());
}

#[test]
fn generated_inputs_agree_however_split() {
    // Deterministic xorshift over pieces of the grammar, valid and not:
    // whatever comes out (done, need more, error), every split agrees.
    let pieces: &[&[u8]] = &[
        b"0",
        b"5",
        b"a",
        b"F",
        b"\r\n",
        b"\n",
        b"\r",
        b";",
        b"=",
        b"\"",
        b"\\",
        b" ",
        b"x",
        b"hello",
        b"A: b",
        b":",
        b"0\r\n",
        b"0\r\n\r\n",
        b"5\r\nhello\r\n",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut done = 0;
    for _ in 0..400 {
        let mut raw = Vec::new();
        for _ in 0..(next() % 14) {
            raw.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
        }
        if let Outcome::Done(_) = outcome(&raw) {
            done += 1;
        }
    }
    assert!(done > 0, "the generator reaches the end sometimes");
}

/// Chunk data of `input` as `scan_data` reports it when fed in `pieces`.
fn data_of(pieces: &[&[u8]]) -> Vec<u8> {
    let mut scanner = ChunkedScanner::new();
    let mut data = Vec::new();
    for piece in pieces {
        let mut ranges = Vec::new();
        let used = scanner
            .scan_data(piece, |r| ranges.push(r))
            .unwrap_or_else(|e| panic!("valid body rejected: {e}"));
        for r in ranges {
            assert!(r.end <= used, "data range past the body");
            data.extend_from_slice(&piece[r]);
        }
    }
    assert!(scanner.is_done());
    data
}

#[test]
fn scan_data_yields_only_chunk_data_however_split() {
    let body: &[u8] =
        b"5;ext=\"a;b\"\r\nhello\r\nA\r\n, chunked!\r\n0;last\r\nTrailer-X: 1\r\n\r\n";
    let want: &[u8] = b"hello, chunked!";
    assert_eq!(data_of(&[body]), want, "whole");
    for at in 0..=body.len() {
        let (a, b) = body.split_at(at);
        assert_eq!(data_of(&[a, b]), want, "split at {at}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(data_of(&bytes), want, "byte by byte");
}

/// Chunk data and trailer bytes of `input` as `scan_pieces` reports them
/// when fed in `pieces`.
fn pieces_of(pieces: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let mut scanner = ChunkedScanner::new();
    let (mut data, mut trailers) = (Vec::new(), Vec::new());
    for piece in pieces {
        let mut ranges = Vec::new();
        let used = scanner
            .scan_pieces(piece, |r, t| ranges.push((r, t)))
            .unwrap_or_else(|e| panic!("valid body rejected: {e}"));
        for (r, t) in ranges {
            assert!(
                r.end <= used && !r.is_empty(),
                "range past the body, or empty"
            );
            let sink = if t { &mut trailers } else { &mut data };
            sink.extend_from_slice(&piece[r]);
        }
    }
    assert!(scanner.is_done());
    (data, trailers)
}

#[test]
fn scan_pieces_yields_the_trailer_field_lines_however_split() {
    let body: &[u8] = b"5\r\nhello\r\n0;last\r\nTrailer-X: 1\r\ngrpc-status:0\r\n\r\nNEXT";
    let want = (
        b"hello".to_vec(),
        b"Trailer-X: 1\r\ngrpc-status:0\r\n".to_vec(),
    );
    assert_eq!(pieces_of(&[body]), want, "whole");
    for at in 0..=body.len() {
        let (a, b) = body.split_at(at);
        assert_eq!(pieces_of(&[a, b]), want, "split at {at}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(pieces_of(&bytes), want, "byte by byte");
    let none: &[u8] = b"3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(pieces_of(&[none]), (b"abc".to_vec(), Vec::new()));
}

//! `ChunkedScanner` (RFC 9112 §7.1): every input whole, split at each byte,
//! byte by byte, and with bytes after the end; all answers must agree.
//! Bad bodies: `chunked_rejects.rs`; leading zeros: `chunked_zeros.rs`;
//! the data and trailers it reports: `chunked_data.rs`.

use super::{Outcome, agree};
use crate::http::ParseError;
use crate::http::chunked::ChunkedScanner;
use crate::http::chunked::{MAX_CHUNK_LINE, MAX_TRAILER_SECTION};

#[track_caller]
pub(super) fn outcome(input: &[u8]) -> Outcome {
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

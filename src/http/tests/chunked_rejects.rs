//! `ChunkedScanner` rejects bad chunked bodies at the same byte however they are cut.

use super::Outcome;
use super::chunked::outcome;
use crate::http::ParseError;
use crate::http::chunked::{MAX_CHUNK_LINE, MAX_TRAILER_SECTION};

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

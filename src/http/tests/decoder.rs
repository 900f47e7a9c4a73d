//! `BodyDecoder` over each body kind, and the request status of each
//! `ParseError` (ARCHITECTURE.md §5, §8).

use super::{Outcome, agree};
use crate::http::{BodyDecoder, BodyKind, ParseError};

// ---- BodyDecoder ----------------------------------------------------------

#[test]
fn decoder_length_counts_exactly() {
    let fresh = || BodyDecoder::new(BodyKind::Length(5));
    assert_eq!(agree(fresh, b"hello"), Outcome::Done(5));
    assert_eq!(agree(fresh, b"hel"), Outcome::NeedMore);
    assert_eq!(agree(fresh, b""), Outcome::NeedMore);
    let mut d = fresh();
    assert_eq!(d.remaining_hint(), Some(5));
    assert_eq!(d.scan(b"he"), Ok(2));
    assert_eq!(d.remaining_hint(), Some(3));
    assert_eq!(d.scan(b"lloGET"), Ok(3));
    assert!(d.is_done());
    assert_eq!(d.remaining_hint(), Some(0));
    assert_eq!(d.scan(b"more"), Ok(0));
    assert!(!d.is_until_close());
}

#[test]
fn decoder_huge_length_never_overflows() {
    let mut d = BodyDecoder::new(BodyKind::Length(u64::MAX));
    assert_eq!(d.scan(&[0; 4096]), Ok(4096));
    assert_eq!(d.remaining_hint(), Some(u64::MAX - 4096));
}

#[test]
fn decoder_empty_and_zero_length_are_done_at_once() {
    for kind in [BodyKind::Empty, BodyKind::Length(0)] {
        assert_eq!(
            agree(|| BodyDecoder::new(kind), b""),
            Outcome::Done(0),
            "{kind:?}"
        );
        assert_eq!(
            agree(|| BodyDecoder::new(kind), b"GET"),
            Outcome::Done(0),
            "{kind:?}"
        );
        let mut d = BodyDecoder::new(kind);
        assert!(d.is_done());
        assert_eq!(d.finish_on_eof(), Ok(()));
    }
    assert_eq!(BodyDecoder::new(BodyKind::Empty).remaining_hint(), None);
}

#[test]
fn decoder_chunked_delegates_to_the_scanner() {
    let fresh = || BodyDecoder::new(BodyKind::Chunked);
    let body = b"3\r\nabc\r\n0\r\nT: 1\r\n\r\n";
    assert_eq!(agree(fresh, body), Outcome::Done(body.len()));
    assert_eq!(
        agree(fresh, b"3\nabc"),
        Outcome::Failed(ParseError::Chunk("bare LF in chunk-size line"))
    );
    assert_eq!(fresh().remaining_hint(), None);
}

#[test]
fn decoder_until_close_takes_everything_until_eof() {
    let fresh = || BodyDecoder::new(BodyKind::UntilClose);
    assert_eq!(agree(fresh, b"any bytes\r\n0\r\n\r\n"), Outcome::NeedMore);
    let mut d = fresh();
    assert!(d.is_until_close());
    assert_eq!(d.remaining_hint(), None);
    assert_eq!(d.scan(b"abc"), Ok(3));
    assert!(!d.is_done());
    assert_eq!(d.finish_on_eof(), Ok(()));
    assert!(d.is_done());
    assert!(d.is_until_close());
    assert_eq!(d.scan(b"late"), Ok(0));
}

#[test]
fn decoder_eof_before_the_end_is_truncated() {
    // (kind, bytes before EOF, why)
    let table: &[(BodyKind, &[u8], &str)] = &[
        (BodyKind::Length(5), b"", "no byte of a Length body"),
        (BodyKind::Length(5), b"hell", "one byte short"),
        (BodyKind::Chunked, b"", "no byte of a chunked body"),
        (BodyKind::Chunked, b"5\r\nhello\r\n", "no last-chunk"),
        (BodyKind::Chunked, b"0\r\n", "no final CRLF"),
    ];
    for (kind, bytes, why) in table {
        let mut d = BodyDecoder::new(*kind);
        assert_eq!(d.scan(bytes), Ok(bytes.len()), "{why}");
        assert_eq!(d.finish_on_eof(), Err(ParseError::Truncated), "{why}");
    }
    let mut d = BodyDecoder::new(BodyKind::Chunked);
    assert_eq!(d.scan(b"0\r\n\r\n"), Ok(5));
    assert_eq!(d.finish_on_eof(), Ok(()), "already done");
}

// ---- ParseError -----------------------------------------------------------

#[test]
fn request_status_of_each_error() {
    // (error, status, why)
    let table: &[(ParseError, u16, &str)] = &[
        (ParseError::Malformed("x"), 400, "syntax"),
        (
            ParseError::Framing("x"),
            400,
            "framing (ARCHITECTURE.md §5)",
        ),
        (ParseError::Chunk("x"), 400, "chunked syntax"),
        (ParseError::Truncated, 400, "incomplete body"),
        (ParseError::HeadTooLarge, 431, "RFC 6585 §5"),
        (ParseError::TooManyFields, 431, "RFC 6585 §5"),
        (ParseError::UnknownCoding, 501, "RFC 9112 §6.1"),
    ];
    for (e, status, why) in table {
        assert_eq!(e.request_status(), *status, "{why}");
        assert!(!e.to_string().is_empty());
    }
}

// ---- data bytes (the access log's body bytes) ------------------------------

/// Chunk data counts, sizes, extensions and the trailer section do not:
/// the same total whole, split at every position, and byte by byte.
#[test]
fn data_bytes_count_chunk_data_only_however_the_stream_is_split() {
    let body: &[u8] = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
    let count = |parts: &[&[u8]]| {
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        for p in parts {
            d.scan(p).unwrap();
        }
        assert!(d.is_done());
        d.data_bytes()
    };
    assert_eq!(count(&[body]), 11);
    for at in 0..=body.len() {
        let (a, b) = body.split_at(at);
        assert_eq!(count(&[a, b]), 11, "split at {at}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(count(&bytes), 11);
    let mut d = BodyDecoder::new(BodyKind::Length(4));
    assert_eq!(d.scan(b"abcdef").unwrap(), 4);
    assert_eq!(d.data_bytes(), 4);
}

#[test]
fn chunk_left_with_the_data_counted_is_what_the_body_is_known_to_reach() {
    // Fed whole and split at every byte: data counted plus the announced
    // rest of the current chunk never falls, and is the chunk's size once
    // its size line's digits are in.
    let body = b"10;x=y\r\n0123456789abcdef\r\n7fffffff\r\nabc";
    for split in 0..=body.len() {
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let mut known = 0;
        for part in [&body[..split], &body[split..]] {
            assert_eq!(d.scan(part), Ok(part.len()), "split {split}");
            let now = d.data_bytes() + d.chunk_left();
            assert!(now >= known, "split {split}: {now} < {known}");
            known = now;
        }
        assert_eq!(known, 16 + 0x7fff_ffff, "split {split}");
    }
    let mut d = BodyDecoder::new(BodyKind::Chunked);
    assert_eq!(d.scan(b"7f"), Ok(2));
    assert_eq!(d.chunk_left(), 0x7f, "a lower bound while the line comes");
    assert_eq!(BodyDecoder::new(BodyKind::Length(9)).chunk_left(), 0);
}

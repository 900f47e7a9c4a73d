//! A chunk size's leading zeros: read by value, and forwarded without their run.

use super::Outcome;
use super::chunked::outcome;
use crate::http::chunked::ChunkedScanner;
use crate::http::chunked::MAX_CHUNK_LINE;

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

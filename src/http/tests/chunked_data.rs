//! The chunk data (`scan_data`) and trailer lines (`scan_pieces`) however split.

use crate::http::chunked::ChunkedScanner;

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

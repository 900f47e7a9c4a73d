//! The chunked scanner: the same answer (bytes counted, done, error)
//! whether the input comes whole or split at a point the first two bytes
//! choose; never more bytes counted than given; the chunk-data ranges lie
//! inside what was counted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::fuzz_api::{ChunkedScanner, ParseError};

fn feed(pieces: &[&[u8]]) -> (Result<usize, ParseError>, bool, usize) {
    let mut s = ChunkedScanner::new();
    let mut total = 0;
    let mut data = 0;
    for piece in pieces {
        let mut ranges = Vec::new();
        match s.scan_data(piece, |r| ranges.push(r)) {
            Ok(n) => {
                assert!(n <= piece.len());
                for r in ranges {
                    assert!(r.start < r.end && r.end <= n);
                    data += r.len();
                }
                total += n;
                if n < piece.len() {
                    assert!(s.is_done());
                }
            }
            // Data seen before an error is not compared: where the error
            // falls relative to the split decides what was reported.
            Err(e) => return (Err(e), false, 0),
        }
    }
    (Ok(total), s.is_done(), data)
}

fuzz_target!(|input: &[u8]| {
    let Some((&[a, b], data)) = input.split_first_chunk::<2>() else {
        return;
    };
    let at = usize::from(u16::from_le_bytes([a, b])) % (data.len() + 1);
    let whole = feed(&[data]);
    let (x, y) = data.split_at(at);
    assert_eq!(feed(&[x, y]), whole, "split at {at}");
});

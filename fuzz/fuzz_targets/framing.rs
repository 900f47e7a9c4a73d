//! Body framing selection and the body decoder: a head's fields pick a
//! framing for both roles without panicking; the decoder for it counts the
//! rest of the input the same whole and split at a chosen point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::fuzz_api::{BodyDecoder, BodyKind, ParseHead, request_framing, response_framing};
use sluice::RequestHead;

fn decode(kind: BodyKind, pieces: &[&[u8]]) -> (Option<usize>, bool) {
    let mut d = BodyDecoder::new(kind);
    let mut total = 0;
    for piece in pieces {
        match d.scan(piece) {
            Ok(n) => {
                assert!(n <= piece.len());
                total += n;
            }
            Err(_) => return (None, false),
        }
    }
    (Some(total), d.is_done())
}

fuzz_target!(|data: &[u8]| {
    let mut head = RequestHead::default();
    let Ok(Some(len)) = head.parse_into(data, 100) else {
        return;
    };
    let rest = &data[len..];
    let req = request_framing(&head.headers);
    let status = 100 + (rest.len() % 500) as u16;
    let resp = response_framing(&head.method, status, &head.headers);
    for kind in [req, resp].into_iter().flatten() {
        if let BodyKind::Length(n) = kind {
            assert!(n > 0 && n <= i64::MAX as u64);
        }
        let whole = decode(kind, &[rest]);
        let at = rest.len() / 2;
        let (x, y) = rest.split_at(at);
        assert_eq!(decode(kind, &[x, y]), whole);
    }
});

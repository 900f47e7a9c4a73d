//! The CONTINUATION flood (CVE-2024-27316 and kin): a header block that
//! never ends is bounded in bytes, frame headers included, and never
//! makes the decoder hold more than the bound.

use super::{BLOCK_LIMIT, decoder, start};
use crate::h2::ErrorCode;
use crate::h2::decode::{Frame, FrameDecoder};
use crate::h2::frame::{self, flag, kind};

/// Feeds `frame` repeatedly after a HEADERS frame without END_HEADERS,
/// as a machine would, until the decoder refuses; returns the error and
/// the most heap the decoder held.
fn flood(mut dec: FrameDecoder, continuation: &[u8], max_frames: usize) -> (ErrorCode, usize) {
    let mut input = start();
    frame::encode_frame(&mut input, kind::HEADERS, 0, 1, b"\x82");
    let mut most = 0;
    let mut buf = input;
    for _ in 0..max_frames {
        buf.extend_from_slice(continuation);
        loop {
            match dec.next(&buf) {
                Ok(Some((f, n))) => {
                    assert!(!matches!(f, Frame::Headers(_)));
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(e) => return (e.code(), most.max(dec.held_bytes())),
            }
            most = most.max(dec.held_bytes());
        }
    }
    panic!("the flood was never refused");
}

#[test]
fn a_continuation_flood_hits_the_byte_bound_without_growing_memory() {
    let mut cont = Vec::new();
    frame::encode_frame(&mut cont, kind::CONTINUATION, 0, 1, &[0x82; 1000]);
    let (code, held) = flood(decoder(), &cont, 1_000);
    assert_eq!(code, ErrorCode::EnhanceYourCalm);
    assert!(held <= BLOCK_LIMIT, "held {held} bytes");
}

#[test]
fn empty_continuation_frames_count_their_headers_against_the_bound() {
    let mut cont = Vec::new();
    frame::encode_frame(&mut cont, kind::CONTINUATION, 0, 1, b"");
    let (code, held) = flood(FrameDecoder::new(16_384, 4096), &cont, 10_000);
    assert_eq!(code, ErrorCode::EnhanceYourCalm);
    assert!(held <= 4096);
}

#[test]
fn a_block_within_the_bound_is_fine_and_its_storage_is_released() {
    let mut dec = FrameDecoder::new(16_384, 4096);
    let mut input = start();
    frame::encode_frame(&mut input, kind::HEADERS, 0, 1, &[0x82; 2000]);
    frame::encode_frame(
        &mut input,
        kind::CONTINUATION,
        flag::END_HEADERS,
        1,
        &[0x86; 2000],
    );
    let mut buf = input.as_slice();
    let mut blocks = 0;
    while let Some((f, n)) = dec.next(buf).unwrap() {
        if let Frame::Headers(h) = f {
            assert_eq!(h.block.len(), 4000);
            blocks += 1;
        }
        buf = &buf[n..];
    }
    assert_eq!(blocks, 1);
    // The next call frees the joined block.
    assert_eq!(dec.next(buf), Ok(None));
    assert_eq!(dec.held_bytes(), 0);
    assert!(!dec.in_header_block());
}

#[test]
fn a_single_headers_frame_over_the_bound_is_refused() {
    let mut input = start();
    frame::encode_frame(
        &mut input,
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &[0x82; 5000],
    );
    let out = super::agree_with(|| FrameDecoder::new(16_384, 4096), &input);
    assert_eq!(
        out.error.map(|e| e.code()),
        Some(ErrorCode::EnhanceYourCalm)
    );
}

//! The HTTP/2 frame decoder and HPACK decoder: after the client preface
//! and a SETTINGS frame, any bytes give the same events (and the same
//! connection error) whether they come whole or split at a point the
//! first two bytes choose; every header block goes through one HPACK
//! context, with a list limit that is never exceeded, and through the
//! request mapping; SETTINGS frames are applied. Nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::fuzz_api::{
    FieldList, Frame, FrameDecoder, HpackDecoder, PREFACE, PeerSettings, map_request,
};

/// A frame event with what it borrowed copied (for comparing feedings).
fn describe(f: &Frame<'_>) -> String {
    format!("{f:?}")
}

const LIST_LIMIT: usize = 16 * 1024;

fn feed(pieces: &[&[u8]]) -> (Vec<String>, Option<String>) {
    let mut dec = FrameDecoder::new(16_384, 32 * 1024);
    let mut hpack = HpackDecoder::new(4096);
    let mut settings = PeerSettings::default();
    let mut buf = Vec::new();
    let mut events = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match dec.next(&buf) {
                Ok(None) => break,
                Ok(Some((frame, n))) => {
                    assert!(n > 0 && n <= buf.len());
                    events.push(describe(&frame));
                    match frame {
                        Frame::Headers(h) => {
                            let mut list = FieldList::new();
                            let mut size = 0;
                            let r = hpack.decode(h.block, LIST_LIMIT, |name, value| {
                                size += name.len() + value.len() + 32;
                                list.push(name, value);
                            });
                            assert!(size <= LIST_LIMIT);
                            events.push(format!("{r:?}"));
                            if r.is_ok() {
                                let m = map_request(list.iter(), h.end_stream);
                                events.push(format!("{m:?}"));
                            } else if r != Err(sluice::fuzz_api::HpackError::ListTooLarge) {
                                return (events, Some("compression".into()));
                            }
                        }
                        Frame::Settings { params, .. } => {
                            events.push(format!("{:?}", settings.apply(params)));
                        }
                        _ => {}
                    }
                    buf.drain(..n);
                }
                Err(e) => return (events, Some(e.to_string())),
            }
        }
    }
    (events, None)
}

fuzz_target!(|input: &[u8]| {
    let Some((&[a, b], data)) = input.split_first_chunk::<2>() else {
        return;
    };
    let mut bytes = PREFACE.to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(data);
    let at = usize::from(u16::from_le_bytes([a, b])) % (bytes.len() + 1);
    let whole = feed(&[&bytes]);
    let (x, y) = bytes.split_at(at);
    assert_eq!(feed(&[x, y]), whole, "split at {at}");
});

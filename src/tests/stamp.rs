//! The access records' formatting: the RFC 3339 time (formatted into a stack
//! buffer, the date worked out once a second and reused within it) and the
//! text format's escaping.

use std::time::{Duration, SystemTime};

use crate::conn::access::{StampCache, rfc3339_ms};

#[test]
fn stamps_are_rfc3339_with_milliseconds_and_the_cached_second_is_right() {
    let at = |ms: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
    let mut cache = StampCache::default();
    let mut out = [0u8; 24];
    // 2026-12-01T00:49:13.875Z
    let t = 1_796_086_153_875;
    assert_eq!(cache.stamp(at(t), &mut out), "2026-12-01T00:49:13.875Z");
    // Same second, cached date: only the milliseconds change.
    assert_eq!(
        cache.stamp(at(t + 100), &mut out),
        "2026-12-01T00:49:13.975Z"
    );
    // The next second and the next day are worked out anew.
    assert_eq!(
        cache.stamp(at(t + 125), &mut out),
        "2026-12-01T00:49:14.000Z"
    );
    assert_eq!(
        cache.stamp(at(t + 86_400_000), &mut out),
        "2026-12-02T00:49:13.875Z"
    );
    assert_eq!(cache.stamp(None, &mut out), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339_ms(at(t)), "2026-12-01T00:49:13.875Z");
}

#[test]
fn text_escaping_matches_a_byte_by_byte_escape_for_every_byte_and_run() {
    use crate::conn::access::escape_text;
    let reference = |bytes: &[u8]| {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
                out.extend_from_slice(format!("\\x{b:02X}").as_bytes());
            } else {
                out.push(b);
            }
        }
        out
    };
    let every: Vec<u8> = (0..=255u8).collect();
    let mut inputs: Vec<Vec<u8>> = vec![Vec::new(), b"/small?a=1".to_vec(), every.clone()];
    inputs.extend(every.iter().map(|&b| vec![b'a', b, b'z']));
    inputs.push(b"\"\\\"".to_vec());
    for input in inputs {
        let mut out = b"x".to_vec();
        escape_text(&mut out, &input);
        assert_eq!(out, [&b"x"[..], &reference(&input)].concat(), "{input:?}");
    }
}

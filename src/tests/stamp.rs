//! The access records' RFC 3339 time: formatted into a stack buffer, the
//! date worked out once a second and reused within it.

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

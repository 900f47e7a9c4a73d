//! The time of an access record as RFC 3339 in UTC with milliseconds,
//! written into a stack buffer: the date is worked out once a second and
//! reused by every record of that second ([`StampCache`]).
//!
//! What it must not know: the record's other fields, the log's format,
//! sockets.

use std::io::Write as _;
use std::time::SystemTime;

use crate::text;

/// `time` as RFC 3339 in UTC with milliseconds (`2026-01-02T03:04:05.678Z`);
/// the epoch if the clock is before it.
pub(crate) fn rfc3339_ms(time: Option<SystemTime>) -> String {
    let mut out = [0u8; 24];
    StampCache::default().stamp(time, &mut out).to_string()
}

/// The second last written as RFC 3339 (`YYYY-MM-DDTHH:MM:SS`): the
/// records of one second share it, so the calendar date is worked out
/// once a second, not per record, and no record allocates its time.
#[derive(Debug, Default)]
pub(crate) struct StampCache {
    /// Seconds since the epoch of `text`, if set.
    secs: Option<u64>,
    text: [u8; 19],
}

impl StampCache {
    /// `time` as RFC 3339 in UTC with milliseconds
    /// (`2026-01-02T03:04:05.678Z`), written into `out`; the epoch if the
    /// clock is before it.
    pub(crate) fn stamp<'a>(&mut self, time: Option<SystemTime>, out: &'a mut [u8; 24]) -> &'a str {
        let since = time
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        let secs = since.as_secs();
        if self.secs != Some(secs) {
            let rem = secs % 86_400;
            let (y, m, d) = crate::http::date::civil_from_days(secs / 86_400);
            let mut text = std::io::Cursor::new(&mut self.text[..]);
            let _ = write!(
                text,
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            );
            self.secs = Some(secs);
        }
        let (head, tail) = out.split_at_mut(19);
        head.copy_from_slice(&self.text);
        let ms = u64::from(since.subsec_millis());
        let digits = [
            b'.',
            text::digit(ms / 100),
            text::digit(ms / 10),
            text::digit(ms),
            b'Z',
        ];
        for (slot, b) in tail.iter_mut().zip(digits) {
            *slot = b;
        }
        std::str::from_utf8(out).unwrap_or_default()
    }
}

//! [`HttpDate`]: the `Date` field value (IMF-fixdate, RFC 9110 §5.6.7),
//! formatted at most once per second from a time the caller passes in.
//!
//! Why it exists: a proxy with a clock MUST add `Date` to a response that
//! has none, and to its own (RFC 9110 §6.6.1). The loop reads the clock
//! once per turn and hands it here; responses copy the cached 29 bytes, so
//! no response costs a syscall or a format.
//!
//! What it must not know: the clock itself (no `SystemTime::now` here),
//! sockets, heads.

use super::known::Known;
use std::time::{SystemTime, UNIX_EPOCH};

use super::head::ResponseHead;

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const IMF_FIXDATE_LEN: usize = 29;

/// The `Date` value for the current second.
#[derive(Debug, Clone)]
pub struct HttpDate {
    /// Whole seconds since the epoch `value` was formatted for.
    secs: u64,
    value: [u8; IMF_FIXDATE_LEN],
}

impl HttpDate {
    /// The value for `now`.
    pub fn new(now: SystemTime) -> Self {
        let secs = epoch_secs(now);
        HttpDate {
            secs,
            value: imf_fixdate(secs),
        }
    }

    /// Moves to `now`; formats again only if the second changed.
    pub fn update(&mut self, now: SystemTime) {
        let secs = epoch_secs(now);
        if secs != self.secs {
            self.secs = secs;
            self.value = imf_fixdate(secs);
        }
    }

    /// The 29 bytes of the field value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }
}

/// Adds `Date: <date>` to a final response that has no `Date` field
/// (RFC 9110 §6.6.1: a recipient with a clock MUST add one when
/// forwarding a response without it). 1xx heads are left alone (an origin
/// MAY omit `Date` from them, §6.6.1).
pub fn add_date_if_missing(head: &mut ResponseHead, date: &HttpDate) {
    if head.status >= 200 && !head.headers.has_known(Known::Date) {
        head.headers.append_known(Known::Date, date.value());
    }
}

/// Seconds since 1970 (0 for a clock before it).
fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Formats `secs` since the epoch as an IMF-fixdate (RFC 9110 §5.6.7).
pub fn imf_fixdate(secs: u64) -> [u8; IMF_FIXDATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    let weekday = DAYS.get((days % 7) as usize).copied().unwrap_or(b"Thu");
    let month_name = MONTHS
        .get(month.saturating_sub(1) as usize)
        .copied()
        .unwrap_or(b"Jan");
    let mut put = |at: usize, bytes: &[u8]| {
        for (i, &b) in bytes.iter().enumerate() {
            if let Some(slot) = out.get_mut(at + i) {
                *slot = b;
            }
        }
    };
    let two = |n: u64| [b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
    put(0, weekday);
    put(5, &two(day));
    put(8, month_name);
    put(12, &two(year / 100));
    put(14, &two(year % 100));
    put(17, &two(rem / 3600));
    put(20, &two(rem / 60 % 60));
    put(23, &two(rem % 60));
    out
}

/// (year, month 1-12, day 1-31) of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days >= 0).
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

//! Numbers and addresses written as ASCII into byte buffers without
//! `core::fmt` (issue 11: on the hot path — `X-Forwarded-For` on every
//! request, every access record — `core::fmt`'s padding and dispatch cost
//! several percent of a keep-alive request's instructions, callgrind).
//! Integers go through `itoa`; the rest is here.
//!
//! What it must not know: HTTP, sockets, what the text is for.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Appends `n` in decimal.
pub(crate) fn push_uint<N: itoa::Integer>(buf: &mut Vec<u8>, n: N) {
    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `d` in milliseconds with three decimals, rounded to the
/// nearest microsecond, halves up (`1.235` for 1,234,567 ns).
/// In 64-bit arithmetic (a `u128` division is a library call per record).
pub(crate) fn push_ms3(buf: &mut Vec<u8>, d: Duration) {
    let micros = d
        .as_secs()
        .saturating_mul(1_000_000)
        .saturating_add((u64::from(d.subsec_nanos()) + 500) / 1000);
    push_uint(buf, micros / 1000);
    let frac = micros % 1000;
    buf.extend_from_slice(&[b'.', digit(frac / 100), digit(frac / 10), digit(frac)]);
}

/// The last decimal digit of `n` as ASCII.
pub(crate) fn digit(n: u64) -> u8 {
    b'0' + u8::try_from(n % 10).unwrap_or(0)
}

/// Appends `ip` in its usual text form (`192.0.2.7`, `2001:db8::1`).
pub(crate) fn push_ip(buf: &mut Vec<u8>, ip: IpAddr) {
    buf.extend_from_slice(ip_text(ip, &mut [0; 64]).as_bytes());
}

/// `s` for a log line: whole if it has at most `max` bytes, else its
/// first `max` bytes (back to a character boundary) and `...`.
pub(crate) fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}...", s.get(..end).unwrap_or_default()))
}

/// `ip` in its usual text form, written into `out` (on the caller's
/// stack: large enough for any IPv6 address, 45 bytes).
pub(crate) fn ip_text(ip: IpAddr, out: &mut [u8; 64]) -> &str {
    let len = match ip {
        IpAddr::V4(v4) => {
            let mut len = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    put(out, &mut len, b'.');
                }
                if octet >= 100 {
                    put(out, &mut len, b'0' + octet / 100);
                }
                if octet >= 10 {
                    put(out, &mut len, b'0' + octet / 10 % 10);
                }
                put(out, &mut len, b'0' + octet % 10);
            }
            len
        }
        IpAddr::V6(_) => {
            use std::io::Write;
            let mut cursor = std::io::Cursor::new(&mut out[..]);
            let _ = write!(cursor, "{ip}");
            usize::try_from(cursor.position()).unwrap_or(0)
        }
    };
    std::str::from_utf8(out.get(..len).unwrap_or_default()).unwrap_or_default()
}

/// Writes `b` at `*len` if `out` has room.
fn put(out: &mut [u8], len: &mut usize, b: u8) {
    if let Some(slot) = out.get_mut(*len) {
        *slot = b;
        *len += 1;
    }
}

/// Appends `addr` as `ip:port` (`[ip]:port` for IPv6), as `Display` does.
pub(crate) fn push_socket_addr(buf: &mut Vec<u8>, addr: SocketAddr) {
    match addr {
        SocketAddr::V4(a) => push_ip(buf, IpAddr::V4(*a.ip())),
        SocketAddr::V6(_) => {
            use std::io::Write;
            let _ = write!(buf, "{addr}");
            return;
        }
    }
    buf.push(b':');
    push_uint(buf, addr.port());
}

#[cfg(test)]
mod tests {

    #[test]
    fn cut_keeps_short_text_and_cuts_long_text_at_a_character_boundary() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcdef", 3), "abc...");
        assert_eq!(cut("aé", 2), "a...");
        assert_eq!(cut("", 0), "");
    }

    use super::*;

    #[test]
    fn milliseconds_with_three_decimals_round_to_the_microsecond() {
        for (nanos, want) in [
            (0u64, "0.000"),
            (499, "0.000"),
            (500, "0.001"),
            (1_234_567, "1.235"),
            (999_999_499, "999.999"),
            (999_999_500, "1000.000"),
            (86_400_123_456_789, "86400123.457"),
        ] {
            let mut buf = Vec::new();
            push_ms3(&mut buf, Duration::from_nanos(nanos));
            assert_eq!(String::from_utf8_lossy(&buf), want, "{nanos} ns");
        }
    }

    #[test]
    fn addresses_read_as_display_does() {
        for text in [
            "0.0.0.0:0",
            "9.10.99.100:8080",
            "255.255.255.255:65535",
            "[2001:db8::1]:443",
            "[::ffff:192.0.2.1]:80",
        ] {
            let addr: SocketAddr = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            let mut buf = Vec::new();
            push_socket_addr(&mut buf, addr);
            assert_eq!(buf, addr.to_string().as_bytes());
            let mut buf = Vec::new();
            push_ip(&mut buf, addr.ip());
            assert_eq!(buf, addr.ip().to_string().as_bytes());
        }
    }

    #[test]
    fn milliseconds_have_three_decimals_rounded_to_the_nearest_microsecond() {
        for (nanos, want) in [
            (0u64, "0.000"),
            (499, "0.000"),
            (500, "0.001"),
            (999_499, "0.999"),
            (999_500, "1.000"),
            (1_234_567, "1.235"),
            (60_001_000_000, "60001.000"),
            (123_456_789_012, "123456.789"),
        ] {
            let mut buf = Vec::new();
            push_ms3(&mut buf, Duration::from_nanos(nanos));
            assert_eq!(String::from_utf8_lossy(&buf), want, "{nanos} ns");
        }
    }
}

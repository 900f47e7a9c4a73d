//! Request ids (`request_id`, on by default; docs/edge.md "Request ids"):
//! the `X-Request-Id` a request goes upstream with, in its access record
//! and in `$request_id`.
//!
//! A request from a peer in `trusted_proxies` keeps the id it came with
//! (an earlier proxy made it), if that is 1 to 64 token characters (RFC
//! 9110 §5.6.2, so it goes into a log line as it is); any other request
//! gets a new one: 32 lowercase hex digits, 128 bits (nginx's
//! `$request_id` has the same form). The bits come from a SplitMix64
//! sequence (Steele, Lea, Flood 2014) per loop, seeded from the system's
//! random source at start: unique within a loop, and across loops and
//! hosts as far as two random 64-bit seeds differ. Ids are not secrets.
//!
//! What it must not know: sockets, HTTP beyond the field's name.

/// Length of a generated id (hex digits).
pub const LEN: usize = 32;

/// Longest id kept from a trusted peer, bytes.
pub const MAX_KEPT: usize = 64;

/// A loop's source of new ids.
#[derive(Debug)]
pub struct RequestIds {
    /// SplitMix64 state.
    state: u64,
}

impl RequestIds {
    /// A source seeded from the system's random source (`getrandom`,
    /// through ring); if that fails, from the time and the process id.
    pub fn new() -> Self {
        let mut seed = [0u8; 8];
        let random = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed);
        let seed = match random {
            Ok(()) => u64::from_le_bytes(seed),
            Err(_) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                now ^ (u64::from(std::process::id()) << 32)
            }
        };
        RequestIds::seeded(seed)
    }

    /// A source with a given seed (tests).
    pub fn seeded(seed: u64) -> Self {
        RequestIds { state: seed }
    }

    /// The next 64 bits (SplitMix64).
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A new id: [`LEN`] lowercase hex digits.
    pub fn next_id(&mut self) -> [u8; LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; LEN];
        let (hi, lo) = (self.next_u64(), self.next_u64());
        let bytes = [hi.to_be_bytes(), lo.to_be_bytes()];
        for (pair, b) in out.chunks_exact_mut(2).zip(bytes.iter().flatten()) {
            if let [h, l] = pair {
                *h = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
                *l = HEX.get(usize::from(b & 0xf)).copied().unwrap_or(b'0');
            }
        }
        out
    }
}

impl Default for RequestIds {
    fn default() -> Self {
        RequestIds::new()
    }
}

/// An id that came with a request may be kept (from a trusted peer): 1
/// to [`MAX_KEPT`] token characters.
pub fn keepable(value: &[u8]) -> bool {
    (1..=MAX_KEPT).contains(&value.len()) && crate::http::syntax::is_token(value)
}

/// The request id of `headers` as the access record and `$request_id`
/// see it: its `X-Request-Id` if [`keepable`], else none. With
/// `request_id = true` the proxy has made it so; with `false` the field
/// is the client's, and a value with spaces or other bytes would forge
/// fields of a text record or reach a `Location` as it is.
pub fn of(headers: &crate::http::Headers) -> Option<&[u8]> {
    headers
        .get_known(crate::http::known::Known::XRequestId)
        .filter(|v| keepable(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let mut ids = RequestIds::seeded(7);
        let a = ids.next_id();
        let b = ids.next_id();
        assert_ne!(a, b);
        for id in [a, b] {
            assert!(
                id.iter()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
        }
        let mut seen = std::collections::HashSet::new();
        let mut ids = RequestIds::new();
        for _ in 0..10_000 {
            assert!(seen.insert(ids.next_id()));
        }
    }

    #[test]
    fn only_short_tokens_are_kept() {
        assert!(keepable(b"0f3c9a2e-1b7d-4c1e-9a7b-2f6c8d9e0a1b"));
        assert!(keepable(&[b'a'; MAX_KEPT]));
        assert!(!keepable(&[b'a'; MAX_KEPT + 1]));
        assert!(!keepable(b""));
        assert!(!keepable(b"has space"));
        assert!(!keepable(b"quote\""));
    }
}

//! In-crate tests of the connection layer, and helpers the codec's tests share.

mod buffer;
mod buffer_sizing;
mod error;
mod exchange;
mod feed_helpers;
mod heap;
mod listen;
mod pool;
mod pool_choice;
mod stamp;
mod tls_transport;
mod token;
mod transport_feed;
mod transport_feed_clients;
mod transport_feed_refused;

/// A 64-bit linear congruential generator (Knuth's MMIX constants): a
/// repeatable sequence for tests that try many operation orders.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    /// The next value in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

//! Connection state machines: the downstream session (`downstream`), the
//! request/response exchange it runs (`exchange`), and the upstream
//! connections it borrows (`upstream`). They decide what to read and write
//! next and which interest to register; `event_loop` decides when.

pub(crate) mod downstream;
pub(crate) mod exchange;
pub(crate) mod io;
pub(crate) mod upstream;

use std::sync::Arc;
use std::time::Instant;

use mio::Registry;

use crate::buffer::BufferPool;
use crate::config::Config;
use crate::filter::Filter;
use crate::stats::Stats;
use exchange::Exchange;
use upstream::Upstreams;

/// Everything a session may touch besides itself, owned by the loop.
pub(crate) struct Shared {
    /// The process's settings.
    pub cfg: Config,
    /// The user's hooks.
    pub filter: Box<dyn Filter + Send>,
    /// The poll's registry (a clone), for interest changes.
    pub registry: Registry,
    /// Free list of body buffers.
    pub bufs: BufferPool,
    /// Upstream connections and the idle pool.
    pub ups: Upstreams,
    /// Counters.
    pub stats: Arc<Stats>,
    /// The time the current batch of events is handled at.
    pub now: Instant,
    /// Finished exchanges kept for reuse, so the steady path allocates no
    /// exchange, head or encode buffer per request (at most `MAX_SPARE`).
    /// Boxed: a session holds its exchange as a `Box`, which moves here
    /// and back without copying the struct.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Exchange>>,
    next_gen: u32,
}

/// Most finished exchanges kept for reuse (each a few hundred bytes plus
/// the storage of the largest heads it held).
const MAX_SPARE: usize = 256;

impl Shared {
    /// Assembles the shared state.
    pub(crate) fn new(
        cfg: Config,
        filter: Box<dyn Filter + Send>,
        registry: Registry,
        bufs: BufferPool,
        ups: Upstreams,
        stats: Arc<Stats>,
    ) -> Self {
        Shared {
            cfg,
            filter,
            registry,
            bufs,
            ups,
            stats,
            now: Instant::now(),
            spare: Vec::new(),
            next_gen: 0,
        }
    }

    /// An exchange to parse the next request into: a recycled one if any.
    pub(crate) fn take_exchange(&mut self) -> Box<Exchange> {
        self.spare
            .pop()
            .unwrap_or_else(|| Box::new(Exchange::blank(self.now)))
    }

    /// Keeps a finished exchange for reuse (its buffers and upstream must
    /// already be gone).
    pub(crate) fn recycle_exchange(&mut self, ex: Box<Exchange>) {
        debug_assert!(ex.upstream.is_none() && ex.to_upstream.is_none() && ex.upin.is_none());
        if self.spare.len() < MAX_SPARE && ex.upstream.is_none() {
            self.spare.push(ex);
        }
    }

    /// A fresh generation for a new slab entry's token (never 0).
    pub(crate) fn next_gen(&mut self) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        self.next_gen
    }
}

/// Tokens: bits 0..2 the kind, 2..32 the slab key, 32..64 the generation.
/// A freed slot's stale events carry the old generation and are ignored.
pub(crate) mod token {
    use mio::Token;

    #[cfg(not(target_pointer_width = "64"))]
    compile_error!("sluice's token layout needs 64-bit usize");

    /// The listener.
    pub(crate) const LISTENER: Token = Token(usize::MAX);
    /// The waker (shutdown requests).
    pub(crate) const WAKER: Token = Token(usize::MAX - 1);

    /// What a token names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Kind {
        /// A downstream session's client socket.
        Session,
        /// An upstream socket (in use or parked).
        Upstream,
    }

    const KEY_BITS: u32 = 30;
    const KEY_MASK: usize = (1 << KEY_BITS) - 1;

    fn make(kind: usize, key: usize, generation: u32) -> Token {
        Token(((generation as usize) << 32) | ((key & KEY_MASK) << 2) | kind)
    }

    /// Token of session `key`.
    pub(crate) fn session(key: usize, generation: u32) -> Token {
        make(0, key, generation)
    }

    /// Token of upstream `key`.
    pub(crate) fn upstream(key: usize, generation: u32) -> Token {
        make(1, key, generation)
    }

    /// Splits a (non-reserved) token into kind, key and generation.
    pub(crate) fn split(token: Token) -> Option<(Kind, usize, u32)> {
        let t = token.0;
        let kind = match t & 3 {
            0 => Kind::Session,
            1 => Kind::Upstream,
            _ => return None,
        };
        Some((kind, (t >> 2) & KEY_MASK, (t >> 32) as u32))
    }
}

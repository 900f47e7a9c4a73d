//! Tokens: how an event finds its connection (ARCHITECTURE.md §3).
//!
//! Layout of a `mio::Token` (64-bit `usize`): bits 0..3 the kind (client,
//! upstream or health-check socket; an admin connection; a listener), bits
//! 3..32 the slab key (a listener's: its index), bits 32..64 a generation
//! given to the slot when it was filled. A slot freed and reused within one
//! batch of events gets a new generation, so a stale event of the old
//! connection carries the old one and is dropped instead of reaching the
//! new connection. Generation 0 is never handed out.
//!
//! What it must not know: connections, HTTP. The machines see only the
//! opaque [`ConnId`] and the `Token` it yields.

use mio::Token;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("sluice's token layout needs 64-bit usize");

/// The waker (signals, shutdown requests; kind bits 6).
pub(crate) const WAKER: Token = Token(usize::MAX - 1);
/// The admin listener (kind bits 5).
pub(crate) const ADMIN_LISTENER: Token = Token(usize::MAX - 2);

/// Kind bits of a listener's token ([`listener`]).
const LISTENER_KIND: usize = 4;

/// The token of listener number `index` (the loop's listeners in order:
/// every `listen` address, then every `listen_tls` one): kind bits 4 with
/// generation 0, which neither the reserved tokens (all ones above their
/// kind) nor any connection has.
pub(crate) fn listener(index: usize) -> Token {
    Token(((index & KEY_MASK) << KIND_BITS) | LISTENER_KIND)
}

/// The listener index a token names, if it is a listener's (see
/// [`listener`]).
pub(crate) fn listener_index(token: Token) -> Option<usize> {
    let t = token.0;
    (t & KIND_MASK == LISTENER_KIND && t >> 32 == 0).then_some((t >> KIND_BITS) & KEY_MASK)
}

/// The workers' tier board's eventfd (`tier_board`: the modes table
/// changed). Kind bits 3 with all ones above: not an admin connection's
/// token (those have generation 0).
pub(crate) const TIER_WAKE: Token = Token(usize::MAX - 4);

/// The token of admin connection `key`: kind bits 3 with generation 0,
/// which no reserved token has (they carry all ones above their kind).
pub(crate) fn admin(key: usize) -> Token {
    Token(((key & KEY_MASK) << KIND_BITS) | 3)
}

/// The admin connection a token names, if it is one (see [`admin`]).
pub(crate) fn admin_key(token: Token) -> Option<usize> {
    let t = token.0;
    (t & KIND_MASK == 3 && t >> 32 == 0).then_some((t >> KIND_BITS) & KEY_MASK)
}

/// What a token names. Kind value 3 is an admin connection ([`admin`]),
/// 4 a listener ([`listener`]); the reserved tokens (the tier board's
/// `usize::MAX - 4`, the admin listener's `usize::MAX - 2`, the waker's
/// `usize::MAX - 1`) carry 3, 5 and 6 in their low three bits with all
/// ones above, which no connection's or listener's token has (theirs have
/// generation 0 or a slot's); 7 stays unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A client (downstream) socket.
    Client,
    /// An upstream socket (in use or parked).
    Upstream,
    /// An active health check's socket (`conn::check`).
    Check,
}

const KIND_BITS: u32 = 3;
const KIND_MASK: usize = (1 << KIND_BITS) - 1;
const KEY_BITS: u32 = 32 - KIND_BITS;
const KEY_MASK: usize = (1 << KEY_BITS) - 1;

/// One slab slot as it was filled: key and generation. Opaque to the
/// connection machines, which only pass it around and ask for its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnId {
    /// The slab key, below 2^29 (`KEY_BITS`; `max_connections` is far
    /// below): 4 bytes, so an id is 8 (an idle client keeps one).
    key: u32,
    generation: u32,
}

impl ConnId {
    /// The id of slot `key` filled with `generation`.
    /// Bits of `key` above `KEY_BITS` are dropped (a token could not carry
    /// them either).
    pub(crate) fn new(key: usize, generation: u32) -> Self {
        ConnId {
            key: (key & KEY_MASK) as u32,
            generation,
        }
    }

    /// The slab key.
    pub(crate) fn key(self) -> usize {
        self.key as usize
    }

    /// The generation the slot was filled with.
    pub(crate) fn generation(self) -> u32 {
        self.generation
    }

    /// The token of this slot as a socket of `kind`.
    pub(crate) fn token(self, kind: Kind) -> Token {
        let k = match kind {
            Kind::Client => 0,
            Kind::Upstream => 1,
            Kind::Check => 2,
        };
        Token(((self.generation as usize) << 32) | ((self.key() & KEY_MASK) << KIND_BITS) | k)
    }
}

/// Splits a (non-reserved) token into kind and slot id.
pub(crate) fn split(token: Token) -> Option<(Kind, ConnId)> {
    let t = token.0;
    let kind = match t & KIND_MASK {
        0 => Kind::Client,
        1 => Kind::Upstream,
        2 => Kind::Check,
        _ => return None,
    };
    Some((
        kind,
        ConnId::new((t >> KIND_BITS) & KEY_MASK, (t >> 32) as u32),
    ))
}

/// Hands out generations: never 0, wrapping after 2^32 - 1.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    pub(crate) last: u32,
}

impl Generations {
    /// The next generation.
    pub(crate) fn next(&mut self) -> u32 {
        self.last = self.last.wrapping_add(1).max(1);
        self.last
    }
}

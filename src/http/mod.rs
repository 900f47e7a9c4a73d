//! The sans-IO HTTP/1.1 codec: bytes in; heads, framing and body boundaries
//! out (ARCHITECTURE.md §2).
//!
//! Why it exists: everything the proxy must know about HTTP/1.1 syntax lives
//! here, testable with byte strings alone, so the connection state machines
//! only move bytes and ask this module what they mean.
//!
//! What it must not know: sockets (no `mio`, no `std::net` sockets), the
//! clock, buffers' watermarks, the pool. `grep mio src/http` is empty.
//!
//! Parts:
//! - [`head`]: [`RequestHead`], [`ResponseHead`], [`Headers`], and the
//!   incremental end-of-head finder [`HeadScanner`] (RFC 9112 §2-§5).
//! - [`syntax`](syntax): the token, list and field-value rules of RFC 9110
//!   §5, as byte functions.
//! - [`hop`]: hop-by-hop removal, keep-alive verdicts, forwarding fields
//!   (RFC 9110 §7.6, RFC 9112 §9.3).
//! - [`framing`]: body length per role (RFC 9112 §6.3) and [`BodyDecoder`].
//! - [`chunked`]: [`ChunkedScanner`](chunked::ChunkedScanner), the chunked-body end finder
//!   (RFC 9112 §7.1).
//! - [`request`]: [`RequestPlan`](request::RequestPlan), the verdict on a request head (target,
//!   Host, framing, hop-by-hop, forwarding fields, keep-alive, upgrade,
//!   retry class).
//! - [`response`]: [`ResponsePlan`], the verdict on a response head
//!   (interim or final, framing, upgrade, de-chunking, keep-alive).
//! - [`error`]: the one error type, [`ParseError`], and the status a
//!   rejected request gets.
//!
//! Invariants: no function panics on input (no `unwrap`, no indexing that
//! can fail, checked arithmetic); every incremental parser gives the same
//! answer whatever way its input is split; bodies are never copied or
//! changed, only measured.

pub mod chunk_encode;
pub mod chunked;
pub mod date;
pub mod error;
pub mod forwarded;
pub mod framing;
pub mod head;
pub mod headers;
pub mod hop;
pub(crate) mod known;
pub mod path;
pub mod request;
pub mod response;
pub mod runs;
pub mod scanner;
pub mod sniff;
pub(crate) mod syntax;
pub mod target;

pub use error::ParseError;
pub use framing::{BodyDecoder, BodyKind};
pub use head::{ParseHead, RequestHead, ResponseHead, reason_phrase};
pub use headers::Headers;
pub use request::{Forwarding, Refusal, ensure_host, plan_request};
pub use response::{
    ResponseContext, ResponsePlan, ResponseRefusal, finish_response_head, plan_response,
};
pub use scanner::HeadScanner;

#[cfg(test)]
mod tests;

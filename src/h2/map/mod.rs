//! HTTP/2 messages to and from sluice's heads (RFC 9113 §8): a decoded
//! request field list to a [`RequestHead`](crate::http::RequestHead) that
//! `plan_request` takes like any HTTP/1.1 request, a request trailer
//! section to fields, the DATA total against `content-length`, and a
//! [`ResponseHead`](crate::http::ResponseHead) or trailer section to an
//! HPACK block.
//!
//! Why it exists: the exchange, the plans, the filters and the upstream
//! speak HTTP/1.1 heads; HTTP/2's control data (pseudo-header fields),
//! its field rules (lower case, no connection-specific fields) and its
//! framing (DATA frames, END_STREAM) are translated here, once, with
//! every check of RFC 9113 §8.1–§8.3 and §8.5.
//!
//! What it must not know: frames, streams' states, sockets, the
//! configuration; rules the HTTP/1.1 plans already apply (hop-by-hop
//! removal upstream, framing normalisation, `Via`) stay theirs.
//!
//! Parts: `fields` (validity shared by both directions), `request`,
//! `body`, `response`.

mod body;
mod fields;
mod request;
mod response;

pub use body::BodyLength;
pub use request::{MappedRequest, Refusal, map_request, map_request_into, map_trailers};
pub use response::{encode_response_head, encode_trailer_section, encode_trailers, has_content};

//! The response half of an [`Exchange`]: where it stands ([`Resp`]: the
//! head awaited, the body relayed, done), whether any response byte came,
//! and what the upstream socket is watched for while it stands there. Its
//! head is taken in `conn/response_head.rs`, its body pumped in `relay.rs`.
//!
//! What it must not know: the client socket, the request half's framing,
//! how the head is parsed or the body relayed.

use super::Exchange;
use crate::http::BodyDecoder;

/// Where the response half stands.
#[derive(Debug)]
pub(crate) enum Resp {
    /// Waiting for (the rest of) a response head; 1xx heads may pass.
    AwaitHead,
    /// The final head went downstream; the body is being relayed.
    Body(BodyDecoder),
    /// The whole response was read from the upstream.
    Done,
}

impl Exchange {
    /// The whole response was read from the upstream.
    pub(crate) fn response_done(&self) -> bool {
        matches!(self.resp, Resp::Done)
    }

    /// No byte of a response (not even a 1xx) came from the current
    /// upstream connection.
    pub(crate) fn no_response_byte(&self) -> bool {
        matches!(self.resp, Resp::AwaitHead)
            && !self.interim_sent
            && self.upin.as_ref().is_none_or(|b| b.is_empty())
    }

    /// What the upstream socket should be watched for now:
    /// `(readable, writable)`. Reading follows the sink's room (the head
    /// buffer, or the client's response buffer `client_out_room`).
    pub(crate) fn upstream_interest(&self, client_out_room: bool) -> (bool, bool) {
        let read = match &self.resp {
            Resp::AwaitHead => self.upin.as_ref().is_none_or(|b| b.room() > 0),
            Resp::Body(_) => client_out_room,
            Resp::Done => true,
        };
        let write = self.to_upstream.as_ref().is_some_and(|b| !b.is_empty());
        (read, write)
    }
}

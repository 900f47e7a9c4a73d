//! The request half of an [`Exchange`]: where it stands ([`ReqHalf`]: body
//! bytes still to come, taken whole, or abandoned), the request body found
//! in the client's bytes and held to `max_body_size`, and what the other
//! parts ask of it (taken? sent? how much is left?). The request's bytes
//! go client → upstream; its head was encoded at [`Exchange::start`].
//!
//! What it must not know: the client socket, the response half, how the
//! bytes are pumped (`relay.rs`).

use super::Exchange;
use crate::http::{BodyDecoder, ParseError};

/// Where the request half stands.
#[derive(Debug)]
pub(crate) enum ReqHalf {
    /// Body bytes are still to come from the client (in a tunnel: until
    /// the client's EOF).
    Body(BodyDecoder),
    /// The whole request was taken from the client.
    Taken,
    /// The rest of the request is dropped: the upstream answered first, or
    /// stopped reading after its answer began. The client connection closes
    /// after the response.
    Abandoned,
}

impl ReqHalf {
    /// The forwarded bytes at the end of the body so far that may start
    /// its last chunk ([`BodyDecoder::last_chunk_bytes`]); 0 once taken.
    pub(crate) fn last_chunk_bytes(&self) -> usize {
        match self {
            ReqHalf::Body(decoder) => decoder.last_chunk_bytes(),
            _ => 0,
        }
    }

    /// Finds where the body ends in `bytes`: returns how many of them are
    /// body; becomes `Taken` at the body's end. Nothing is taken unless
    /// the half is `Body`. `redundant` gets the ranges of those bytes the
    /// forwarded body leaves out (`BodyDecoder::scan_forward`).
    ///
    /// Errors: the body's framing is invalid (chunked syntax).
    /// Body data bytes found (chunk framing excluded) are added to `data`.
    pub(crate) fn scan(
        &mut self,
        bytes: &[u8],
        data: &mut u64,
        redundant: &mut Vec<std::ops::Range<usize>>,
    ) -> Result<usize, ParseError> {
        redundant.clear();
        let ReqHalf::Body(decoder) = self else {
            return Ok(0);
        };
        let before = decoder.data_bytes();
        let n = decoder.scan_forward(bytes, redundant)?;
        *data += decoder.data_bytes().saturating_sub(before);
        if decoder.is_done() {
            *self = ReqHalf::Taken;
        }
        Ok(n)
    }
}

impl Exchange {
    /// Body bytes from the client are framed by `decoder` from now on (a
    /// tunnel's until-close after a 101).
    pub(crate) fn set_request_body(&mut self, decoder: BodyDecoder) {
        self.req_half = if decoder.is_done() {
            ReqHalf::Taken
        } else {
            ReqHalf::Body(decoder)
        };
    }

    /// Finds where the request body ends in `bytes` (read from the client
    /// after what was scanned before): returns how many of them are body.
    /// The half becomes `Taken` at the body's end. `ranges` then holds
    /// the ranges of those bytes the forwarded body leaves out.
    ///
    /// Errors: the body's framing is invalid (chunked syntax).
    pub(crate) fn scan_request(&mut self, bytes: &[u8]) -> Result<usize, ParseError> {
        let n = self
            .req_half
            .scan(bytes, &mut self.req_body_bytes, &mut self.ranges)?;
        self.check_body_limit()?;
        if n > 0 {
            // The client no longer waits for a 100.
            self.expect_continue = false;
        }
        Ok(n)
    }

    /// Errors: the body scanned so far, with the rest of the chunk whose
    /// size line came, is over `max_body` (a chunk of `7fffffff` is
    /// refused at its size line, not after `max_body` bytes of it).
    pub(crate) fn check_body_limit(&self) -> Result<(), ParseError> {
        let announced = match &self.req_half {
            ReqHalf::Body(d) => d.chunk_left(),
            _ => 0,
        };
        if self.max_body > 0 && self.req_body_bytes.saturating_add(announced) > self.max_body {
            return Err(ParseError::BodyTooLarge);
        }
        Ok(())
    }

    /// The client sent EOF while the request half was open.
    ///
    /// Errors: `Truncated` unless the body is delimited by close.
    pub(crate) fn request_eof(&mut self) -> Result<(), ParseError> {
        if let ReqHalf::Body(decoder) = &mut self.req_half {
            decoder.finish_on_eof()?;
            self.req_half = ReqHalf::Taken;
        }
        Ok(())
    }

    /// Request body bytes left, if known (for clamping reads).
    pub(crate) fn request_remaining(&self) -> Option<u64> {
        match &self.req_half {
            ReqHalf::Body(d) => d.remaining_hint(),
            _ => Some(0),
        }
    }

    /// The rest of the request is dropped (see [`ReqHalf::Abandoned`]).
    pub(crate) fn abandon_request(&mut self) {
        self.req_half = ReqHalf::Abandoned;
    }

    /// The request was dropped before it was all taken or sent.
    pub(crate) fn request_abandoned(&self) -> bool {
        matches!(self.req_half, ReqHalf::Abandoned)
    }

    /// The whole request body was taken from the client.
    pub(crate) fn request_body_done(&self) -> bool {
        matches!(self.req_half, ReqHalf::Taken)
    }

    /// The request half is over: its body fully taken, or abandoned.
    pub(crate) fn request_taken(&self) -> bool {
        !matches!(self.req_half, ReqHalf::Body(_))
    }

    /// Every request byte reached the upstream's socket.
    pub(crate) fn request_sent(&self) -> bool {
        self.request_body_done() && self.to_upstream.as_ref().is_none_or(|b| b.is_empty())
    }
}

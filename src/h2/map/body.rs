//! [`BodyLength`]: a request's DATA total against its `content-length`
//! (RFC 9113 §8.1.1).
//!
//! Why it exists: a `content-length` that disagrees with the DATA frames
//! makes the request malformed; the upstream was promised that many
//! bytes, so the disagreement must be caught before a byte too many goes
//! out, and at the end of the stream.
//!
//! What it must not know: frames, windows, the upstream.

use crate::h2::{ErrorCode, H2Error};

/// The DATA counted on one request stream, and the length it declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLength {
    declared: Option<u64>,
    received: u64,
}

impl BodyLength {
    /// A stream whose request declared `declared` bytes (`None`: no
    /// `content-length`, nothing to check).
    pub fn new(declared: Option<u64>) -> BodyLength {
        BodyLength {
            declared,
            received: 0,
        }
    }

    /// Data bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Data bytes the request still declares it will send (`None`: no
    /// `content-length`).
    pub fn left(&self) -> Option<u64> {
        self.declared.map(|d| d.saturating_sub(self.received))
    }

    /// A DATA frame of `len` data bytes (padding not counted) arrived on
    /// `stream_id`; `end_stream`: it ends the request.
    ///
    /// Errors: more bytes than declared, or fewer at END_STREAM: a stream
    /// error PROTOCOL_ERROR (RFC 9113 §8.1.1). Checked before the bytes
    /// are forwarded, so the upstream never gets more than promised.
    pub fn data(&mut self, len: usize, end_stream: bool, stream_id: u32) -> Result<(), H2Error> {
        self.received = self
            .received
            .saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
        if let Some(declared) = self.declared
            && self.received > declared
        {
            return Err(malformed(
                stream_id,
                "DATA beyond content-length (RFC 9113 §8.1.1)",
            ));
        }
        if end_stream {
            return self.end(stream_id);
        }
        Ok(())
    }

    /// The request ended without more DATA (a trailer section with
    /// END_STREAM).
    ///
    /// Errors: fewer bytes than declared: a stream error PROTOCOL_ERROR
    /// (RFC 9113 §8.1.1).
    pub fn end(&self, stream_id: u32) -> Result<(), H2Error> {
        match self.declared {
            Some(declared) if declared != self.received => Err(malformed(
                stream_id,
                "DATA total differs from content-length (RFC 9113 §8.1.1)",
            )),
            _ => Ok(()),
        }
    }
}

/// A malformed request: stream error PROTOCOL_ERROR (RFC 9113 §8.1.1).
fn malformed(stream_id: u32, why: &'static str) -> H2Error {
    H2Error::Stream(stream_id, ErrorCode::ProtocolError, why)
}

//! The sans-IO HTTP/2 codec for the downstream side (RFC 9113, RFC 7541):
//! bytes in; frames, header blocks, decoded field lists and verdicts out;
//! bytes of frames and HPACK blocks out (DESIGN §11).
//!
//! Why it exists: clients may speak HTTP/2 to sluice while upstreams stay
//! HTTP/1.1. Everything the proxy must know about HTTP/2's syntax and
//! rules lives here as pure code over bytes, tested without sockets and
//! split at every byte, so the connection machine (streams, exchanges,
//! the coupling of flow control to the watermarks) only asks it what
//! bytes mean and what to answer.
//!
//! What it must not know: sockets, mio, the clock, buffers' watermarks,
//! the configuration (the caller passes every limit), the pool, how
//! often a peer may do something (the machine counts rates; this module
//! hands it one event per frame to count).
//!
//! Parts:
//! - [`frame`]: the frame header, types and flags; encoders appending to
//!   a `Vec<u8>` (RFC 9113 §4, §6).
//! - [`decode`]: [`FrameDecoder`](decode::FrameDecoder), the incremental
//!   frame reader: the client preface, one event per frame, header
//!   blocks joined across CONTINUATION and bounded in bytes, every
//!   frame-level error rule of RFC 9113 §4–§6.
//! - [`hpack`]: the HPACK decoder and encoder (RFC 7541), with the
//!   dynamic table bounded by our SETTINGS_HEADER_TABLE_SIZE and the
//!   decoded list bounded by SETTINGS_MAX_HEADER_LIST_SIZE.
//! - [`settings`]: our settings and the peer's; a SETTINGS frame applied
//!   with the checks of RFC 9113 §6.5.2.
//! - [`window`]: flow-control window arithmetic (RFC 9113 §5.2, §6.9).
//! - [`stream_state`]: the stream states of RFC 9113 §5.1 as pure
//!   transitions, with the error for each frame in the wrong state.
//! - [`map`]: a decoded request field list to sluice's
//!   [`RequestHead`](crate::http::RequestHead), trailers, and a
//!   [`ResponseHead`](crate::http::ResponseHead) to an HPACK block
//!   (RFC 9113 §8).
//!
//! Errors: every rule broken is an [`H2Error`], a connection error
//! (GOAWAY, then close) or a stream error (RST_STREAM) with the code RFC
//! 9113 names for it, section by section; the reason is a `&'static str`
//! for the log.
//!
//! Invariants: no function panics on input (no `unwrap`, no indexing
//! that can fail, checked arithmetic); the frame decoder gives the same
//! events whatever way its input is split; nothing a peer sends is
//! buffered without a bound the caller set.

pub mod decode;
pub mod frame;
pub mod hpack;
pub mod map;
pub mod settings;
pub mod stream_state;
pub mod window;

use std::fmt;

/// The client connection preface (RFC 9113 §3.4): these 24 octets, then
/// a SETTINGS frame.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The error codes of RFC 9113 §7, as RST_STREAM and GOAWAY carry them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorCode {
    /// Not an error: a graceful GOAWAY, or a RST_STREAM after a complete
    /// response (RFC 9113 §8.1).
    NoError = 0x0,
    /// An unspecific protocol error.
    ProtocolError = 0x1,
    /// An unexpected internal error.
    InternalError = 0x2,
    /// The peer broke flow control (RFC 9113 §5.2, §6.9).
    FlowControlError = 0x3,
    /// A SETTINGS frame was not acknowledged in time (RFC 9113 §6.5.3).
    SettingsTimeout = 0x4,
    /// A frame came after the stream was half-closed (RFC 9113 §5.1).
    StreamClosed = 0x5,
    /// A frame had an invalid size (RFC 9113 §4.2).
    FrameSizeError = 0x6,
    /// The stream was refused before any processing (RFC 9113 §8.7).
    RefusedStream = 0x7,
    /// The stream is no longer needed.
    Cancel = 0x8,
    /// The field section compression context is broken (RFC 9113 §4.3).
    CompressionError = 0x9,
    /// A CONNECT tunnel was reset (RFC 9113 §8.5).
    ConnectError = 0xa,
    /// The peer exhibits behaviour that might generate excessive load.
    EnhanceYourCalm = 0xb,
    /// The transport does not meet the security requirements (RFC 9113
    /// §9.2).
    InadequateSecurity = 0xc,
    /// HTTP/1.1 must be used instead.
    Http11Required = 0xd,
}

impl ErrorCode {
    /// The 32-bit value on the wire.
    pub fn wire(self) -> u32 {
        self as u32
    }

    /// The code for a value received on the wire; `None` for a value RFC
    /// 9113 does not define (RFC 9113 §7: an unknown code MUST NOT
    /// trigger special behaviour; it may be treated as INTERNAL_ERROR).
    pub fn from_wire(value: u32) -> Option<ErrorCode> {
        Some(match value {
            0x0 => ErrorCode::NoError,
            0x1 => ErrorCode::ProtocolError,
            0x2 => ErrorCode::InternalError,
            0x3 => ErrorCode::FlowControlError,
            0x4 => ErrorCode::SettingsTimeout,
            0x5 => ErrorCode::StreamClosed,
            0x6 => ErrorCode::FrameSizeError,
            0x7 => ErrorCode::RefusedStream,
            0x8 => ErrorCode::Cancel,
            0x9 => ErrorCode::CompressionError,
            0xa => ErrorCode::ConnectError,
            0xb => ErrorCode::EnhanceYourCalm,
            0xc => ErrorCode::InadequateSecurity,
            0xd => ErrorCode::Http11Required,
            _ => return None,
        })
    }

    /// The name RFC 9113 §7 gives the code, for logs (`PROTOCOL_ERROR`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "NO_ERROR",
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::FlowControlError => "FLOW_CONTROL_ERROR",
            ErrorCode::SettingsTimeout => "SETTINGS_TIMEOUT",
            ErrorCode::StreamClosed => "STREAM_CLOSED",
            ErrorCode::FrameSizeError => "FRAME_SIZE_ERROR",
            ErrorCode::RefusedStream => "REFUSED_STREAM",
            ErrorCode::Cancel => "CANCEL",
            ErrorCode::CompressionError => "COMPRESSION_ERROR",
            ErrorCode::ConnectError => "CONNECT_ERROR",
            ErrorCode::EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            ErrorCode::InadequateSecurity => "INADEQUATE_SECURITY",
            ErrorCode::Http11Required => "HTTP_1_1_REQUIRED",
        }
    }
}

/// A broken rule of RFC 9113 and what it costs (RFC 9113 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Error {
    /// A connection error (RFC 9113 §5.4.1): send GOAWAY with this code
    /// and the last stream processed, then close the connection.
    Connection(ErrorCode, &'static str),
    /// A stream error (RFC 9113 §5.4.2) on stream `.0`: send RST_STREAM
    /// with this code; the connection goes on.
    Stream(u32, ErrorCode, &'static str),
}

impl H2Error {
    /// The error code to send.
    pub fn code(&self) -> ErrorCode {
        match *self {
            H2Error::Connection(code, _) | H2Error::Stream(_, code, _) => code,
        }
    }

    /// Why, in words, for the log.
    pub fn reason(&self) -> &'static str {
        match *self {
            H2Error::Connection(_, why) | H2Error::Stream(_, _, why) => why,
        }
    }

    /// The stream a stream error resets; `None` for a connection error.
    pub fn stream_id(&self) -> Option<u32> {
        match *self {
            H2Error::Connection(..) => None,
            H2Error::Stream(id, ..) => Some(id),
        }
    }
}

impl fmt::Display for H2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            H2Error::Connection(code, why) => {
                write!(f, "HTTP/2 connection error {}: {why}", code.name())
            }
            H2Error::Stream(id, code, why) => {
                write!(f, "HTTP/2 stream {id} error {}: {why}", code.name())
            }
        }
    }
}

impl std::error::Error for H2Error {}

/// A connection error of type PROTOCOL_ERROR, the most common one.
pub(crate) fn protocol(why: &'static str) -> H2Error {
    H2Error::Connection(ErrorCode::ProtocolError, why)
}

/// A connection error of type FRAME_SIZE_ERROR (RFC 9113 §4.2).
pub(crate) fn frame_size(why: &'static str) -> H2Error {
    H2Error::Connection(ErrorCode::FrameSizeError, why)
}

#[cfg(test)]
mod tests;

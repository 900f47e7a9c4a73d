//! Flow-control windows as plain arithmetic (RFC 9113 §5.2, §6.9).
//!
//! Why it exists: both directions of every stream, and the connection,
//! keep a window; its rules (no window over 2^31-1, a negative window
//! after SETTINGS_INITIAL_WINDOW_SIZE shrinks, each error's code and
//! scope) are the same everywhere, so they are one type.
//!
//! What it must not know: frames, streams' states, buffers (the machine
//! decides when to grant; DESIGN §11 couples it to the watermarks).
//!
//! Invariant: a window is within -2^31..=2^31-1 bytes; an operation that
//! would leave that range is an error and changes nothing.

use super::frame::MAX_STREAM_ID;
use super::{ErrorCode, H2Error};

/// The largest window: 2^31-1 bytes (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = MAX_STREAM_ID as i64;

/// One flow-control window, in bytes: on the send side what the peer
/// still lets us send; on the receive side what we still let it send.
/// It may be negative (RFC 9113 §6.9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    size: i64,
}

impl Window {
    /// A window of `initial` bytes (at most 2^31-1).
    pub fn new(initial: u32) -> Window {
        Window {
            size: i64::from(initial).min(MAX_WINDOW),
        }
    }

    /// The window in bytes; negative after a shrinking
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub fn size(&self) -> i64 {
        self.size
    }

    /// Bytes that may be sent now: the window, or 0 when it is negative.
    pub fn available(&self) -> u32 {
        u32::try_from(self.size.max(0)).unwrap_or(u32::MAX)
    }

    /// Send side: `n` bytes of DATA went out (at most [`Self::available`]:
    /// more is a bug of the caller and takes the window to 0 or below
    /// just the same).
    pub fn spend(&mut self, n: u32) {
        debug_assert!(n <= self.available(), "sent past the window");
        self.size = self.size.saturating_sub(i64::from(n));
    }

    /// Receive side: a DATA frame of `flow_len` bytes arrived on
    /// `stream_id` (0: the connection window).
    ///
    /// Errors: more than the window allows: FLOW_CONTROL_ERROR (RFC 9113
    /// §6.9.1), a connection error for the connection window, a stream
    /// error for a stream's.
    pub fn receive(&mut self, flow_len: u32, stream_id: u32) -> Result<(), H2Error> {
        let n = i64::from(flow_len);
        if n > self.size {
            return Err(error(
                stream_id,
                "DATA past the flow-control window (RFC 9113 §6.9.1)",
            ));
        }
        self.size -= n;
        Ok(())
    }

    /// A WINDOW_UPDATE of `increment` bytes (1..=2^31-1; the decoder
    /// refuses 0) for `stream_id` (0: the connection) on the send side,
    /// or our own grant on the receive side.
    ///
    /// Errors: a window over 2^31-1: FLOW_CONTROL_ERROR (RFC 9113 §6.9.1),
    /// a stream error on a stream, a connection error on the connection.
    pub fn grant(&mut self, increment: u32, stream_id: u32) -> Result<(), H2Error> {
        let size = self.size.saturating_add(i64::from(increment));
        if size > MAX_WINDOW {
            return Err(error(
                stream_id,
                "flow-control window over 2^31-1 (RFC 9113 §6.9.1)",
            ));
        }
        self.size = size;
        Ok(())
    }

    /// Applies a change of SETTINGS_INITIAL_WINDOW_SIZE by `delta` bytes
    /// (new − old, [`super::settings::Applied::window_delta`]) to a
    /// stream's send window (RFC 9113 §6.9.2): the window may become
    /// negative.
    ///
    /// Errors: a window over 2^31-1: a connection error FLOW_CONTROL_ERROR
    /// (RFC 9113 §6.9.2).
    pub fn adjust(&mut self, delta: i64) -> Result<(), H2Error> {
        let size = self.size.saturating_add(delta);
        if size > MAX_WINDOW {
            return Err(error(
                0,
                "SETTINGS_INITIAL_WINDOW_SIZE takes a window over 2^31-1 (RFC 9113 §6.9.2)",
            ));
        }
        self.size = size.max(-MAX_WINDOW - 1);
        Ok(())
    }
}

/// FLOW_CONTROL_ERROR on `stream_id`, or on the connection for 0.
fn error(stream_id: u32, why: &'static str) -> H2Error {
    if stream_id == 0 {
        H2Error::Connection(ErrorCode::FlowControlError, why)
    } else {
        H2Error::Stream(stream_id, ErrorCode::FlowControlError, why)
    }
}

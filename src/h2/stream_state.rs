//! Stream states (RFC 9113 §5.1) as pure transitions on frames received
//! and sent, with the error for a frame in the wrong state.
//!
//! Why it exists: which frame is allowed on which stream, and what it
//! costs when it is not, is a table in RFC 9113 §5.1, §5.1.1, §6.1,
//! §6.2, §6.4, §6.9 and §8.1; here it is one function per direction.
//!
//! What it must not know: frames' bytes, flow control, the machine's
//! store of streams (it passes the state it holds, or asks
//! [`unknown_stream`] for a stream it holds none for).
//!
//! States (a server never reserves streams: push is off):
//! - `Idle`: not opened yet;
//! - `Open`: both sides may send;
//! - `HalfClosedRemote`: the client ended its side (END_STREAM);
//! - `HalfClosedLocal`: we ended ours;
//! - `Closed`: both ended, or reset; how it closed decides what a late
//!   frame costs.

use super::{ErrorCode, H2Error, protocol};

/// How a stream came to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closure {
    /// Both sides sent END_STREAM.
    Ended,
    /// The client sent RST_STREAM.
    ResetByPeer,
    /// We sent RST_STREAM: frames the client sent before it saw it are
    /// ignored (RFC 9113 §5.1, "closed"), though DATA still counts
    /// against the connection window and HEADERS still go through HPACK.
    ResetByUs,
    /// The machine no longer holds the stream ([`unknown_stream`]).
    Forgotten,
}

/// A stream's state (RFC 9113 §5.1, without the reserved states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// Not opened yet.
    Idle,
    /// Both sides may send.
    Open,
    /// We sent END_STREAM; the client may still send.
    HalfClosedLocal,
    /// The client sent END_STREAM; we may still send.
    HalfClosedRemote,
    /// Both sides are done, or the stream was reset.
    Closed(Closure),
}

/// A frame received on a stream (not stream 0), as far as its state
/// matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    /// A complete header block (HEADERS and its CONTINUATION frames).
    Headers {
        /// The HEADERS frame had END_STREAM.
        end_stream: bool,
    },
    /// A DATA frame.
    Data {
        /// END_STREAM was set.
        end_stream: bool,
    },
    /// A RST_STREAM frame.
    RstStream,
    /// A WINDOW_UPDATE frame (or a stream error the decoder found in
    /// one).
    WindowUpdate,
    /// A PRIORITY frame (or a stream error the decoder found in one).
    Priority,
}

/// A frame we send on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    /// A header block (a response head, an interim one, or trailers).
    Headers {
        /// END_STREAM set.
        end_stream: bool,
    },
    /// A DATA frame.
    Data {
        /// END_STREAM set.
        end_stream: bool,
    },
    /// A RST_STREAM frame.
    RstStream,
}

/// What receiving a frame does to a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Process the frame; the stream is now in this state.
    Go(StreamState),
    /// Discard the frame (after its connection-level effects: DATA
    /// counts against the connection window, HEADERS go through HPACK);
    /// the state does not change.
    Ignore,
}

/// The state of a stream the machine holds no record of: idle if its
/// identifier is above every stream the client opened (`highest_opened`),
/// else closed — skipped identifiers close implicitly when a higher one
/// opens (RFC 9113 §5.1.1).
pub fn unknown_stream(stream_id: u32, highest_opened: u32) -> StreamState {
    if stream_id > highest_opened {
        StreamState::Idle
    } else {
        StreamState::Closed(Closure::Forgotten)
    }
}

/// A client may open another stream while `open` (streams open or
/// half-closed) is below our SETTINGS_MAX_CONCURRENT_STREAMS `limit`.
///
/// Errors: at the limit, the new stream is refused with a stream error
/// REFUSED_STREAM (RFC 9113 §5.1.2: the client may retry it).
pub fn admit(stream_id: u32, open: u32, limit: u32) -> Result<(), H2Error> {
    if open >= limit {
        return Err(H2Error::Stream(
            stream_id,
            ErrorCode::RefusedStream,
            "over SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §5.1.2)",
        ));
    }
    Ok(())
}

/// The transition for a frame received on `stream_id` in `state`.
///
/// Errors, by state:
/// - idle: HEADERS on an even identifier (RFC 9113 §5.1.1), or any frame
///   but HEADERS and PRIORITY (§5.1): connection PROTOCOL_ERROR;
/// - open / half-closed (local): a second HEADERS without END_STREAM (a
///   trailer section must end the stream, §8.1): stream PROTOCOL_ERROR;
/// - half-closed (remote): HEADERS or DATA: stream STREAM_CLOSED (§5.1,
///   §6.1);
/// - closed after END_STREAM both ways: HEADERS: connection
///   STREAM_CLOSED (§5.1 "closed"); DATA: stream STREAM_CLOSED (§6.1);
/// - closed by the client's RST_STREAM: HEADERS or DATA: stream
///   STREAM_CLOSED (§5.1);
/// - forgotten: HEADERS reuses an identifier (§5.1.1): connection
///   PROTOCOL_ERROR; DATA: stream STREAM_CLOSED (§6.1).
///
/// PRIORITY is allowed in every state; WINDOW_UPDATE and RST_STREAM on
/// a closed stream are ignored (§5.1: they may cross our END_STREAM or
/// RST_STREAM); every frame on a stream we reset is ignored.
pub fn on_recv(state: StreamState, stream_id: u32, frame: Recv) -> Result<Verdict, H2Error> {
    use StreamState::*;
    let stream_closed = |why| Err(H2Error::Stream(stream_id, ErrorCode::StreamClosed, why));
    let next = match (state, frame) {
        (_, Recv::Priority) => state,
        (Idle, Recv::Headers { end_stream }) => {
            if stream_id.is_multiple_of(2) {
                return Err(protocol(
                    "client-initiated stream with an even identifier (RFC 9113 §5.1.1)",
                ));
            }
            if end_stream { HalfClosedRemote } else { Open }
        }
        (Idle, _) => {
            return Err(protocol(
                "frame other than HEADERS or PRIORITY on an idle stream (RFC 9113 §5.1)",
            ));
        }
        (Open | HalfClosedLocal, Recv::Headers { end_stream: false }) => {
            return Err(H2Error::Stream(
                stream_id,
                ErrorCode::ProtocolError,
                "second HEADERS without END_STREAM (RFC 9113 §8.1)",
            ));
        }
        (Open, Recv::Headers { .. } | Recv::Data { end_stream: true }) => HalfClosedRemote,
        (HalfClosedLocal, Recv::Headers { .. } | Recv::Data { end_stream: true }) => {
            Closed(Closure::Ended)
        }
        (Open | HalfClosedLocal, Recv::Data { end_stream: false } | Recv::WindowUpdate) => state,
        (Open | HalfClosedLocal | HalfClosedRemote, Recv::RstStream) => {
            Closed(Closure::ResetByPeer)
        }
        (HalfClosedRemote, Recv::Headers { .. } | Recv::Data { .. }) => {
            return stream_closed("frame after the client's END_STREAM (RFC 9113 §5.1)");
        }
        (HalfClosedRemote, Recv::WindowUpdate) => state,
        (Closed(Closure::ResetByUs), _) => return Ok(Verdict::Ignore),
        (Closed(_), Recv::WindowUpdate | Recv::RstStream) => return Ok(Verdict::Ignore),
        (Closed(Closure::Ended), Recv::Headers { .. }) => {
            return Err(H2Error::Connection(
                ErrorCode::StreamClosed,
                "HEADERS on a closed stream (RFC 9113 §5.1)",
            ));
        }
        (Closed(Closure::Forgotten), Recv::Headers { .. }) => {
            return Err(protocol(
                "HEADERS on a stream identifier already used or skipped (RFC 9113 §5.1.1)",
            ));
        }
        (Closed(_), Recv::Headers { .. } | Recv::Data { .. }) => {
            return stream_closed("frame on a closed stream (RFC 9113 §5.1, §6.1)");
        }
    };
    Ok(Verdict::Go(next))
}

/// The transition for a frame we send in `state`. Sending what the state
/// forbids is the machine's bug: it trips a `debug_assert!` and the
/// state does not change.
pub fn on_send(state: StreamState, frame: Send) -> StreamState {
    use StreamState::*;
    match (state, frame) {
        (Closed(_), _) => state,
        (_, Send::RstStream) => Closed(Closure::ResetByUs),
        (Open, Send::Headers { end_stream: true } | Send::Data { end_stream: true }) => {
            HalfClosedLocal
        }
        (
            HalfClosedRemote,
            Send::Headers { end_stream: true } | Send::Data { end_stream: true },
        ) => Closed(Closure::Ended),
        (Open | HalfClosedRemote, _) => state,
        (Idle | HalfClosedLocal, _) => {
            debug_assert!(false, "sending {frame:?} in {state:?}");
            state
        }
    }
}

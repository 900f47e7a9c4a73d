//! HTTP/2 frames on the wire: the 9-octet frame header, the frame types
//! and flags, and the encoders of every frame the server sends
//! (RFC 9113 §4.1, §6).
//!
//! Why it exists: the decoder reads frame headers and the connection
//! machine writes frames; both need the same layout, in one place.
//!
//! What it must not know: stream states, settings' meaning, HPACK, the
//! machine's buffers (encoders append to the `Vec<u8>` they are given).
//!
//! Invariant: every encoder writes the reserved bits as 0 (RFC 9113
//! §4.1) and masks stream identifiers and increments to 31 bits.

use super::ErrorCode;

/// Length of the frame header (RFC 9113 §4.1), in bytes.
pub const HEADER_LEN: usize = 9;

/// The smallest SETTINGS_MAX_FRAME_SIZE, and its initial value: 2^14
/// bytes (RFC 9113 §4.2, §6.5.2).
pub const MIN_MAX_FRAME_SIZE: u32 = 1 << 14;

/// The largest SETTINGS_MAX_FRAME_SIZE: 2^24-1 bytes (RFC 9113 §6.5.2).
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// The largest stream identifier and window increment: 2^31-1.
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// Frame type codes (RFC 9113 §6; §11.2 registry).
pub mod kind {
    /// DATA (RFC 9113 §6.1).
    pub const DATA: u8 = 0x0;
    /// HEADERS (RFC 9113 §6.2).
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (RFC 9113 §6.3), deprecated: parsed, ignored.
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM (RFC 9113 §6.4).
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS (RFC 9113 §6.5).
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE (RFC 9113 §6.6): a server never accepts one.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING (RFC 9113 §6.7).
    pub const PING: u8 = 0x6;
    /// GOAWAY (RFC 9113 §6.8).
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE (RFC 9113 §6.9).
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION (RFC 9113 §6.10).
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 §6); their meaning depends on the type.
pub mod flag {
    /// END_STREAM on DATA and HEADERS.
    pub const END_STREAM: u8 = 0x1;
    /// ACK on SETTINGS and PING.
    pub const ACK: u8 = 0x1;
    /// END_HEADERS on HEADERS, PUSH_PROMISE and CONTINUATION.
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED on DATA, HEADERS and PUSH_PROMISE.
    pub const PADDED: u8 = 0x8;
    /// PRIORITY on HEADERS.
    pub const PRIORITY: u8 = 0x20;
}

/// A frame header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length in bytes (24 bits; the header is not counted).
    pub len: u32,
    /// The frame type (see [`kind`]).
    pub kind: u8,
    /// The flags (see [`flag`]).
    pub flags: u8,
    /// The stream identifier, 31 bits (the reserved bit is dropped on
    /// receipt, RFC 9113 §4.1).
    pub stream_id: u32,
}

impl FrameHeader {
    /// Reads a frame header from the first 9 bytes of `bytes`; `None` if
    /// fewer are given.
    pub fn parse(bytes: &[u8]) -> Option<FrameHeader> {
        let h: &[u8; HEADER_LEN] = bytes.first_chunk()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream_id: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID,
        })
    }

    /// The 9 bytes of this header; a length over 2^24-1 is cut to 24
    /// bits (callers never pass one).
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let len = self.len.to_be_bytes();
        let id = (self.stream_id & MAX_STREAM_ID).to_be_bytes();
        [
            len[1], len[2], len[3], self.kind, self.flags, id[0], id[1], id[2], id[3],
        ]
    }

    /// True if `f` is set in the flags.
    pub fn has(self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Appends a frame header and `payload` (at most 2^24-1 bytes; the
/// caller keeps to the peer's SETTINGS_MAX_FRAME_SIZE).
pub fn encode_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream_id: u32, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    debug_assert!(len <= MAX_MAX_FRAME_SIZE, "frame payload over 2^24-1");
    out.extend_from_slice(
        &FrameHeader {
            len,
            kind,
            flags,
            stream_id,
        }
        .to_bytes(),
    );
    out.extend_from_slice(payload);
}

/// The header of a DATA frame of `len` payload bytes on `stream_id`
/// (RFC 9113 §6.1), for a machine that writes the header in front of
/// body bytes already in its buffer (no copy of the body).
pub fn data_header(stream_id: u32, len: u32, end_stream: bool) -> [u8; HEADER_LEN] {
    FrameHeader {
        len,
        kind: kind::DATA,
        flags: if end_stream { flag::END_STREAM } else { 0 },
        stream_id,
    }
    .to_bytes()
}

/// Appends a DATA frame without padding (RFC 9113 §6.1); `data` must fit
/// the peer's SETTINGS_MAX_FRAME_SIZE and the flow-control windows.
pub fn encode_data(out: &mut Vec<u8>, stream_id: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    encode_frame(out, kind::DATA, flags, stream_id, data);
}

/// Appends a header block as one HEADERS frame and as many CONTINUATION
/// frames as `max_frame_size` (the peer's SETTINGS_MAX_FRAME_SIZE, in
/// bytes) requires, back to back (RFC 9113 §4.3, §6.2, §6.10: no other
/// frame may come between them). END_STREAM goes on the HEADERS frame,
/// END_HEADERS on the last frame. An empty block is one empty HEADERS
/// frame.
pub fn encode_headers(
    out: &mut Vec<u8>,
    stream_id: u32,
    block: &[u8],
    end_stream: bool,
    max_frame_size: u32,
) {
    let max = usize::try_from(max_frame_size.clamp(MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE))
        .unwrap_or(usize::MAX);
    let mut chunks = block.chunks(max);
    let first = chunks.next().unwrap_or_default();
    let mut rest = chunks.peekable();
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if rest.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    encode_frame(out, kind::HEADERS, flags, stream_id, first);
    while let Some(chunk) = rest.next() {
        let flags = if rest.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        encode_frame(out, kind::CONTINUATION, flags, stream_id, chunk);
    }
}

/// Appends a SETTINGS frame listing `settings` as (identifier, value)
/// pairs, in order (RFC 9113 §6.5.1): at most 8 (RFC 9113 defines 6;
/// more are left out).
pub fn encode_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    let mut payload = [0u8; 6 * 8];
    let mut len = 0;
    for (id, value) in settings.iter().take(8) {
        if let Some(slot) = payload.get_mut(len..len + 6) {
            slot[..2].copy_from_slice(&id.to_be_bytes());
            slot[2..].copy_from_slice(&value.to_be_bytes());
            len += 6;
        }
    }
    encode_frame(
        out,
        kind::SETTINGS,
        0,
        0,
        payload.get(..len).unwrap_or_default(),
    );
}

/// Appends an empty SETTINGS frame with ACK (RFC 9113 §6.5.3).
pub fn encode_settings_ack(out: &mut Vec<u8>) {
    encode_frame(out, kind::SETTINGS, flag::ACK, 0, &[]);
}

/// Appends a PING frame with these 8 bytes of opaque data; `ack` for the
/// answer to a peer's PING, which carries the same data (RFC 9113 §6.7).
pub fn encode_ping(out: &mut Vec<u8>, data: [u8; 8], ack: bool) {
    encode_frame(out, kind::PING, if ack { flag::ACK } else { 0 }, 0, &data);
}

/// Appends a GOAWAY frame (RFC 9113 §6.8): the last peer-initiated
/// stream that was or might be processed, the code, and debug data.
pub fn encode_goaway(out: &mut Vec<u8>, last_stream_id: u32, code: ErrorCode, debug: &[u8]) {
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(last_stream_id & MAX_STREAM_ID).to_be_bytes());
    head[4..].copy_from_slice(&code.wire().to_be_bytes());
    let len = u32::try_from(head.len().saturating_add(debug.len())).unwrap_or(u32::MAX);
    out.extend_from_slice(
        &FrameHeader {
            len,
            kind: kind::GOAWAY,
            flags: 0,
            stream_id: 0,
        }
        .to_bytes(),
    );
    out.extend_from_slice(&head);
    out.extend_from_slice(debug);
}

/// Appends a RST_STREAM frame (RFC 9113 §6.4).
pub fn encode_rst_stream(out: &mut Vec<u8>, stream_id: u32, code: ErrorCode) {
    encode_frame(
        out,
        kind::RST_STREAM,
        0,
        stream_id,
        &code.wire().to_be_bytes(),
    );
}

/// Appends a WINDOW_UPDATE frame (RFC 9113 §6.9): stream 0 for the
/// connection window; `increment` in 1..=2^31-1 bytes.
pub fn encode_window_update(out: &mut Vec<u8>, stream_id: u32, increment: u32) {
    debug_assert!((1..=MAX_STREAM_ID).contains(&increment));
    encode_frame(
        out,
        kind::WINDOW_UPDATE,
        0,
        stream_id,
        &(increment & MAX_STREAM_ID).to_be_bytes(),
    );
}

//! One frame's payload read into a [`Frame`], for every frame type but
//! the header-block ones (RFC 9113 §6), and the padding of DATA and
//! HEADERS frames removed (§6.1, §6.2): the per-type rules of
//! [`FrameDecoder`](super::FrameDecoder), which finds the frames.
//!
//! What it must not know: where the bytes came from, how a header block
//! is joined (the decoder's), stream states, flow control windows.

use super::super::frame::{FrameHeader, MAX_STREAM_ID, flag, kind};
use super::super::settings::Params;
use super::super::{ErrorCode, H2Error, frame_size, protocol};
use super::{Frame, Priority};

/// The payload of a DATA or HEADERS frame without its Pad Length field
/// and padding (RFC 9113 §6.1, §6.2).
///
/// Errors: PADDED on an empty payload (FRAME_SIZE_ERROR, §4.2: too small
/// for its mandatory fields); padding as long as the payload or longer
/// (PROTOCOL_ERROR, §6.1, §6.2).
pub(super) fn strip_padding(h: FrameHeader, payload: &[u8]) -> Result<&[u8], H2Error> {
    if !h.has(flag::PADDED) {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(frame_size(
            "PADDED frame without a Pad Length (RFC 9113 §4.2)",
        ));
    };
    let pad = usize::from(pad);
    if pad >= payload.len() {
        return Err(protocol(
            "padding as long as the frame payload or longer (RFC 9113 §6.1, §6.2)",
        ));
    }
    Ok(rest
        .get(..rest.len().saturating_sub(pad))
        .unwrap_or_default())
}

/// Every frame type but HEADERS and CONTINUATION, from its header and
/// whole payload. `Ok(Some(frame))` always (the `Option` matches the
/// header-block paths).
pub(super) fn simple_frame(h: FrameHeader, payload: &[u8]) -> Result<Option<Frame<'_>>, H2Error> {
    let on_stream = |what: &'static str| {
        if h.stream_id == 0 {
            Err(protocol(what))
        } else {
            Ok(())
        }
    };
    let on_connection = |what: &'static str| {
        if h.stream_id != 0 {
            Err(protocol(what))
        } else {
            Ok(())
        }
    };
    let frame = match h.kind {
        kind::DATA => {
            on_stream("DATA on stream 0 (RFC 9113 §6.1)")?;
            Frame::Data {
                stream_id: h.stream_id,
                data: strip_padding(h, payload)?,
                flow_len: h.len,
                end_stream: h.has(flag::END_STREAM),
            }
        }
        kind::PRIORITY => {
            on_stream("PRIORITY on stream 0 (RFC 9113 §6.3)")?;
            let Ok(fields) = <&[u8; 5]>::try_from(payload) else {
                return Ok(Some(Frame::Invalid {
                    kind: h.kind,
                    error: H2Error::Stream(
                        h.stream_id,
                        ErrorCode::FrameSizeError,
                        "PRIORITY frame not 5 bytes long (RFC 9113 §6.3)",
                    ),
                }));
            };
            let priority = Priority::parse(fields);
            if let Err(error) = priority.check(h.stream_id) {
                return Ok(Some(Frame::Invalid {
                    kind: h.kind,
                    error,
                }));
            }
            Frame::Priority {
                stream_id: h.stream_id,
                priority,
            }
        }
        kind::RST_STREAM => {
            on_stream("RST_STREAM on stream 0 (RFC 9113 §6.4)")?;
            let code = be32(payload).ok_or(frame_size(
                "RST_STREAM frame not 4 bytes long (RFC 9113 §6.4)",
            ))?;
            Frame::RstStream {
                stream_id: h.stream_id,
                code,
            }
        }
        kind::SETTINGS => {
            on_connection("SETTINGS on a stream (RFC 9113 §6.5)")?;
            let ack = h.has(flag::ACK);
            if ack && !payload.is_empty() {
                return Err(frame_size("SETTINGS ACK with a payload (RFC 9113 §6.5)"));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(frame_size(
                    "SETTINGS length not a multiple of 6 (RFC 9113 §6.5)",
                ));
            }
            Frame::Settings {
                ack,
                params: Params::new(payload),
            }
        }
        kind::PUSH_PROMISE => {
            return Err(protocol("PUSH_PROMISE from a client (RFC 9113 §8.4)"));
        }
        kind::PING => {
            on_connection("PING on a stream (RFC 9113 §6.7)")?;
            let data: [u8; 8] = payload
                .try_into()
                .map_err(|_| frame_size("PING frame not 8 bytes long (RFC 9113 §6.7)"))?;
            Frame::Ping {
                ack: h.has(flag::ACK),
                data,
            }
        }
        kind::GOAWAY => {
            on_connection("GOAWAY on a stream (RFC 9113 §6.8)")?;
            let Some((fixed, debug)) = payload.split_first_chunk::<8>() else {
                return Err(frame_size("GOAWAY shorter than 8 bytes (RFC 9113 §6.8)"));
            };
            let [a, b, c, d, e, f, g, i] = *fixed;
            Frame::GoAway {
                last_stream_id: u32::from_be_bytes([a, b, c, d]) & MAX_STREAM_ID,
                code: u32::from_be_bytes([e, f, g, i]),
                debug,
            }
        }
        kind::WINDOW_UPDATE => {
            let word = be32(payload).ok_or(frame_size(
                "WINDOW_UPDATE frame not 4 bytes long (RFC 9113 §6.9)",
            ))?;
            let increment = word & MAX_STREAM_ID;
            if increment == 0 {
                if h.stream_id == 0 {
                    return Err(protocol(
                        "WINDOW_UPDATE of 0 on the connection (RFC 9113 §6.9)",
                    ));
                }
                return Ok(Some(Frame::Invalid {
                    kind: h.kind,
                    error: H2Error::Stream(
                        h.stream_id,
                        ErrorCode::ProtocolError,
                        "WINDOW_UPDATE of 0 on a stream (RFC 9113 §6.9)",
                    ),
                }));
            }
            Frame::WindowUpdate {
                stream_id: h.stream_id,
                increment,
            }
        }
        other => Frame::Unknown {
            kind: other,
            stream_id: h.stream_id,
            len: h.len,
        },
    };
    Ok(Some(frame))
}

/// A payload of exactly 4 bytes as a big-endian number.
fn be32(payload: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = payload.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

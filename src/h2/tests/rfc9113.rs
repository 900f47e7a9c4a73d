//! One named test per frame-level error rule of RFC 9113 (§3.4, §4.2,
//! §5.5, §6.1–§6.10, §8.4): the connection or stream error, its code,
//! whole and split at every byte. (Stream-state rules are in
//! `stream_state.rs`, settings' values in `settings.rs`, windows in
//! `window.rs`, HTTP rules in `map_request.rs`.)

use super::{Event, after_start, agree, decoder, start};
use crate::h2::ErrorCode::{self, *};
use crate::h2::frame::{self, flag, kind};
use crate::h2::{H2Error, PREFACE};

/// The connection error code `frames` (after the start) end with.
#[track_caller]
fn connection_error(frames: &[u8]) -> ErrorCode {
    match after_start(frames).1 {
        Some(H2Error::Connection(code, _)) => code,
        other => panic!("expected a connection error, got {other:?}"),
    }
}

/// The one event `frames` give, which must be a stream error.
#[track_caller]
fn stream_error(frames: &[u8]) -> (u32, ErrorCode) {
    let (events, error) = after_start(frames);
    assert_eq!(error, None);
    match events.as_slice() {
        [
            Event::Invalid {
                error: H2Error::Stream(id, code, _),
                ..
            },
        ] => (*id, *code),
        other => panic!("expected one stream error, got {other:?}"),
    }
}

fn raw(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::encode_frame(&mut v, kind, flags, stream_id, payload);
    v
}

#[test]
fn rfc9113_3_4_an_invalid_preface_is_a_protocol_error_at_once() {
    // The first byte that differs is enough: no waiting for 24 bytes.
    for input in [&b"GET / HTTP/1.1\r\n\r\n"[..], b"PRI * HTTP/1.1", b"X"] {
        let out = agree(input);
        assert_eq!(out.events, vec![]);
        assert_eq!(
            out.error.map(|e| e.code()),
            Some(ProtocolError),
            "{input:?}"
        );
    }
}

#[test]
fn rfc9113_3_4_the_preface_must_be_followed_by_settings() {
    let mut input = PREFACE.to_vec();
    frame::encode_ping(&mut input, [0; 8], false);
    let out = agree(&input);
    assert_eq!(out.events, vec![Event::Preface]);
    assert_eq!(out.error.map(|e| e.code()), Some(ProtocolError));
    // A SETTINGS ACK is not the client's SETTINGS.
    let mut input = PREFACE.to_vec();
    frame::encode_settings_ack(&mut input);
    assert_eq!(agree(&input).error.map(|e| e.code()), Some(ProtocolError));
}

#[test]
fn rfc9113_4_2_a_frame_over_our_max_frame_size_is_a_frame_size_error() {
    // DATA and HEADERS alike; decided from the header, before the payload.
    for k in [kind::DATA, kind::HEADERS, 0xfa] {
        let frame = raw(k, flag::END_HEADERS, 1, &vec![0u8; 16_385]);
        assert_eq!(connection_error(&frame), FrameSizeError);
        let mut input = start();
        input.extend_from_slice(&frame[..frame::HEADER_LEN]);
        let out = super::feed(decoder(), &[&input]);
        assert_eq!(out.error.map(|e| e.code()), Some(FrameSizeError));
    }
}

#[test]
fn rfc9113_4_2_a_raised_max_frame_size_admits_larger_frames() {
    let mut input = start();
    frame::encode_data(&mut input, 1, &vec![1u8; 20_000], true);
    let out = super::agree_with(
        || {
            let mut d = decoder();
            d.set_max_frame_size(32_768);
            d
        },
        &input,
    );
    assert_eq!(out.error, None);
    assert_eq!(out.events.len(), 3);
}

#[test]
fn rfc9113_5_5_unknown_frame_types_are_discarded() {
    let mut frames = raw(0x0b, 0, 0, b"");
    frames.extend(raw(0xff, 0xff, 1, &[9; 100]));
    let (events, error) = after_start(&frames);
    assert_eq!(error, None);
    assert_eq!(events.len(), 2);
}

#[test]
fn rfc9113_5_5_an_unknown_frame_inside_a_header_block_is_a_protocol_error() {
    let mut frames = raw(kind::HEADERS, 0, 1, b"\x82");
    frames.extend(raw(0xfa, 0, 1, b""));
    assert_eq!(connection_error(&frames), ProtocolError);
}

#[test]
fn rfc9113_6_1_data_on_stream_0_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::DATA, flag::END_STREAM, 0, b"test")),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_1_data_padding_as_long_as_the_payload_is_a_protocol_error() {
    // h2spec 6.1/3: length 5, Pad Length 6.
    assert_eq!(
        connection_error(&raw(
            kind::DATA,
            flag::PADDED | flag::END_STREAM,
            1,
            b"\x06Test"
        )),
        ProtocolError
    );
    // Pad Length equal to the payload length (5) is an error too...
    assert_eq!(
        connection_error(&raw(kind::DATA, flag::PADDED, 1, b"\x05Test")),
        ProtocolError
    );
    // ...one less is all padding and no data.
    let (events, error) = after_start(&raw(kind::DATA, flag::PADDED, 1, b"\x04Test"));
    assert_eq!(error, None);
    assert!(matches!(&events[0], Event::Data { data, flow_len: 5, .. } if data.is_empty()));
}

#[test]
fn rfc9113_6_1_padded_data_without_a_pad_length_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::DATA, flag::PADDED, 1, b"")),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_2_headers_on_stream_0_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::HEADERS, flag::END_HEADERS, 0, b"\x82")),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_2_headers_padding_longer_than_the_payload_is_a_protocol_error() {
    // h2spec 6.2/4: Pad Length = fragment + 2.
    let mut payload = vec![3u8];
    payload.extend_from_slice(b"\x82\x86");
    assert_eq!(
        connection_error(&raw(
            kind::HEADERS,
            flag::PADDED | flag::END_HEADERS | flag::END_STREAM,
            1,
            &payload
        )),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_2_headers_too_short_for_priority_fields_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(
            kind::HEADERS,
            flag::PRIORITY | flag::END_HEADERS,
            1,
            b"\0\0\0"
        )),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_2_another_frame_inside_a_header_block_is_a_protocol_error() {
    // h2spec 6.2/1: a PRIORITY frame between HEADERS and CONTINUATION.
    let mut frames = raw(kind::HEADERS, 0, 1, b"\x82");
    frames.extend(raw(kind::PRIORITY, 0, 1, &[0, 0, 0, 0, 1]));
    assert_eq!(connection_error(&frames), ProtocolError);
    // h2spec 6.2/2: HEADERS on another stream.
    let mut frames = raw(kind::HEADERS, 0, 1, b"\x82");
    frames.extend(raw(kind::HEADERS, flag::END_HEADERS, 3, b"\x82"));
    assert_eq!(connection_error(&frames), ProtocolError);
    // A CONTINUATION on another stream.
    let mut frames = raw(kind::HEADERS, 0, 1, b"\x82");
    frames.extend(raw(kind::CONTINUATION, flag::END_HEADERS, 3, b"\x86"));
    assert_eq!(connection_error(&frames), ProtocolError);
}

#[test]
fn rfc9113_6_3_priority_on_stream_0_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::PRIORITY, 0, 0, &[0, 0, 0, 1, 16])),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_3_priority_of_a_wrong_length_is_a_stream_frame_size_error() {
    // h2spec 6.3/2: length 4.
    assert_eq!(
        stream_error(&raw(kind::PRIORITY, 0, 1, &[0x80, 0, 0, 1])),
        (1, FrameSizeError)
    );
    assert_eq!(
        stream_error(&raw(kind::PRIORITY, 0, 3, &[0; 6])),
        (3, FrameSizeError)
    );
}

#[test]
fn rfc9113_5_3_1_a_stream_depending_on_itself_is_a_stream_protocol_error() {
    assert_eq!(
        stream_error(&raw(kind::PRIORITY, 0, 3, &[0, 0, 0, 3, 16])),
        (3, ProtocolError)
    );
    // A HEADERS frame's priority is checked by the machine.
    let p = crate::h2::decode::Priority {
        dependency: 5,
        exclusive: false,
        weight: 0,
    };
    assert!(p.check(5).is_err());
    assert!(p.check(7).is_ok());
}

#[test]
fn rfc9113_6_4_rst_stream_on_stream_0_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::RST_STREAM, 0, 0, &[0, 0, 0, 8])),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_4_rst_stream_of_a_wrong_length_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::RST_STREAM, 0, 1, &[0, 0, 0])),
        FrameSizeError
    );
    assert_eq!(
        connection_error(&raw(kind::RST_STREAM, 0, 1, &[0, 0, 0, 0, 0])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_5_settings_on_a_stream_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::SETTINGS, 0, 1, b"")),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_5_settings_ack_with_a_payload_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::SETTINGS, flag::ACK, 0, &[0, 3, 0, 0, 0, 1])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_5_settings_not_a_multiple_of_6_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_8_4_push_promise_from_a_client_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(
            kind::PUSH_PROMISE,
            flag::END_HEADERS,
            1,
            &[0, 0, 0, 2, 0x82]
        )),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_7_ping_on_a_stream_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::PING, 0, 1, &[0; 8])),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_7_ping_of_a_wrong_length_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::PING, 0, 0, &[0; 6])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_8_goaway_on_a_stream_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::GOAWAY, 0, 1, &[0; 8])),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_8_goaway_shorter_than_8_bytes_is_a_frame_size_error() {
    assert_eq!(
        connection_error(&raw(kind::GOAWAY, 0, 0, &[0; 7])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_9_window_update_of_0_on_the_connection_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::WINDOW_UPDATE, 0, 0, &[0; 4])),
        ProtocolError
    );
}

#[test]
fn rfc9113_6_9_window_update_of_0_on_a_stream_is_a_stream_protocol_error() {
    assert_eq!(
        stream_error(&raw(kind::WINDOW_UPDATE, 0, 1, &[0x80, 0, 0, 0])),
        (1, ProtocolError)
    );
}

#[test]
fn rfc9113_6_9_window_update_of_a_wrong_length_is_a_frame_size_error() {
    // A connection error even on a stream (§6.9: "MUST be treated as a
    // connection error").
    assert_eq!(
        connection_error(&raw(kind::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1, 0])),
        FrameSizeError
    );
    assert_eq!(
        connection_error(&raw(kind::WINDOW_UPDATE, 0, 0, &[0, 1, 0])),
        FrameSizeError
    );
}

#[test]
fn rfc9113_6_10_continuation_without_a_header_block_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::CONTINUATION, flag::END_HEADERS, 1, b"\x82")),
        ProtocolError
    );
    // Nor after a block that ended.
    let mut frames = raw(kind::HEADERS, flag::END_HEADERS, 1, b"\x82");
    frames.extend(raw(kind::CONTINUATION, flag::END_HEADERS, 1, b"\x86"));
    assert_eq!(connection_error(&frames), ProtocolError);
}

#[test]
fn rfc9113_6_10_continuation_on_stream_0_is_a_protocol_error() {
    assert_eq!(
        connection_error(&raw(kind::CONTINUATION, flag::END_HEADERS, 0, b"")),
        ProtocolError
    );
}

#[test]
fn rfc9113_5_4_1_events_before_a_connection_error_are_all_given() {
    let mut frames = raw(kind::PING, 0, 0, &[1; 8]);
    frames.extend(raw(kind::PING, 0, 3, &[1; 8]));
    frames.extend(raw(kind::PING, 0, 0, &[2; 8]));
    let (events, error) = after_start(&frames);
    assert_eq!(
        events,
        vec![Event::Ping {
            ack: false,
            data: [1; 8]
        }]
    );
    assert_eq!(error.map(|e| e.code()), Some(ProtocolError));
}

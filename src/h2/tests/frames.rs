//! Every frame type encoded, then decoded whole, split at every byte and
//! byte by byte: the same event each time.

use super::{Event, after_start, agree, start, start_events};
use crate::h2::ErrorCode;
use crate::h2::decode::Priority;
use crate::h2::frame::{self, flag, kind};
use crate::h2::settings::{LocalSettings, id};

#[test]
fn every_frame_the_server_encodes_round_trips() {
    let mut wire = Vec::new();
    frame::encode_data(&mut wire, 1, b"hello", false);
    frame::encode_data(&mut wire, 1, b"", true);
    frame::encode_headers(&mut wire, 3, b"\x82\x86\x84", true, 16_384);
    frame::encode_rst_stream(&mut wire, 3, ErrorCode::Cancel);
    frame::encode_settings(&mut wire, &[(id::MAX_CONCURRENT_STREAMS, 100), (0x99, 7)]);
    frame::encode_settings_ack(&mut wire);
    frame::encode_ping(&mut wire, *b"12345678", false);
    frame::encode_ping(&mut wire, *b"abcdefgh", true);
    frame::encode_goaway(&mut wire, 7, ErrorCode::EnhanceYourCalm, b"calm");
    frame::encode_window_update(&mut wire, 0, 1);
    frame::encode_window_update(&mut wire, 5, (1 << 31) - 1);
    let (events, error) = after_start(&wire);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            Event::Data {
                stream_id: 1,
                data: b"hello".to_vec(),
                flow_len: 5,
                end_stream: false
            },
            Event::Data {
                stream_id: 1,
                data: vec![],
                flow_len: 0,
                end_stream: true
            },
            Event::Headers {
                stream_id: 3,
                end_stream: true,
                priority: None,
                block: b"\x82\x86\x84".to_vec()
            },
            Event::RstStream {
                stream_id: 3,
                code: 8
            },
            Event::Settings {
                ack: false,
                params: vec![(3, 100), (0x99, 7)]
            },
            Event::Settings {
                ack: true,
                params: vec![]
            },
            Event::Ping {
                ack: false,
                data: *b"12345678"
            },
            Event::Ping {
                ack: true,
                data: *b"abcdefgh"
            },
            Event::GoAway {
                last_stream_id: 7,
                code: 0xb,
                debug: b"calm".to_vec()
            },
            Event::WindowUpdate {
                stream_id: 0,
                increment: 1
            },
            Event::WindowUpdate {
                stream_id: 5,
                increment: (1 << 31) - 1
            },
        ]
    );
}

#[test]
fn frames_only_clients_send_decode_too() {
    let mut wire = Vec::new();
    // PRIORITY: exclusive, depends on 1, weight 15.
    frame::encode_frame(&mut wire, kind::PRIORITY, 0, 3, &[0x80, 0, 0, 1, 15]);
    // Padded DATA: Pad Length 3, "abc", 3 bytes of padding.
    frame::encode_frame(&mut wire, kind::DATA, flag::PADDED, 1, b"\x03abc\0\0\0");
    // HEADERS with padding and priority.
    frame::encode_frame(
        &mut wire,
        kind::HEADERS,
        flag::PADDED | flag::PRIORITY | flag::END_HEADERS,
        5,
        b"\x02\x00\x00\x00\x03\x07\x82\0\0",
    );
    // A frame of an unknown type, on any stream.
    frame::encode_frame(&mut wire, 0xfa, 0xff, 9, b"whatever");
    let (events, error) = after_start(&wire);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            Event::Priority {
                stream_id: 3,
                priority: Priority {
                    dependency: 1,
                    exclusive: true,
                    weight: 15
                }
            },
            Event::Data {
                stream_id: 1,
                data: b"abc".to_vec(),
                flow_len: 7,
                end_stream: false
            },
            Event::Headers {
                stream_id: 5,
                end_stream: false,
                priority: Some(Priority {
                    dependency: 3,
                    exclusive: false,
                    weight: 7
                }),
                block: vec![0x82]
            },
            Event::Unknown {
                kind: 0xfa,
                stream_id: 9,
                len: 8
            },
        ]
    );
}

#[test]
fn a_header_block_over_continuation_frames_is_handed_out_once_joined() {
    let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    let mut wire = Vec::new();
    frame::encode_headers(&mut wire, 1, &block, false, 16_384);
    // A HEADERS and two CONTINUATION frames.
    assert_eq!(wire.len(), block.len() + 3 * frame::HEADER_LEN);
    let (events, error) = after_start(&wire);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            Event::Fragment {
                stream_id: 1,
                len: 16_384
            },
            Event::Fragment {
                stream_id: 1,
                len: 16_384
            },
            Event::Headers {
                stream_id: 1,
                end_stream: false,
                priority: None,
                block
            },
        ]
    );
}

#[test]
fn the_data_header_writer_matches_the_data_encoder() {
    let mut a = Vec::new();
    frame::encode_data(&mut a, 7, b"xyz", true);
    let mut b = frame::data_header(7, 3, true).to_vec();
    b.extend_from_slice(b"xyz");
    assert_eq!(a, b);
}

#[test]
fn our_settings_frame_decodes_as_what_we_advertise() {
    let ours = LocalSettings {
        max_frame_size: 32_768,
        initial_window_size: 1 << 20,
        header_table_size: 1024,
        ..LocalSettings::new()
    };
    let mut wire = crate::h2::PREFACE.to_vec();
    ours.encode(&mut wire);
    let out = agree(&wire);
    assert_eq!(out.error, None);
    assert_eq!(
        out.events,
        vec![
            Event::Preface,
            Event::Settings {
                ack: false,
                params: vec![
                    (id::ENABLE_PUSH, 0),
                    (id::MAX_CONCURRENT_STREAMS, 128),
                    (id::MAX_HEADER_LIST_SIZE, 65_536),
                    (id::HEADER_TABLE_SIZE, 1024),
                    (id::INITIAL_WINDOW_SIZE, 1 << 20),
                    (id::MAX_FRAME_SIZE, 32_768),
                ]
            }
        ]
    );
}

#[test]
fn the_reserved_bit_of_a_stream_identifier_is_ignored() {
    let mut wire = Vec::new();
    frame::encode_data(&mut wire, 1, b"x", false);
    wire[5] |= 0x80;
    let (events, error) = after_start(&wire);
    assert_eq!(error, None);
    assert!(matches!(events[0], Event::Data { stream_id: 1, .. }));
}

#[test]
fn a_partial_frame_consumes_nothing() {
    let mut input = start();
    frame::encode_data(&mut input, 1, b"hello", false);
    input.pop();
    let out = agree(&input);
    assert_eq!(out.events, start_events());
    assert_eq!(out.left, frame::HEADER_LEN + 4);
}

#[test]
fn a_frame_as_large_as_our_max_frame_size_is_taken() {
    let data = vec![7u8; 16_384];
    let mut wire = Vec::new();
    frame::encode_data(&mut wire, 1, &data, true);
    let (events, error) = after_start(&wire);
    assert_eq!(error, None);
    assert_eq!(events.len(), 1);
}

#[test]
fn empty_work_is_flagged_for_the_flood_counters() {
    use crate::h2::decode::Frame;
    let empty = Frame::Data {
        stream_id: 1,
        data: b"",
        flow_len: 0,
        end_stream: false,
    };
    assert!(empty.is_empty_work());
    let last = Frame::Data {
        stream_id: 1,
        data: b"",
        flow_len: 0,
        end_stream: true,
    };
    assert!(!last.is_empty_work());
    assert!(
        Frame::HeaderFragment {
            stream_id: 1,
            len: 0
        }
        .is_empty_work()
    );
    assert!(
        Frame::Unknown {
            kind: 0x20,
            stream_id: 0,
            len: 0
        }
        .is_empty_work()
    );
    assert!(
        !Frame::Ping {
            ack: false,
            data: [0; 8]
        }
        .is_empty_work()
    );
}

#[test]
fn random_frames_after_the_start_agree_however_split_and_never_panic() {
    // Valid frame headers with random types, flags, streams and short
    // payloads: every path of the decoder, errors included.
    let mut rng = crate::tests::Lcg(0x5eed);
    for _ in 0..300 {
        let mut input = start();
        for _ in 0..rng.below(6) {
            let len = rng.below(24) as usize;
            let payload: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let kind = rng.below(12) as u8;
            let flags = rng.below(256) as u8;
            let stream = rng.below(4) as u32;
            frame::encode_frame(&mut input, kind, flags, stream, &payload);
        }
        let out = agree(&input);
        assert!(out.events.starts_with(&start_events()));
    }
}

//! Unit tests of the HTTP/2 codec, with byte strings alone, and the
//! split-feeding harness the frame decoder goes through: the same bytes
//! whole, split in two at every position and byte by byte must give the
//! same events (ARCHITECTURE.md §2).

mod flood;
mod frames;
mod hpack_limits;
mod hpack_rfc7541;
mod map_request;
mod map_response;
mod rfc9113;
mod settings;
mod stream_state;
mod window;

use super::decode::{Frame, FrameDecoder, HeaderBlock, Priority};
use super::frame::{self, MIN_MAX_FRAME_SIZE};
use super::{H2Error, PREFACE};

/// The default bound of a header block in these tests, in bytes.
pub(super) const BLOCK_LIMIT: usize = 64 * 1024;

/// A frame event with everything it borrowed copied, to compare events
/// from different feedings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    Preface,
    Data {
        stream_id: u32,
        data: Vec<u8>,
        flow_len: u32,
        end_stream: bool,
    },
    Headers {
        stream_id: u32,
        end_stream: bool,
        priority: Option<Priority>,
        block: Vec<u8>,
    },
    Fragment {
        stream_id: u32,
        len: u32,
    },
    Priority {
        stream_id: u32,
        priority: Priority,
    },
    RstStream {
        stream_id: u32,
        code: u32,
    },
    Settings {
        ack: bool,
        params: Vec<(u16, u32)>,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream_id: u32,
        code: u32,
        debug: Vec<u8>,
    },
    WindowUpdate {
        stream_id: u32,
        increment: u32,
    },
    Unknown {
        kind: u8,
        stream_id: u32,
        len: u32,
    },
    Invalid {
        kind: u8,
        error: H2Error,
    },
}

impl From<Frame<'_>> for Event {
    fn from(f: Frame<'_>) -> Event {
        match f {
            Frame::Preface => Event::Preface,
            Frame::Data {
                stream_id,
                data,
                flow_len,
                end_stream,
            } => Event::Data {
                stream_id,
                data: data.to_vec(),
                flow_len,
                end_stream,
            },
            Frame::Headers(HeaderBlock {
                stream_id,
                end_stream,
                priority,
                block,
            }) => Event::Headers {
                stream_id,
                end_stream,
                priority,
                block: block.to_vec(),
            },
            Frame::HeaderFragment { stream_id, len } => Event::Fragment { stream_id, len },
            Frame::Priority {
                stream_id,
                priority,
            } => Event::Priority {
                stream_id,
                priority,
            },
            Frame::RstStream { stream_id, code } => Event::RstStream { stream_id, code },
            Frame::Settings { ack, params } => Event::Settings {
                ack,
                params: params.iter().collect(),
            },
            Frame::Ping { ack, data } => Event::Ping { ack, data },
            Frame::GoAway {
                last_stream_id,
                code,
                debug,
            } => Event::GoAway {
                last_stream_id,
                code,
                debug: debug.to_vec(),
            },
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => Event::WindowUpdate {
                stream_id,
                increment,
            },
            Frame::Unknown {
                kind,
                stream_id,
                len,
            } => Event::Unknown {
                kind,
                stream_id,
                len,
            },
            Frame::Invalid { kind, error } => Event::Invalid { kind, error },
        }
    }
}

/// What a whole feeding came to: the events, and the connection error
/// that ended it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) events: Vec<Event>,
    pub(super) error: Option<H2Error>,
    /// Bytes given but not consumed at the end (0 after an error).
    pub(super) left: usize,
}

/// Feeds `pieces` in order into a buffer, as the machine would, taking
/// every event after each piece; checks the `next` contract on the way.
pub(super) fn feed(mut dec: FrameDecoder, pieces: &[&[u8]]) -> Outcome {
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match dec.next(&buf) {
                Ok(None) => break,
                Ok(Some((frame, n))) => {
                    assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len());
                    events.push(Event::from(frame));
                    buf.drain(..n);
                }
                Err(e) => {
                    // The error sticks.
                    assert_eq!(dec.next(&buf), Err(e));
                    // How many bytes had come by then depends on the split.
                    return Outcome {
                        events,
                        error: Some(e),
                        left: 0,
                    };
                }
            }
        }
    }
    Outcome {
        events,
        error: None,
        left: buf.len(),
    }
}

/// A server decoder with our default limits.
pub(super) fn decoder() -> FrameDecoder {
    FrameDecoder::new(MIN_MAX_FRAME_SIZE, BLOCK_LIMIT)
}

/// The client preface and an empty SETTINGS frame: what every input
/// starts with.
pub(super) fn start() -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    frame::encode_settings(&mut v, &[]);
    v
}

/// The events [`start`] gives.
pub(super) fn start_events() -> Vec<Event> {
    vec![
        Event::Preface,
        Event::Settings {
            ack: false,
            params: vec![],
        },
    ]
}

/// Runs `input` through decoders from `fresh` whole, split in two at
/// every position, and byte by byte; asserts all agree; returns the
/// outcome. The split-in-two runs skip positions past 4 KiB except every
/// 257th (the large-frame tests).
#[track_caller]
pub(super) fn agree_with(fresh: impl Fn() -> FrameDecoder, input: &[u8]) -> Outcome {
    let whole = feed(fresh(), &[input]);
    let points: Vec<usize> = if input.len() <= 4096 {
        (0..=input.len()).collect()
    } else {
        (0..=input.len())
            .filter(|i| i % 257 == 0 || *i < 64 || *i + 64 > input.len())
            .collect()
    };
    for i in points {
        let (a, b) = input.split_at(i);
        assert_eq!(feed(fresh(), &[a, b]), whole, "split at {i} disagrees");
    }
    if input.len() <= 64 * 1024 {
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(feed(fresh(), &bytes), whole, "byte by byte disagrees");
    }
    whole
}

/// [`agree_with`] the default decoder.
#[track_caller]
pub(super) fn agree(input: &[u8]) -> Outcome {
    agree_with(decoder, input)
}

/// [`start`] followed by `frames`, run through [`agree`]: the events
/// after the start's, and the error.
#[track_caller]
pub(super) fn after_start(frames: &[u8]) -> (Vec<Event>, Option<H2Error>) {
    let mut input = start();
    input.extend_from_slice(frames);
    let out = agree(&input);
    assert!(out.events.starts_with(&start_events()), "{:?}", out.events);
    (out.events[2..].to_vec(), out.error)
}

/// Bytes from hex (spaces ignored).
pub(super) fn unhex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

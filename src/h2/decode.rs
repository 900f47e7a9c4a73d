//! [`FrameDecoder`]: the incremental reader of a client's HTTP/2 bytes
//! (RFC 9113 §3.4, §4, §6), server side.
//!
//! Why it exists: the connection machine reads bytes into its buffer and
//! asks what they are. Each call takes at most one frame (or the client
//! preface) from the front of the buffer and says how many bytes it
//! consumed, or that more bytes are needed; every frame-level rule of
//! RFC 9113 (sizes, stream 0 or not, padding, the order of a header
//! block's frames) is checked here, so an event the machine receives is
//! well formed.
//!
//! What it must not know: sockets, the clock, stream states (a frame on
//! an idle or closed stream is [`super::stream_state`]'s business), flow
//! control windows, HPACK (a header block is handed over as bytes),
//! rates (the machine counts the events).
//!
//! Invariants:
//! - the same bytes give the same events whatever way they are split;
//! - DATA payloads and single-frame header blocks are borrowed from the
//!   input (no copy); a block continued in CONTINUATION frames is copied
//!   into one buffer, bounded by the caller's byte limit (frame headers
//!   of CONTINUATION frames count too, so empty ones end a flood), and
//!   released when handed out; an idle decoder holds no heap memory;
//! - after a connection error every later call returns the same error.

use super::frame::{FrameHeader, HEADER_LEN, MAX_STREAM_ID, flag, kind};
use super::settings::Params;
use super::{ErrorCode, H2Error, PREFACE, frame_size, protocol};
use payload::{simple_frame, strip_padding};

mod payload;

/// A PRIORITY frame's or a HEADERS frame's priority fields (RFC 9113
/// §5.3.2, §6.3): deprecated, parsed and otherwise ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// The stream this one depends on (31 bits).
    pub dependency: u32,
    /// The exclusive flag.
    pub exclusive: bool,
    /// The weight minus one, as sent (0..=255).
    pub weight: u8,
}

impl Priority {
    /// Reads the 5 bytes of priority fields.
    fn parse(b: &[u8; 5]) -> Priority {
        let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Priority {
            dependency: word & MAX_STREAM_ID,
            exclusive: word & !MAX_STREAM_ID != 0,
            weight: b[4],
        }
    }

    /// RFC 9113 §5.3.1: a stream cannot depend on itself (stream error
    /// PROTOCOL_ERROR on `stream_id`). The decoder checks PRIORITY frames
    /// itself; the machine calls this for a HEADERS frame's priority.
    pub fn check(self, stream_id: u32) -> Result<(), H2Error> {
        if self.dependency == stream_id {
            return Err(H2Error::Stream(
                stream_id,
                ErrorCode::ProtocolError,
                "stream depends on itself (RFC 9113 §5.3.1)",
            ));
        }
        Ok(())
    }
}

/// A complete header block: a HEADERS frame and its CONTINUATION frames
/// joined, padding and priority fields removed (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderBlock<'a> {
    /// The stream the block belongs to (not 0).
    pub stream_id: u32,
    /// The HEADERS frame had END_STREAM.
    pub end_stream: bool,
    /// The HEADERS frame's priority fields, if it had the PRIORITY flag
    /// (check them with [`Priority::check`]).
    pub priority: Option<Priority>,
    /// The HPACK-encoded field block.
    pub block: &'a [u8],
}

/// One thing the decoder read: a frame, or the client preface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The 24-byte client preface (RFC 9113 §3.4); a SETTINGS frame must
    /// come next.
    Preface,
    /// A DATA frame (RFC 9113 §6.1), padding removed.
    Data {
        /// The stream (not 0).
        stream_id: u32,
        /// The data, borrowed from the input.
        data: &'a [u8],
        /// The whole payload length, Pad Length and padding included:
        /// what the frame takes from both flow-control windows, in bytes.
        flow_len: u32,
        /// END_STREAM was set.
        end_stream: bool,
    },
    /// A complete header block (HEADERS and its CONTINUATION frames).
    Headers(HeaderBlock<'a>),
    /// A HEADERS or CONTINUATION frame of a block that goes on: the
    /// block is handed over as [`Frame::Headers`] with its last frame.
    HeaderFragment {
        /// The stream of the block.
        stream_id: u32,
        /// This frame's payload length in bytes.
        len: u32,
    },
    /// A PRIORITY frame (RFC 9113 §6.3): no effect on any stream state.
    Priority {
        /// The stream it names (possibly idle or closed).
        stream_id: u32,
        /// Its fields (not depending on itself).
        priority: Priority,
    },
    /// A RST_STREAM frame (RFC 9113 §6.4).
    RstStream {
        /// The stream (not 0).
        stream_id: u32,
        /// The error code as sent ([`ErrorCode::from_wire`]).
        code: u32,
    },
    /// A SETTINGS frame (RFC 9113 §6.5): apply `params` with
    /// [`super::settings::PeerSettings::apply`], then acknowledge.
    Settings {
        /// This acknowledges our SETTINGS (`params` is then empty).
        ack: bool,
        /// The parameters, in order.
        params: Params<'a>,
    },
    /// A PING frame (RFC 9113 §6.7): answer one without `ack` with the
    /// same data and ACK.
    Ping {
        /// This is an answer to our PING.
        ack: bool,
        /// The 8 bytes of opaque data.
        data: [u8; 8],
    },
    /// A GOAWAY frame (RFC 9113 §6.8).
    GoAway {
        /// The last stream the client may have processed.
        last_stream_id: u32,
        /// The error code as sent.
        code: u32,
        /// Additional debug data.
        debug: &'a [u8],
    },
    /// A WINDOW_UPDATE frame (RFC 9113 §6.9) with an increment in
    /// 1..=2^31-1 bytes; stream 0 is the connection window.
    WindowUpdate {
        /// The stream, or 0 for the connection.
        stream_id: u32,
        /// The increment in bytes.
        increment: u32,
    },
    /// A frame of a type RFC 9113 does not define: discarded (RFC 9113
    /// §4.1, §5.5), reported so the machine can count it.
    Unknown {
        /// The frame type.
        kind: u8,
        /// The stream.
        stream_id: u32,
        /// The payload length in bytes.
        len: u32,
    },
    /// A frame that breaks a rule whose price is a stream error
    /// (`error` is always [`H2Error::Stream`]): a PRIORITY frame not 5
    /// bytes long (RFC 9113 §6.3) or depending on its own stream (§5.3.1),
    /// a WINDOW_UPDATE of 0 on a stream (§6.9). The frame was consumed;
    /// the machine checks the stream's state first (a WINDOW_UPDATE on an
    /// idle stream is a connection error), then resets the stream.
    Invalid {
        /// The frame's type.
        kind: u8,
        /// The stream error.
        error: H2Error,
    },
}

impl Frame<'_> {
    /// True for a frame that costs work and moves nothing forward: an
    /// empty DATA frame without END_STREAM, an empty header fragment, a
    /// PRIORITY frame, a frame of an unknown type. The machine counts them
    /// per period and answers a flood with GOAWAY ENHANCE_YOUR_CALM
    /// (CVE-2019-9518, CVE-2019-9516; ARCHITECTURE.md §8).
    pub fn is_empty_work(&self) -> bool {
        match *self {
            Frame::Data {
                data, end_stream, ..
            } => data.is_empty() && !end_stream,
            Frame::HeaderFragment { len, .. } => len == 0,
            Frame::Priority { .. } | Frame::Unknown { .. } => true,
            _ => false,
        }
    }
}

/// Where the decoder is in the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the 24-byte client preface.
    Preface,
    /// After the preface: the next frame must be a SETTINGS frame
    /// without ACK (RFC 9113 §3.4).
    FirstSettings,
    /// Frames.
    Frames,
    /// A connection error happened: every call returns it.
    Failed(H2Error),
}

/// A header block whose HEADERS frame came without END_HEADERS.
#[derive(Debug, Clone, Copy)]
struct Pending {
    stream_id: u32,
    end_stream: bool,
    priority: Option<Priority>,
    /// Bytes counted against the bound so far: fragments, plus 9 per
    /// CONTINUATION frame.
    counted: usize,
}

/// The server side's frame reader (see the module doc).
///
/// Shape: call [`FrameDecoder::next`] with the bytes read and not yet
/// consumed; it returns `Ok(None)` (more bytes needed, nothing consumed),
/// `Ok(Some((frame, n)))` (drop `n` bytes from the front once done with
/// `frame`), or a connection error. The caller's buffer must hold at
/// least `9 +` our SETTINGS_MAX_FRAME_SIZE bytes: a frame is taken whole.
#[derive(Debug)]
pub struct FrameDecoder {
    state: State,
    /// Our SETTINGS_MAX_FRAME_SIZE, in bytes (RFC 9113 §4.2).
    max_frame_size: u32,
    /// The most bytes one header block may count (see [`Pending`]).
    max_block_size: usize,
    /// The block in progress, if a HEADERS frame came without
    /// END_HEADERS.
    pending: Option<Pending>,
    /// The fragments of the block in progress, joined.
    joined: Vec<u8>,
    /// `joined` was handed out by the last call: cleared at the next.
    handed_out: bool,
}

impl FrameDecoder {
    /// A decoder at the start of a server connection: the client preface
    /// comes first. `max_frame_size` is the SETTINGS_MAX_FRAME_SIZE we
    /// advertise (bytes, 2^14..=2^24-1; a larger frame is a connection
    /// FRAME_SIZE_ERROR, RFC 9113 §4.2); `max_block_size` bounds a header
    /// block in bytes (its fragments plus 9 per CONTINUATION frame; past
    /// it, a connection error ENHANCE_YOUR_CALM).
    pub fn new(max_frame_size: u32, max_block_size: usize) -> FrameDecoder {
        FrameDecoder {
            state: State::Preface,
            max_frame_size,
            max_block_size,
            pending: None,
            joined: Vec::new(),
            handed_out: false,
        }
    }

    /// Changes our SETTINGS_MAX_FRAME_SIZE (bytes). The machine raises it
    /// when it sends the SETTINGS frame and lowers it once the client
    /// acknowledged it (RFC 9113 §6.5.3).
    pub fn set_max_frame_size(&mut self, bytes: u32) {
        self.max_frame_size = bytes;
    }

    /// Changes the bound of a header block (bytes; see [`Self::new`]).
    pub fn set_max_block_size(&mut self, bytes: usize) {
        self.max_block_size = bytes;
    }

    /// True while a header block is open (a HEADERS frame without
    /// END_HEADERS came and its last CONTINUATION did not).
    pub fn in_header_block(&self) -> bool {
        self.pending.is_some()
    }

    /// Bytes of heap storage held for header blocks (0 between blocks).
    pub fn held_bytes(&self) -> usize {
        self.joined.capacity()
    }

    /// Reads the next frame (or the preface) from the front of `input`;
    /// see the type's doc for the shape of the answer.
    ///
    /// Errors: a connection error (RFC 9113 §5.4.1) with the code RFC
    /// 9113 names: an invalid preface or a first frame other than
    /// SETTINGS (PROTOCOL_ERROR, §3.4); a frame over our
    /// SETTINGS_MAX_FRAME_SIZE, or of a length its type forbids
    /// (FRAME_SIZE_ERROR, §4.2, §6.4, §6.5, §6.7–§6.9); a frame on stream
    /// 0 that needs a stream or the reverse, padding as long as the
    /// payload or longer, a frame inside a header block that is not its
    /// CONTINUATION, a CONTINUATION outside one, a PUSH_PROMISE, a
    /// WINDOW_UPDATE of 0 on the connection (PROTOCOL_ERROR, §5.5, §6.1–
    /// §6.10, §8.4); a header block over its bound (ENHANCE_YOUR_CALM).
    pub fn next<'a>(&'a mut self, input: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, H2Error> {
        if self.handed_out {
            // Continued blocks are rare: their storage is not kept.
            self.handed_out = false;
            self.joined = Vec::new();
        }
        match self.state {
            State::Failed(e) => return Err(e),
            State::Preface => {
                let n = input.len().min(PREFACE.len());
                if input.get(..n) != PREFACE.get(..n) {
                    return Err(self.fail(protocol("invalid connection preface (RFC 9113 §3.4)")));
                }
                if n < PREFACE.len() {
                    return Ok(None);
                }
                self.state = State::FirstSettings;
                return Ok(Some((Frame::Preface, PREFACE.len())));
            }
            State::FirstSettings | State::Frames => {}
        }
        let Some(h) = FrameHeader::parse(input) else {
            return Ok(None);
        };
        // Checks the header alone decides come before waiting for the
        // payload: a frame over the limit is never waited for.
        if let Err(e) = self.check_header(h) {
            return Err(self.fail(e));
        }
        let total = HEADER_LEN.saturating_add(h.len as usize);
        let Some(payload) = input.get(HEADER_LEN..total) else {
            return Ok(None);
        };
        self.state = State::Frames;
        let frame = match h.kind {
            kind::HEADERS => self.headers(h, payload),
            kind::CONTINUATION => self.continuation(h, payload),
            _ => simple_frame(h, payload),
        };
        match frame {
            Ok(Some(frame)) => Ok(Some((frame, total))),
            Ok(None) => {
                // The end of a continued block: hand out the joined bytes.
                let Some(p) = self.pending.take() else {
                    debug_assert!(false, "a block ended without a pending block");
                    return Err(self.fail(H2Error::Connection(
                        ErrorCode::InternalError,
                        "header block state lost",
                    )));
                };
                self.handed_out = true;
                Ok(Some((
                    Frame::Headers(HeaderBlock {
                        stream_id: p.stream_id,
                        end_stream: p.end_stream,
                        priority: p.priority,
                        block: &self.joined,
                    }),
                    total,
                )))
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Records a connection error: every later call returns it.
    fn fail(&mut self, e: H2Error) -> H2Error {
        self.state = State::Failed(e);
        self.pending = None;
        self.joined = Vec::new();
        e
    }

    /// The rules a frame header alone decides.
    fn check_header(&self, h: FrameHeader) -> Result<(), H2Error> {
        if h.len > self.max_frame_size {
            return Err(frame_size(
                "frame larger than our SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2)",
            ));
        }
        if self.state == State::FirstSettings && (h.kind != kind::SETTINGS || h.has(flag::ACK)) {
            return Err(protocol(
                "the client preface must be followed by SETTINGS (RFC 9113 §3.4)",
            ));
        }
        if let Some(p) = &self.pending
            && (h.kind != kind::CONTINUATION || h.stream_id != p.stream_id)
        {
            return Err(protocol(
                "a frame other than its CONTINUATION inside a header block (RFC 9113 §6.2, §6.10)",
            ));
        }
        Ok(())
    }

    /// A HEADERS frame: the whole block (`Some`), or its first fragment
    /// kept for the CONTINUATION frames to come (`Some(HeaderFragment)`).
    fn headers<'a>(
        &mut self,
        h: FrameHeader,
        payload: &'a [u8],
    ) -> Result<Option<Frame<'a>>, H2Error> {
        if h.stream_id == 0 {
            return Err(protocol("HEADERS on stream 0 (RFC 9113 §6.2)"));
        }
        let rest = strip_padding(h, payload)?;
        let (priority, fragment) = if h.has(flag::PRIORITY) {
            let Some((fields, fragment)) = rest.split_first_chunk::<5>() else {
                return Err(frame_size(
                    "HEADERS too short for its priority fields (RFC 9113 §4.2)",
                ));
            };
            (Some(Priority::parse(fields)), fragment)
        } else {
            (None, rest)
        };
        if fragment.len() > self.max_block_size {
            return Err(block_too_large());
        }
        let end_stream = h.has(flag::END_STREAM);
        if h.has(flag::END_HEADERS) {
            return Ok(Some(Frame::Headers(HeaderBlock {
                stream_id: h.stream_id,
                end_stream,
                priority,
                block: fragment,
            })));
        }
        self.joined.clear();
        self.append(fragment)?;
        self.pending = Some(Pending {
            stream_id: h.stream_id,
            end_stream,
            priority,
            counted: fragment.len(),
        });
        Ok(Some(Frame::HeaderFragment {
            stream_id: h.stream_id,
            len: h.len,
        }))
    }

    /// A CONTINUATION frame: `Ok(None)` when it ends the block (the
    /// caller hands out the joined bytes), else a fragment event.
    fn continuation<'a>(
        &mut self,
        h: FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Frame<'a>>, H2Error> {
        let Some(p) = self.pending.as_mut() else {
            return Err(protocol(
                "CONTINUATION without a header block in progress (RFC 9113 §6.10)",
            ));
        };
        let counted = p
            .counted
            .saturating_add(HEADER_LEN)
            .saturating_add(payload.len());
        if counted > self.max_block_size {
            return Err(block_too_large());
        }
        p.counted = counted;
        self.append(payload)?;
        if h.has(flag::END_HEADERS) {
            return Ok(None);
        }
        Ok(Some(Frame::HeaderFragment {
            stream_id: h.stream_id,
            len: h.len,
        }))
    }

    /// Appends a fragment to the joined block, growing the storage at
    /// most to the bound (never twice what the block needs past it).
    fn append(&mut self, fragment: &[u8]) -> Result<(), H2Error> {
        let need = self.joined.len().saturating_add(fragment.len());
        if need > self.max_block_size {
            return Err(block_too_large());
        }
        if need > self.joined.capacity() {
            let want = need
                .max(self.joined.capacity().saturating_mul(2))
                .min(self.max_block_size);
            self.joined
                .reserve_exact(want.saturating_sub(self.joined.len()));
        }
        self.joined.extend_from_slice(fragment);
        Ok(())
    }
}

/// The connection error for a header block over its byte bound.
fn block_too_large() -> H2Error {
    H2Error::Connection(
        ErrorCode::EnhanceYourCalm,
        "header block over its byte bound",
    )
}

//! HTTP/2 settings (RFC 9113 §6.5): the ones we advertise, and the
//! client's, updated by each SETTINGS frame with the checks of §6.5.2.
//!
//! Why it exists: both sides' settings bound what the other may send;
//! applying a SETTINGS frame is a small rule set with its own error
//! codes, kept apart from the machine that acknowledges it.
//!
//! What it must not know: frames' layout beyond the parameters, streams
//! (the machine applies a new initial window to its streams with
//! [`super::window`]), the configuration (the caller passes our values).

use super::frame::{self, MAX_MAX_FRAME_SIZE, MAX_STREAM_ID, MIN_MAX_FRAME_SIZE};
use super::hpack::DEFAULT_TABLE_SIZE;
use super::{ErrorCode, H2Error, protocol};

/// Setting identifiers (RFC 9113 §6.5.2).
pub mod id {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The initial stream window, and the connection's: 65,535 bytes (RFC
/// 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

/// Our SETTINGS_MAX_CONCURRENT_STREAMS unless told otherwise (DESIGN §9:
/// nginx's 128).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 128;

/// The parameters of one SETTINGS frame: (identifier, value) pairs in
/// the order sent (RFC 9113 §6.5.1). Built by the decoder from a payload
/// whose length is a multiple of 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params<'a>(&'a [u8]);

impl<'a> Params<'a> {
    /// Parameters from a payload (a trailing part shorter than 6 bytes is
    /// ignored; the decoder refuses such a payload first).
    pub fn new(payload: &'a [u8]) -> Params<'a> {
        Params(payload)
    }

    /// True if there is no parameter.
    pub fn is_empty(&self) -> bool {
        self.0.len() < 6
    }

    /// The (identifier, value) pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        self.0.chunks_exact(6).map(|p| {
            let [a, b, c, d, e, f] = <[u8; 6]>::try_from(p).unwrap_or_default();
            (u16::from_be_bytes([a, b]), u32::from_be_bytes([c, d, e, f]))
        })
    }
}

/// The settings we advertise in our connection preface (RFC 9113 §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSettings {
    /// SETTINGS_HEADER_TABLE_SIZE: our HPACK decoder's table limit,
    /// bytes.
    pub header_table_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS (default 128).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each request body's first window,
    /// bytes (at most 2^31-1).
    pub initial_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: bytes, 2^14..=2^24-1.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the request head limit, bytes
    /// (counted as RFC 9113 §6.5.2 does).
    pub max_header_list_size: u32,
}

impl LocalSettings {
    /// Defaults: table 4,096, 128 streams, window 65,535, frames of 16,384
    /// bytes, header lists of 64 KiB (the request head limit's default,
    /// DESIGN §9).
    pub fn new() -> LocalSettings {
        LocalSettings {
            header_table_size: DEFAULT_TABLE_SIZE as u32,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            initial_window_size: DEFAULT_WINDOW,
            max_frame_size: MIN_MAX_FRAME_SIZE,
            max_header_list_size: 64 * 1024,
        }
    }

    /// Appends our SETTINGS frame: SETTINGS_ENABLE_PUSH 0 (a server MAY
    /// say so, RFC 9113 §6.5.2), the stream limit and the header list
    /// limit always, the others when they differ from the initial values.
    /// Values out of their range are clamped into it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut params: Vec<(u16, u32)> = vec![
            (id::ENABLE_PUSH, 0),
            (id::MAX_CONCURRENT_STREAMS, self.max_concurrent_streams),
            (id::MAX_HEADER_LIST_SIZE, self.max_header_list_size),
        ];
        if self.header_table_size != DEFAULT_TABLE_SIZE as u32 {
            params.push((id::HEADER_TABLE_SIZE, self.header_table_size));
        }
        let window = self.initial_window_size.min(MAX_STREAM_ID);
        if window != DEFAULT_WINDOW {
            params.push((id::INITIAL_WINDOW_SIZE, window));
        }
        let frame_size = self
            .max_frame_size
            .clamp(MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE);
        if frame_size != MIN_MAX_FRAME_SIZE {
            params.push((id::MAX_FRAME_SIZE, frame_size));
        }
        frame::encode_settings(out, &params);
    }
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings::new()
    }
}

/// The client's settings as last applied (initial values per RFC 9113
/// §6.5.2 until its first SETTINGS frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSettings {
    /// Its HPACK decoder's table limit: our encoder's bound, bytes.
    pub header_table_size: u32,
    /// SETTINGS_ENABLE_PUSH as sent (a server never pushes anyway).
    pub enable_push: bool,
    /// How many streams we may open: `None` is unlimited (we open none).
    pub max_concurrent_streams: Option<u32>,
    /// The first send window of each response body, bytes.
    pub initial_window_size: u32,
    /// The largest frame payload we may send, bytes.
    pub max_frame_size: u32,
    /// The largest field section it accepts (advisory), bytes; `None`
    /// is unlimited.
    pub max_header_list_size: Option<u32>,
}

impl Default for PeerSettings {
    fn default() -> Self {
        PeerSettings {
            header_table_size: DEFAULT_TABLE_SIZE as u32,
            enable_push: true,
            max_concurrent_streams: None,
            initial_window_size: DEFAULT_WINDOW,
            max_frame_size: MIN_MAX_FRAME_SIZE,
            max_header_list_size: None,
        }
    }
}

/// What a SETTINGS frame changed that the machine must carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// The initial window changed by this many bytes (new − old): add it
    /// to every open stream's send window (RFC 9113 §6.9.2,
    /// [`super::window::Window::adjust`]).
    pub window_delta: i64,
    /// SETTINGS_HEADER_TABLE_SIZE was present: pass it to
    /// [`super::hpack::Encoder::set_peer_table_size`].
    pub header_table_size: Option<u32>,
}

impl PeerSettings {
    /// Applies a SETTINGS frame's parameters in order (RFC 9113 §6.5.3);
    /// unknown identifiers are ignored (§6.5.2). The machine then sends
    /// the acknowledgement.
    ///
    /// Errors (connection errors, RFC 9113 §6.5.2): SETTINGS_ENABLE_PUSH
    /// other than 0 or 1 (PROTOCOL_ERROR); SETTINGS_INITIAL_WINDOW_SIZE
    /// above 2^31-1 (FLOW_CONTROL_ERROR); SETTINGS_MAX_FRAME_SIZE outside
    /// 2^14..=2^24-1 (PROTOCOL_ERROR). Parameters before the bad one are
    /// applied (the connection ends anyway).
    pub fn apply(&mut self, params: Params<'_>) -> Result<Applied, H2Error> {
        let old_window = self.initial_window_size;
        let mut applied = Applied::default();
        for (id, value) in params.iter() {
            match id {
                id::HEADER_TABLE_SIZE => {
                    self.header_table_size = value;
                    applied.header_table_size = Some(value);
                }
                id::ENABLE_PUSH => {
                    self.enable_push = match value {
                        0 => false,
                        1 => true,
                        _ => {
                            return Err(protocol(
                                "SETTINGS_ENABLE_PUSH other than 0 or 1 (RFC 9113 §6.5.2)",
                            ));
                        }
                    };
                }
                id::MAX_CONCURRENT_STREAMS => self.max_concurrent_streams = Some(value),
                id::INITIAL_WINDOW_SIZE => {
                    if value > MAX_STREAM_ID {
                        return Err(H2Error::Connection(
                            ErrorCode::FlowControlError,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 (RFC 9113 §6.5.2)",
                        ));
                    }
                    self.initial_window_size = value;
                }
                id::MAX_FRAME_SIZE => {
                    if !(MIN_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) {
                        return Err(protocol(
                            "SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1 (RFC 9113 §6.5.2)",
                        ));
                    }
                    self.max_frame_size = value;
                }
                id::MAX_HEADER_LIST_SIZE => self.max_header_list_size = Some(value),
                _ => {}
            }
        }
        applied.window_delta = i64::from(self.initial_window_size) - i64::from(old_window);
        Ok(applied)
    }
}

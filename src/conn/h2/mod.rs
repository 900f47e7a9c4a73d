//! The HTTP/2 client connection machine (ARCHITECTURE.md §14, DESIGN §11):
//! one downstream connection that speaks HTTP/2 (`h2` by ALPN, or
//! prior-knowledge `h2c` with `http2_cleartext`), owning its streams. Each
//! stream is one [`Exchange`](super::exchange::Exchange), started by
//! `begin` and relayed by `relay` exactly as an HTTP/1 request is; only
//! the framing toward the client differs: HEADERS and DATA frames instead
//! of an HTTP/1 head and body bytes. Upstreams stay HTTP/1.1.
//!
//! Connection states: `Open` (frames flow; the client's preface and first
//! SETTINGS are checked by the codec), `Closing` (a GOAWAY or the last
//! bytes are flushed, then the sending side is shut and the input
//! discarded until EOF or the linger deadline), `Closed`.
//!
//! Stream states are RFC 9113 §5.1's (`h2::stream_state`). Who owns which
//! window:
//! - receive, per stream: what the client may still send on it; granted
//!   back (WINDOW_UPDATE) only as its bytes drain to the upstream, so a
//!   slow upstream pauses that stream's client, not the connection
//!   (`stream.rs`);
//! - receive, the connection: credited as DATA arrives (the stream
//!   windows bound the memory), so one stalled stream cannot starve the
//!   others;
//! - send, per stream and the connection: the client's; DATA is claimed
//!   only for bytes in hand, round robin over the streams, one frame per
//!   stream per pass (`send.rs`). A stream whose window is closed keeps its
//!   bytes in its body buffer, and above the high watermark its upstream is
//!   not read: the watermark rule of HTTP/1, per stream.
//!
//! Parts: this file holds the machine, its round and its interest;
//! `recv.rs` reads and dispatches frames; `serve.rs` starts, steps and
//! ends the streams' exchanges; `send.rs` writes frames; `stream.rs` is
//! one stream; `timers.rs` its deadlines; `limits.rs` the flood bounds.
//!
//! What it must not know: the loop's bookkeeping beyond its [`ConnId`],
//! frame and HPACK syntax (`crate::h2`), how a request is planned or
//! routed (`begin`).

mod answered;
mod limits;
mod recv;
mod send;
mod serve;
mod stream;
mod timers;

use std::net::SocketAddr;
use std::time::Instant;

use log::{debug, warn};

use super::Shared;
use super::io::Io;
use super::transport::Transport;
use crate::buffer::WatermarkBuffer;
use crate::event_loop::token::{ConnId, Kind};
use crate::h2::decode::FrameDecoder;
use crate::h2::hpack::{Decoder, Encoder, FieldList};
use crate::h2::settings::{LocalSettings, PeerSettings};
use crate::h2::window::Window;
use crate::h2::{ErrorCode, frame};
use crate::stats::Stats;
use crate::warn_limit::WarnKind;
use limits::Limits;
use stream::Stream;

/// Rounds of one `drive` before the connection yields to others.
const MAX_ROUNDS: usize = 32;

/// Frames decoded per round at most (the round repeats while frames
/// remain): bounds one connection's share of a loop turn.
const MAX_FRAMES_PER_ROUND: usize = 64;

/// Bytes of frames queued toward the client above which no more DATA is
/// framed (two full frames): the streams' own buffers hold the rest,
/// under their watermarks.
const OUT_TARGET: usize = 2 * (16_384 + 9);

/// Bytes of frames queued toward the client above which a client that
/// keeps asking for control replies (PING, SETTINGS) without reading them
/// gets GOAWAY ENHANCE_YOUR_CALM.
const OUT_LIMIT: usize = 256 * 1024;

/// Largest read buffer: a whole frame of our SETTINGS_MAX_FRAME_SIZE
/// (16,384 bytes) plus its header, and room for a read behind it.
const IN_MAX: usize = 64 * 1024;

/// The connection receive window we open at the start (bytes), beyond
/// the protocol's 65,535: the stream windows bound what is held, so the
/// connection's only needs to let every stream use its own.
fn connection_window(cfg: &crate::config::Config) -> u32 {
    let per_stream = u64::from(cfg.h2_initial_window_size);
    let all = per_stream.saturating_mul(u64::from(cfg.h2_max_concurrent_streams));
    u32::try_from(all.clamp(65_535, 0x7fff_ffff)).unwrap_or(0x7fff_ffff)
}

/// Where the connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Frames flow.
    Open,
    /// Flushing the last frames (a GOAWAY), then half-closed until EOF
    /// or `linger_until`.
    Closing { linger_until: Option<Instant> },
    /// Terminal.
    Closed,
}

/// The graceful shutdown's progress (RFC 9113 §6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goaway {
    /// None sent.
    None,
    /// A first GOAWAY with the largest stream id went, with a PING, at
    /// `since`: the final one follows its acknowledgement (one round
    /// trip), or [`DRAIN_PING_WAIT`] when none comes.
    Announced { since: Instant },
    /// The final GOAWAY went: streams above `last` are not served.
    Sent { last: u32 },
}

/// The opaque data of the PING that follows the first GOAWAY of a drain.
const DRAIN_PING: [u8; 8] = *b"sluice-d";

/// How long a drain waits for its PING's acknowledgement before the final
/// GOAWAY goes anyway: a client that never answers would otherwise open
/// streams, each served, until `drain_timeout`.
const DRAIN_PING_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a drain holds its first GOAWAY on a connection whose streams
/// are open: Chromium fails (ERR_FAILED, no retry) a request it had
/// already given a connection when a GOAWAY arrives before the stream is
/// opened, so a reload in the middle of a page load lost assets; sent once
/// no stream is open, it comes between page loads.
const DRAIN_HOLD_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// What the machine was made from: an HTTP/1 connection that found the
/// HTTP/2 preface (h2c) or whose TLS handshake chose `h2`.
pub(crate) struct Handover {
    /// The loop's id of the connection.
    pub id: ConnId,
    /// Its transport.
    pub stream: Transport,
    /// Its readiness.
    pub io: Io,
    /// The peer's address (after any PROXY header).
    pub addr: SocketAddr,
    /// Bytes read and not consumed: the preface and what followed it.
    pub inbuf: Option<WatermarkBuffer>,
    /// When it was accepted.
    pub accepted_at: Instant,
    /// Counted per client address (`max_connections_per_client`).
    pub conn_counted: bool,
    /// Counted idle in `downstream_idle`.
    pub idle_counted: bool,
    /// A drain began before the handover.
    pub draining: bool,
}

/// One HTTP/2 client connection.
pub(crate) struct H2Conn {
    id: ConnId,
    tx: Transport,
    io: Io,
    addr: SocketAddr,
    /// Bytes read from the client, frames not yet consumed.
    inbuf: Option<WatermarkBuffer>,
    /// Frames for the client not yet written.
    out: Option<WatermarkBuffer>,
    /// Last time a byte was written to the client (or frames appeared).
    write_at: Instant,
    read_eof: bool,
    state: State,
    /// The frame reader; taken out while frames are handled.
    decoder: Option<Box<FrameDecoder>>,
    hpack_in: Decoder,
    hpack_out: Encoder,
    /// A decoded field list (reused).
    fields: FieldList,
    /// An HPACK block being encoded (reused).
    block: Vec<u8>,
    /// Frames being encoded (reused).
    scratch: Vec<u8>,
    local: LocalSettings,
    peer: PeerSettings,
    /// What the client still lets us send on the connection.
    send_window: Window,
    /// What we still let the client send on the connection.
    recv_window: Window,
    /// Connection window received and not yet credited back.
    recv_credit: u32,
    /// The streams open or finishing, in arrival order.
    streams: Vec<Stream>,
    /// The largest stream id the client opened.
    highest: u32,
    /// Streams reset by us recently: frames on them are ignored (RFC
    /// 9113 §5.1 "closed"), at most `RECENT_RESETS`.
    reset_by_us: std::collections::VecDeque<u32>,
    /// Streams answered in full whose request body still arrives, at
    /// most `max_concurrent_streams` (`answered.rs`).
    answered: std::collections::VecDeque<answered::Answered>,
    /// The round robin's next stream (an index into `streams`).
    next_send: usize,
    goaway: Goaway,
    /// The client sent GOAWAY: it opens no more streams.
    peer_goaway: bool,
    /// The client acknowledged our SETTINGS (the only ones we send):
    /// until then it may use the protocol's defaults, so a stream may
    /// receive up to 65,535 bytes even when `h2_initial_window_size` is
    /// lower (RFC 9113 §6.9.3; [`H2Conn::recv_initial`]).
    settings_acked: bool,
    limits: Limits,
    accepted_at: Instant,
    /// Since when no stream is open.
    idle_since: Instant,
    /// Since when a header block is open (a HEADERS frame without
    /// END_HEADERS): it must end within `request_head_timeout`, as an
    /// HTTP/1 head must.
    block_since: Option<Instant>,
    idle_counted: bool,
    conn_counted: bool,
    draining: bool,
    /// A drain began while streams were open, at this time: its first
    /// GOAWAY waits until none is, or `DRAIN_HOLD_MAX`.
    drain_held: Option<Instant>,
    /// Requests served (streams started).
    requests: u64,
    linger_queued: usize,
}

/// Streams reset by us whose late frames are ignored, at most.
const RECENT_RESETS: usize = 256;

impl H2Conn {
    /// The machine for a connection handed over from HTTP/1: our SETTINGS
    /// (and a connection window for every stream) are queued at once, the
    /// server's preface (RFC 9113 §3.4).
    pub(crate) fn new(h: Handover, sh: &mut Shared) -> Self {
        let cfg = &sh.cfg;
        let mut local = LocalSettings::new();
        local.max_concurrent_streams = cfg.h2_max_concurrent_streams;
        local.initial_window_size = cfg.h2_initial_window_size;
        local.max_header_list_size = u32::try_from(cfg.max_head_size).unwrap_or(u32::MAX);
        let decoder = FrameDecoder::new(local.max_frame_size, cfg.max_head_size);
        let conn_window = connection_window(cfg);
        let mut c = H2Conn {
            id: h.id,
            tx: h.stream,
            io: h.io,
            addr: h.addr,
            inbuf: h.inbuf,
            out: None,
            write_at: sh.now,
            read_eof: false,
            state: State::Open,
            decoder: Some(Box::new(decoder)),
            hpack_in: Decoder::new(local.header_table_size as usize),
            hpack_out: Encoder::new(),
            fields: FieldList::new(),
            block: Vec::new(),
            scratch: Vec::new(),
            local,
            peer: PeerSettings::default(),
            send_window: Window::new(crate::h2::settings::DEFAULT_WINDOW),
            recv_window: Window::new(conn_window),
            recv_credit: 0,
            streams: Vec::new(),
            highest: 0,
            reset_by_us: std::collections::VecDeque::new(),
            answered: std::collections::VecDeque::new(),
            next_send: 0,
            goaway: Goaway::None,
            peer_goaway: false,
            settings_acked: false,
            limits: Limits::new(cfg.h2_max_concurrent_streams),
            accepted_at: h.accepted_at,
            idle_since: sh.now,
            block_since: None,
            idle_counted: h.idle_counted,
            conn_counted: h.conn_counted,
            draining: false,
            drain_held: None,
            requests: 0,
            linger_queued: usize::MAX,
        };
        Stats::add(&sh.stats.h2_connections, 1);
        let mut preface = Vec::with_capacity(64);
        c.local.encode(&mut preface);
        let raise = conn_window.saturating_sub(crate::h2::settings::DEFAULT_WINDOW);
        if raise > 0 {
            frame::encode_window_update(&mut preface, 0, raise);
        }
        c.queue(sh, &preface);
        c.set_idle(false, &sh.stats);
        if h.draining {
            c.begin_drain(sh);
        }
        c
    }

    /// The connection ended; the loop frees it with `close`.
    pub(crate) fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Records an event of the client socket.
    pub(crate) fn on_event(&mut self, event: &mio::event::Event) {
        self.io.on_event(event);
    }

    /// Moves everything that can move now. Returns true if it stopped only
    /// because of its round limit (drive it again soon).
    pub(crate) fn drive(&mut self, sh: &mut Shared) -> bool {
        let mut more = false;
        for round in 0..MAX_ROUNDS {
            if self.state == State::Closed {
                break;
            }
            if !self.step(sh) {
                break;
            }
            more = round + 1 == MAX_ROUNDS;
        }
        if self.state != State::Closed
            && let Err(e) = self.update_interest(sh)
        {
            debug!("h2 client {}: interest update failed: {e}", self.addr);
            self.state = State::Closed;
        }
        more
    }

    /// One round: write what is queued, read and handle frames, start the
    /// streams whose heads came, step every stream's exchange, frame what
    /// the streams hold, and close when the connection is done.
    fn step(&mut self, sh: &mut Shared) -> bool {
        let mut progress = self.write_out(sh);
        if self.state == State::Closed {
            return false;
        }
        progress |= match self.state {
            State::Open => {
                let mut p = self.read_frames(sh);
                p |= self.start_streams(sh);
                p |= self.step_streams(sh);
                p |= self.fill_out(sh);
                p |= self.finish_streams(sh);
                p |= self.grant_windows(sh);
                p |= self.maybe_close(sh);
                p
            }
            State::Closing { .. } => self.advance_closing(sh),
            State::Closed => false,
        };
        progress
    }

    /// A graceful drain began (ARCHITECTURE.md §12, RFC 9113 §6.8): a
    /// first GOAWAY with the largest stream id and a PING, once no stream
    /// is open (or after `DRAIN_HOLD_MAX`); the final GOAWAY with the real
    /// last stream id after the PING's answer (one round trip, so streams
    /// the client opened meanwhile are served), or after
    /// `DRAIN_PING_WAIT` without one.
    /// Streams in flight finish; the connection closes when none is left.
    pub(crate) fn begin_drain(&mut self, sh: &mut Shared) {
        if self.draining {
            return;
        }
        self.draining = true;
        self.io.readable = true;
        if self.streams.is_empty() {
            self.announce_drain(sh);
        } else {
            self.drain_held = Some(sh.now);
        }
    }

    /// The drain's first GOAWAY (the largest stream id) and its PING.
    fn announce_drain(&mut self, sh: &mut Shared) {
        self.drain_held = None;
        if self.goaway == Goaway::None && self.state == State::Open {
            let mut bytes = Vec::with_capacity(40);
            frame::encode_goaway(&mut bytes, 0x7fff_ffff, ErrorCode::NoError, b"");
            frame::encode_ping(&mut bytes, DRAIN_PING, false);
            self.goaway = Goaway::Announced { since: sh.now };
            Stats::add(&sh.stats.h2_goaways_no_error, 1);
            self.queue(sh, &bytes);
        }
    }

    /// The final GOAWAY of a drain (or of a keep-alive timeout, or of
    /// `max_requests_per_connection`): no stream above the last one
    /// opened will be served.
    fn final_goaway(&mut self, sh: &mut Shared) {
        if matches!(self.goaway, Goaway::Sent { .. }) {
            return;
        }
        let mut bytes = Vec::with_capacity(17);
        frame::encode_goaway(&mut bytes, self.highest, ErrorCode::NoError, b"");
        if self.goaway == Goaway::None {
            Stats::add(&sh.stats.h2_goaways_no_error, 1);
        }
        self.goaway = Goaway::Sent { last: self.highest };
        self.queue(sh, &bytes);
    }

    /// The connection has no open stream and will get none (the client
    /// left or sent GOAWAY, or our final GOAWAY went: a drain's, or the
    /// one at `max_requests_per_connection`): it closes once its frames
    /// are out.
    fn maybe_close(&mut self, sh: &mut Shared) -> bool {
        if !self.streams.is_empty() {
            return false;
        }
        if self.drain_held.is_some() {
            self.announce_drain(sh);
            return true;
        }
        // A stream answered early still has its body dropped, or its reset
        // is due shortly (`answered.rs`): closing now would put the reset,
        // or nothing, right behind the answer.
        if !self.answered.is_empty() && !self.read_eof {
            return false;
        }
        let done = self.read_eof || self.peer_goaway || matches!(self.goaway, Goaway::Sent { .. });
        if !done {
            return false;
        }
        if self.draining {
            self.final_goaway(sh);
        }
        self.state = State::Closing { linger_until: None };
        true
    }

    /// A connection error (RFC 9113 §5.4.1): GOAWAY with `code` and the
    /// last stream processed, every stream's exchange ended, then close.
    fn connection_error(&mut self, code: ErrorCode, why: &str, sh: &mut Shared) {
        if self.state != State::Open {
            return;
        }
        debug!(
            "h2 client {}: connection error {}: {why}",
            self.addr,
            code.name()
        );
        if code == ErrorCode::EnhanceYourCalm
            && let Some(more) = sh.warn_limit.allow(WarnKind::Flood, sh.now)
        {
            // An operator sees an attack without debug logging: one line
            // a second, the rest counted (and in the GOAWAY metric).
            warn!(
                "h2 client {}: {why}: connection closed with GOAWAY ENHANCE_YOUR_CALM{more}",
                self.addr
            );
        }
        limits::count_goaway(&sh.stats, code);
        let mut bytes = Vec::with_capacity(64);
        let debug = why.as_bytes();
        frame::encode_goaway(
            &mut bytes,
            self.highest,
            code,
            debug.get(..debug.len().min(128)).unwrap_or_default(),
        );
        self.goaway = Goaway::Sent { last: self.highest };
        self.queue(sh, &bytes);
        self.end_all_streams(sh, super::access::Termination::ProxyError);
        self.state = State::Closing { linger_until: None };
    }

    /// Frees everything the connection holds (the loop removed it);
    /// exchanges still running are ended and logged: `cut` says the loop
    /// stopped them (drain deadline or shutdown), else the client left.
    pub(crate) fn close(mut self, sh: &mut Shared, cut: bool) {
        let how = if cut {
            super::access::Termination::DrainCut
        } else {
            super::access::Termination::ClientAborted
        };
        self.end_all_streams(sh, how);
        for b in [self.inbuf.take(), self.out.take()].into_iter().flatten() {
            sh.bufs.put_buffer(b);
        }
        if self.conn_counted {
            sh.conns.release(self.addr.ip());
        }
        self.set_idle(false, &sh.stats);
        self.tx.goodbye(&mut self.io, &sh.stats);
        Stats::sub(&sh.stats.downstream_active, 1);
    }

    /// Since when the connection has no open stream (the loop may close
    /// it to make room at the connection cap); `None` while one is open.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        (self.streams.is_empty() && self.state == State::Open && !self.draining)
            .then_some(self.idle_since)
    }

    /// Closes an idle connection to make room for a new client.
    pub(crate) fn close_for_room(&mut self, sh: &mut Shared) {
        Stats::add(&sh.stats.downstream_closed_for_room, 1);
        debug!("h2 client {}: closed to make room", self.addr);
        self.final_goaway(sh);
        self.state = State::Closing { linger_until: None };
    }

    // ---- helpers ----

    /// Appends frames to the bytes queued for the client.
    fn queue(&mut self, sh: &mut Shared, bytes: &[u8]) {
        let out = self.out.get_or_insert_with(|| sh.bufs.head(usize::MAX / 2));
        if out.is_empty() {
            self.write_at = sh.now;
        }
        out.extend_from_slice(bytes);
    }

    /// Bytes queued for the client.
    fn queued(&self) -> usize {
        self.out.as_ref().map_or(0, |b| b.pending())
    }

    fn set_idle(&mut self, idle: bool, stats: &Stats) {
        crate::conn::count_downstream_idle(&mut self.idle_counted, idle, stats);
    }

    /// The index of stream `id` in `streams`.
    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Registers what each socket should be watched for now: the client's
    /// for reading always (frames may come at any time: WINDOW_UPDATE,
    /// RST_STREAM, PING) and for writing while frames are queued; each
    /// stream's upstream as its exchange says, reading only while the
    /// stream's body buffer has room (the watermark rule).
    fn update_interest(&mut self, sh: &mut Shared) -> std::io::Result<()> {
        let want_write = self.queued() > 0;
        let want_read = match self.state {
            State::Open => !self.read_eof && self.inbuf.as_ref().is_none_or(|b| b.room() > 0),
            State::Closing { .. } => !self.read_eof,
            State::Closed => false,
        };
        self.tx.set_interest(
            &mut self.io,
            &sh.registry,
            self.id.token(Kind::Client),
            want_read,
            want_write,
        )?;
        for s in &self.streams {
            let Some(ex) = s.ex.as_deref() else {
                continue;
            };
            let Some(up) = ex.upstream.and_then(|k| sh.ups.get_mut(k)) else {
                continue;
            };
            let room = s.out.as_ref().is_none_or(|b| b.room() > 0);
            let (r, w) = ex.upstream_interest(room);
            up.set_interest(&sh.registry, r, w)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::Other))?;
        }
        Ok(())
    }
}

//! One rustls session, unbuffered (`rustls::unbuffered`), driven over the
//! caller's record storages without a socket: ciphertext in from `rx`,
//! plaintext out to the caller's buffer (or kept in `rest`), plaintext in
//! from the caller, ciphertext out to `tx`. The transport (`tls.rs`, its
//! `read.rs` and `write.rs`) moves the storages' bytes to and from the
//! socket.
//!
//! rustls' states, as one pass meets them (`Session::run`):
//! - `ReadTraffic`: a decrypted record. It goes to the caller's buffer up
//!   to its room and `max`, the rest of it to `rest`; with no room at all
//!   the record stays in rustls (read next time). Without a buffer (the
//!   write path, an idle look) it goes to `rest`, so that rustls can go on
//!   to `WriteTraffic`.
//! - `EncodeTlsData` / `TransmitTlsData`: handshake messages, alerts,
//!   session tickets, key updates: encoded into `tx` (the caller sends it).
//! - `WriteTraffic`: the handshake is done and nothing more can be read
//!   from `rx`: the caller's plaintext is encrypted into `tx` (after any
//!   record rustls queued, such as a key update), and `close_notify` if
//!   asked. The pass ends.
//! - `BlockedHandshake`: the handshake needs more bytes. The pass ends,
//!   unless a handshake gate lets rustls see one more record (below).
//! - `PeerClosed`, `Closed`: the peer's `close_notify` was read.
//!
//! A server session's handshake is gated (`tls::handshake_gate`): while
//! it lasts, rustls sees the records of `rx` one at a time, each judged
//! before, so that what a client makes it hold stays bounded; a refusal
//! ends the pass with an error (and the plaintext alert `decode_error`
//! in `tx` when the server has answered nothing yet). Once the handshake
//! is done, rustls sees all of `rx`: bytes behind the client's
//! `Finished` are never judged.
//!
//! Each pass ends after at most [`MAX_STATES`] states; `Run::more` then
//! says that `rx` may hold records rustls has not seen.
//!
//! What it must not know: sockets, HTTP, the watermarks' meaning.

use rustls::client::UnbufferedClientConnection;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};

use super::records::Records;
use crate::buffer::WatermarkBuffer;
use crate::tls::handshake_gate::{Admit, DECODE_ERROR_ALERT, HandshakeGate, Refusal};

/// Most states one pass handles (a storage of 1-byte records holds about
/// 750; what is left is handled by the next pass), besides the records a
/// handshake gate lets through one at a time.
const MAX_STATES: usize = 256;

/// A server or client session.
pub(crate) enum Session {
    Server(UnbufferedServerConnection),
    Client(UnbufferedClientConnection),
}

/// What a pass reads: the ciphertext of `rx` and, for a server session
/// while its handshake lasts, the gate that lets rustls see it record by
/// record.
pub(crate) struct Incoming<'a> {
    pub rx: &'a mut Records,
    pub gate: Option<&'a mut HandshakeGate>,
}

/// Where a pass puts decrypted bytes: the caller's buffer, at most `max`
/// bytes more.
pub(crate) struct Sink<'a> {
    pub buf: &'a mut WatermarkBuffer,
    pub max: usize,
}

/// What a pass did.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Plaintext bytes appended to the sink's buffer.
    pub taken: usize,
    /// Caller's plaintext bytes encrypted into `tx`.
    pub encrypted: usize,
    /// `close_notify` was encrypted into `tx`.
    pub close_queued: bool,
    /// The peer's `close_notify` was read.
    pub peer_closed: bool,
    /// Records may wait: in rustls, decrypted (the sink was full), or in
    /// `rx`, not yet processed (the state bound).
    pub more: bool,
    /// rustls reached `WriteTraffic` (application data may be sent).
    pub writable: bool,
}

/// What one state asks of the pass.
enum Next {
    Again,
    /// Nothing more to do with what rustls was given (it needs more
    /// bytes, or waits to be given plaintext).
    Stop,
    /// The sink is full: stop, records may wait in `rx` and in rustls.
    Full,
}

/// Why a pass failed.
#[derive(Debug)]
pub(crate) enum Failed {
    /// rustls' error (a bad record, a failed handshake, an alert from the
    /// peer).
    Tls(rustls::Error),
    /// The handshake gate refused the client's next record.
    Refused(Refusal),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Tls(e) => e.fmt(f),
            Failed::Refused(r) => r.fmt(f),
        }
    }
}

impl std::error::Error for Failed {}

impl Session {
    /// The handshake is still going on.
    pub(crate) fn is_handshaking(&self) -> bool {
        match self {
            Session::Server(s) => s.is_handshaking(),
            Session::Client(c) => c.is_handshaking(),
        }
    }

    /// The state rustls shares between both sides (version, suite,
    /// handshake kind, peer certificates).
    pub(crate) fn common(&self) -> &rustls::CommonState {
        match self {
            Session::Server(s) => s,
            Session::Client(c) => c,
        }
    }

    /// One pass: processes what `input.rx` holds (while a gate is given
    /// and the handshake lasts, the records it admits), puts plaintext in
    /// `sink` (else `rest`), encodes what rustls has to send into `tx`,
    /// and once it may, encrypts `plain` (all of it: the caller bounds it)
    /// and, with `close`, `close_notify`. Bytes rustls processed leave
    /// `rx`.
    ///
    /// Errors: rustls' (a bad record, a failed handshake, an alert from
    /// the peer), the alert rustls answers with encoded into `tx` first;
    /// the gate's refusal.
    pub(crate) fn run(
        &mut self,
        input: Incoming<'_>,
        tx: &mut Records,
        rest: &mut Vec<u8>,
        mut sink: Option<Sink<'_>>,
        plain: &[u8],
        close: bool,
    ) -> Result<Run, Failed> {
        let Incoming { rx, mut gate } = input;
        let mut run = Run::default();
        let mut out = Out {
            tx,
            rest,
            sink: &mut sink,
            plain,
            close,
            run: &mut run,
        };
        let mut states = 0;
        while states < MAX_STATES {
            states += 1;
            let gated = gate.as_deref().filter(|_| self.is_handshaking());
            let open = gated.map_or(rx.len(), HandshakeGate::open);
            let last = gated.map_or(0, HandshakeGate::last);
            let held_back = open < rx.len();
            let bytes = rx.pending_mut();
            let bytes = bytes.get_mut(..open).unwrap_or_default();
            let step = match self {
                Session::Server(s) => out.handle(s.process_tls_records(bytes)),
                Session::Client(c) => out.handle(c.process_tls_records(bytes)),
            };
            let (discard, next) = match step {
                Ok(s) => s,
                Err((discard, e)) => {
                    rx.consume(discard);
                    // rustls asked for its alert reads its input again:
                    // a record it could not decrypt (while gated, the
                    // last one let through) would fail again, with a
                    // second fatal alert rustls asserts against. (The
                    // gate refuses the record headers rustls would.)
                    let failed = match e {
                        rustls::Error::DecryptError | rustls::Error::PeerSentOversizedRecord => {
                            last
                        }
                        _ => 0,
                    };
                    let seen = open.saturating_sub(discard).saturating_sub(failed);
                    self.encode_alert(rx, out.tx, seen);
                    return Err(Failed::Tls(e));
                }
            };
            rx.consume(discard);
            if let Some(g) = gate.as_deref_mut() {
                g.consumed(discard);
            }
            match next {
                Next::Again => {}
                Next::Stop => {
                    let more = match gate.as_deref_mut() {
                        Some(g) => self.gate_next(g, rx, out.tx, held_back)?,
                        None => false,
                    };
                    if !more {
                        return Ok(run);
                    }
                    // A record the gate let through is not counted: the
                    // gate bounds them (5 bytes each at least), and a
                    // handshake stopped here would wait for an event
                    // that its client, waiting for the answer, never
                    // sends.
                    states -= 1;
                }
                Next::Full => {
                    run.more = true;
                    return Ok(run);
                }
            }
        }
        run.more = true;
        Ok(run)
    }

    /// rustls did all it could with what it was given: while the
    /// handshake lasts, the gate judges the next record (true: rustls may
    /// see it); once it is done, the bytes held back behind it (the
    /// client's first request) are let through (true if there were any).
    ///
    /// Errors: the gate's refusal, with the plaintext alert `decode_error`
    /// in `tx` when the server has answered nothing yet (no version
    /// chosen: nothing it sent is encrypted).
    fn gate_next(
        &self,
        gate: &mut HandshakeGate,
        rx: &Records,
        tx: &mut Records,
        held_back: bool,
    ) -> Result<bool, Failed> {
        if !self.is_handshaking() {
            return Ok(held_back);
        }
        let version = self.common().protocol_version();
        match gate.admit(
            rx.pending(),
            version == Some(rustls::ProtocolVersion::TLSv1_2),
        ) {
            Admit::Record => Ok(true),
            Admit::NeedMore => Ok(false),
            Admit::Refuse(why) => {
                if version.is_none() {
                    let n = DECODE_ERROR_ALERT.len();
                    if let Some(space) = tx.space_for(n).get_mut(..n) {
                        space.copy_from_slice(&DECODE_ERROR_ALERT);
                        tx.filled(n);
                    }
                }
                Err(Failed::Refused(why))
            }
        }
    }

    /// After an error: the records rustls queued (its alert last) into
    /// `tx`; rustls sees the first `open` bytes of `rx` (at most what it
    /// was given before: less would be out of its bounds).
    fn encode_alert(&mut self, rx: &mut Records, tx: &mut Records, open: usize) {
        for _ in 0..4 {
            let bytes = rx.pending_mut();
            let bytes = bytes.get_mut(..open).unwrap_or_default();
            let more = match self {
                Session::Server(s) => alert_step(s.process_tls_records(bytes), tx),
                Session::Client(c) => alert_step(c.process_tls_records(bytes), tx),
            };
            if !more {
                return;
            }
        }
    }
}

/// One state after an error: true while rustls still hands out records
/// to send (encoded into `tx`).
fn alert_step<Data>(status: UnbufferedStatus<'_, '_, Data>, tx: &mut Records) -> bool {
    match status.state {
        Ok(ConnectionState::EncodeTlsData(mut e)) => encode(&mut e, tx),
        Ok(ConnectionState::TransmitTlsData(t)) => {
            t.done();
            true
        }
        _ => false,
    }
}

/// Encodes one handshake or alert record into `tx`, growing it if it
/// must. False if it could not.
fn encode<Data>(e: &mut rustls::unbuffered::EncodeTlsData<'_, Data>, tx: &mut Records) -> bool {
    let mut want = 0;
    for _ in 0..2 {
        match e.encode(tx.space_for(want)) {
            Ok(n) => {
                tx.filled(n);
                return true;
            }
            Err(EncodeError::InsufficientSize(s)) => want = s.required_size,
            Err(_) => return false,
        }
    }
    false
}

/// The outputs of one pass.
struct Out<'a, 'b> {
    tx: &'a mut Records,
    rest: &'a mut Vec<u8>,
    sink: &'a mut Option<Sink<'b>>,
    plain: &'a [u8],
    close: bool,
    run: &'a mut Run,
}

impl Out<'_, '_> {
    /// Handles one state: the bytes of `rx` to discard, and what next.
    fn handle<Data>(
        &mut self,
        status: UnbufferedStatus<'_, '_, Data>,
    ) -> Result<(usize, Next), (usize, rustls::Error)> {
        let mut discard = status.discard;
        let state = match status.state {
            Ok(s) => s,
            Err(e) => return Err((discard, e)),
        };
        let next = match state {
            ConnectionState::ReadTraffic(mut r) => {
                if self
                    .sink
                    .as_ref()
                    .is_some_and(|s| s.max == 0 || s.buf.room() == 0)
                {
                    return Ok((discard, Next::Full));
                }
                // One record per `ReadTraffic` in rustls 0.23; bounded all
                // the same.
                for _ in 0..MAX_STATES {
                    let Some(record) = r.next_record() else {
                        break;
                    };
                    let record = record.map_err(|e| (discard, e))?;
                    discard += record.discard;
                    self.take(record.payload);
                }
                Next::Again
            }
            ConnectionState::EncodeTlsData(mut e) => {
                if !encode(&mut e, self.tx) {
                    return Err((
                        discard,
                        rustls::Error::General("TLS record too large".into()),
                    ));
                }
                Next::Again
            }
            // The records are in `tx`: the caller sends them, in order.
            ConnectionState::TransmitTlsData(t) => {
                t.done();
                Next::Again
            }
            ConnectionState::WriteTraffic(mut w) => {
                self.run.writable = true;
                if !self.plain.is_empty() && self.run.encrypted == 0 {
                    let mut want = 0;
                    for _ in 0..2 {
                        match w.encrypt(self.plain, self.tx.space_for(want)) {
                            Ok(n) => {
                                self.tx.filled(n);
                                self.run.encrypted = self.plain.len();
                                break;
                            }
                            Err(EncryptError::InsufficientSize(s)) => want = s.required_size,
                            Err(e) => {
                                return Err((discard, rustls::Error::General(e.to_string())));
                            }
                        }
                    }
                }
                if self.close && !self.run.close_queued {
                    let mut want = 0;
                    for _ in 0..2 {
                        match w.queue_close_notify(self.tx.space_for(want)) {
                            Ok(n) => {
                                self.tx.filled(n);
                                self.run.close_queued = true;
                                break;
                            }
                            Err(EncryptError::InsufficientSize(s)) => want = s.required_size,
                            Err(_) => break,
                        }
                    }
                }
                Next::Stop
            }
            ConnectionState::BlockedHandshake => Next::Stop,
            ConnectionState::PeerClosed => {
                self.run.peer_closed = true;
                Next::Again
            }
            ConnectionState::Closed => {
                self.run.peer_closed = true;
                Next::Stop
            }
            // `ReadEarlyData` never comes: the server configuration keeps
            // `max_early_data_size` at 0.
            _ => Next::Stop,
        };
        Ok((discard, next))
    }

    /// A decrypted record's bytes: into the sink up to its room, the rest
    /// kept in `rest`. Once `rest` holds bytes, everything after them goes
    /// there too: the sink may take less than its `room()` says (an
    /// elastic head buffer grows by steps), and a later record's bytes must
    /// never pass an earlier one's.
    fn take(&mut self, mut payload: &[u8]) {
        if let Some(sink) = self.sink.as_mut().filter(|_| self.rest.is_empty()) {
            let room = sink.max.min(sink.buf.room()).min(payload.len());
            if room > 0 {
                let head = payload.get(..room).unwrap_or_default();
                let copied = sink.buf.fill_with(room, |space| {
                    let n = space.len().min(head.len());
                    if let (Some(dst), Some(src)) = (space.get_mut(..n), head.get(..n)) {
                        dst.copy_from_slice(src);
                    }
                    Ok(n)
                });
                let n = copied.map_or(0, |(n, _)| n);
                sink.max -= n;
                self.run.taken += n;
                payload = payload.get(n..).unwrap_or_default();
            }
        }
        self.rest.extend_from_slice(payload);
    }
}

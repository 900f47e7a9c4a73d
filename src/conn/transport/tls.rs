//! A rustls session over the transport's socket, driven sans-IO in the one
//! loop (DESIGN §10) through rustls' unbuffered API (`session.rs`): the
//! socket's bytes go into a record storage (`records.rs`), rustls
//! decrypts them, and encrypts into another storage that the transport
//! writes. No threads, no blocking calls.
//!
//! Why unbuffered: rustls' buffered `ServerConnection` keeps a 4 KiB
//! deframer buffer from its first read to its end, so an idle keep-alive
//! TLS connection cost about 7 KB; here the storages are the transport's,
//! held only while records are in flight, and an idle connection keeps
//! only the session (about 2.2 KB; `examples/tls_session_mem.rs`). It also
//! lets one socket read take a whole record (17 KiB) instead of rustls'
//! 4 KiB step, so an upload takes a read per record, and a 32 KiB body
//! buffer leaves in one `send` of two records.
//!
//! The four points of the layout review (SEAMS.md §3.1), settled here:
//! - **Short reads.** A socket read that was short clears `readable` as on
//!   a plain socket, but records may still wait (in rustls for lack of
//!   room, in `rest`, or unprocessed in the storage) that no readiness
//!   event will announce: [`Tls::may_read`] keeps the machine reading
//!   until they are gone.
//! - **Write interest.** While the storage holds TLS bytes not yet on the
//!   socket (a handshake flight, an alert, `close_notify`), the transport
//!   wants WRITABLE whatever the machine's buffers say, and a close waits
//!   for them ([`Tls::wants_write`]).
//! - **Bounded memory.** New plaintext is encrypted only once the previous
//!   ciphertext is on the socket, and at most 33 KiB at a time, so a
//!   session holds at most one write's worth beside the machine's own
//!   buffer (a slow reader's 16 KiB buffer and its head: 17 KiB); a
//!   socket read takes one record's worth (17 KiB) at most.
//! - **Plain HTTP on a TLS port.** The first byte of a server session is
//!   looked at before rustls sees it: a TLS handshake record (22) goes on;
//!   an ASCII letter (a request line) turns the transport plain, so that
//!   the machine can answer a plaintext 400 naming HTTPS (nginx's 497);
//!   anything else is an error (the connection closes).
//!
//! The ClientHello's name is read from the first bytes as they come
//! (`tls::client_hello`): for the access record, and under
//! `tls_unknown_sni = "reject"` to answer `unrecognized_name` before the
//! session acts on a hello no certificate covers.
//!
//! What it must not know: HTTP, the watermarks' meaning.

use std::io::{self, Read};
use std::sync::Arc;

use mio::net::TcpStream;

use super::super::io::{Io, Read1};
use super::records::{Records, encrypt_take, sealed_len};
use super::session::{Failed, Incoming, Run, Session, Sink};
use crate::buffer::WatermarkBuffer;
use crate::stats::Stats;
use crate::tls::client_hello::{Hello, HelloScan};
use crate::tls::handshake_gate::HandshakeGate;
use crate::tls::sni::{CertStore, UNRECOGNIZED_NAME_ALERT};

/// The first byte of a TLS handshake record (RFC 8446 §5.1, `handshake`).
const HANDSHAKE_RECORD: u8 = 22;

/// Most rounds of one read call (decrypt, refill from the socket): bounds
/// the work before the machine sees what came.
const MAX_READ_ROUNDS: usize = 8;

/// What the first bytes of a server session were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sniff {
    /// Nothing read yet.
    Unknown,
    /// A TLS record: the session goes on.
    Tls,
    /// A plaintext request line: the transport turned plain.
    PlainHttp,
}

/// One rustls session (server or client side), its record storages, and
/// what the socket's readiness does not say about it.
pub(crate) struct Tls {
    session: Session,
    /// Ciphertext read from the socket, not yet processed by rustls.
    rx: Records,
    /// Ciphertext for the socket, not yet written.
    tx: Records,
    /// Decrypted bytes the caller's buffer had no room for, oldest first
    /// (no allocation unless a record did not fit).
    rest: Vec<u8>,
    /// Records may wait that no socket event will announce: new bytes in
    /// `rx` not yet processed, or a decrypted record left in rustls (the
    /// last pass stopped for lack of room, or at its state bound).
    unprocessed: bool,
    /// rustls read the peer's `close_notify`, or the socket said EOF:
    /// once the plaintext before it is read, reads say `Eof`.
    peer_closed: bool,
    /// What the first bytes were (server sessions; client ones start at
    /// `Tls`).
    pub(super) sniff: Sniff,
    /// The ClientHello's name, looked for until the hello is whole
    /// (server sessions).
    hello: Option<Box<HelloScan>>,
    /// The certificates a name must be covered by (a listener with
    /// `tls_unknown_sni = "reject"`), until the hello is judged.
    reject: Option<Arc<CertStore>>,
    /// What rustls may see of the client's records while a server
    /// session's handshake lasts (`tls::handshake_gate`: 8 KiB in all);
    /// dropped when it ends.
    gate: Option<Box<HandshakeGate>>,
    /// The name the ClientHello asked for (lower case), for the access
    /// record.
    sni: Option<Box<str>>,
    /// The `X-Forwarded-Client-Cert` value of the client's verified
    /// certificate, made once when the handshake ends (a server session
    /// under `tls_client_auth`).
    client_cert: Option<Box<str>>,
}

/// A client connection's TLS facts, for its access records (issue 23,
/// "Observability").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TlsFacts<'a> {
    /// `"TLSv1.3"` or `"TLSv1.2"`.
    pub version: &'static str,
    /// The cipher suite's IANA name (`"TLS13_AES_128_GCM_SHA256"`).
    pub cipher: &'static str,
    /// The name the ClientHello asked for (a server session), if any.
    pub sni: Option<&'a str>,
    /// The session was resumed (a ticket or a cached session).
    pub resumed: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("handshaking", &self.session.is_handshaking())
            .field("rx", &self.rx.len())
            .field("tx", &self.tx.len())
            .field("rest", &self.rest.len())
            .field("sniff", &self.sniff)
            .finish()
    }
}

fn tls_error(e: Failed) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl Tls {
    /// A server session (a TLS listener's accepted connection): its first
    /// bytes are sniffed and its ClientHello's name read. With `reject`,
    /// a name no certificate of that store covers gets `unrecognized_name`
    /// before rustls answers the hello. `gate` bounds what the client's
    /// handshake may make the session hold (`ServerTls::handshake_gate`).
    pub(crate) fn server(
        conn: rustls::server::UnbufferedServerConnection,
        reject: Option<Arc<CertStore>>,
        gate: HandshakeGate,
    ) -> Self {
        let mut tls = Tls::new(Session::Server(conn), Sniff::Unknown, reject);
        tls.gate = Some(Box::new(gate));
        tls
    }

    /// A client session (an upstream TLS connection).
    pub(crate) fn client(conn: rustls::client::UnbufferedClientConnection) -> Self {
        Tls::new(Session::Client(conn), Sniff::Tls, None)
    }

    fn new(session: Session, sniff: Sniff, reject: Option<Arc<CertStore>>) -> Self {
        let server = matches!(session, Session::Server(_));
        Tls {
            session,
            rx: Records::default(),
            tx: Records::default(),
            rest: Vec::new(),
            unprocessed: false,
            peer_closed: false,
            sniff,
            hello: server.then(Box::default),
            reject,
            gate: None,
            sni: None,
            client_cert: None,
        }
    }

    /// A read may give something: the socket is readable, or bytes wait
    /// that no event will announce.
    pub(crate) fn may_read(&self, io: &Io) -> bool {
        io.readable || self.holds_plaintext()
    }

    /// The handshake chose HTTP/2 by ALPN (`h2`, RFC 9113 §3.2).
    pub(crate) fn alpn_h2(&self) -> bool {
        !self.session.is_handshaking()
            && self.session.common().alpn_protocol() == Some(crate::tls::server::ALPN_H2)
    }

    /// Decrypted bytes (or records not yet processed, or the peer's close)
    /// wait to be read.
    pub(crate) fn holds_plaintext(&self) -> bool {
        !self.rest.is_empty() || self.unprocessed || self.peer_closed
    }

    /// TLS bytes wait to be written to the socket.
    pub(crate) fn wants_write(&self) -> bool {
        !self.tx.is_empty()
    }

    /// The handshake is still going on.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.session.is_handshaking()
    }

    /// Encrypts `close_notify` (RFC 8446 §6.1) once, behind anything
    /// queued; it goes with the next flush. Nothing while the handshake
    /// runs (the connection then closes silently).
    pub(crate) fn close_notify(&mut self) {
        if self.session.is_handshaking() {
            return;
        }
        let _ = self.pass(None, &[], true);
    }

    /// One pass of the session over the storages (see `session.rs`),
    /// with the handshake's end counted (a server session) and an error
    /// counted as a failed handshake while it lasted.
    fn pass(&mut self, sink: Option<Sink<'_>>, plain: &[u8], close: bool) -> io::Result<Run> {
        let handshaking = self.session.is_handshaking();
        let input = Incoming {
            rx: &mut self.rx,
            gate: self.gate.as_deref_mut(),
        };
        let r = self
            .session
            .run(input, &mut self.tx, &mut self.rest, sink, plain, close);
        let server = matches!(self.session, Session::Server(_));
        match r {
            Ok(run) => {
                self.unprocessed = run.more;
                self.peer_closed |= run.peer_closed;
                if handshaking && server && !self.session.is_handshaking() {
                    self.handshake_done();
                }
                Ok(run)
            }
            Err(e) => {
                if handshaking && server {
                    log::debug!("TLS handshake with a client failed: {e}");
                }
                Err(tls_error(e))
            }
        }
    }

    /// A server session's handshake just ended: the gate goes, and the
    /// client certificate's field is made once.
    fn handshake_done(&mut self) {
        self.gate = None;
        self.client_cert = self
            .peer_leaf()
            .and_then(crate::tls::client_cert::forwarded_value)
            .map(String::into_boxed_str);
    }

    /// Counts a server session's completed handshake (`ok` or
    /// `resumed`), or its failure.
    fn count(&self, before: bool, failed: bool, stats: &Stats) {
        if !before || !matches!(self.session, Session::Server(_)) {
            return;
        }
        if failed {
            Stats::add(&stats.tls_handshakes_failed, 1);
        } else if !self.session.is_handshaking() {
            let resumed =
                self.session.common().handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            Stats::add(
                if resumed {
                    &stats.tls_handshakes_resumed
                } else {
                    &stats.tls_handshakes
                },
                1,
            );
        }
    }

    /// A pass over what `rx` holds, with the answer flushed at once while
    /// the handshake runs (a flight the peer waits for, or the alert of a
    /// failure), and the handshake's end or failure counted.
    fn process(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        sink: Option<Sink<'_>>,
        stats: &Stats,
    ) -> io::Result<Run> {
        let before = self.session.is_handshaking();
        let r = self.pass(sink, &[], false);
        self.count(before, r.is_err(), stats);
        if !self.tx.is_empty() {
            // A handshake flight, tickets, an alert: the peer may wait for
            // them, and no event would flush them.
            let flushed = self.flush(stream, io, false, stats);
            if r.is_ok() {
                flushed?;
            }
        }
        r
    }

    /// One read of plaintext into `buf` (at most `max` bytes, never past
    /// its room): what is already decrypted first, then the records the
    /// storage holds, else one socket read, decrypted (a handshake step's
    /// answer is flushed at once). `Read1::Eof` at the peer's
    /// `close_notify` or the socket's EOF, once the bytes before it are
    /// read. On the first bytes of a server session that are a plaintext
    /// request line, they are put in `buf` and `sniff` becomes `PlainHttp`
    /// (the caller turns plain).
    ///
    /// Errors: the socket's; invalid TLS (`InvalidData`, rustls' alert
    /// flushed once); bytes that are neither TLS nor HTTP; a name no
    /// certificate covers under `reject`.
    pub(crate) fn read_into(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        max: usize,
        stats: &Stats,
    ) -> io::Result<Read1> {
        if max == 0 || buf.room() == 0 {
            return Ok(Read1::Idle);
        }
        for _ in 0..MAX_READ_ROUNDS {
            if !self.rest.is_empty() {
                return Ok(Read1::Data(self.give_rest(buf, max)));
            }
            if self.unprocessed {
                let run = self.process(stream, io, Some(Sink { buf, max }), stats)?;
                if run.taken > 0 {
                    return Ok(Read1::Data(run.taken));
                }
                if run.more {
                    // No room for the next record after all.
                    return Ok(Read1::Idle);
                }
                continue;
            }
            if self.peer_closed {
                return Ok(Read1::Eof);
            }
            if !io.readable {
                return Ok(self.wait());
            }
            let Some(n) = self.read_socket(stream, io, stats)? else {
                return Ok(self.wait());
            };
            if self.sniff != Sniff::Tls && n > 0 {
                self.sniff_first()?;
                if self.sniff == Sniff::PlainHttp {
                    let bytes = self.rx.pending();
                    let n = bytes.len();
                    buf.extend_from_slice(bytes);
                    self.rx.consume(n);
                    return Ok(Read1::Data(n));
                }
            }
            if self.hello.is_some() {
                self.look_at_hello(stream, n, stats)?;
            }
        }
        Ok(Read1::Idle)
    }

    /// The socket has nothing more for now: a handshake that waits for
    /// the rest of a record keeps its bytes in a storage of their own
    /// size (at most the gate's 8 KiB), not in a 17 KiB one.
    fn wait(&mut self) -> Read1 {
        if self.gate.is_some() {
            self.rx.fit();
        }
        Read1::Idle
    }

    /// Moves up to `max` bytes of `rest` into `buf`; the count.
    fn give_rest(&mut self, buf: &mut WatermarkBuffer, max: usize) -> usize {
        let rest = &mut self.rest;
        let r = buf.fill_with(max, |space| {
            let n = space.len().min(rest.len());
            if let (Some(dst), Some(src)) = (space.get_mut(..n), rest.get(..n)) {
                dst.copy_from_slice(src);
            }
            Ok(n)
        });
        let n = r.map_or(0, |(n, _)| n);
        self.rest.drain(..n.min(self.rest.len()));
        if self.rest.is_empty() {
            self.rest = Vec::new();
        }
        n
    }

    /// The first bytes of a server session: a TLS handshake record goes
    /// on, a request line turns it plain, anything else is refused.
    fn sniff_first(&mut self) -> io::Result<()> {
        match self.rx.pending().first() {
            Some(&HANDSHAKE_RECORD) => self.sniff = Sniff::Tls,
            Some(b) if b.is_ascii_alphabetic() => self.sniff = Sniff::PlainHttp,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "neither TLS nor HTTP on a TLS port",
                ));
            }
        }
        Ok(())
    }

    /// The `fresh` bytes just read (the newest of `rx`) go to the look
    /// for the ClientHello's name; once the hello is whole its name is
    /// kept, and under `reject` one no certificate covers is refused.
    fn look_at_hello(&mut self, stream: &TcpStream, fresh: usize, stats: &Stats) -> io::Result<()> {
        let Some(scan) = self.hello.as_mut() else {
            return Ok(());
        };
        let pending = self.rx.pending();
        let from = pending.len().saturating_sub(fresh);
        let verdict = scan.feed(pending.get(from..).unwrap_or_default());
        let invalid = verdict == Hello::Invalid;
        let name = match verdict {
            Hello::NeedMore => return Ok(()),
            Hello::Invalid => None,
            Hello::Name(name) => name,
        };
        self.hello = None;
        if let Some(store) = self.reject.take()
            && !invalid
            && !store.covers(name.as_deref())
        {
            return Err(refuse(stream, stats, name));
        }
        self.sni = name.map(String::into_boxed_str);
        Ok(())
    }

    /// One socket read into `rx` (`Interrupted` retried): `None` at
    /// `WouldBlock` (`readable` cleared), else the bytes read (0: EOF,
    /// noted as the peer's close). A short read clears `readable` as on a
    /// plain socket (not once an event reported the FIN).
    ///
    /// Errors: the socket's; a record or handshake message larger than a
    /// storage may grow (`InvalidData`).
    fn read_socket(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> io::Result<Option<usize>> {
        loop {
            let space = self.rx.space();
            if space.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "TLS record or handshake message too large",
                ));
            }
            let want = space.len();
            Stats::add(&stats.socket_reads, 1);
            match stream.read(space) {
                Ok(0) => {
                    io.readable = false;
                    self.peer_closed = true;
                    self.rx.consume(0);
                    return Ok(Some(0));
                }
                Ok(n) => {
                    self.rx.filled(n);
                    self.unprocessed = true;
                    if n < want && !io.read_closed {
                        io.readable = false;
                    }
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    io.readable = false;
                    self.rx.consume(0);
                    return Ok(None);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.rx.consume(0);
                    return Err(e);
                }
            }
        }
    }

    /// One write of `buf`'s plaintext: encrypted (all of it up to 33 KiB,
    /// else two 16 KiB records: `records::encrypt_take`) only if no earlier
    /// ciphertext waits, so a session holds at
    /// most one write's worth, then flushed. `fin_follows`: once `buf` is
    /// empty, `close_notify` goes behind the last bytes, and everything
    /// with `MSG_MORE`. Returns the plaintext bytes taken.
    ///
    /// Errors: the socket's write error; rustls' (an alert read while
    /// getting to write).
    pub(crate) fn write_from(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        fin_follows: bool,
        stats: &Stats,
    ) -> io::Result<usize> {
        if !io.writable {
            return Ok(0);
        }
        let mut n = 0;
        if self.tx.is_empty() && !buf.is_empty() && !self.session.is_handshaking() {
            let take = encrypt_take(buf.pending());
            // A storage of the size this write needs (a slow reader's
            // 16 KiB buffer takes a small one).
            self.tx.space_for(sealed_len(take));
            let plain = buf.as_slice().get(..take).unwrap_or_default();
            let close = fin_follows && take == buf.pending();
            n = self.pass(None, plain, close)?.encrypted;
            buf.consume(n);
        }
        self.flush(stream, io, fin_follows, stats)?;
        Ok(n)
    }

    /// Writes what the storage holds until it is empty or the socket says
    /// `WouldBlock` (one `send` when it takes all). Returns true if
    /// something was written.
    ///
    /// Errors: the socket's write error.
    pub(crate) fn flush(
        &mut self,
        stream: &TcpStream,
        io: &mut Io,
        more: bool,
        stats: &Stats,
    ) -> io::Result<bool> {
        let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
        let mut wrote = false;
        // Bounded: each turn writes something or stops.
        for _ in 0..64 {
            if self.tx.is_empty() || !io.writable {
                break;
            }
            Stats::add(&stats.socket_writes, 1);
            match socket2::SockRef::from(stream).send_with_flags(self.tx.pending(), flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => {
                    self.tx.consume(k);
                    wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => io.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Nothing in flight: no storage kept (a write that encrypted
        // nothing took one too).
        self.tx.consume(0);
        Ok(wrote)
    }

    /// One step of a client handshake (an upstream connection): writes
    /// what the session has to send (the ClientHello first), reads and
    /// processes what the server sent. Returns true once the handshake is
    /// done.
    ///
    /// Errors: the socket's; the handshake failed (`InvalidData`: a bad
    /// certificate, a name that does not match, no common version).
    pub(crate) fn handshake(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> io::Result<bool> {
        for _ in 0..MAX_READ_ROUNDS {
            if self.session.is_handshaking() && self.tx.is_empty() && !self.unprocessed {
                // The ClientHello (first), or what the last bytes asked for.
                self.process(stream, io, None, stats)?;
            }
            self.flush(stream, io, false, stats)?;
            if !self.session.is_handshaking() {
                return Ok(true);
            }
            if !io.readable {
                return Ok(false);
            }
            match self.read_socket(stream, io, stats)? {
                None => return Ok(false),
                Some(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Some(_) => {}
            }
            self.process(stream, io, None, stats)?;
        }
        Ok(!self.session.is_handshaking())
    }

    /// A look at an idle session (a pooled upstream connection that got an
    /// event, or is checked before reuse): what the socket holds is read
    /// and processed, so records that are not data — a TLS 1.3
    /// `NewSessionTicket`, a `KeyUpdate` — are absorbed and leave it
    /// usable; data, `close_notify`, EOF or an error do not.
    pub(crate) fn idle_look(
        &mut self,
        stream: &mut TcpStream,
        io: &mut Io,
        stats: &Stats,
    ) -> super::Peeked {
        use super::Peeked;
        for _ in 0..MAX_READ_ROUNDS {
            if !self.rest.is_empty() {
                return Peeked::Data;
            }
            if self.peer_closed {
                return Peeked::Eof;
            }
            match self.read_socket(stream, io, stats) {
                Ok(None) => return Peeked::Quiet,
                Ok(Some(0)) => return Peeked::Eof,
                Ok(Some(_)) => {}
                Err(e) => return Peeked::Failed(e.kind()),
            }
            if let Err(e) = self.process(stream, io, None, stats) {
                return Peeked::Failed(e.kind());
            }
        }
        Peeked::Quiet
    }

    /// The connection goes idle (parked, or pooled): the ciphertext of a
    /// record not yet whole, if any, moves out of its storage into one of
    /// its own size, and the storage goes back to the free list.
    pub(crate) fn fit_idle(&mut self) {
        self.rx.fit();
    }

    /// Bytes of record storage held now, both ways, and of decrypted
    /// bytes kept aside.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.rx.held() + self.tx.held() + self.rest.capacity()
    }

    /// TLS bytes the storage holds for the socket.
    pub(crate) fn unsent(&self) -> usize {
        self.tx.len()
    }

    /// The negotiated version, cipher suite, SNI and resumption, once the
    /// handshake settled them, for the access record.
    pub(crate) fn facts(&self) -> Option<TlsFacts<'_>> {
        let common = self.session.common();
        let version = match common.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
            _ => "TLS",
        };
        let cipher = common.negotiated_cipher_suite()?.suite().as_str()?;
        Some(TlsFacts {
            version,
            cipher,
            sni: self.sni.as_deref(),
            resumed: common.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        })
    }

    /// The `X-Forwarded-Client-Cert` value of the client's verified
    /// certificate, if it presented one.
    pub(crate) fn client_cert_field(&self) -> Option<&str> {
        self.client_cert.as_deref()
    }

    /// The DER of the certificate the peer presented and rustls verified
    /// (the leaf, first of the chain), if any: a client's under
    /// `tls_client_auth`.
    fn peer_leaf(&self) -> Option<&[u8]> {
        self.session
            .common()
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref())
    }
}

/// Refuses a ClientHello whose name no certificate covers: one write of
/// the fatal `unrecognized_name` alert (7 bytes on a fresh socket: the
/// send buffer is empty), counted as a failed handshake; the error the
/// machine closes on.
fn refuse(stream: &TcpStream, stats: &Stats, name: Option<String>) -> io::Error {
    Stats::add(&stats.socket_writes, 1);
    Stats::add(&stats.tls_handshakes_failed, 1);
    let _ = socket2::SockRef::from(stream)
        .send_with_flags(&UNRECOGNIZED_NAME_ALERT, libc::MSG_NOSIGNAL);
    let why = match name {
        Some(n) => format!("no certificate for the SNI name {n:?}"),
        None => "a ClientHello without SNI".to_string(),
    };
    log::debug!("TLS: {why} (tls_unknown_sni = \"reject\"): alert unrecognized_name");
    io::Error::new(io::ErrorKind::InvalidData, why)
}

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
//! A connection from a source in `accept_proxy_protocol` starts with a
//! PROXY header before its first TLS byte: it is taken out of the
//! storage before the sniff, the hello's look and rustls see anything
//! (`tls/proxy.rs`).
//!
//! The ClientHello's name is read from the first bytes as they come
//! (`tls::client_hello`): for the access record, and under
//! `tls_unknown_sni = "reject"` to answer `unrecognized_name` before the
//! session acts on a hello no certificate covers.
//!
//! Here: the session and what its socket's readiness does not say, one
//! pass over the storages with the handshake's end or failure counted,
//! and the steps of a client handshake. Reading plaintext (with the sniff
//! and the hello's name) is in `tls/read.rs`, writing it (and
//! `close_notify`) in `tls/write.rs`, a session between requests (the
//! idle look, the fit) in `tls/idle.rs`.
//!
//! What it must not know: HTTP, the watermarks' meaning.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::net::TcpStream;

use super::super::io::Io;
use super::records::Records;
use super::session::{Failed, Incoming, Run, Session, Sink};
use crate::stats::Stats;
use crate::tls::client_hello::HelloScan;
use crate::tls::handshake_gate::HandshakeGate;
use crate::tls::sni::CertStore;

mod idle;
mod proxy;
mod read;
mod write;

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
    /// rustls read the peer's `close_notify` (RFC 8446 §6.1): an EOF
    /// without it is an incomplete close ([`Tls::closed_without_notify`]).
    notified: bool,
    /// What this side sent was cut short ([`Tls::cut`]): the session ends
    /// without `close_notify`, so the peer can tell (RFC 9112 §9.8).
    cut: bool,
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
    /// A PROXY header comes before the ClientHello (the client's source is
    /// in `accept_proxy_protocol`): until it is whole, the bytes read are
    /// for `tls/proxy.rs`, not for rustls.
    await_proxy: bool,
    /// What the PROXY header gave, until the machine takes it
    /// ([`Tls::take_proxy_source`]): `Some(None)` for a header that gives
    /// no address (v1 `UNKNOWN`, v2 `LOCAL`).
    proxy_source: Option<Option<SocketAddr>>,
    /// A socket read gave bytes (the peer began: a ClientHello, a PROXY
    /// header, anything).
    heard: bool,
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
            notified: false,
            cut: false,
            sniff,
            hello: server.then(Box::default),
            reject,
            gate: None,
            sni: None,
            client_cert: None,
            await_proxy: false,
            proxy_source: None,
            heard: false,
        }
    }

    /// The handshake is under way: the peer sent bytes, and it has not
    /// ended.
    pub(crate) fn handshake_under_way(&self) -> bool {
        self.heard && self.session.is_handshaking()
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

    /// The peer closed the socket without `close_notify` (an incomplete
    /// close, RFC 8446 §6.1): a response delimited by the close is then
    /// not complete (RFC 9112 §9.8).
    pub(crate) fn closed_without_notify(&self) -> bool {
        self.peer_closed && !self.notified
    }

    /// What this side sends is cut short (a response the upstream cut):
    /// the session will end without `close_notify`, neither behind the
    /// last bytes nor on its own, so the peer sees an incomplete close
    /// (RFC 9112 §9.8) and cannot take a close-delimited body as whole.
    pub(crate) fn cut(&mut self) {
        self.cut = true;
    }

    /// TLS bytes wait to be written to the socket.
    pub(crate) fn wants_write(&self) -> bool {
        !self.tx.is_empty()
    }

    /// The handshake is still going on.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.session.is_handshaking()
    }

    /// One pass of the session over the storages (see `session.rs`),
    /// with the handshake's end counted (a server session) and an error
    /// counted as a failed handshake while it lasted.
    fn pass(&mut self, sink: Option<Sink<'_>>, plain: &[u8], close: bool) -> io::Result<Run> {
        let handshaking = self.session.is_handshaking();
        let close = close && !self.cut;
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
                self.notified |= run.peer_closed;
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

//! The transport under both connection machines (ARCHITECTURE.md §3,
//! DESIGN §10): one connection's bytes in and out, whatever carries them.
//! Plain TCP, or a rustls session over the same socket (`tls.rs`; SEAMS.md
//! §3.4 seam 1). The relay,
//! the codec and the watermarks see plaintext through it and never touch
//! the socket themselves.
//!
//! Every call the machines make on a socket goes through here: one read
//! into a buffer, one write from a buffer (with "a FIN follows" as a flag,
//! like HAProxy's `CO_SFL_MSG_MORE`), a look without consuming, the
//! pending socket error, the half-close, the kernel's unsent bytes, a read
//! that drops what it reads (lingering close), and the poll registration.
//! Each socket call of the data path is counted in `Stats` (issue 22's
//! regression guard, `tests/syscalls.rs`).
//!
//! What it must not know: HTTP, the watermarks' meaning, which side of an
//! exchange it carries.

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr};

use mio::net::TcpStream;
use mio::{Registry, Token};

use super::io::{self as sockio, Io, Read1, interest};
use crate::buffer::WatermarkBuffer;
use crate::stats::Stats;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod feed;
mod records;
mod session;
mod tls;

pub(crate) use records::{may_trim as may_trim_records, trim as trim_records};
use tls::Sniff;
pub(crate) use tls::{Tls, TlsFacts};

/// What a look at a quiet connection found ([`Transport::peek`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peeked {
    /// Nothing to read now (`WouldBlock`).
    Quiet,
    /// Bytes are waiting.
    Data,
    /// The peer closed its sending side.
    Eof,
    /// The socket failed (reset, or another error).
    Failed(io::ErrorKind),
}

/// One connection's transport: a non-blocking TCP socket, with or
/// without a TLS session over it.
#[derive(Debug)]
pub(crate) struct Transport {
    stream: TcpStream,
    tls: Option<Box<Tls>>,
    /// A plaintext request came to a TLS port: the transport turned plain
    /// so that the machine can answer it (400 naming HTTPS) and close.
    http_on_tls: bool,
}

impl Transport {
    /// A plain TCP transport over `stream` (non-blocking).
    pub(crate) fn plain(stream: TcpStream) -> Self {
        Transport {
            stream,
            tls: None,
            http_on_tls: false,
        }
    }

    /// A TLS transport: `tls` (a server or client session) over `stream`.
    pub(crate) fn tls(stream: TcpStream, tls: Tls) -> Self {
        Transport {
            stream,
            tls: Some(Box::new(tls)),
            http_on_tls: false,
        }
    }

    /// True while a TLS session runs over the socket.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A plaintext request line came to this TLS port (the transport is
    /// plain now; the machine answers 400 and closes).
    pub(crate) fn http_on_tls(&self) -> bool {
        self.http_on_tls
    }

    /// Writes `bytes` on the socket itself, below any TLS session, in one
    /// call: a preface that must come before the connection's own bytes
    /// (the PROXY header of `send_proxy_protocol`), written once the TCP
    /// connect completed and before anything else, so the empty send
    /// buffer takes it whole.
    ///
    /// Errors: the write failed, or took only part of `bytes`.
    pub(crate) fn write_preface(&mut self, bytes: &[u8], stats: &Stats) -> io::Result<()> {
        use std::io::Write;
        Stats::add(&stats.socket_writes, 1);
        match self.stream.write(bytes) {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the PROXY header did not fit the new socket's send buffer",
            )),
            Err(e) => Err(e),
        }
    }

    /// The TLS handshake chose HTTP/2 by ALPN: the connection speaks
    /// HTTP/2 from its first byte (RFC 9113 §3.2).
    pub(crate) fn alpn_h2(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.alpn_h2())
    }

    /// A TLS handshake is still going on.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.is_handshaking())
    }

    /// The negotiated TLS version, cipher suite, SNI and resumption
    /// (`None` for plain, or before the handshake settled them), for the
    /// access record's TLS fields.
    pub(crate) fn tls_facts(&self) -> Option<TlsFacts<'_>> {
        self.tls.as_ref().and_then(|t| t.facts())
    }

    /// Counts a server session whose handshake just completed (full or
    /// resumed): `sluice_tls_connections_total` by the version it
    /// negotiated, and `took` (from the accept to now) in the handshake
    /// duration histogram. Nothing for a plain transport, or one whose
    /// handshake has not settled a version.
    pub(crate) fn count_handshake(&self, took: std::time::Duration, stats: &Stats) {
        let Some(facts) = self.tls_facts() else {
            return;
        };
        match facts.version {
            "TLSv1.3" => Stats::add(&stats.tls_connections_tls13, 1),
            "TLSv1.2" => Stats::add(&stats.tls_connections_tls12, 1),
            _ => {}
        }
        stats.tls_handshake_duration.observe(took);
    }

    /// The `X-Forwarded-Client-Cert` value for the client's verified
    /// certificate (`tls_client_auth`), if it presented one.
    pub(crate) fn client_cert_field(&self) -> Option<&str> {
        self.tls.as_ref().and_then(|t| t.client_cert_field())
    }

    /// A read may give something now: the socket reported readable, or a
    /// TLS session holds decrypted bytes no event will announce.
    pub(crate) fn may_read(&self, io: &Io) -> bool {
        match &self.tls {
            Some(t) => t.may_read(io),
            None => io.readable,
        }
    }

    /// A TLS handshake is under way: the client sent bytes (a ClientHello,
    /// a PROXY header) and it has not ended.
    pub(crate) fn handshake_under_way(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.handshake_under_way())
    }

    /// A TLS session is mid-handshake, holds decrypted bytes, or holds
    /// records to write: the machine must keep it live (not parked).
    pub(crate) fn holds_work(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.is_handshaking() || t.wants_write() || t.holds_plaintext())
    }

    /// Bytes a TLS session holds in record storages now (tests).
    #[cfg(test)]
    pub(crate) fn tls_held(&self) -> usize {
        self.tls.as_ref().map_or(0, |t| t.held())
    }

    /// The connection goes idle (a client parked, an upstream pooled): a
    /// TLS session keeps no record storage (the bytes of a record not yet
    /// whole, if any, move into one of their own size).
    pub(crate) fn fit_idle(&mut self) {
        if let Some(t) = self.tls.as_mut() {
            t.fit_idle();
        }
    }

    /// The transport has bytes of its own to write (TLS records: a
    /// handshake flight, an alert, `close_notify`): watch for WRITABLE,
    /// and do not close before they went.
    pub(crate) fn wants_write(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Writes the transport's own pending bytes (see [`Self::wants_write`]).
    /// Returns true if something was written.
    ///
    /// Errors: the socket's write error.
    pub(crate) fn flush(&mut self, io: &mut Io, stats: &Stats) -> io::Result<bool> {
        match self.tls.as_mut() {
            Some(t) => t.flush(&self.stream, io, false, stats),
            None => Ok(false),
        }
    }

    /// What a PROXY header before the ClientHello gave, once, after the
    /// TLS session read it (`tls/proxy.rs`); `None` before, after, or on
    /// a plain transport. `Some(None)`: a header that gives no address.
    /// A session kept only for this (plaintext came after the header:
    /// `http_on_tls`) is dropped now.
    pub(crate) fn take_proxy_source(&mut self) -> Option<Option<std::net::SocketAddr>> {
        let t = self.tls.as_mut()?;
        let source = t.take_proxy_source();
        if self.http_on_tls {
            self.tls = None;
        }
        source
    }

    /// One read into `buf`: at most `max` bytes, never past its room
    /// below the high watermark (`io::read_into`: the short-read rule).
    ///
    /// Errors: the socket's read error (`WouldBlock` is `Read1::Idle`).
    pub(crate) fn read_into(
        &mut self,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        max: usize,
        stats: &Stats,
    ) -> io::Result<Read1> {
        let Some(t) = self.tls.as_mut() else {
            return sockio::read_into(&mut self.stream, io, buf, max, stats);
        };
        let r = t.read_into(&mut self.stream, io, buf, max, stats)?;
        if t.sniff == Sniff::PlainHttp {
            // Kept until the machine takes the PROXY header's source, if
            // one came (right after this read).
            if !t.holds_proxy_source() {
                self.tls = None;
            }
            self.http_on_tls = true;
        }
        Ok(r)
    }

    /// One write of `buf`'s pending bytes; the written bytes are consumed.
    /// `fin_follows`: the connection closes or half-closes once they are
    /// out, so they go with `MSG_MORE` and leave with the FIN
    /// (`io::write_before_fin`). Returns the bytes written (0 if not
    /// writable, nothing pending, or `WouldBlock`).
    ///
    /// Errors: the socket's write error.
    pub(crate) fn write_from(
        &mut self,
        io: &mut Io,
        buf: &mut WatermarkBuffer,
        fin_follows: bool,
        stats: &Stats,
    ) -> io::Result<usize> {
        if let Some(t) = self.tls.as_mut() {
            return t.write_from(&self.stream, io, buf, fin_follows, stats);
        }
        if fin_follows {
            sockio::write_before_fin(&self.stream, io, buf, stats)
        } else {
            sockio::write_from(&mut self.stream, io, buf, stats)
        }
    }

    /// Looks at the connection without consuming anything (one `MSG_PEEK`
    /// of a byte, counted in `stats.socket_peeks`). Under TLS the bytes
    /// are records, not plaintext: any byte reads as `Data` (a caller that
    /// must tell a ticket from data reads through the session instead).
    pub(crate) fn peek(&self, stats: &Stats) -> Peeked {
        let mut byte = [0u8; 1];
        Stats::add(&stats.socket_peeks, 1);
        match self.stream.peek(&mut byte) {
            Ok(0) => Peeked::Eof,
            Ok(_) => Peeked::Data,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Peeked::Quiet,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Peeked::Quiet,
            Err(e) => Peeked::Failed(e.kind()),
        }
    }

    /// A look at an idle connection (a pooled upstream one): a plain socket
    /// is peeked ([`Self::peek`]); a TLS session reads and processes what
    /// came, so a ticket or a key update keeps it usable
    /// (`Tls::idle_look`).
    pub(crate) fn idle_look(&mut self, io: &mut Io, stats: &Stats) -> Peeked {
        match self.tls.as_mut() {
            Some(t) => t.idle_look(&mut self.stream, io, stats),
            None => self.peek(stats),
        }
    }

    /// One step of a client TLS handshake once the TCP connect completed
    /// (see `Tls::handshake`); a plain transport is done at once.
    ///
    /// Errors: the socket's; the handshake failed.
    pub(crate) fn handshake(&mut self, io: &mut Io, stats: &Stats) -> io::Result<bool> {
        match self.tls.as_mut() {
            Some(t) => t.handshake(&mut self.stream, io, stats),
            None => Ok(true),
        }
    }

    /// The socket's pending error (`SO_ERROR`, counted as a peek), if any:
    /// a reset or failure pending whatever came before it.
    pub(crate) fn pending_error(&self, stats: &Stats) -> Option<io::Error> {
        Stats::add(&stats.socket_peeks, 1);
        match self.stream.take_error() {
            Ok(None) => None,
            Ok(Some(e)) | Err(e) => Some(e),
        }
    }

    /// The pending error of a connect in progress, uncounted (it is part
    /// of the connect, not of a request's path).
    pub(crate) fn connect_error(&self) -> Option<io::Error> {
        match self.stream.take_error() {
            Ok(None) => None,
            Ok(Some(e)) | Err(e) => Some(e),
        }
    }

    /// One read whose bytes are dropped (a lingering close): the count,
    /// 0 at EOF.
    ///
    /// Errors: the socket's read error (`WouldBlock` included).
    pub(crate) fn discard(&mut self) -> io::Result<usize> {
        let mut scratch = [0u8; 4096];
        self.stream.read(&mut scratch)
    }

    /// Shuts the sending side (the FIN goes once pending bytes are out).
    /// A TLS session first queues `close_notify` and tries once to flush
    /// it (the caller waits for [`Self::wants_write`] to be false before a
    /// close). Errors are ignored: the socket may already be gone.
    pub(crate) fn shutdown_write(&mut self, io: &mut Io, stats: &Stats) {
        if let Some(t) = self.tls.as_mut() {
            t.close_notify();
            let _ = t.flush(&self.stream, io, true, stats);
        }
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// The peer ended a TLS session with a bare EOF, no `close_notify`
    /// (RFC 8446 §6.1): what it sent last may have been cut (RFC 9112
    /// §9.8). False for a plain transport (nothing tells a cut there).
    pub(crate) fn closed_without_notify(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.closed_without_notify())
    }

    /// What this side sends is cut short: a TLS session ends without
    /// `close_notify` (`Tls::cut`). Nothing for a plain transport.
    pub(crate) fn cut(&mut self) {
        if let Some(t) = self.tls.as_mut() {
            t.cut();
        }
    }

    /// The connection is about to be closed: a TLS session whose
    /// handshake completed says so with `close_notify` (RFC 8446 §6.1), one
    /// try to write it (no wait); one that never completed closes silently.
    pub(crate) fn goodbye(&mut self, io: &mut Io, stats: &Stats) {
        if let Some(t) = self.tls.as_mut().filter(|t| !t.is_handshaking()) {
            t.close_notify();
            let _ = t.flush(&self.stream, io, false, stats);
        }
    }

    /// Bytes the kernel still holds for the peer (unsent or unacknowledged,
    /// `SIOCOUTQ`), plus any the TLS session holds; 0 if it does not say.
    pub(crate) fn unsent(&self) -> usize {
        sockio::unsent_bytes(&self.stream) + self.tls.as_ref().map_or(0, |t| t.unsent())
    }

    /// The peer's address (`ENOTCONN` while a connect is in progress).
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// The local address of the socket.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Makes the poll watch the socket for `read`/`write` under `token`,
    /// with one syscall only if that changed (`Io::set_interest`).
    ///
    /// Errors: the registration failed.
    pub(crate) fn set_interest(
        &mut self,
        io: &mut Io,
        registry: &Registry,
        token: Token,
        read: bool,
        write: bool,
    ) -> io::Result<()> {
        let write = write || self.wants_write();
        io.set_interest(&mut self.stream, registry, token, interest(read, write))
    }
}

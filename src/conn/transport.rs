//! The transport under both connection machines (ARCHITECTURE.md §3,
//! DESIGN §10): one connection's bytes in and out, whatever carries them.
//! Today that is plain TCP; a rustls session over the same socket is the
//! second kind this type is shaped for (SEAMS.md §3.4 seam 1). The relay,
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

/// One connection's transport: a non-blocking TCP socket.
#[derive(Debug)]
pub(crate) struct Transport {
    stream: TcpStream,
}

impl Transport {
    /// A plain TCP transport over `stream` (non-blocking).
    pub(crate) fn plain(stream: TcpStream) -> Self {
        Transport { stream }
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
        sockio::read_into(&mut self.stream, io, buf, max, stats)
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
        if fin_follows {
            sockio::write_before_fin(&self.stream, io, buf, stats)
        } else {
            sockio::write_from(&mut self.stream, io, buf, stats)
        }
    }

    /// Looks at the connection without consuming anything (one `MSG_PEEK`
    /// of a byte, counted in `stats.socket_peeks`).
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
    /// Errors are ignored: the socket may already be gone.
    pub(crate) fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Bytes the kernel still holds for the peer (unsent or unacknowledged,
    /// `SIOCOUTQ`); 0 if it does not say.
    pub(crate) fn unsent(&self) -> usize {
        sockio::unsent_bytes(&self.stream)
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
        io.set_interest(&mut self.stream, registry, token, interest(read, write))
    }
}

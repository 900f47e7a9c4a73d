//! Socket helpers under the transport (`transport.rs`): readiness flags,
//! interest updates, and one read or write between a socket and a
//! `WatermarkBuffer`.
//!
//! mio is edge-triggered: a flag is set by an event and cleared only by
//! `WouldBlock`, so a source paused by its watermark keeps `readable` and is
//! read again as soon as its sink has room, without waiting for an event
//! that would never come. `Interrupted` is retried; `Ok(0)` from a read is
//! EOF, a normal input. A short read clears `readable` too: on Linux every
//! byte that arrives after it raises a new edge-triggered event. Not once
//! an event reported the peer's FIN (`read_closed`): the FIN may already
//! sit behind the bytes just read, and no further edge would announce it.
//!
//! What it must not know: HTTP, which side a socket is on.

use std::io::{self, Read, Write};

use mio::event::Source;
use mio::{Interest, Registry, Token};

use crate::buffer::WatermarkBuffer;
use crate::stats::Stats;

/// Readiness last reported for one socket and the interest registered now.
#[derive(Debug, Default)]
pub(crate) struct Io {
    /// A read may succeed (set by an event, cleared by `WouldBlock`).
    pub readable: bool,
    /// A write may succeed (set by an event, cleared by `WouldBlock`).
    pub writable: bool,
    /// An event said the peer closed its side or the socket failed: the
    /// next read must run to see it (sticky: no further edge will come).
    pub read_closed: bool,
    /// An event arrived since a waiting client was last looked at
    /// (the client machine's probe takes it).
    pub fresh: bool,
    /// What the poll watches now; `None` when deregistered.
    pub interest: Option<Interest>,
}

impl Io {
    /// Records what an event reported. Error and hang-up count as both:
    /// the next read or write tells what happened.
    pub(crate) fn on_event(&mut self, event: &mio::event::Event) {
        self.fresh = true;
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.readable = true;
        }
        if event.is_read_closed() || event.is_error() {
            self.read_closed = true;
        }
        if event.is_writable() || event.is_write_closed() || event.is_error() {
            self.writable = true;
        }
    }

    /// Makes the poll watch `want`, with one syscall only if it changed.
    pub(crate) fn set_interest<S: Source + ?Sized>(
        &mut self,
        source: &mut S,
        registry: &Registry,
        token: Token,
        want: Option<Interest>,
    ) -> io::Result<()> {
        if self.interest == want {
            return Ok(());
        }
        match (self.interest, want) {
            (None, Some(i)) => registry.register(source, token, i)?,
            (Some(_), Some(i)) => registry.reregister(source, token, i)?,
            (Some(_), None) => registry.deregister(source)?,
            (None, None) => {}
        }
        self.interest = want;
        Ok(())
    }
}

/// The interest for wanting to read and/or write (`None`: neither).
pub(crate) fn interest(read: bool, write: bool) -> Option<Interest> {
    match (read, write) {
        (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
        (true, false) => Some(Interest::READABLE),
        (false, true) => Some(Interest::WRITABLE),
        (false, false) => None,
    }
}

/// Result of one read attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read1 {
    /// This many bytes were appended to the buffer.
    Data(usize),
    /// The peer closed its sending side.
    Eof,
    /// Nothing now: `WouldBlock` (flag cleared), no room, or not readable.
    Idle,
}

/// One read from `stream` into `buf`, at most `max` bytes and never past the
/// buffer's room below its high watermark. Each `read` call counts in
/// `stats.socket_reads`.
pub(crate) fn read_into<R: Read>(
    stream: &mut R,
    io: &mut Io,
    buf: &mut WatermarkBuffer,
    max: usize,
    stats: &Stats,
) -> io::Result<Read1> {
    if !io.readable || max == 0 || buf.room() == 0 {
        return Ok(Read1::Idle);
    }
    loop {
        let mut eof = false;
        let mut short = false;
        Stats::add(&stats.socket_reads, 1);
        let r = buf.fill_with(max, |space| {
            let n = stream.read(space)?;
            eof = n == 0;
            short = n < space.len();
            Ok(n)
        });
        return match r {
            Ok(_) if eof => Ok(Read1::Eof),
            Ok((n, _)) => {
                if short && !io.read_closed {
                    // The socket had fewer bytes than asked for: it is
                    // drained now, and any later byte (or FIN) raises a new
                    // edge. Skipping the read that would say WouldBlock
                    // saves a syscall per message.
                    io.readable = false;
                }
                Ok(Read1::Data(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                io.readable = false;
                Ok(Read1::Idle)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// One write of `buf`'s pending bytes to `stream`; the written bytes are
/// consumed. Returns the count (0 if not writable, nothing pending, or
/// `WouldBlock`). Each `write` call counts in `stats.socket_writes`.
pub(crate) fn write_from<W: Write>(
    stream: &mut W,
    io: &mut Io,
    buf: &mut WatermarkBuffer,
    stats: &Stats,
) -> io::Result<usize> {
    write_with(io, buf, stats, |bytes| stream.write(bytes))
}

/// [`write_from`] for the last bytes before the proxy closes or shuts
/// down its sending side: they go with `MSG_MORE`, so a short tail waits
/// in the kernel for the FIN that follows and both leave in one segment
/// (`tcp_send_fin` sets FIN on an unsent tail; without it, the response
/// and the FIN are two segments and the peer acknowledges each). The hold
/// lasts only until that FIN, or until an acknowledgment pushes pending
/// frames (TCP_NODELAY is set on every socket).
pub(crate) fn write_before_fin(
    stream: &mio::net::TcpStream,
    io: &mut Io,
    buf: &mut WatermarkBuffer,
    stats: &Stats,
) -> io::Result<usize> {
    let sock = socket2::SockRef::from(stream);
    write_with(io, buf, stats, |bytes| {
        sock.send_with_flags(bytes, libc::MSG_MORE | libc::MSG_NOSIGNAL)
    })
}

/// Bytes in `stream`'s send queue: not yet sent, or sent and not yet
/// acknowledged (`SIOCOUTQ`); 0 if the kernel does not say.
pub(crate) fn unsent_bytes(stream: &mio::net::TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: a valid descriptor and a pointer to a c_int, which
    // SIOCOUTQ (TIOCOUTQ) fills.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    if rc == 0 {
        usize::try_from(queued).unwrap_or(0)
    } else {
        0
    }
}

fn write_with(
    io: &mut Io,
    buf: &mut WatermarkBuffer,
    stats: &Stats,
    mut send: impl FnMut(&[u8]) -> io::Result<usize>,
) -> io::Result<usize> {
    if !io.writable || buf.is_empty() {
        return Ok(0);
    }
    loop {
        Stats::add(&stats.socket_writes, 1);
        return match send(buf.as_slice()) {
            Ok(0) => Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf.consume(n);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                io.writable = false;
                Ok(0)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Whether a non-blocking connect has finished, from `getpeername` and
/// `getsockname`: `Ok(Some(local))` once it is connected (the local
/// address, for the access log's port), `Ok(None)` while it is still in
/// progress.
///
/// Errors: `ConnectionRefused` when the socket is connected to itself. A
/// connect to a port of the ephemeral range with nothing listening can pick
/// that same port as its source and complete as a TCP simultaneous open
/// (RFC 9293 §3.5); the request would then come back as its own answer.
/// Any other error of the two calls.
pub(crate) fn connect_finished(
    peer: io::Result<std::net::SocketAddr>,
    local: impl FnOnce() -> io::Result<std::net::SocketAddr>,
) -> io::Result<Option<std::net::SocketAddr>> {
    let peer = match peer {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(None),
        Err(e) => return Err(e),
    };
    let local = local()?;
    if local == peer {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("connected to itself ({peer}: nothing listens on that port)"),
        ));
    }
    Ok(Some(local))
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener, TcpStream};

    use socket2::{Domain, Socket, Type};

    use super::*;

    fn finished(s: &Socket) -> io::Result<Option<SocketAddr>> {
        let peer = s.peer_addr().and_then(|a| {
            a.as_socket()
                .ok_or_else(|| io::Error::other("not an inet address"))
        });
        connect_finished(peer, || {
            s.local_addr()?
                .as_socket()
                .ok_or_else(|| io::Error::other("not an inet address"))
        })
    }

    #[test]
    fn a_socket_connected_to_itself_is_refused() {
        // Bound to a port, then connected to that same port: Linux
        // completes it as a simultaneous open with itself.
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let me = s.local_addr().unwrap();
        s.connect(&me).unwrap();
        let e = finished(&s).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert!(e.to_string().contains("connected to itself"), "{e}");
    }

    #[test]
    fn a_connected_socket_gives_its_local_address_and_an_unconnected_one_none() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let local = c.local_addr().unwrap();
        let s = Socket::from(c);
        assert_eq!(finished(&s).unwrap(), Some(local));
        let unconnected = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        assert_eq!(finished(&unconnected).unwrap(), None);
    }
}

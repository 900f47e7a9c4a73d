//! Bytes fed to the server side of the transport as a client's socket
//! brings them, chunk by chunk, for the tests that split a handshake at
//! every byte (`src/tests/transport_feed.rs`; the bound's and real clients'
//! in `transport_feed_refused.rs`, `transport_feed_clients.rs`) and the
//! fuzz target `fuzz/fuzz_targets/tls_server.rs`. Each [`FeedSession`] is a
//! real loopback TCP connection whose accepted end is a TLS listener's
//! transport (the SNI look included under `tls_unknown_sni = "reject"`);
//! each chunk is read as the loop reads a readable socket (until nothing
//! more, as edge-triggered readiness requires), and what the server writes
//! back is collected.
//!
//! Built for tests and with the cargo feature `fuzzing` only: not part of
//! the proxy.
//!
//! What it must not know: HTTP.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use super::{Tls, Transport};
use crate::buffer::{BufferPool, WatermarkBuffer};
use crate::config::Config;
use crate::conn::io::{Io, Read1};
use crate::stats::Stats;
use crate::tls::ServerTls;

/// Most plaintext bytes one read of the feed takes (the client machine's
/// head reads take as much).
const READ_MAX: usize = 16 * 1024;

/// Most reads per chunk: each takes bytes or stops, so this bounds a
/// transport that would say "more" for ever.
const MAX_READS: usize = 256;

/// How long a chunk may take to reach the server's socket over loopback
/// (it is there at once in practice; the bound keeps a stall finite).
const ARRIVAL: Duration = Duration::from_secs(1);

/// How a session stands after its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Still open: more bytes could come.
    Open,
    /// The transport read the end of the client's stream (its FIN, or
    /// `close_notify` once the handshake was done).
    Eof,
    /// The transport failed with this kind: the machine would close.
    Failed(io::ErrorKind),
}

/// A TLS listener's server configuration and a loopback listener to
/// make sessions with.
pub struct ServerFeed {
    tls: ServerTls,
    listener: TcpListener,
    max_head: usize,
}

impl ServerFeed {
    /// The server side `config` describes (its certificates, versions,
    /// ALPN, `tls_unknown_sni`, client certificates) on a loopback
    /// listener of its own.
    ///
    /// Errors: a certificate that does not load, the listener's bind.
    pub fn new(config: &Config) -> io::Result<ServerFeed> {
        let tls = crate::tls::server_config(config)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(ServerFeed {
            tls,
            listener: TcpListener::bind("127.0.0.1:0")?,
            max_head: config.max_head_size,
        })
    }

    /// A new connection: the client's end, and the accepted end under a
    /// fresh server session.
    ///
    /// Errors: the connect or accept, the session's creation.
    pub fn session(&self) -> io::Result<FeedSession> {
        let client = TcpStream::connect(self.listener.local_addr()?)?;
        let (server, _) = self.listener.accept()?;
        server.set_nonblocking(true)?;
        client.set_nonblocking(true)?;
        // Closed with a reset: no TIME_WAIT left behind per session.
        socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO))?;
        let conn = rustls::server::UnbufferedServerConnection::new(self.tls.config.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let stream = mio::net::TcpStream::from_std(server);
        let stats = Arc::new(Stats::default());
        let buf = BufferPool::new(READ_MAX, 0, stats.clone()).head(self.max_head);
        Ok(FeedSession {
            client,
            transport: Transport::tls(
                stream,
                Tls::server(conn, self.tls.sni_check(), self.tls.handshake_gate()),
            ),
            io: Io {
                writable: true,
                ..Io::default()
            },
            buf,
            stats,
            end: End::Open,
            plaintext: Vec::new(),
        })
    }
}

/// One client connection to the transport under test.
pub struct FeedSession {
    client: TcpStream,
    transport: Transport,
    io: Io,
    buf: WatermarkBuffer,
    stats: Arc<Stats>,
    end: End,
    plaintext: Vec<u8>,
}

impl FeedSession {
    /// Sends `bytes` from the client, lets the transport read them as the
    /// loop would, and returns what the server wrote back (its handshake
    /// flight, an alert). Nothing is sent once the session ended.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.end != End::Open {
            return Vec::new();
        }
        if !bytes.is_empty() {
            if let Err(e) = write_all(&mut self.client, bytes) {
                self.end = End::Failed(e.kind());
                return Vec::new();
            }
            wait_readable(&self.transport, ARRIVAL);
        }
        self.read_all();
        self.answer()
    }

    /// The client shuts its sending side (a FIN); the transport reads it.
    /// Returns what the server wrote back.
    pub fn close_write(&mut self) -> Vec<u8> {
        if self.end != End::Open {
            return Vec::new();
        }
        let _ = self.client.shutdown(std::net::Shutdown::Write);
        wait_readable(&self.transport, ARRIVAL);
        self.io.read_closed = true;
        self.read_all();
        self.answer()
    }

    /// How the session stands.
    pub fn end(&self) -> End {
        self.end
    }

    /// The handshake is still going on.
    pub fn is_handshaking(&self) -> bool {
        self.transport.is_handshaking()
    }

    /// A plaintext request line came: the transport turned plain (the
    /// machine would answer `400` naming HTTPS).
    pub fn http_on_tls(&self) -> bool {
        self.transport.http_on_tls()
    }

    /// Plaintext the transport handed up so far.
    pub fn plaintext(&self) -> &[u8] {
        &self.plaintext
    }

    /// Handshakes the session counted: (completed, failed).
    pub fn handshakes(&self) -> (u64, u64) {
        let st = self.stats.snapshot();
        (
            st.tls_handshakes + st.tls_handshakes_resumed,
            st.tls_handshakes_failed,
        )
    }

    /// Reads as the loop reads a readable socket: until the transport has
    /// nothing more, an end, or an error.
    fn read_all(&mut self) {
        self.io.readable = true;
        for _ in 0..MAX_READS {
            if !self.transport.may_read(&self.io) {
                break;
            }
            let r = self
                .transport
                .read_into(&mut self.io, &mut self.buf, READ_MAX, &self.stats);
            match r {
                Ok(Read1::Data(n)) => {
                    self.plaintext
                        .extend_from_slice(self.buf.as_slice().get(..n).unwrap_or(&[]));
                    self.buf.consume(self.buf.pending());
                }
                Ok(Read1::Idle) => {
                    if self.buf.room() == 0 {
                        break;
                    }
                }
                Ok(Read1::Eof) => {
                    self.end = End::Eof;
                    break;
                }
                Err(e) => {
                    self.end = End::Failed(e.kind());
                    break;
                }
            }
        }
    }

    /// What the server wrote back since the last look: its own pending
    /// records flushed, then the client's socket read until empty.
    fn answer(&mut self) -> Vec<u8> {
        self.io.writable = true;
        if let Err(e) = self.transport.flush(&mut self.io, &self.stats)
            && self.end == End::Open
        {
            self.end = End::Failed(e.kind());
        }
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        // Bounded: a server answer is a few flights.
        for _ in 0..1024 {
            match self.client.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(chunk.get(..n).unwrap_or(&[])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        out
    }
}

/// Writes all of `bytes` to the non-blocking client socket, waiting for
/// room when it is full (bounded).
fn write_all(client: &mut TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    for _ in 0..10_000 {
        if bytes.is_empty() {
            return Ok(());
        }
        match client.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = bytes.get(n..).unwrap_or(&[]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::ErrorKind::TimedOut.into())
}

/// Waits (at most `within`) until the server's socket has something to
/// read: the chunk just sent, or the FIN.
fn wait_readable(transport: &Transport, within: Duration) {
    let mut fds = libc::pollfd {
        fd: transport.stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(within.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fds, 1, ms) };
}

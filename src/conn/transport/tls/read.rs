//! Reading plaintext from a TLS session ([`Tls::read_into`]): what rustls
//! already decrypted first, then the records the storage holds, else one
//! socket read into the storage, decrypted. A server session's first
//! bytes are looked at here too: the sniff (plain HTTP on a TLS port turns
//! the transport plain) and the look for the ClientHello's name, with the
//! refusal of a name no certificate covers under `tls_unknown_sni =
//! "reject"`.
//!
//! Why a read goes on for several rounds: records may wait that no
//! readiness event will announce (the short-reads point of `tls.rs`), so
//! one call goes on until plaintext comes, the socket has nothing more, or
//! [`MAX_READ_ROUNDS`] bounds the work before the machine sees what came.
//!
//! What it must not know: HTTP, the watermarks' meaning.

use std::io::{self, Read};

use mio::net::TcpStream;

use super::{MAX_READ_ROUNDS, Sniff, Tls};
use crate::buffer::WatermarkBuffer;
use crate::conn::io::{Io, Read1};
use crate::conn::transport::session::Sink;
use crate::stats::Stats;
use crate::tls::client_hello::Hello;
use crate::tls::sni::UNRECOGNIZED_NAME_ALERT;

/// The first byte of a TLS handshake record (RFC 8446 §5.1, `handshake`).
const HANDSHAKE_RECORD: u8 = 22;

impl Tls {
    /// One read of plaintext into `buf` (at most `max` bytes, never past
    /// its room): what is already decrypted first, then the records the
    /// storage holds, else one socket read, decrypted (a handshake step's
    /// answer is flushed at once). `Read1::Eof` at the peer's
    /// `close_notify` or the socket's EOF, once the bytes before it are
    /// read. On the first bytes of a server session that are a plaintext
    /// request line, they are put in `buf` and `sniff` becomes `PlainHttp`
    /// (the caller turns plain). The read that ends a PROXY header stops
    /// there (`Read1::Idle`, the bytes after it kept for the next call),
    /// so that the machine takes the header's address first
    /// ([`Tls::take_proxy_source`]).
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
            if self.awaits_proxy() {
                continue;
            }
            // The bytes of this read that follow a PROXY header (all of
            // them, but on the read that ended one).
            let n = n.min(self.rx.len());
            if self.sniff != Sniff::Tls && n > 0 {
                self.sniff_first(stats)?;
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
            if self.proxy_source.is_some() {
                // A PROXY header just ended: the machine takes its address
                // (and may refuse the client) before the session answers.
                return Ok(Read1::Idle);
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
    /// on, a request line turns it plain, anything else is refused (a v2
    /// PROXY header, from a source not listed, counted as refused).
    fn sniff_first(&mut self, stats: &Stats) -> io::Result<()> {
        match self.rx.pending().first() {
            Some(&HANDSHAKE_RECORD) => self.sniff = Sniff::Tls,
            Some(b) if b.is_ascii_alphabetic() => self.sniff = Sniff::PlainHttp,
            _ if crate::proxy_protocol::has_signature(self.rx.pending()) => {
                // A v2 header from a source not in `accept_proxy_protocol`
                // (a v1 line reads as HTTP: the machine refuses it, 400).
                Stats::add(&stats.proxy_headers_refused, 1);
                log::debug!(
                    "TLS port: a PROXY v2 header from a source not in accept_proxy_protocol"
                );
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "PROXY protocol header from a source not in accept_proxy_protocol",
                ));
            }
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
    /// While a PROXY header is due ([`Tls::expect_proxy_header`]) the
    /// bytes read go to it first, and only those after it are for the
    /// session.
    ///
    /// Errors: the socket's; a record or handshake message larger than a
    /// storage may grow (`InvalidData`); a PROXY header that is not valid
    /// (`InvalidData`).
    pub(super) fn read_socket(
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
                    self.heard = true;
                    if n < want && !io.read_closed {
                        io.readable = false;
                    }
                    // A PROXY header's bytes are not the session's.
                    self.unprocessed = !self.awaits_proxy()
                        || self.take_proxy_header(stream, stats)? && !self.rx.is_empty();
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

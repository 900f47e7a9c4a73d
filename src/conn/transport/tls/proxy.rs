//! The PROXY protocol header before a TLS connection's first record
//! (`accept_proxy_protocol` on a `listen_tls` listener, as behind a TCP
//! balancer that passes TLS through): the balancer writes the header, then
//! the client's ClientHello follows on the same bytes. The header is taken
//! out of the record storage as it completes, so the sniff, the look for
//! the hello's name, the handshake gate and rustls see only what follows
//! it; the source it gives waits here until the machine takes it.
//!
//! What it must not know: the header's wire format (`proxy_protocol`),
//! HTTP, the client's counting.

use std::io;
use std::net::SocketAddr;

use log::debug;
use mio::net::TcpStream;

use super::Tls;
use crate::proxy_protocol::{self, Error as PpError};
use crate::stats::Stats;

impl Tls {
    /// The connection must start with a PROXY header (its source is in
    /// `accept_proxy_protocol`): the bytes read go to it until it is
    /// whole. Set once, before the first read.
    pub(crate) fn expect_proxy_header(&mut self) {
        self.await_proxy = true;
    }

    /// A PROXY header is still to come: what `rx` holds is its start.
    pub(super) fn awaits_proxy(&self) -> bool {
        self.await_proxy
    }

    /// A PROXY header was read and its source not yet taken.
    pub(crate) fn holds_proxy_source(&self) -> bool {
        self.proxy_source.is_some()
    }

    /// What the PROXY header gave, once, after it was read: `Some(None)`
    /// for a header that gives no address (v1 `UNKNOWN`, v2 `LOCAL`).
    pub(crate) fn take_proxy_source(&mut self) -> Option<Option<SocketAddr>> {
        self.proxy_source.take()
    }

    /// Looks at the bytes `rx` holds while the header is due: a whole
    /// header is taken out of the storage (the bytes after it stay, for
    /// the session), its source kept and counted (`proxy_headers`).
    /// `Ok(false)`: not whole yet.
    ///
    /// Errors (`InvalidData`, counted in `proxy_headers_refused`): the
    /// bytes are not a valid header, or one over 4,096 bytes
    /// (`proxy_protocol::MAX_HEADER`); logged at `debug` with the peer's
    /// address and the reason (the machine's error line keeps only the
    /// error's kind).
    pub(super) fn take_proxy_header(
        &mut self,
        stream: &TcpStream,
        stats: &Stats,
    ) -> io::Result<bool> {
        let refuse = |why: String| {
            Stats::add(&stats.proxy_headers_refused, 1);
            let peer = stream
                .peer_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string());
            debug!("client {peer}: PROXY header before TLS refused: {why}");
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("PROXY header before TLS: {why}"),
            )
        };
        match proxy_protocol::parse(self.rx.pending()) {
            Ok(Some(h)) => {
                self.rx.consume(h.len);
                self.await_proxy = false;
                self.proxy_source = Some(h.source);
                Stats::add(&stats.proxy_headers, 1);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e @ PpError::Malformed(_)) => Err(refuse(e.to_string())),
            Err(PpError::TooLarge) => {
                Err(refuse(format!("over {} bytes", proxy_protocol::MAX_HEADER)))
            }
        }
    }
}

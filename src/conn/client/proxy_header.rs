//! The PROXY protocol header at the start of a client connection
//! (`accept_proxy_protocol`, docs/configuration.md, "Edge rules"): taken out of the head
//! buffer before the first request head is looked at (on a TLS listener
//! the transport takes it before the ClientHello), and its source made
//! the connection's client address — the one `X-Forwarded-For`, the
//! access record and `hash_key = "client_ip"` use.
//!
//! A connection from a listed source must start with a valid header
//! (within the request head timeout, which runs from the accept); from
//! any other source bytes that start like one are never trusted (400).
//!
//! What it must not know: the header's wire format (`proxy_protocol`),
//! how bytes are read.

use log::debug;

use super::{ClientConn, Result};
use crate::error::{ErrorKind, ProxyError};
use crate::http::ParseError;
use crate::proxy_protocol::{self, Error as PpError};
use crate::stats::Stats;

impl ClientConn {
    /// Takes the PROXY header out of the head buffer if one is due.
    ///
    /// `Ok(true)`: nothing is due (or it was just taken): read the
    /// request head. `Ok(false)`: the header is due and not complete yet.
    /// Errors: a due header is malformed, too long, or longer than the
    /// head buffer may grow; a header from a source not listed (400).
    pub(super) fn take_proxy_header(&mut self, sh: &mut crate::conn::Shared) -> Result<bool> {
        let stats = &sh.stats;
        let refuse = |e: ParseError| {
            Stats::add(&stats.proxy_headers_refused, 1);
            Err(ProxyError::downstream(ErrorKind::Parse(e)))
        };
        let Some(buf) = self.side.inbuf.as_mut().filter(|b| !b.is_empty()) else {
            return Ok(!self.await_proxy);
        };
        if !self.await_proxy {
            return if !self.proxied && proxy_protocol::has_signature(buf.as_slice()) {
                refuse(ParseError::UntrustedProxyHeader)
            } else {
                Ok(true)
            };
        }
        match proxy_protocol::parse(buf.as_slice()) {
            Ok(Some(h)) => {
                buf.consume(h.len);
                self.await_proxy = false;
                self.proxied = true;
                Stats::add(&stats.proxy_headers, 1);
                if let Some(source) = h.source {
                    debug!("client {}: PROXY header gives {source}", self.side.addr);
                    self.side.addr = source;
                }
                // Counted by the address the header gave (or the
                // balancer's own, for `LOCAL`).
                Ok(self.count_client(sh))
            }
            Ok(None) if buf.room() == 0 => {
                refuse(ParseError::ProxyHeader("longer than the head buffer"))
            }
            Ok(None) => Ok(false),
            Err(PpError::Malformed(why)) => refuse(ParseError::ProxyHeader(why)),
            Err(PpError::TooLarge) => refuse(ParseError::ProxyHeader("over 4096 bytes")),
        }
    }

    /// On a TLS listener the transport reads the PROXY header before the
    /// ClientHello (`transport/tls/proxy.rs`): once it has, its source
    /// becomes the connection's client address, as above. `None`: no
    /// header was just read; `Some(false)`: the address holds
    /// `max_connections_per_client` already (closed); `Some(true)`: taken.
    pub(super) fn take_tls_proxy_source(&mut self, sh: &mut crate::conn::Shared) -> Option<bool> {
        let source = self.side.stream.take_proxy_source()?;
        self.proxied = true;
        if let Some(source) = source {
            debug!("client {}: PROXY header gives {source}", self.side.addr);
            self.side.addr = source;
        }
        Some(self.count_client(sh))
    }
}

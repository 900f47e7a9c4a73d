//! A request the proxy answered itself (a filter's reply, an edge rule,
//! an error answer), and its access record: what is kept of the request
//! once its exchange went back to the spare list.
//!
//! What it must not know: how the answer is encoded (HTTP/1 or HTTP/2),
//! sockets.

use std::time::Instant;

use super::Shared;
use super::access::{Access, Downstream, Termination, sniff_request_line};
use crate::http::RequestHead;
use crate::http::known::Known;

/// A request answered by the proxy itself, for the access log.
pub(crate) struct OwnReply {
    /// The request method.
    pub method: String,
    /// The request-target as received.
    pub target: Vec<u8>,
    /// The HTTP/1 minor version (2: HTTP/2); `None` for a head that could
    /// not be read.
    pub version: Option<u8>,
    /// The `Host` field's value, if any.
    pub host: Option<Vec<u8>>,
    /// Its `X-Request-Id`, if any.
    pub request_id: Option<Vec<u8>>,
    /// The status of the answer.
    pub status: u16,
    /// Body bytes of the answer.
    pub bytes: u64,
    /// When the request head was complete.
    pub started: Instant,
    /// How the request ended (access log, metrics).
    pub termination: Termination,
}

impl OwnReply {
    /// The record of `req` answered with `status` (0: decided later) at
    /// `now`, ending as `how`.
    pub(crate) fn new(req: &RequestHead, status: u16, now: Instant, how: Termination) -> Self {
        OwnReply {
            method: req.method.clone(),
            target: req.target.clone().into_bytes(),
            version: Some(req.version),
            host: req.headers.get_known(Known::Host).map(<[u8]>::to_vec),
            request_id: crate::request_id::of(&req.headers).map(<[u8]>::to_vec),
            status,
            bytes: 0,
            started: now,
            termination: how,
        }
    }

    /// The record of an HTTP/2 request refused from its fields (`status`,
    /// a 400 for a `:path` that is no request-target, say): `:method`,
    /// `:path` and `:authority` (else `host`) as they came, since no
    /// request head could be made of them (RFC 9113 §8.3.1; the HTTP/1
    /// refusal of the same target is logged with it too).
    pub(crate) fn refused_h2<'a>(
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        status: u16,
        now: Instant,
    ) -> Self {
        let (mut method, mut target, mut authority, mut host) = (None, None, None, None);
        for (name, value) in fields {
            match name {
                b":method" => method = method.or(Some(value)),
                b":path" => target = target.or(Some(value)),
                b":authority" => authority = authority.or(Some(value)),
                b"host" => host = host.or(Some(value)),
                _ => {}
            }
        }
        OwnReply {
            method: String::from_utf8_lossy(method.unwrap_or_default()).into_owned(),
            target: target.unwrap_or_default().to_vec(),
            version: Some(1),
            host: authority.or(host).map(<[u8]>::to_vec),
            request_id: None,
            status,
            bytes: 0,
            started: now,
            termination: Termination::ProxyError,
        }
    }

    /// The answer to a head that could not be read: what its first line
    /// looks like, from the bytes that came.
    pub(crate) fn unreadable(head: &[u8], status: u16, started: Instant) -> Self {
        let (method, target) = sniff_request_line(head);
        OwnReply {
            method,
            target,
            version: None,
            host: None,
            request_id: None,
            status,
            bytes: 0,
            started,
            termination: Termination::ProxyError,
        }
    }

    /// Writes the access record, about `client`.
    pub(crate) fn log(&self, client: Downstream<'_>, sh: &mut Shared) {
        Access {
            client: client.addr,
            tls: client.tls,
            stream: client.stream,
            method: &self.method,
            target: &self.target,
            version: self.version,
            host: self.host.as_deref(),
            request_id: self.request_id.as_deref(),
            status: self.status,
            bytes_in: 0,
            bytes_out: self.bytes,
            started: self.started,
            upstream: None,
            connect: None,
            first_byte: None,
            reused: None,
            retries: 0,
            attempts: &[],
            termination: self.termination,
        }
        .record(&sh.stats, &mut sh.access);
    }
}

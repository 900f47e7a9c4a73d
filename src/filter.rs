//! The user's hooks: [`Filter`], and what they return ([`Reply`],
//! [`Target`], [`Peer`]).
//!
//! Hooks run synchronously on the loop thread (ARCHITECTURE.md §10): they must not
//! block, and every connection of the process waits while one runs.
//!
//! What it must not know: the loop, sockets, buffers.

use std::borrow::Cow;
use std::net::SocketAddr;

use crate::http::{Headers, RequestHead, ResponseHead};

/// Where a request goes: the upstream peer, and the key of the upstream
/// pool: its address and, for TLS, its identity (client configuration and
/// server name, interned per loop: `tls::identity`), so a TLS and a plain
/// connection to one address never mix. 12 bytes, `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Peer {
    /// The upstream's socket address.
    pub addr: SocketAddr,
    /// The TLS identity of connections to it; `None`: plain TCP.
    pub tls: Option<crate::tls::identity::TlsId>,
}

impl Peer {
    /// A plain-TCP peer at `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Peer { addr, tls: None }
    }
}

/// Where `Filter::upstream_peer` sends a request (ARCHITECTURE.md §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Whatever the configured `[[route]]`s say (the first group when there
    /// are none; 404 when routes exist and none matches). Routes see the
    /// head as `request_filter` left it, so rewriting `Host` or the target
    /// there re-routes the request.
    Routes,
    /// The group with this name: balanced, health-checked, retried on
    /// another of its servers. An unknown name is a 502.
    Group(Cow<'static, str>),
    /// This one peer, outside any group: no balancing, no health; a retry
    /// asks `upstream_peer` again.
    Peer(Peer),
}

impl From<Peer> for Target {
    fn from(p: Peer) -> Self {
        Target::Peer(p)
    }
}

impl Target {
    /// The group named `name`.
    pub fn group(name: impl Into<Cow<'static, str>>) -> Self {
        Target::Group(name.into())
    }
}

/// A response the proxy writes itself, without contacting an upstream.
///
/// The proxy adds `Content-Length` (the body's length in bytes) and, when it
/// will close the connection afterwards, `Connection: close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Status code, 200..=599.
    pub status: u16,
    /// Fields to send, in order; do not include `Content-Length`.
    pub headers: Headers,
    /// The whole body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A reply with `status`, no fields and `body`.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            headers: Headers::new(),
            body: body.into(),
        }
    }

    /// A reply with `status`, `Content-Type: text/plain` and `body`: the
    /// proxy's own answers, whose body is a line of text (RFC 9110 §8.3:
    /// a sender of content should say its type).
    pub fn text(status: u16, body: impl Into<Vec<u8>>) -> Self {
        let mut reply = Reply::new(status, body);
        reply.headers.append("Content-Type", b"text/plain");
        reply
    }
}

/// The three hooks of a request's path (ARCHITECTURE.md §1, §10).
pub trait Filter {
    /// Sees (and may change) each request head before anything else happens
    /// to it. `Some(reply)` answers the request without an upstream. If the
    /// request has a body, the downstream connection is closed after the
    /// reply (the body is never parsed as a next request).
    fn request_filter(&self, _req: &mut RequestHead) -> Option<Reply> {
        None
    }

    /// Chooses where `req` goes: the routes (the default), a group by name,
    /// or one concrete peer ([`Target`]). Asked again for a retry; a group's
    /// retry goes to another of its servers.
    fn upstream_peer(&self, _req: &RequestHead) -> Target {
        Target::Routes
    }

    /// Sees (and may change) each response head before it goes downstream,
    /// 1xx interim heads included. Hop-by-hop fields are already removed.
    fn response_filter(&self, _req: &RequestHead, _resp: &mut ResponseHead) {}
}

/// The default filter: every request goes to one upstream, unchanged.
#[derive(Debug, Clone, Copy)]
pub struct Forward {
    /// The peer every request is sent to.
    pub peer: Peer,
}

impl Forward {
    /// Sends everything to `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Forward {
            peer: Peer::new(addr),
        }
    }
}

impl Filter for Forward {
    fn upstream_peer(&self, _req: &RequestHead) -> Target {
        Target::Peer(self.peer)
    }
}

/// The binary's filter: every request goes where the configured routes
/// and groups say (`Target::Routes`), unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByRoutes;

impl Filter for ByRoutes {}

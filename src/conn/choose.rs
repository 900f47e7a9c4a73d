//! Which server a request goes to, first and on a retry (ARCHITECTURE.md
//! §13): the user's `upstream_peer` names the routes, a group or one peer;
//! a group's balancer picks a server the request has not tried yet; a
//! failure is counted against the server it happened on (passive health).
//!
//! What it must not know: sockets, how bytes move, the pool's choice.

use std::net::IpAddr;

use crate::conn::Shared;
use crate::conn::exchange::Exchange;
use crate::error::{ErrorKind, ProxyError};
use crate::filter::{Peer, Target};
use crate::http::RequestHead;
use crate::upstreams::NoPick;
use crate::upstreams::health::Verdict;

/// Where a new request goes.
pub(crate) enum Dest {
    /// To `peer`, a server of `group` (or a concrete peer: `None`).
    Server {
        group: Option<usize>,
        peer: Peer,
        panic: bool,
        hash: u64,
    },
    /// To a server of `group`, chosen by [`pick_first`]; `route`: the
    /// `[[route]]` that matched, if routes chose the group.
    Group { group: usize, route: Option<usize> },
    /// Routes exist and none matches: 404.
    NoRoute,
    /// The group is unknown or has no server with an address: 502.
    NoServer(String),
    /// Every server of group `group` is out and none may be tried in panic
    /// mode: 503 with `Retry-After` of `retry_after`.
    Unavailable {
        group: usize,
        retry_after: std::time::Duration,
    },
}

/// Asks `upstream_peer` where `req` goes: a concrete peer, a group (and
/// the route that chose it), or no route. No server is picked yet.
/// `tls`: the request came over TLS (a route's `scheme`).
pub(crate) fn aim(sh: &mut Shared, req: &RequestHead, tls: bool) -> Dest {
    let (route, group) = match sh.filter.upstream_peer(req) {
        Target::Peer(peer) => {
            return Dest::Server {
                group: None,
                peer,
                panic: false,
                hash: 0,
            };
        }
        Target::Routes => match sh.groups.route_of(req, tls) {
            Some(rg) => rg,
            None => return Dest::NoRoute,
        },
        Target::Group(name) => match sh.groups.find(&name) {
            Some(g) => (None, g),
            None => return Dest::NoServer(format!("no upstream group named {name:?}")),
        },
    };
    Dest::Group { group, route }
}

/// Picks the first server for `dest` when it names a group; any other
/// `dest` is returned as it is.
pub(crate) fn pick_first(sh: &mut Shared, dest: Dest, client: IpAddr, req: &RequestHead) -> Dest {
    let Dest::Group { group, .. } = dest else {
        return dest;
    };
    let hash = sh.groups.hash_of(group, client, req);
    match sh.groups.pick(group, hash, &[], sh.now) {
        Ok(p) => Dest::Server {
            group: Some(group),
            peer: sh.peer_in(group, p.addr),
            panic: p.panic,
            hash,
        },
        Err(NoPick::Unavailable(retry_after)) => Dest::Unavailable { group, retry_after },
        Err(NoPick::Tried) => {
            Dest::NoServer("the upstream group has no server with an address".into())
        }
    }
}

/// What a failed try of a server is called in the access record's list of
/// tries (`outcome`).
pub(crate) fn outcome(err: &ProxyError) -> &'static str {
    use crate::error::Timeout as T;
    match &err.kind {
        ErrorKind::ConnectFailed(std::io::ErrorKind::ConnectionRefused) => "refused",
        k if k.is_upstream_tls() => "tls_error",
        ErrorKind::ConnectFailed(_) => "connect_error",
        ErrorKind::Timeout(T::Connect) => "connect_timeout",
        ErrorKind::Timeout(T::UpstreamRead) => "read_timeout",
        ErrorKind::Timeout(T::UpstreamWrite) => "write_timeout",
        ErrorKind::Timeout(_) => "timeout",
        ErrorKind::Io(std::io::ErrorKind::ConnectionReset) => "reset",
        ErrorKind::Io(_) => "io_error",
        ErrorKind::Closed => "closed",
        ErrorKind::NoDescriptor => "no_descriptor",
        ErrorKind::Parse(_) | ErrorKind::UnexpectedUpgrade => "invalid_response",
        _ => "error",
    }
}

/// The reason a failure `err` of a try is recorded against its server
/// (`traffic: connect refused`), for `/status` and the ejection line.
fn reason(err: &ProxyError, before_response: bool) -> String {
    use crate::error::Timeout as T;
    let when = if before_response {
        " before response"
    } else {
        ""
    };
    match &err.kind {
        ErrorKind::ConnectFailed(std::io::ErrorKind::ConnectionRefused) => {
            "traffic: connect refused".into()
        }
        k if k.is_upstream_tls() => "traffic: TLS handshake failed".into(),
        ErrorKind::ConnectFailed(k) => format!("traffic: connect failed: {k}"),
        ErrorKind::Timeout(T::Connect) => "traffic: connect timeout".into(),
        ErrorKind::Timeout(T::UpstreamRead) => format!("traffic: read timeout{when}"),
        ErrorKind::Timeout(T::UpstreamWrite) => format!("traffic: write timeout{when}"),
        ErrorKind::Io(std::io::ErrorKind::ConnectionReset) => format!("traffic: reset{when}"),
        ErrorKind::Io(k) => format!("traffic: {k}{when}"),
        ErrorKind::Closed => format!("traffic: closed{when}"),
        ErrorKind::Parse(e) => format!("traffic: malformed response: {e}"),
        ErrorKind::UnexpectedUpgrade => "traffic: unexpected 101".into(),
        other => format!("traffic: {other:?}"),
    }
}

/// Counts the failure `err` of the current try against its server
/// (passive health): a refused or timed-out connect, a reset or close
/// before any response byte on a new connection, or the upstream read or
/// write timeout before any response byte. A close of a pooled
/// connection before any byte is the keep-alive race, not the server's
/// fault: it is retried but not counted.
pub(crate) fn count_failure(ex: &mut Exchange, err: &ProxyError, sh: &mut Shared) {
    let Some(g) = ex.group.filter(|_| ex.in_flight) else {
        return;
    };
    ex.in_flight = false;
    let verdict = match &err.kind {
        ErrorKind::ConnectFailed(_) | ErrorKind::Timeout(crate::error::Timeout::Connect) => {
            Verdict::Failure
        }
        ErrorKind::Io(_) | ErrorKind::Closed if ex.no_response_byte() && !ex.reused => {
            Verdict::Failure
        }
        // It took the request (or stopped taking it) and answered nothing
        // within the read or write timeout: the server's fault on a new or
        // a pooled connection alike (nginx counts `timeout` too).
        ErrorKind::Timeout(
            crate::error::Timeout::UpstreamRead | crate::error::Timeout::UpstreamWrite,
        ) if ex.no_response_byte() => Verdict::Failure,
        // A coding this client cannot be given: the proxy's limit.
        ErrorKind::Parse(crate::http::ParseError::Framing(why))
            if *why == crate::http::response::UNDELIVERABLE_CODING =>
        {
            Verdict::Neutral
        }
        // It answered what HTTP does not allow, or cut or stalled its
        // answer: its fault, seen in `/status` and the metrics, not an
        // ejection.
        ErrorKind::Parse(_) | ErrorKind::UnexpectedUpgrade => Verdict::Flawed,
        ErrorKind::Io(_)
        | ErrorKind::Closed
        | ErrorKind::Timeout(
            crate::error::Timeout::UpstreamRead | crate::error::Timeout::UpstreamWrite,
        ) if !ex.no_response_byte() => Verdict::Flawed,
        _ => Verdict::Neutral,
    };
    if matches!(verdict, Verdict::Failure | Verdict::Flawed) {
        let why = reason(err, ex.no_response_byte());
        sh.groups.note_failure(g, ex.peer.addr, why);
    }
    // The status of a head that came before the failure (a cut 200).
    sh.report(g, ex.peer.addr, verdict, (ex.status, ex.first_byte));
}

/// The server for a retry of `ex`: another server of its group not tried
/// yet (healthy first); when every one was tried, any server again while
/// `max_retries` allows (a new connection, as before groups), unless the
/// request already went out on a new connection that failed
/// (`Exchange::sent_fresh`: that server may have acted on it). For a
/// concrete peer, `upstream_peer` is asked again. `None`: nowhere to go.
pub(crate) fn next(ex: &mut Exchange, sh: &mut Shared) -> Option<Peer> {
    let Some(g) = ex.group else {
        let peer = match sh.filter.upstream_peer(&ex.req) {
            Target::Peer(p) => p,
            _ => ex.peer,
        };
        ex.tried.push(peer.addr);
        return Some(peer);
    };
    // Once the request went out on a new connection that failed, only an
    // untried server may get it: one it was sent to may have acted on it.
    let pick = sh
        .groups
        .pick(g, ex.hash, &ex.tried, sh.now)
        .ok()
        .or_else(|| {
            (ex.retries <= sh.cfg.max_retries && !ex.sent_fresh)
                .then(|| sh.groups.pick(g, ex.hash, &[], sh.now).ok())?
        })?;
    if pick.panic && ex.panic_until.is_none() {
        // Panic mode from here on: one connect timeout for all its tries.
        ex.panic_until = Some(sh.now + ex.connect_timeout(&sh.cfg));
    }
    ex.panic |= pick.panic;
    ex.tried.push(pick.addr);
    ex.in_flight = true;
    Some(sh.peer_in(g, pick.addr))
}

/// How many retries `ex` may make: `max_retries`; enough to try every
/// server of the group once in panic mode, or while no byte of the
/// request was written (a refused or failed connect: the request reached
/// no server, so trying the next is safe for every method, as nginx's
/// `proxy_next_upstream error` does).
pub(crate) fn retry_limit(ex: &Exchange, sh: &Shared) -> u32 {
    let max = sh.cfg.max_retries;
    match ex.group.and_then(|g| sh.groups.get(g)) {
        Some(group) if ex.panic || ex.nothing_written() => {
            max.max(group.len().saturating_sub(1) as u32)
        }
        _ => max,
    }
}

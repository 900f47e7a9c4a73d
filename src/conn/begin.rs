//! Starting a request whatever protocol brought it (SEAMS.md §3.4, seam
//! 2): the parsed head's plan ([`plan_request`]), the request id, the
//! user's `request_filter` and `upstream_peer` hooks, the edge rules, the
//! server chosen and an upstream connection attached — or the proxy's own
//! answer decided instead; the PROXY header a new upstream connection
//! starts with, and the upstream's release. What follows a failed try
//! (its record, the retry, the warning) is `failed_try.rs`.
//!
//! The HTTP/1 machine (`client`) and the HTTP/2 machine (`h2`) call the
//! same functions and differ only in how they carry the outcome out: an
//! HTTP/1 head in the connection's buffer, or HEADERS and DATA frames on
//! a stream.
//!
//! What it must not know: sockets, how bytes move (the relay), how an
//! answer is encoded, keep-alive of the client connection.

use std::net::SocketAddr;
use std::time::Instant;

use log::warn;

use super::access::Termination;
use super::choose::{self, Dest};
use super::exchange::Exchange;
use super::own_reply::OwnReply;
use super::transport::Transport;
use super::{Shared, edge};
use crate::cidr::{self, Cidr};
use crate::error::{ErrorKind, ProxyError};
use crate::event_loop::token::ConnId;
use crate::filter::Reply;
use crate::http::forwarded::client_address;
use crate::http::known::Known;
use crate::http::request::ALLOW;
use crate::http::{BodyKind, Forwarding, Headers, Refusal, RequestHead, ensure_host, plan_request};
use crate::request_id::{self, RequestIds};
use crate::stats::Stats;
use crate::upstreams::spec::ProxyVersion;
use crate::warn_limit::WarnKind;

/// What starting a request needs to know of the connection it came on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    /// The client connection: the owner of the exchange's upstream
    /// connections (their events are routed to it).
    pub id: ConnId,
    /// The peer's address (after any PROXY header).
    pub peer: SocketAddr,
    /// The request came over TLS (scheme `https`).
    pub tls: bool,
    /// The request came over HTTP/2 (`Via` says `2`).
    pub h2: bool,
    /// The `X-Forwarded-Client-Cert` value of the client's verified
    /// certificate, if any (`tls::client_cert`).
    pub client_cert: Option<&'a str>,
    /// The client connection's transport: the address the client
    /// connected to is asked of it only when a PROXY header upstream
    /// names it (no `getsockname` per request otherwise).
    pub stream: &'a Transport,
}

impl Origin<'_> {
    /// The request's client address: `client` (from a trusted
    /// `X-Forwarded-For`), else the peer's.
    pub(crate) fn client(&self, client: Option<SocketAddr>) -> SocketAddr {
        client.unwrap_or(self.peer)
    }
}

/// How a request starts.
pub(crate) enum Begin {
    /// It goes upstream: the exchange is started and an upstream
    /// connection attached, or the attach failed with the error in
    /// `attached` (the caller fails the exchange, which may retry).
    Forward {
        /// The started exchange.
        ex: Box<Exchange>,
        /// The attach's result.
        attached: Result<(), ProxyError>,
    },
    /// The proxy answers it itself with `reply` (a filter's reply, an edge
    /// rule, `Max-Forwards: 0`, no route); `has_body`: the request has a
    /// body that is never read. `how`: its termination state.
    Own {
        /// The exchange holding the request head (for the record).
        ex: Box<Exchange>,
        /// The answer.
        reply: Reply,
        /// The request carries a body.
        has_body: bool,
        /// Its termination state.
        how: Termination,
    },
    /// It is refused with the error table's answer to `err`; `own` is its
    /// record (the exchange went back to the spare list).
    Refused {
        /// The record of the refused request.
        own: OwnReply,
        /// Why.
        err: ProxyError,
    },
}

/// A request started ([`begin`]), with what the client connection learns
/// from it.
pub(crate) struct Begun {
    /// How it goes on.
    pub begin: Begin,
    /// The request allows its connection to carry another one (its own
    /// `Connection` field, RFC 9112 §9.3; HTTP/1 only).
    pub keep_alive: bool,
    /// The client address a trusted `X-Forwarded-For` gave (port 0: the
    /// field carries none); `None`: the peer's.
    pub client: Option<SocketAddr>,
}

/// Starts the request parsed into `ex.req`, coming from `o`: in order, the
/// client address behind trusted proxies, the request id, the plan, the
/// user's `request_filter`, the route and its edge rules, the first
/// server, the request rules, and the upstream connection.
pub(crate) fn begin(sh: &mut Shared, mut ex: Box<Exchange>, o: &Origin<'_>) -> Begun {
    let fwd = Forwarding {
        via: sh.cfg.add_via,
        via_name: &sh.via_name,
        x_forwarded_for: sh.cfg.add_x_forwarded_for,
        x_forwarded_proto: sh.cfg.add_x_forwarded_proto,
        tls: o.tls,
        h2: o.h2,
        client_cert: o.client_cert,
    };
    let client = trusted_client(&ex.req, o.peer, &sh.cfg.trusted_proxies);
    if sh.cfg.request_id {
        let trusted = cidr::any_contains(&sh.cfg.trusted_proxies, o.peer.ip());
        stamp_request_id(&mut ex.req.headers, trusted, &mut sh.ids);
    }
    let done = |begin, keep_alive| Begun {
        begin,
        keep_alive,
        client,
    };
    let req = &mut ex.req;
    let plan = match plan_request(req, o.peer.ip(), fwd) {
        Ok(plan) => plan,
        Err(Refusal::MaxForwards { status, keep_alive }) => {
            // RFC 9110 §7.6.2: the proxy is the final recipient.
            let has_body = req.body_kind().map_or(true, |k| {
                !matches!(k, BodyKind::Empty | BodyKind::Length(0))
            });
            // A 405 (TRACE) is the proxy's own refusal: counted like the
            // others in `sluice_proxy_responses_total` (a 200 is not).
            count_status(&sh.stats, status);
            let mut reply = Reply::new(status, "");
            reply.headers.append("Allow", ALLOW.as_bytes());
            let how = Termination::ProxyReply;
            return done(
                Begin::Own {
                    ex,
                    reply,
                    has_body,
                    how,
                },
                keep_alive,
            );
        }
        Err(refusal) => {
            let own = OwnReply::new(req, 0, sh.now, Termination::ProxyError);
            sh.recycle_exchange(ex);
            let err = ProxyError::downstream(match refusal {
                Refusal::Invalid(e) => ErrorKind::Parse(e),
                Refusal::LoopDetected => ErrorKind::LoopDetected,
                Refusal::NotImplemented | Refusal::MaxForwards { .. } => ErrorKind::NotImplemented,
            });
            return done(Begin::Refused { own, err }, true);
        }
    };
    if sh.cfg.request_id && !req.headers.has_known(Known::XRequestId) {
        // The client's `Connection` named it, and the plan removed what
        // that names (RFC 9110 §7.6.1): the request still goes upstream
        // with one (one bit test when present).
        req.headers
            .append_known_made(Known::XRequestId, &[&sh.ids.next_id()]);
    }
    let keep_alive = plan.keep_alive;
    let has_body = plan.has_body();
    let own = |ex, reply, how| Begin::Own {
        ex,
        reply,
        has_body,
        how,
    };
    if let Some(reply) = sh.filter.request_filter(req) {
        Stats::add(&sh.stats.filter_replies, 1);
        return done(own(ex, reply, Termination::ProxyReply), keep_alive);
    }
    let dest = choose::aim(sh, &ex.req, o.tls);
    let route = match dest {
        Dest::Group { route, .. } => route,
        _ => None,
    };
    let client_ip = o.client(client).ip();
    let verdict = edge::verdict(sh, &ex.req, route, plan.framing, client_ip, o.tls);
    if let Some((reply, how)) = verdict.answer {
        if !matches!(how, Termination::Redirect | Termination::FixedAnswer) {
            // A refusal (403, 413, 429): the proxy's own error answers.
            count_status(&sh.stats, reply.status);
        }
        return done(own(ex, reply, how), keep_alive);
    }
    let refused = |sh: &mut Shared, ex: Box<Exchange>, err| {
        let own = OwnReply::new(&ex.req, 0, sh.now, Termination::ProxyError);
        sh.recycle_exchange(ex);
        Begin::Refused { own, err }
    };
    let (group, peer, panic, hash) = match choose::pick_first(sh, dest, client_ip, &ex.req) {
        Dest::Server {
            group,
            peer,
            panic,
            hash,
        } => (group, peer, panic, hash),
        Dest::NoRoute => {
            // The proxy refuses it (no upstream to ask): counted and
            // logged as its own error answer, not as a filter's reply.
            let body = "404 Not Found: no route for this host and path\n";
            count_status(&sh.stats, 404);
            let reply = Reply::text(404, body);
            return done(own(ex, reply, Termination::ProxyError), keep_alive);
        }
        Dest::Unavailable { group, retry_after } => {
            let secs = retry_after.as_secs().min(u64::from(u32::MAX)) as u32;
            if let Some(more) = sh.warn_limit.allow(WarnKind::Unavailable, sh.now) {
                let name = sh.groups.get(group).map_or("-", |g| g.spec.name.get_ref());
                warn!(
                    "upstream group {name}: no server available, answered 503 \
                     (Retry-After: {secs}) to {} {}: {}{more}",
                    ex.req.method,
                    crate::text::cut(&ex.req.target, 200),
                    sh.groups.why_out(group, sh.now)
                );
            }
            let err = ProxyError::upstream(ErrorKind::Unavailable { retry_after: secs });
            return done(refused(sh, ex, err), keep_alive);
        }
        Dest::Group { .. } => {
            // Not returned by `pick_first`; answered as no server.
            let err = ProxyError::upstream(ErrorKind::NoServer);
            return done(refused(sh, ex, err), keep_alive);
        }
        Dest::NoServer(why) => {
            warn!("client {}: {why}", o.peer);
            let err = ProxyError::upstream(ErrorKind::NoServer);
            return done(refused(sh, ex, err), keep_alive);
        }
    };
    let spec = route.and_then(|i| sh.cfg.route.get(i).map(|r| (i, r)));
    if let Some((_, r)) = spec {
        r.request_rules()
            .apply_to_request(&mut ex.req, o.tls, client_ip);
    }
    // An HTTP/1.0 request without Host gets the first server's
    // address; a retry on another server keeps it (ARCHITECTURE.md §6).
    // After the rules: their `$host` is the client's (none), and a rule
    // that sets Host wins.
    let host_added = ensure_host(&mut ex.req, peer.addr);
    ex.start(peer, plan.framing, plan.upgrade, plan.idempotent, sh.now);
    ex.host_added = host_added;
    ex.max_body = verdict.max_body;
    ex.timeouts = crate::conn::exchange::Timeouts::of_route(&sh.cfg, route);
    ex.resp_rules = spec
        .filter(|(_, r)| !r.response_rules().is_empty())
        .map(|(i, _)| (i, o.tls, client_ip));
    ex.expect_continue = plan.expect_continue;
    ex.group = group;
    ex.in_flight = group.is_some();
    ex.panic = panic;
    // Panic mode's tries share one connect timeout (ARCHITECTURE.md §13).
    ex.panic_until = panic.then(|| sh.now + ex.connect_timeout(&sh.cfg));
    ex.hash = hash;
    ex.tried.push(peer.addr);
    let mut to_up = sh.bufs.body(sh.cfg.high_watermark, sh.cfg.low_watermark);
    to_up.extend_from_slice(&ex.head_bytes);
    ex.to_upstream = Some(to_up);
    let preface = preface(sh, group, o.client(client), o.stream);
    let attached = attach(sh, &mut ex, o.id, preface, false);
    done(Begin::Forward { ex, attached }, keep_alive)
}

/// Gives `ex` an upstream connection owned by `owner`: pooled or new, or
/// always new if `fresh` (a retry goes on a new connection,
/// ARCHITECTURE.md §7). A new one starts with `preface` (a PROXY header;
/// such a connection is never pooled).
///
/// Errors: the connect failed at once (`ConnectFailed`), or found no
/// descriptor (`NoDescriptor`).
pub(crate) fn attach(
    sh: &mut Shared,
    ex: &mut Exchange,
    owner: ConnId,
    preface: Vec<u8>,
    fresh: bool,
) -> Result<(), ProxyError> {
    let tls = ex.peer.tls.and_then(|id| sh.tls_ids.get(id));
    let (key, reused) = sh
        .ups
        .acquire(
            ex.peer,
            tls,
            owner,
            fresh,
            ex.idempotent,
            preface,
            &sh.registry,
            &sh.stats,
            sh.now,
        )
        .map_err(|e| {
            // The OS's words (e.g. "Too many open files"), not the kind.
            if let Some(more) = sh.warn_limit.allow(WarnKind::ConnectStart, sh.now) {
                warn!("upstream {}: connect failed: {e}{more}", ex.peer.addr);
            }
            if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
                || e.kind() == std::io::ErrorKind::QuotaExceeded
            {
                ProxyError::upstream(ErrorKind::NoDescriptor)
            } else {
                ProxyError::upstream(ErrorKind::ConnectFailed(e.kind()))
            }
        })?;
    ex.upstream = Some(key);
    ex.reused = reused;
    ex.connect_time = None;
    ex.connect_began = (!reused).then(Instant::now);
    ex.up_read_at = sh.now;
    ex.up_write_at = sh.now;
    ex.up_port = sh.ups.get(key).map_or(0, |u| u.local_port());
    Ok(())
}

/// The PROXY header a new connection to a server of `group` starts with
/// (its `send_proxy_protocol`; empty: none): from `client` (after the
/// PROXY header in and `trusted_proxies`) to the address it connected to
/// (`stream`'s local address).
pub(crate) fn preface(
    sh: &Shared,
    group: Option<usize>,
    client: SocketAddr,
    stream: &Transport,
) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(version) = group
        .and_then(|g| sh.groups.get(g))
        .and_then(|g| g.spec.send_proxy_protocol)
    else {
        return out;
    };
    let dst = stream
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::new(client.ip(), 0));
    match version {
        ProxyVersion::V1 => crate::proxy_protocol::write::v1(client, dst, &mut out),
        ProxyVersion::V2 => crate::proxy_protocol::write::v2(client, dst, &mut out),
    }
    out
}

/// Parks or closes the upstream connection of `ex` once its part is over:
/// the response read whole and the request sent whole (or abandoned).
/// Returns `(progress, unread)`: something changed, and the client's
/// request body was not all read (its connection cannot carry another
/// request).
pub(crate) fn release_upstream(ex: &mut Exchange, sh: &mut Shared) -> (bool, bool) {
    // The request buffer is not needed once everything went up.
    if ex.request_body_done()
        && ex.to_upstream.as_ref().is_some_and(|b| b.is_empty())
        && !ex.tunnel
        && let Some(b) = ex.to_upstream.take()
    {
        sh.bufs.put_buffer(b);
    }
    let Some(key) = ex.upstream else {
        return (false, false);
    };
    if !ex.response_done() {
        return (false, false);
    }
    if ex.tunnel
        && !(ex.request_body_done() && ex.to_upstream.as_ref().is_none_or(|b| b.is_empty()))
    {
        // A tunnel is two directions: the upstream's EOF ends only its
        // own; the client's bytes still go to it until the client's EOF.
        return (false, false);
    }
    ex.upstream = None;
    // A server gone from its group (DNS, ARCHITECTURE.md §13) or
    // drained gets no new exchange: its connection is closed, not parked.
    let member = ex
        .group
        .and_then(|g| sh.groups.get(g))
        .is_none_or(|gr| gr.parks(ex.peer.addr));
    let mut unread = false;
    if ex.reusable() && member {
        let hint = ex.idle_hint.map(std::time::Duration::from_secs);
        sh.ups.park(key, hint, &sh.registry, &sh.stats, sh.now);
    } else {
        // Request bytes not yet written are not needed any more: the
        // answer is complete. If the client has not sent its whole
        // body, the rest is never read.
        if !ex.request_taken() {
            ex.abandon_request();
            unread = true;
        }
        if let Some(b) = ex.to_upstream.as_mut() {
            b.clear();
        }
        sh.ups.close(key, &sh.stats);
    }
    (true, unread)
}

/// Counts an answer the proxy wrote itself with status `code`.
pub(crate) fn count_status(stats: &Stats, code: u16) {
    let field = match code {
        400 => &stats.status_400,
        403 => &stats.status_403,
        404 => &stats.status_404,
        405 => &stats.status_405,
        408 => &stats.status_408,
        413 => &stats.status_413,
        414 => &stats.status_414,
        429 => &stats.status_429,
        431 => &stats.status_431,
        501 => &stats.status_501,
        502 => &stats.status_502,
        503 => &stats.status_503,
        504 => &stats.status_504,
        505 => &stats.status_505,
        508 => &stats.status_508,
        _ => return,
    };
    Stats::add(field, 1);
}

/// Gives `headers` their `X-Request-Id`: the one that came, when the peer
/// is `trusted` and it is one keepable field, else a new one from `ids`
/// in place of any that came (docs/edge.md "Request ids").
fn stamp_request_id(headers: &mut Headers, trusted: bool, ids: &mut RequestIds) {
    if trusted {
        let mut came = headers.get_all_known(Known::XRequestId);
        if let (Some(v), None) = (came.next(), came.next())
            && request_id::keepable(v)
        {
            return;
        }
    }
    // One bit test when absent (`Known`).
    headers.remove_known(Known::XRequestId);
    headers.append_known_made(Known::XRequestId, &[&ids.next_id()]);
}

/// The client address `X-Forwarded-For` gives for a request from `peer`
/// when `peer` is one of `trusted` (ARCHITECTURE.md §6, docs/edge.md);
/// `None` when it is the peer's own.
fn trusted_client(req: &RequestHead, peer: SocketAddr, trusted: &[Cidr]) -> Option<SocketAddr> {
    if trusted.is_empty() {
        return None;
    }
    let ip = client_address(&req.headers, peer.ip(), |a| cidr::any_contains(trusted, a));
    (ip != peer.ip().to_canonical() && ip != peer.ip()).then(|| SocketAddr::new(ip, 0))
}

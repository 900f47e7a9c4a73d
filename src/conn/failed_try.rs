//! What follows a failed try of an exchange on its upstream (ARCHITECTURE.md
//! §7), for the HTTP/1 and the HTTP/2 machine alike: the try recorded
//! and counted against its server ([`note_failed_try`]), the request sent
//! again on a new upstream connection when the retry rules allow it
//! ([`retry`]), and the warning for a failure the client gets an answer
//! for ([`warn_upstream_failure`]).
//!
//! What it must not know: sockets, how bytes move, how an answer is
//! encoded.

use std::net::SocketAddr;

use log::{info, warn};

use super::Shared;
use super::begin::{attach, preface};
use super::choose;
use super::exchange::Exchange;
use super::transport::Transport;
use crate::error::{Answer, ErrorKind, ProxyError, Timeout};
use crate::event_loop::token::ConnId;
use crate::stats::Stats;
use crate::warn_limit::WarnKind;

/// A failed try of `ex` ended with `err` (upstream side): it is recorded
/// in the exchange's tries and counted against its server (passive
/// health), before a retry is considered.
pub(crate) fn note_failed_try(ex: &mut Exchange, err: &ProxyError, sh: &mut Shared) {
    let status = match err.answer(false, true) {
        Answer::Status(code) => code,
        Answer::Close => 0,
    };
    if ex.attempts.len() < ex.tried.len() {
        ex.note_attempt(choose::outcome(err), status);
    }
    choose::count_failure(ex, err, sh);
    // The handshake's reason (a name that does not match, an alert) is
    // only the connection's: one line a second at most, as every
    // per-request upstream warning (a misconfigured group fails them all).
    if err.kind.is_upstream_tls()
        && let Some(reason) = ex
            .upstream
            .and_then(|k| sh.ups.get_mut(k))
            .and_then(|u| u.take_handshake_error())
        && let Some(more) = sh.warn_limit.allow(WarnKind::TlsHandshake, sh.now)
    {
        warn!(
            "upstream {}: TLS handshake failed: {reason}{more}",
            ex.peer.addr
        );
    }
}

/// Sends `ex` again on a new upstream connection (owned by `owner`;
/// `client` and `stream` for a PROXY header) if the retry rules allow it
/// (ARCHITECTURE.md §7); `upstream_peer` is asked again. After a failed
/// connect the retry may take a pooled connection: the request reached no
/// server, so it is a first try of the next one. Timeouts and a spent
/// descriptor budget are not retried (the same `EMFILE` would come back at
/// once), except a connect timeout when the group has a server this
/// request has not tried: nothing reached the silent server, so the next
/// one gets it (nginx's `proxy_next_upstream timeout`); another wait on
/// the same server would only double the client's.
///
/// Errors: the retry's connect found no descriptor (`NoDescriptor`).
pub(crate) fn retry(
    ex: &mut Exchange,
    err: &ProxyError,
    sh: &mut Shared,
    owner: ConnId,
    client: SocketAddr,
    stream: &Transport,
) -> Result<bool, ProxyError> {
    let untried = |ex: &Exchange| {
        ex.group
            .and_then(|g| sh.groups.get(g))
            .is_some_and(|g| g.may_try_another(&ex.tried))
    };
    match err.kind {
        ErrorKind::Timeout(Timeout::Connect) if untried(ex) => {}
        ErrorKind::Timeout(_) | ErrorKind::NoDescriptor => return Ok(false),
        _ => {}
    }
    if ex.panic_until.is_some_and(|t| sh.now >= t) {
        // Panic mode spent its one connect timeout.
        return Ok(false);
    }
    if ex.reused
        && matches!(err.kind, ErrorKind::Closed | ErrorKind::Io(_))
        && ex.no_response_byte()
        && let Some(k) = ex.upstream
    {
        // A pooled connection the server closed under the request.
        sh.ups.observe_failed_reuse(k, sh.now);
    }
    if !ex.may_retry(choose::retry_limit(ex, sh), untried(ex)) {
        return Ok(false);
    }
    if !ex.reused && !ex.nothing_written() {
        ex.sent_fresh = true;
    }
    let fresh = !matches!(
        err.kind,
        ErrorKind::ConnectFailed(_) | ErrorKind::Timeout(Timeout::Connect)
    );
    if let Some(k) = ex.upstream.take() {
        sh.ups.close(k, &sh.stats);
    }
    ex.retries += 1;
    Stats::add(&sh.stats.retries, 1);
    // `tries()` now counts the try about to start: "retry 1 … try 2".
    // One line a second at most (a failing server can make every
    // request retry), the target cut to 200 bytes.
    let failed = ex.peer.addr;
    let Some(peer) = choose::next(ex, sh) else {
        return Ok(false);
    };
    if let Some(more) = sh.retry_log.allow(sh.now) {
        let target = crate::text::cut(&ex.req.target, 200);
        info!(
            "retry {}: {} {target} after upstream {failed}: {} (reused={}), try {} on {}{more}",
            ex.retries,
            ex.req.method,
            err.what(),
            ex.reused,
            ex.tries(),
            peer.addr
        );
    }
    ex.peer = peer;
    if ex.to_upstream.is_none() {
        ex.to_upstream = Some(sh.bufs.body(sh.cfg.high_watermark, sh.cfg.low_watermark));
    }
    ex.rewind();
    let preface = preface(sh, ex.group, client, stream);
    match attach(sh, ex, owner, preface, fresh) {
        Ok(()) => Ok(true),
        Err(e) if e.kind == ErrorKind::NoDescriptor => Err(e),
        Err(e) => {
            log::debug!("retry connect failed: {e}");
            ex.note_attempt(choose::outcome(&e), 502);
            choose::count_failure(ex, &e, sh);
            Ok(false)
        }
    }
}

/// Logs an upstream failure `err` of `ex` (if any) that the client gets
/// `answer` for: one warning a second at most, naming the server, its
/// group, the request and every server tried.
pub(crate) fn warn_upstream_failure(
    sh: &mut Shared,
    ex: Option<&Exchange>,
    err: &ProxyError,
    answer: Answer,
) {
    if matches!(err.kind, ErrorKind::Unavailable { .. }) {
        return;
    }
    let kind = match err.kind {
        ErrorKind::ConnectFailed(_) | ErrorKind::NoDescriptor => WarnKind::Connect,
        ErrorKind::Parse(_) | ErrorKind::UnexpectedUpgrade => WarnKind::Malformed,
        ErrorKind::Closed | ErrorKind::Io(_) => WarnKind::Closed,
        ErrorKind::Timeout(_) => WarnKind::Timeout,
        _ => WarnKind::Other,
    };
    let Some(more) = sh.warn_limit.allow(kind, sh.now) else {
        return;
    };
    let (method, target) = ex.map_or(("-", "-"), |e| {
        (e.req.method.as_str(), e.req.target.as_str())
    });
    let peer = ex.map(|e| e.peer.addr);
    let what = match answer {
        Answer::Status(code) => format!("answered {code}"),
        Answer::Close => "response cut".to_string(),
    };
    // Every server tried, with how its try ended.
    let tried = ex.filter(|e| e.attempts.len() > 1).map(|e| {
        let list: Vec<String> = e
            .attempts
            .iter()
            .map(|a| format!("{} {}", a.addr, a.outcome))
            .collect();
        format!(" (tried {})", list.join(", "))
    });
    let group = ex
        .and_then(|e| e.group)
        .and_then(|g| sh.groups.get(g))
        .map(|g| format!(" (group {})", g.spec.name.get_ref()));
    let (group, tried) = (group.unwrap_or_default(), tried.unwrap_or_default());
    let target = crate::text::cut(target, 200);
    match peer {
        Some(p) => warn!(
            "upstream {p}{group}: {}: {what} to {method} {target}{tried}{more}",
            err.what()
        ),
        None => warn!("{err}: {what}{more}"),
    }
}

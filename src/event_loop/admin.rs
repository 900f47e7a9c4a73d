//! The admin listener, served by the loop itself (ARCHITECTURE.md §11):
//! `GET /metrics`, `/healthz`, `/readyz`, `/status`, and with
//! `admin_write` `POST /servers/GROUP/ADDR/state` (`admin_write.rs`), one
//! request per connection, answered with `Connection: close`.
//!
//! Why in the loop and not on a thread: the loop stays the only thread that
//! does I/O, and a scrape reads shared memory, so answering costs a few
//! microseconds. It never blocks the loop: sockets are non-blocking, a
//! request head is at most [`MAX_HEAD`] bytes (a longer one gets 431, RFC
//! 6585 §5; bytes that cannot start a request get 400 at once), and a
//! connection has [`TIMEOUT`] to send its head and take its answer. After
//! the answer the connection closes the way RFC 9112 §9.6 asks: its
//! sending side first, then what the client still sends is read and
//! dropped (at most [`LINGER_MAX`] bytes) until it closes too, so unread
//! bytes cannot make the kernel reset the connection before the client
//! has read the answer. At most
//! [`MAX_CONNS`] are open at once (at the cap, newcomers wait in the
//! kernel's queue, and a connection not answered within [`GRACE`] of its
//! accept is closed to make room, see [`Admin::accept`]): they come
//! out of the descriptors kept aside from the proxy's budget (docs/operations.md,
//! "Descriptor budget"), so a flood of admin connections cannot take the
//! proxy's. Out of descriptors (`EMFILE`), accepting pauses as the proxy
//! listener's does (`ACCEPT_BACKOFF`) and is retried: the listener is
//! edge-triggered, and connections left in its queue would bring no new
//! event.
//! Heads are parsed by the proxy's own codec (`http`).
//!
//! What it must not know: the proxy's connections; it answers from the
//! shared region (`metrics`) and the drain flag.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry};
use slab::Slab;

use super::admin_write::{self, Tier, WriteAccess};
use super::{ACCEPT_BACKOFF, token};
use crate::http::{HeadScanner, ParseError, ParseHead, RequestHead, ResponseHead};
use crate::metrics::Observer;
use crate::metrics::expose;
use crate::warn_limit::WarnLimit;

/// Largest admin request head.
const MAX_HEAD: usize = 8 * 1024;
/// Most bytes read and dropped after the answer (a longer request body or
/// a client that keeps sending is then closed at once).
const LINGER_MAX: usize = 64 * 1024;
/// Time an admin connection has for its request and answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Most admin connections open at once: with the loop's own descriptors
/// (about 14) they fit in the 32 kept aside from the proxy's budget.
const MAX_CONNS: usize = 16;
/// At the cap, a connection open this long and not being answered (or
/// one already answered) may be closed to make room for a waiting one: a
/// real client sends its whole head right after connecting, and is
/// answered within microseconds of it. 100 ms, not less: on a loaded
/// machine a scraper's thread can be descheduled for tens of ms between
/// its `connect` and its `write` (20 ms closed one of 40 scrapes at once
/// under a load average of 6); a flood of 250 idle connections then holds
/// a health probe back about 1.5 s (16 closed per 100 ms).
const GRACE: Duration = Duration::from_millis(100);

struct AdminConn {
    stream: TcpStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    written: usize,
    deadline: Instant,
    writing: bool,
    /// Answered, sending side shut: reading until the client closes.
    lingering: bool,
    /// Bytes read and dropped while lingering.
    dropped: usize,
}

/// The admin listener and its connections.
pub(crate) struct Admin {
    /// `None` once the loop stopped accepting ([`Admin::stop_accepting`]).
    listener: Option<TcpListener>,
    conns: Slab<AdminConn>,
    obs: Observer,
    /// After `EMFILE`: when accepting is tried again.
    paused_until: Option<Instant>,
    /// One "admin accept" warning per second.
    warned: WarnLimit,
    /// At the cap, connections were left in the listener's queue: accept
    /// again when one finishes or grows stale.
    backlog: bool,
    /// Who may `POST /servers/…/state`.
    write: WriteAccess,
}

impl Admin {
    /// Registers the observer's admin listener (if any) with `registry`;
    /// the observer goes back for publishing.
    pub(crate) fn new(
        obs: Option<Observer>,
        registry: &Registry,
        write: WriteAccess,
    ) -> io::Result<(Option<Admin>, Option<Observer>)> {
        let Some(mut obs) = obs else {
            return Ok((None, None));
        };
        obs.claim();
        let Some(std_listener) = obs.admin.take() else {
            return Ok((None, Some(obs)));
        };
        let mut listener = TcpListener::from_std(std_listener);
        registry.register(&mut listener, token::ADMIN_LISTENER, Interest::READABLE)?;
        // The observer stays with the loop for publishing; the admin side
        // gets its own handle on the same region.
        let mine = obs.reader();
        Ok((
            Some(Admin {
                listener: Some(listener),
                conns: Slab::new(),
                obs: mine,
                paused_until: None,
                warned: WarnLimit::default(),
                backlog: false,
                write,
            }),
            Some(obs),
        ))
    }

    /// The listener's address.
    pub(crate) fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.as_ref()?.local_addr().ok()
    }

    /// Accepts everything queued (until `WouldBlock`: the listener is
    /// edge-triggered, so stopping early would leave the queue unannounced
    /// for good) — except at the connection cap. There, a connection open
    /// for [`GRACE`] and not being answered (idle, or a head sent in part
    /// and stopped), or already answered, is closed to make room, so a
    /// flood of such connections cannot shut out a health probe; if none
    /// is, the rest stay in the kernel's queue and are accepted as soon as
    /// a connection finishes or its grace ends (`backlog`), so a burst of
    /// well-behaved scrapes waits instead of being dropped. Out of
    /// descriptors, accepting pauses for `ACCEPT_BACKOFF`
    /// ([`Admin::expire`] resumes it).
    pub(crate) fn accept(&mut self, registry: &Registry, now: Instant) {
        if self.paused_until.is_some() {
            return;
        }
        loop {
            if self.listener.is_none() {
                return;
            }
            if self.conns.len() >= MAX_CONNS && !self.evict_stale(registry, now) {
                self.backlog = true;
                return;
            }
            let Some(accepted) = self.listener.as_ref().map(TcpListener::accept) else {
                return;
            };
            match accepted {
                Ok((mut stream, _)) => {
                    let entry = self.conns.vacant_entry();
                    let t = token::admin(entry.key());
                    if registry
                        .register(&mut stream, t, Interest::READABLE)
                        .is_ok()
                    {
                        entry.insert(AdminConn {
                            stream,
                            inbuf: Vec::new(),
                            out: Vec::new(),
                            written: 0,
                            deadline: now + TIMEOUT,
                            writing: false,
                            lingering: false,
                            dropped: 0,
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    if let Some(more) = self.warned.allow(now) {
                        warn!(
                            "admin accept: {e}: pausing admin accepts for {ACCEPT_BACKOFF:?}{more}"
                        );
                    }
                    self.paused_until = Some(now + ACCEPT_BACKOFF);
                    return;
                }
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        debug!("admin accept: {e}");
                    }
                    self.backlog = false;
                    return;
                }
            }
        }
    }

    /// Stops accepting (a drained loop about to end): deregisters and
    /// closes this loop's descriptor of the shared listener; the socket
    /// and its queue stay with the other loops of the group. The
    /// connections already accepted are still answered (within their
    /// deadline), so none is dropped unanswered when the loop ends.
    pub(crate) fn stop_accepting(&mut self, registry: &Registry) {
        if let Some(mut l) = self.listener.take() {
            let _ = registry.deregister(&mut l);
        }
    }

    /// No admin connection is open but answered ones waiting for their
    /// client to close (a drained loop need not wait for those).
    pub(crate) fn is_idle(&self) -> bool {
        self.conns.iter().all(|(_, c)| c.lingering)
    }

    /// Closes, for room, the answered connection or the one open for
    /// [`GRACE`] and not being answered with the earliest deadline; false
    /// if there is none.
    fn evict_stale(&mut self, registry: &Registry, now: Instant) -> bool {
        let grace_before = now + (TIMEOUT - GRACE);
        let Some(key) = self
            .conns
            .iter()
            .filter(|(_, c)| c.lingering || (!c.writing && c.deadline <= grace_before))
            .min_by_key(|(_, c)| c.deadline)
            .map(|(k, _)| k)
        else {
            return false;
        };
        let mut c = self.conns.remove(key);
        let _ = registry.deregister(&mut c.stream);
        true
    }

    /// An event on admin connection `key`: read its head, answer, write.
    pub(crate) fn on_event(
        &mut self,
        key: usize,
        registry: &Registry,
        now: Instant,
        draining: bool,
        tier: &mut dyn Tier,
    ) {
        let done = match self.conns.get_mut(key) {
            None => return,
            Some(c) => match advance(c, &self.obs, draining, &self.write, tier) {
                Ok(done) => done,
                Err(e) => {
                    debug!("admin connection: {e}");
                    true
                }
            },
        };
        if let Some(c) = self.conns.get_mut(key) {
            if done {
                let mut c = self.conns.remove(key);
                let _ = registry.deregister(&mut c.stream);
                if self.backlog {
                    self.accept(registry, now);
                }
            } else if c.writing {
                let interest = if c.lingering {
                    Interest::READABLE
                } else {
                    Interest::WRITABLE
                };
                let _ = registry.reregister(&mut c.stream, token::admin(key), interest);
            }
        }
    }

    /// The earliest connection deadline, or the end of an accept pause,
    /// or (connections waiting in the queue at the cap) the next moment
    /// after `now` an open one may be closed for room.
    pub(crate) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        // Only a reading connection grows stale (an answered one is closed
        // for room at once, a writing one never).
        let stale = self
            .backlog
            .then(|| {
                self.conns
                    .iter()
                    .filter(|(_, c)| !c.writing)
                    .filter_map(|(_, c)| c.deadline.checked_sub(TIMEOUT - GRACE))
                    .filter(|&t| t > now)
                    .min()
            })
            .flatten();
        self.conns
            .iter()
            .map(|(_, c)| c.deadline)
            .chain(self.paused_until)
            .chain(stale)
            .min()
    }

    /// Closes connections past their deadline, and accepts again once an
    /// accept pause is over.
    pub(crate) fn expire(&mut self, now: Instant, registry: &Registry) {
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            self.accept(registry, now);
        }
        let late: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(k, _)| k)
            .collect();
        for key in late {
            let mut c = self.conns.remove(key);
            let _ = registry.deregister(&mut c.stream);
        }
        if self.backlog {
            self.accept(registry, now);
        }
    }
}

/// Hands an event for token `t` to the admin side if it is one of its
/// tokens (listener or connection): true if it was.
pub(crate) fn dispatch(
    admin: &mut Option<Admin>,
    t: mio::Token,
    registry: &Registry,
    now: Instant,
    draining: bool,
    tier: &mut dyn Tier,
) -> bool {
    let Some(a) = admin.as_mut() else {
        return false;
    };
    if t == token::ADMIN_LISTENER {
        a.accept(registry, now);
        return true;
    }
    match token::admin_key(t) {
        Some(key) => {
            a.on_event(key, registry, now, draining, tier);
            true
        }
        None => false,
    }
}

/// Reads, answers and writes what can be now. `Ok(true)`: the connection
/// is finished (answered, or the peer left).
fn advance(
    c: &mut AdminConn,
    obs: &Observer,
    draining: bool,
    write: &WriteAccess,
    tier: &mut dyn Tier,
) -> io::Result<bool> {
    if c.lingering {
        return linger(c);
    }
    if !c.writing {
        let mut chunk = [0u8; 2048];
        let mut eof = false;
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) if c.inbuf.is_empty() => return Ok(true),
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => c.inbuf.extend_from_slice(chunk.get(..n).unwrap_or(&[])),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if c.inbuf.len() > MAX_HEAD {
                break;
            }
        }
        let mut req = RequestHead::default();
        let (status, ctype, body) = match read_head(&c.inbuf, &mut req) {
            // Incomplete: more may come, unless the client said it sent all.
            None if !eof => return Ok(false),
            None => (400, TEXT, refusal(400).to_string()),
            Some(Ok(len)) if req.is_method("POST") && req.target.starts_with("/servers/") => {
                let want = req
                    .headers
                    .get("content-length")
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let body = c.inbuf.get(len..).unwrap_or_default();
                if want > admin_write::MAX_BODY {
                    (413, TEXT, "body too large\n".to_string())
                } else if body.len() < want && !eof {
                    return Ok(false);
                } else {
                    let body = body.get(..want).unwrap_or(body);
                    let peer = c.stream.peer_addr().ok();
                    let auth = req.headers.get("authorization");
                    let (status, text) =
                        admin_write::post(&req.target, body, peer, auth, write, tier);
                    (status, TEXT, text)
                }
            }
            Some(Ok(_)) => {
                let path = req.target.split('?').next().unwrap_or("");
                if path == "/metrics" || path == "/status" {
                    // Every worker's counters in the answer: this loop's
                    // own as the others will read them (monotonic).
                    tier.post_view(draining);
                }
                route(&req, obs, draining, tier)
            }
            Some(Err(status)) => (status, TEXT, refusal(status).to_string()),
        };
        let mut head = ResponseHead::new(status);
        head.headers.append("Content-Type", ctype.as_bytes());
        head.headers
            .append("Content-Length", body.len().to_string().as_bytes());
        head.headers.append("Cache-Control", b"no-store");
        head.headers.append("Connection", b"close");
        head.encode(&mut c.out);
        if !req.is_method("HEAD") {
            c.out.extend_from_slice(body.as_bytes());
        }
        c.writing = true;
    }
    while c.written < c.out.len() {
        match c.stream.write(c.out.get(c.written..).unwrap_or(&[])) {
            Ok(0) => return Ok(true),
            Ok(n) => c.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.stream.shutdown(std::net::Shutdown::Write)?;
    c.lingering = true;
    linger(c)
}

/// Plain-text content type of the admin's own answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// The request head at the start of `inbuf`, parsed into `req`: `None`
/// while more bytes may complete it; `Some(Err(status))` for a head the
/// admin refuses: 431 past [`MAX_HEAD`] bytes or 64 fields, 400 for bytes
/// that are not an HTTP/1.x request head (found as soon as they arrive:
/// a TLS handshake is refused at its first byte, not after [`TIMEOUT`]).
fn read_head(inbuf: &[u8], req: &mut RequestHead) -> Option<Result<usize, u16>> {
    let end = HeadScanner::new().find_end(inbuf);
    let head = match end {
        Some(len) if len > MAX_HEAD => return Some(Err(431)),
        Some(len) => inbuf.get(..len).unwrap_or_default(),
        None if inbuf.len() > MAX_HEAD => return Some(Err(431)),
        None => inbuf,
    };
    match req.parse_into(head, 64) {
        Ok(Some(_)) => Some(Ok(head.len())),
        Ok(None) if end.is_none() => None,
        Ok(None) => Some(Err(400)),
        Err(ParseError::TooManyFields) => Some(Err(431)),
        Err(_) => Some(Err(400)),
    }
}

/// The body of the admin's refusal with `status`.
fn refusal(status: u16) -> &'static str {
    match status {
        431 => "request head too large\n",
        _ => "bad request\n",
    }
}

/// Reads and drops what the client still sends after the answer. `Ok(true)`
/// once it closed (or sent more than [`LINGER_MAX`] bytes).
fn linger(c: &mut AdminConn) -> io::Result<bool> {
    let mut chunk = [0u8; 2048];
    loop {
        match c.stream.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                c.dropped = c.dropped.saturating_add(n);
                if c.dropped > LINGER_MAX {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Status, content type and body for an admin request.
fn route(
    req: &RequestHead,
    obs: &Observer,
    draining: bool,
    tier: &dyn Tier,
) -> (u16, &'static str, String) {
    if !req.is_method("GET") && !req.is_method("HEAD") {
        return (405, TEXT, "only GET and HEAD\n".into());
    }
    let path = req.target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => (
            200,
            expose::CONTENT_TYPE,
            expose::metrics_text(obs, &tier.workers(obs.slot), &tier.certificates()),
        ),
        "/healthz" => (200, TEXT, "ok\n".into()),
        "/readyz" if !expose::group_ready(obs, draining) => (503, TEXT, "draining\n".into()),
        "/readyz" => (200, TEXT, "ready\n".into()),
        "/status" => (
            200,
            "application/json",
            expose::status_json(obs, &tier.workers(obs.slot), &tier.certificates()),
        ),
        _ => (
            404,
            TEXT,
            "not found: /metrics, /healthz, /readyz, /status\n".into(),
        ),
    }
}

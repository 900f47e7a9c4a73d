//! Active health checks (ARCHITECTURE.md §13): each server of a group with
//! a `health_check` gets one small request (`GET` or `HEAD` of `path`,
//! with the check's `host` and `headers`) every `interval`, from this
//! loop's thread, on a socket of its own (token kind `Check`): a
//! non-blocking connect, the request, the status line read (and with
//! `expect_body` the body, up to `MAX_CHECK_BODY` bytes), all bounded by
//! `timeout`. The first check of a server is placed at a random point of
//! the interval and each later one `interval` ± 10 % after the last, so
//! N servers (and N workers, which each check on their own) do not probe
//! in lockstep. A result goes to `Groups::check_result` (rise/fall) with
//! what it saw (`status 404`, `timeout after 500ms`, `connect refused`).
//! One probe is moved along, and its answer read until it decides, in
//! `check/advance.rs`; this file keeps the schedule, the sockets' slab
//! and what a result does.
//!
//! A server of a TLS group is checked over TLS, with the group's client
//! configuration and server name (`check/tls.rs`): a certificate that
//! would fail a request fails the check.
//!
//! A check socket counts in the loop's descriptor budget while it is in
//! flight, and a check the proxy could not start for want of local
//! resources (no descriptor left in the budget, `EMFILE`, `ENFILE`,
//! `ENOBUFS`, `EADDRNOTAVAIL`, `ENOMEM` at connect) is *no result*: it is
//! counted in `health_checks_skipped`, tried again at the next interval,
//! and says nothing about the server.
//!
//! What it must not know: exchanges, the pool, client connections.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::net::TcpStream;
use mio::{Interest, Registry};
use slab::Slab;

use crate::event_loop::token::{ConnId, Generations, Kind};
use crate::stats::Stats;
use crate::tls::identity::TlsIdentity;
use crate::upstreams::Groups;
use crate::upstreams::health::Change;
use crate::upstreams::spec::{HealthCheck, ProxyVersion};

mod advance;
mod tls;

use advance::advance;
use tls::CheckTls;

/// What one check is sent with: group, server, the PROXY header (empty:
/// none), request bytes, the `expect_body` text, and the group's TLS
/// identity for a TLS group.
type ProbeSpec = (
    usize,
    SocketAddr,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Option<TlsIdentity>,
);

/// One check in flight.
#[derive(Debug)]
struct Probe {
    stream: TcpStream,
    generation: u32,
    group: usize,
    addr: SocketAddr,
    deadline: Instant,
    /// The check's timeout (for the result's words).
    timeout: Duration,
    connected: bool,
    /// The PROXY header still to write on the socket itself, before the
    /// request and before a TLS group's ClientHello (the header is below
    /// TLS, as on the group's request connections).
    preface: Vec<u8>,
    request: Vec<u8>,
    written: usize,
    answer: Vec<u8>,
    /// A substring the body must hold, if the check says so.
    expect_body: Option<Vec<u8>>,
    /// The session of a TLS group's check.
    tls: Option<Box<CheckTls>>,
}

/// What one check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A status line (and, with `expect_body`, whether the body held it).
    Status(u16, Option<bool>),
    /// The socket failed or the answer was not HTTP.
    Failed(String),
}

/// When a server is checked next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Due {
    group: usize,
    addr: SocketAddr,
    at: Instant,
    /// A check of it is in flight.
    busy: bool,
}

/// The checks of all groups: the schedule and the sockets in flight.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    probes: Slab<Probe>,
    generations: Generations,
    schedule: Vec<Due>,
    rng: u64,
    /// Rate limit of the "no result" line (one a second, with a count).
    skip_log: crate::warn_limit::WarnLimit,
}

impl Checks {
    /// No checks yet; [`Checks::sync`] schedules them.
    pub(crate) fn new() -> Self {
        let seed = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
        Checks {
            rng: seed | 1,
            ..Checks::default()
        }
    }

    fn random(&mut self) -> u64 {
        // xorshift64: jitter only, not security.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// A random span in `0..span`.
    fn jitter(&mut self, span: Duration) -> Duration {
        let ms = span.as_millis().max(1) as u64;
        Duration::from_millis(self.random() % ms)
    }

    /// Brings the schedule in line with the groups' servers (after start
    /// or a DNS change): new servers get a first check at a random point
    /// of the interval, removed ones are dropped.
    pub(crate) fn sync(&mut self, groups: &Groups, now: Instant) {
        let mut want: Vec<(usize, SocketAddr, Duration)> = Vec::new();
        for (g, group) in groups.iter() {
            if let Some(hc) = groups.health_check(g) {
                want.extend(group.addrs().map(|a| (g, a, hc.interval)));
            }
        }
        self.schedule
            .retain(|d| want.iter().any(|(g, a, _)| *g == d.group && *a == d.addr));
        for (g, addr, interval) in want {
            if !self.schedule.iter().any(|d| d.group == g && d.addr == addr) {
                let at = now + self.jitter(interval);
                self.schedule.push(Due {
                    group: g,
                    addr,
                    at,
                    busy: false,
                });
            }
        }
    }

    /// The earliest time [`Checks::on_time`] has work: a check due or a
    /// probe's timeout.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let due = self.schedule.iter().filter(|d| !d.busy).map(|d| d.at);
        let timeouts = self.probes.iter().map(|(_, p)| p.deadline);
        due.chain(timeouts).min()
    }

    /// Check sockets in flight (each one descriptor of the loop's budget).
    pub(crate) fn in_flight(&self) -> usize {
        self.probes.len()
    }

    /// Starts the checks due at `now` and times out the probes past their
    /// deadline. `room`: descriptors left in the loop's budget; a check
    /// due with none left is skipped (no result). `tls_of`: a server's
    /// TLS identity by group and the server's index in it
    /// (`conn::server_tls`; `None`: plain). Returns the servers that went out (their
    /// idle pooled connections are closed by the caller).
    pub(crate) fn on_time(
        &mut self,
        now: Instant,
        groups: &mut Groups,
        registry: &Registry,
        stats: &Stats,
        (mut room, tls_of): (usize, &dyn Fn(usize, Option<usize>) -> Option<TlsIdentity>),
    ) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        let late: Vec<usize> = self
            .probes
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k)
            .collect();
        for key in late {
            let Some(p) = self.probes.get(key) else {
                continue;
            };
            let seen = Seen::Failed(format!("timeout after {}ms", p.timeout.as_millis()));
            debug!("health check of {}: timed out", p.addr);
            self.finish(key, seen, now, groups, stats, &mut out);
            room += 1;
        }
        for i in 0..self.schedule.len() {
            let Some(d) = self.schedule.get(i).copied() else {
                continue;
            };
            if d.busy || d.at > now {
                continue;
            }
            let Some(hc) = groups.health_check(d.group) else {
                continue;
            };
            let timeout = hc.timeout;
            let expect_body = hc.expect_body.clone().map(String::into_bytes);
            let mut preface = Vec::new();
            if let Some(v) = groups.get(d.group).and_then(|g| g.spec.send_proxy_protocol) {
                // HAProxy sends the PROXY header on checks of a server
                // that gets it on traffic; a check has no client: LOCAL.
                crate::proxy_protocol::write::local(v == ProxyVersion::V2, &mut preface);
            }
            let request = request_bytes(hc, &groups.check_host(d.group, d.addr));
            if room == 0 {
                self.skip(
                    d.group,
                    d.addr,
                    "no descriptor left in the budget",
                    now,
                    groups,
                    stats,
                );
                continue;
            }
            if let Some(s) = self.schedule.get_mut(i) {
                s.busy = true;
            }
            let probe = (
                d.group,
                d.addr,
                preface,
                request,
                expect_body,
                tls_of(d.group, groups.origin_of(d.group, d.addr)),
            );
            match self.start(probe, now + timeout, timeout, registry) {
                Ok(()) => room -= 1,
                Err(e) if local_shortage(&e) => {
                    self.skip(d.group, d.addr, &e.to_string(), now, groups, stats);
                }
                Err(e) => {
                    debug!("health check of {}: connect failed at once: {e}", d.addr);
                    let seen = Seen::Failed(connect_words(&e));
                    self.record(d.group, d.addr, seen, now, groups, stats, &mut out);
                }
            }
        }
        out
    }

    /// A check of `addr` that could not start for want of local resources:
    /// no result, counted, the next one an interval later.
    fn skip(
        &mut self,
        group: usize,
        addr: SocketAddr,
        why: &str,
        now: Instant,
        groups: &Groups,
        st: &Stats,
    ) {
        Stats::add(&st.health_checks_skipped, 1);
        if let Some(more) = self.skip_log.allow(now) {
            warn!("health check of {addr}: no result ({why}): the server keeps its state{more}");
        }
        self.reschedule(group, addr, now, groups);
    }

    fn start(
        &mut self,
        (group, addr, preface, request, expect_body, tls): ProbeSpec,
        deadline: Instant,
        timeout: Duration,
        registry: &Registry,
    ) -> io::Result<()> {
        let tls = tls.map(|id| CheckTls::new(&id).map(Box::new)).transpose()?;
        let mut stream = TcpStream::connect(addr)?;
        let generation = self.generations.next();
        let entry = self.probes.vacant_entry();
        let token = ConnId::new(entry.key(), generation).token(Kind::Check);
        registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        entry.insert(Probe {
            stream,
            generation,
            group,
            addr,
            deadline,
            timeout,
            connected: false,
            preface,
            request,
            written: 0,
            answer: Vec::with_capacity(128),
            expect_body,
            tls,
        });
        Ok(())
    }

    /// An event for check socket `id`: advances it; returns the servers
    /// that went out.
    pub(crate) fn on_event(
        &mut self,
        id: ConnId,
        now: Instant,
        groups: &mut Groups,
        stats: &Stats,
    ) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        let Some(p) = self
            .probes
            .get_mut(id.key())
            .filter(|p| p.generation == id.generation())
        else {
            return out;
        };
        match advance(p) {
            Ok(None) => {}
            Ok(Some(seen)) => {
                debug!("health check of {}: {seen:?}", p.addr);
                self.finish(id.key(), seen, now, groups, stats, &mut out);
            }
            Err(e) => {
                debug!("health check of {}: {e}", p.addr);
                let words = if p.connected {
                    io_words(&e)
                } else {
                    connect_words(&e)
                };
                self.finish(id.key(), Seen::Failed(words), now, groups, stats, &mut out);
            }
        }
        out
    }

    fn finish(
        &mut self,
        key: usize,
        seen: Seen,
        now: Instant,
        groups: &mut Groups,
        stats: &Stats,
        out: &mut Vec<SocketAddr>,
    ) {
        let Some(p) = self.probes.try_remove(key) else {
            return;
        };
        self.record(p.group, p.addr, seen, now, groups, stats, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        group: usize,
        addr: SocketAddr,
        seen: Seen,
        now: Instant,
        groups: &mut Groups,
        stats: &Stats,
        out: &mut Vec<SocketAddr>,
    ) {
        let hc = groups.health_check(group);
        let (ok, words) = match &seen {
            Seen::Status(code, body) => {
                let status_ok = hc.is_some_and(|hc| hc.expect_status.contains(*code));
                match body {
                    Some(false) => (false, format!("status {code}, body without expect_body")),
                    _ => (status_ok, format!("status {code}")),
                }
            }
            Seen::Failed(w) => (false, w.clone()),
        };
        Stats::add(&stats.health_checks, 1);
        if !ok {
            Stats::add(&stats.health_checks_failed, 1);
        }
        if groups.check_result(group, addr, ok, &words, now) == Some(Change::Out) {
            Stats::add(&stats.servers_marked_down, 1);
            out.push(addr);
        }
        self.reschedule(group, addr, now, groups);
    }

    /// The next check of `addr`: `interval` ± 10 % from `now`.
    fn reschedule(&mut self, group: usize, addr: SocketAddr, now: Instant, groups: &Groups) {
        let interval = groups
            .health_check(group)
            .map_or(Duration::from_secs(5), |hc| hc.interval);
        // interval ± 10 %.
        let spread = self.jitter(interval / 5);
        let next = now + interval - interval / 10 + spread;
        if let Some(d) = self
            .schedule
            .iter_mut()
            .find(|d| d.group == group && d.addr == addr)
        {
            d.busy = false;
            d.at = next;
        }
    }

    /// Closes every check in flight (drain, stop).
    pub(crate) fn close_all(&mut self) {
        self.probes.clear();
        self.schedule.clear();
    }
}

/// The request a check of `hc` sends with `Host: host`.
fn request_bytes(hc: &HealthCheck, host: &str) -> Vec<u8> {
    let mut r = format!(
        "{} {} HTTP/1.1\r\nHost: {host}\r\n",
        hc.method.as_str(),
        hc.path
    );
    if !hc
        .headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("user-agent"))
    {
        r.push_str("User-Agent: sluice-health-check\r\n");
    }
    for (name, value) in &hc.headers {
        r.push_str(&format!("{name}: {value}\r\n"));
    }
    r.push_str("Connection: close\r\n\r\n");
    r.into_bytes()
}

/// A connect error caused by this host's lack of resources, not by the
/// server: no result.
fn local_shortage(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::EADDRNOTAVAIL | libc::ENOMEM)
    )
}

/// The words for a failed connect: `connect refused`, `connect failed: …`.
fn connect_words(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connect refused".into(),
        _ => format!("connect failed: {}", io_words(e)),
    }
}

/// The words for a socket error after the connect.
fn io_words(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset => "reset".into(),
        // A TLS failure says why (`TLS handshake: invalid peer
        // certificate: …`).
        io::ErrorKind::InvalidData if e.get_ref().is_some() => e.to_string(),
        k => k.to_string(),
    }
}

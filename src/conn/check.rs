//! Active health checks (ARCHITECTURE.md §13): each server of a group with
//! a `health_check` gets one small `GET` every `interval`, from this
//! loop's thread, on a socket of its own (token kind `Check`): a
//! non-blocking connect, the request, the status line read, all bounded by
//! `timeout`. The first check of a server is placed at a random point of
//! the interval and each later one `interval` ± 10 % after the last, so
//! N servers (and N workers, which each check on their own) do not probe
//! in lockstep. A result goes to `Groups::check_result` (rise/fall).
//!
//! What it must not know: exchanges, the pool, client connections.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::debug;
use mio::net::TcpStream;
use mio::{Interest, Registry};
use slab::Slab;

use crate::event_loop::token::{ConnId, Generations, Kind};
use crate::stats::Stats;
use crate::upstreams::Groups;
use crate::upstreams::health::Change;

/// Most bytes of an answer read to find its status line.
const MAX_STATUS_LINE: usize = 1024;

/// One check in flight.
#[derive(Debug)]
struct Probe {
    stream: TcpStream,
    generation: u32,
    group: usize,
    addr: SocketAddr,
    deadline: Instant,
    connected: bool,
    request: Vec<u8>,
    written: usize,
    answer: Vec<u8>,
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

    /// Starts the checks due at `now` and times out the probes past their
    /// deadline. Returns the servers that went out (their idle pooled
    /// connections are closed by the caller).
    pub(crate) fn on_time(
        &mut self,
        now: Instant,
        groups: &mut Groups,
        registry: &Registry,
        stats: &Stats,
    ) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        let late: Vec<usize> = self
            .probes
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k)
            .collect();
        for key in late {
            debug!("health check: timed out");
            self.finish(key, false, now, groups, stats, &mut out);
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
            let (timeout, host) = (hc.timeout, d.addr.to_string());
            let request = format!(
                "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sluice-health-check\r\n\
                 Connection: close\r\n\r\n",
                hc.path
            );
            if let Some(s) = self.schedule.get_mut(i) {
                s.busy = true;
            }
            if let Err(e) = self.start(
                d.group,
                d.addr,
                request.into_bytes(),
                now + timeout,
                registry,
            ) {
                debug!("health check of {}: connect failed at once: {e}", d.addr);
                self.record(d.group, d.addr, false, now, groups, stats, &mut out);
            }
        }
        out
    }

    fn start(
        &mut self,
        group: usize,
        addr: SocketAddr,
        request: Vec<u8>,
        deadline: Instant,
        registry: &Registry,
    ) -> io::Result<()> {
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
            connected: false,
            request,
            written: 0,
            answer: Vec::with_capacity(128),
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
            Ok(Some(status)) => {
                let ok = groups
                    .health_check(p.group)
                    .is_some_and(|hc| hc.expect_status.contains(status));
                debug!("health check of {}: status {status}", p.addr);
                self.finish(id.key(), ok, now, groups, stats, &mut out);
            }
            Err(e) => {
                debug!("health check of {}: {e}", p.addr);
                self.finish(id.key(), false, now, groups, stats, &mut out);
            }
        }
        out
    }

    fn finish(
        &mut self,
        key: usize,
        ok: bool,
        now: Instant,
        groups: &mut Groups,
        stats: &Stats,
        out: &mut Vec<SocketAddr>,
    ) {
        let Some(p) = self.probes.try_remove(key) else {
            return;
        };
        self.record(p.group, p.addr, ok, now, groups, stats, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        group: usize,
        addr: SocketAddr,
        ok: bool,
        now: Instant,
        groups: &mut Groups,
        stats: &Stats,
        out: &mut Vec<SocketAddr>,
    ) {
        Stats::add(&stats.health_checks, 1);
        if !ok {
            Stats::add(&stats.health_checks_failed, 1);
        }
        if groups.check_result(group, addr, ok) == Some(Change::Out) {
            Stats::add(&stats.servers_marked_down, 1);
            out.push(addr);
        }
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

/// Moves one probe along: connect, write, read. `Some(status)` once the
/// status line arrived.
///
/// Errors: the connect failed, the socket failed or closed before a status
/// line, or the answer is not HTTP.
fn advance(p: &mut Probe) -> io::Result<Option<u16>> {
    if !p.connected {
        if let Some(e) = p.stream.take_error()? {
            return Err(e);
        }
        match p.stream.peer_addr() {
            Ok(_) => p.connected = true,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    while p.written < p.request.len() {
        match p.stream.write(p.request.get(p.written..).unwrap_or(&[])) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => p.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut buf = [0u8; 512];
    loop {
        match p.stream.read(&mut buf) {
            Ok(0) => return status_of(&p.answer).map(Some),
            Ok(n) => {
                p.answer.extend_from_slice(buf.get(..n).unwrap_or(&[]));
                if p.answer.contains(&b'\n') || p.answer.len() >= MAX_STATUS_LINE {
                    return status_of(&p.answer).map(Some);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The status code of an answer's status line (`HTTP/1.x NNN ...`).
///
/// Errors: `InvalidData` if the bytes do not start with a status line.
pub(crate) fn status_of(answer: &[u8]) -> io::Result<u16> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not an HTTP status line");
    let rest = answer.strip_prefix(b"HTTP/1.").ok_or_else(bad)?;
    let code = rest.get(2..5).ok_or_else(bad)?;
    if rest.get(1) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)
}

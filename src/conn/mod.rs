//! Connection state machines (ARCHITECTURE.md §2): one owner per socket,
//! one exchange per request.
//!
//! - [`client`]: the client connection machine (heads, keep-alive,
//!   closing); it runs one exchange at a time.
//! - [`upstream`]: the upstream connection machine (connecting → active →
//!   idle in the pool → closed) and the set of all upstream connections.
//! - [`exchange`]: one request/response pair: request half, response half,
//!   the reuse and retry verdicts, one teardown.
//! - [`begin`]: starting a request whatever protocol brought it: plan,
//!   hooks, [`edge`] rules, the server ([`choose`]) and its connection;
//!   the retry of a failed try; the upstream's release.
//! - [`own_reply`]: the record of a request the proxy answered itself.
//! - [`relay`]: one pump per direction and the relay policy.
//! - [`response_head`]: a response head from the upstream, planned,
//!   filtered and queued.
//! - [`access`]: the access-log record.
//! - [`check`]: active health checks of group servers (their own sockets).
//! - [`io`]: readiness flags and one read or write per call.
//!
//! What it must not know: how the loop schedules (the loop calls `drive`,
//! `on_timer`, `close`; a client machine never sees its slot's generation,
//! queue flag or armed deadline, only its opaque id).

pub(crate) mod access;
pub(crate) mod begin;
pub(crate) mod check;
pub(crate) mod choose;
pub(crate) mod client;
pub(crate) mod edge;
pub(crate) mod exchange;
pub(crate) mod failed_try;
pub(crate) mod h2;
pub(crate) mod io;
pub(crate) mod own_reply;
pub(crate) mod relay;
pub(crate) mod response_body;
pub(crate) mod response_head;
pub(crate) mod transport;
pub(crate) mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use log::trace;
use mio::Registry;

use crate::access_log::AccessLog;
use crate::buffer::BufferPool;
use crate::config::Config;
use crate::filter::{Filter, Peer};
use crate::http::date::HttpDate;
use crate::pool::IdlePool;
use crate::stats::Stats;
use crate::tls::identity::{TlsId, TlsIdentities};
use crate::upstreams::Groups;
use crate::upstreams::carry::{CarriedLimit, Snapshot};
use crate::upstreams::health::{Change, Verdict};
use crate::warn_limit::{WarnLimit, WarnLimits};
use check::Checks;
use exchange::Exchange;
use upstream::Upstreams;

/// Everything a connection may touch besides itself, owned by the loop.
pub(crate) struct Shared {
    /// The process's settings.
    pub cfg: Config,
    /// The user's hooks.
    pub filter: Box<dyn Filter + Send>,
    /// The poll's registry (a clone), for interest changes.
    pub registry: Registry,
    /// Free list of buffers; the buffers count themselves in `stats`.
    pub bufs: BufferPool,
    /// Upstream connections and the idle pool.
    pub ups: Upstreams,
    /// Upstream groups: servers, balancing, health, routes.
    pub groups: Groups,
    /// Active health checks of the groups' servers.
    pub checks: Checks,
    /// Counters.
    pub stats: Arc<Stats>,
    /// The time the current batch of events is handled at.
    pub now: Instant,
    /// When the current batch of events is taken to have arrived: `now`
    /// if the poll waited for them, else the previous batch's `now` (a
    /// busy loop's latency is not charged to a peer; issue 14).
    pub events_at: Instant,
    /// The access log's buffer and output.
    pub access: AccessLog,
    /// Rate limit of the warnings about upstream failures.
    pub warn_limit: WarnLimits,
    /// Rate limit of the retry lines (one a second, with a count).
    pub retry_log: WarnLimit,
    /// The `Date` value of the current loop turn (RFC 9110 §6.6.1),
    /// formatted at most once per second.
    pub date: HttpDate,
    /// The pseudonym this proxy writes in `Via` and looks for to detect a
    /// loop ([`via_pseudonym`]).
    pub via_name: String,
    /// Finished exchanges kept for reuse, so the steady path allocates no
    /// exchange, head or encode buffer per request (at most `MAX_SPARE`).
    /// Boxed: a connection holds its exchange as a `Box`, which moves here
    /// and back without copying the struct.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Exchange>>,
    /// The TLS identities of this loop's upstream peers (`Peer::tls`).
    pub tls_ids: TlsIdentities,
    /// The TLS listener's certificates, for `/status` and `/metrics`.
    pub(crate) cert_store: Option<std::sync::Arc<crate::tls::sni::CertStore>>,
    /// Each group's TLS identities (by group index), one per server as
    /// declared (by its index in `servers`); empty for a plain group.
    pub(crate) group_tls: Vec<Vec<TlsId>>,
    /// The fewest spares held since the last trim: that many were never
    /// needed, and [`Shared::trim_spare`] drops them.
    spare_low: usize,
    /// Each route's `rate_limit` table (by route index; `None`: no limit).
    pub rates: Vec<Option<crate::rate_limit::RateLimiter>>,
    /// Open connections per client address (`max_connections_per_client`).
    pub conns: crate::conn_limit::ConnCounts,
    /// The zero of the rate tables' clock (their times are ns since it).
    pub epoch: Instant,
    /// New `X-Request-Id` values.
    pub ids: crate::request_id::RequestIds,
    /// This loop's seat at the workers' tier board (`--workers N`; `None`
    /// in a single process).
    pub(crate) board: Option<crate::tier_board::Share>,
}

/// Most free body buffers kept for reuse (each `high_watermark` bytes).
const MAX_FREE_BUFFERS: usize = 256;

/// Most finished exchanges kept for reuse (each a few hundred bytes plus
/// the storage of the largest heads it held). Above the exchanges one loop
/// turn may finish at 512 keep-alive clients, so a busy loop recycles
/// instead of building new ones (issue 11: at a cap of 256, half of the
/// requests at 512 clients got a fresh exchange and regrew its buffers);
/// what a period did not need is trimmed.
const MAX_SPARE: usize = 1024;

impl Shared {
    /// Assembles the shared state: fresh counters, a free list of body
    /// buffers counted in them, and an empty set of upstream connections
    /// over `pool`.
    pub(crate) fn new(
        cfg: Config,
        filter: Box<dyn Filter + Send>,
        registry: Registry,
        pool: IdlePool<Peer>,
        groups: Groups,
        access: AccessLog,
    ) -> Self {
        let stats = Arc::new(Stats::default());
        let bufs = BufferPool::new(cfg.high_watermark, MAX_FREE_BUFFERS, stats.clone());
        let ups = Upstreams::new(pool);
        let mut checks = Checks::new();
        let now = Instant::now();
        checks.sync(&groups, now);
        let rates = cfg
            .route
            .iter()
            .map(|r| {
                r.rate_limit.map(|l| {
                    crate::rate_limit::RateLimiter::new(
                        l.requests_per_second,
                        l.burst,
                        crate::rate_limit::TABLE_CAPACITY,
                    )
                })
            })
            .collect();
        Shared {
            rates,
            conns: crate::conn_limit::ConnCounts::default(),
            epoch: now,
            ids: crate::request_id::RequestIds::new(),
            board: None,
            cfg,
            filter,
            registry,
            bufs,
            ups,
            groups,
            checks,
            stats,
            now,
            events_at: now,
            access,
            warn_limit: WarnLimits::default(),
            retry_log: WarnLimit::default(),
            date: HttpDate::new(SystemTime::now()),
            via_name: String::new(),
            spare: Vec::new(),
            spare_low: 0,
            tls_ids: TlsIdentities::new(),
            cert_store: None,
            group_tls: Vec::new(),
        }
    }

    /// Interns the TLS identities of every TLS group (issue 23, item 7):
    /// its client configuration (trust, client certificate, ALPN
    /// `http/1.1`, session resumption) with, for each server, its server
    /// name: `tls_server_name`, or else the host that server was declared
    /// with (an IP literal is verified as an IP). Peers picked from a
    /// group carry their server's ([`Shared::peer_in`]).
    ///
    /// Errors: a CA or client certificate file that cannot be loaded, a
    /// server name that is not one.
    pub(crate) fn intern_tls_groups(&mut self) -> Result<(), crate::tls::TlsError> {
        self.group_tls.clear();
        for g in &self.cfg.upstream {
            let mut ids = Vec::new();
            if let Some(profile) = crate::tls::client::UpstreamTls::of_group(g) {
                for s in g.servers.get_ref() {
                    let host = g.tls_server_name.as_deref().unwrap_or(&s.host);
                    ids.push(self.tls_ids.intern(&profile, host)?);
                }
            }
            self.group_tls.push(ids);
        }
        Ok(())
    }

    /// The peer for server `addr` of group `g`: with that server's TLS
    /// identity if the group speaks TLS.
    pub(crate) fn peer_in(&self, g: usize, addr: std::net::SocketAddr) -> Peer {
        Peer {
            addr,
            tls: self.tls_of(g, addr),
        }
    }

    /// The TLS identity of server `addr` of group `g` (`None`: a plain
    /// group). An address no declared server has now (a DNS change in
    /// flight) gets the first server's.
    pub(crate) fn tls_of(&self, g: usize, addr: std::net::SocketAddr) -> Option<TlsId> {
        server_tls(&self.group_tls, g, self.groups.origin_of(g, addr))
    }

    /// A request to server `addr` of group `g` ended with `verdict`
    /// (passive health, ARCHITECTURE.md §13); an ejected server's idle
    /// pooled connections are closed. `answer`: the upstream's status (0:
    /// none) and the time to its first byte.
    pub(crate) fn report(
        &mut self,
        g: usize,
        addr: std::net::SocketAddr,
        verdict: Verdict,
        answer: (u16, Option<std::time::Duration>),
    ) {
        if self.groups.release(g, addr, verdict, answer, self.now) == Some(Change::Out) {
            Stats::add(&self.stats.ejections, 1);
            self.server_out(addr);
        }
    }

    /// Server `addr` was taken out (ejected, marked down, or gone from
    /// DNS): its idle pooled connections are closed; in-flight exchanges
    /// on it finish.
    pub(crate) fn server_out(&mut self, addr: std::net::SocketAddr) {
        for peer in self.peers_at(addr) {
            self.ups.close_idle_to(peer, &self.stats);
        }
    }

    /// Every peer a connection to `addr` may have: plain, and with each
    /// TLS identity of this loop's groups.
    fn peers_at(&self, addr: std::net::SocketAddr) -> Vec<Peer> {
        let mut ids: Vec<_> = self.group_tls.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        std::iter::once(None)
            .chain(ids.into_iter().map(Some))
            .map(|tls| Peer { addr, tls })
            .collect()
    }

    /// Idle pooled connections to `addr` (plain and TLS).
    pub(crate) fn idle_at(&self, addr: std::net::SocketAddr) -> usize {
        self.peers_at(addr)
            .iter()
            .map(|p| self.ups.idle_to(p))
            .sum()
    }

    /// Every server's health and the pool's learned idle limits, now (for
    /// a successor, or the other workers: `upstreams::carry`).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let now = self.now;
        let servers = self.groups.snapshot(now, |a| self.idle_at(a));
        let idle_limits = self
            .ups
            .export_limits(now)
            .into_iter()
            .map(|(peer, learned)| CarriedLimit {
                addr: peer.addr,
                tls: peer.tls.is_some(),
                learned,
            })
            .collect();
        Snapshot {
            servers,
            idle_limits,
        }
    }

    /// Takes over `old` (a snapshot taken `later` ago): the health of the
    /// servers this configuration has too, and what was learned of their
    /// idle limits (a TLS peer's for each group that has the address, by
    /// its identity here). Returns the servers and peers taken over, and
    /// the servers not up (`app 127.0.0.1:8002 checked_down`).
    pub(crate) fn adopt(
        &mut self,
        old: &Snapshot,
        later: std::time::Duration,
    ) -> (usize, usize, Vec<String>) {
        let now = self.now;
        let (n, out) = self.groups.adopt(&old.servers, later, now);
        let mut limits = 0;
        for l in &old.idle_limits {
            let peers: Vec<Peer> = if l.tls {
                self.groups
                    .servers_at(l.addr)
                    .into_iter()
                    .filter_map(|g| self.tls_of(g, l.addr))
                    .map(|t| Peer {
                        addr: l.addr,
                        tls: Some(t),
                    })
                    .collect()
            } else {
                vec![Peer::new(l.addr)]
            };
            for p in peers {
                self.ups.import_limit(p, &l.learned, later, now);
                limits += 1;
            }
        }
        (n, limits, out)
    }

    /// Applies the workers' modes table (`tier_board`): every server's
    /// mode as it says; a server taken out loses its idle pooled
    /// connections.
    pub(crate) fn apply_modes(&mut self, table: &[crate::tier_board::share::ModeEntry]) {
        for (addr, old, new) in self.groups.apply_modes(table) {
            log::debug!(
                "{addr}: {} -> {} (the workers' modes table)",
                old.name(),
                new.name()
            );
            if new != crate::upstreams::health::Mode::Ready {
                self.server_out(addr);
            }
        }
    }

    /// What the relay's pumps use, with the upstream connections and the
    /// hooks beside it (borrowed apart, so a pump can hold an upstream
    /// connection too).
    pub(crate) fn split(&mut self) -> (relay::Env<'_>, &mut Upstreams, &dyn Filter) {
        let env = relay::Env {
            cfg: &self.cfg,
            bufs: &mut self.bufs,
            stats: &self.stats,
            now: self.now,
            date: &self.date,
        };
        (env, &mut self.ups, self.filter.as_ref())
    }

    /// An exchange to parse the next request into: a recycled one if any.
    pub(crate) fn take_exchange(&mut self) -> Box<Exchange> {
        let ex = self
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(Exchange::blank(self.now)));
        self.spare_low = self.spare_low.min(self.spare.len());
        ex
    }

    /// Drops the spare exchanges the last period never took (called with
    /// the buffer trim, every `buffer::TRIM_EVERY`). Returns how many.
    pub(crate) fn trim_spare(&mut self) -> usize {
        // The TLS record storages this loop's thread did not use.
        let records = transport::trim_records();
        self.bufs.freed_elsewhere(records);
        let drop = self.spare_low.min(self.spare.len());
        self.spare.truncate(self.spare.len() - drop);
        self.spare.shrink_to_fit();
        self.spare_low = self.spare.len();
        drop
    }

    /// True when [`Shared::trim_spare`] (spare exchanges, TLS record
    /// storages) or the buffer trim could free
    /// something (the loop wakes for a trim only then).
    pub(crate) fn may_trim(&self) -> bool {
        self.bufs.may_trim() || !self.spare.is_empty() || transport::may_trim_records()
    }

    /// Keeps a finished exchange for reuse (its buffers and upstream must
    /// already be gone).
    pub(crate) fn recycle_exchange(&mut self, ex: Box<Exchange>) {
        debug_assert!(ex.upstream.is_none() && ex.to_upstream.is_none() && ex.upin.is_none());
        if self.spare.len() < MAX_SPARE && ex.upstream.is_none() {
            self.spare.push(ex);
        }
    }
}

/// Counts a client connection in `downstream_idle` while it is idle, once:
/// `counted` is the connection's own note of whether it is counted now
/// (HTTP/1 and HTTP/2 machines alike).
pub(crate) fn count_downstream_idle(counted: &mut bool, idle: bool, stats: &Stats) {
    if idle != *counted {
        *counted = idle;
        if idle {
            Stats::add(&stats.downstream_idle, 1);
        } else {
            Stats::sub(&stats.downstream_idle, 1);
        }
    }
}

/// The `Via` pseudonym (`--via-name`): `configured` if set, else
/// `sluice-` and 8 hex digits hashed (FNV-1a) from the host name and the
/// address the proxy listens on, so every worker of one instance shares
/// it, and two instances on one host (different ports) differ.
pub(crate) fn via_pseudonym(configured: &str, listen: SocketAddr) -> String {
    if !configured.is_empty() {
        return configured.to_string();
    }
    let mut host = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) };
    let host_len = if rc == 0 {
        host.iter().position(|&b| b == 0).unwrap_or(host.len())
    } else {
        0
    };
    let listen = listen.to_string();
    let mut hash: u32 = 0x811c_9dc5;
    for &b in host
        .get(..host_len)
        .unwrap_or_default()
        .iter()
        .chain(b"/")
        .chain(listen.as_bytes())
    {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("sluice-{hash:08x}")
}

/// Whether a client connection may carry another request: one-way, true
/// until [`KeepAlive::clear`] (the only way it changes), which logs why.
#[derive(Debug)]
pub(crate) struct KeepAlive(bool);

impl KeepAlive {
    /// Keep-alive on (a new connection).
    pub(crate) fn new() -> Self {
        KeepAlive(true)
    }

    /// The connection may carry another request.
    pub(crate) fn get(&self) -> bool {
        self.0
    }

    /// No further request on this connection, because of `why`.
    pub(crate) fn clear(&mut self, why: &'static str) {
        if self.0 {
            trace!("keep-alive off: {why}");
            self.0 = false;
        }
    }
}

/// The TLS identity of server number `origin` (its index in `servers`;
/// `None`: no declared server has the address now, and the first one's
/// is taken) of group `g`, from each group's identities `group_tls`;
/// `None` for a plain group.
pub(crate) fn server_tls(
    group_tls: &[Vec<TlsId>],
    g: usize,
    origin: Option<usize>,
) -> Option<TlsId> {
    let ids = group_tls.get(g)?;
    ids.get(origin.unwrap_or(0)).or(ids.first()).copied()
}

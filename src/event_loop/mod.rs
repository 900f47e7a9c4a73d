//! The event loop: the only caller of `poll()`. It owns the listeners, the
//! client slab (`Slab<Entry>`: a `Client` with its generation, queue
//! flag and armed deadline), the timer heap of client deadlines, and
//! `Shared`, which holds the upstream connections (their own slab, in
//! `conn::upstream::Upstreams`) and the pool; it dispatches events to them.
//!
//! One turn: poll (timeout = earliest of the client deadlines, the pool's
//! next idle deadline, an accept pause and the drain deadline), record each
//! event's readiness and queue the client connection it concerns (an
//! upstream event goes to the client that owns the upstream connection),
//! drive every queued client once, fire due timers, expire idle pooled
//! connections, and resume accepting if it was paused. Client connections are freed only while
//! driving, after the batch's events were all recorded, and every token
//! carries a generation, so a stale event never reaches a reused slot.
//! The client slab's part of a turn (recording, driving, timers, parking)
//! is in `turn.rs`.
//!
//! What it must not know: HTTP; it calls the client machines' `drive`,
//! `on_timer` and `close`, and asks them for their next deadline.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use mio::{Events, Poll, Waker};
use slab::Slab;

use crate::access_log::AccessLog;
use crate::buffer::TRIM_EVERY;
use crate::config::Config;
use crate::conn::Shared;
use crate::conn::client::{Client, ClientConn};
use crate::filter::Filter;
use crate::metrics::Observer;
use crate::pool::IdlePool;
use crate::stats::Stats;
use crate::upstreams::dns::{Resolver, ResolverThread, SystemResolver};
use admin::Admin;
use fd_share::FdShare;
use listen::{Listener, fit_to_fd_limit, has_pending};
use park_later::ParkLater;
use timer::{Timers, poll_timeout};
use token::{ConnId, Generations};
use turn::queue;
use upstreams_setup::build_groups;

mod accept;
mod admin;
mod admin_write;
pub use admin_write::check_token_file;
mod board;
mod drain;
mod fd_share;
mod handle;
pub(crate) mod listen;
mod park_later;
mod timer;
pub(crate) mod token;
mod turn;

pub use handle::ServerHandle;
mod upstreams_setup;

/// How long accepting pauses after `EMFILE`/`ENFILE` (out of descriptors),
/// instead of spinning on a listener that stays readable.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How soon a loop looks again for room in the descriptor budget when the
/// other loops of the process hold it (they drain: it comes back).
const SHARED_RECHECK: Duration = Duration::from_millis(10);

/// A poll that took this long waited for its events (it did not return a
/// batch that was already there).
const POLL_WAITED: Duration = Duration::from_micros(100);

/// Shortest time between two "connection cap reached" warnings.
const CAP_WARN_EVERY: Duration = Duration::from_secs(10);

/// One slot of the client slab: the machine and the loop's bookkeeping
/// about it, which the machine never sees.
struct Entry {
    /// The client connection (parked while it waits, `conn::client::park`).
    conn: Client,
    /// Generation in its token (a reused slot gets a new one).
    generation: u32,
    /// Queued for a drive in this loop turn.
    queued: bool,
    /// Deadline last armed in the timer heap.
    armed: Option<Instant>,
    /// Listed in the loop's `park_later` (went idle live, not parked yet).
    park_listed: bool,
}

/// A bound proxy, ready to `run` on the current thread.
pub struct Server {
    poll: Poll,
    /// The listening sockets, in `token::listener` order: every `listen`
    /// address, then every `listen_tls` one (empty once a drain closed
    /// them).
    listeners: Vec<Listener>,
    /// The server configuration of the TLS listeners' connections.
    tls: Option<crate::tls::ServerTls>,
    local_addr: SocketAddr,
    clients: Slab<Entry>,
    generations: Generations,
    runnable: Vec<ConnId>,
    runnable_spare: Vec<ConnId>,
    /// Client connections that went idle live, parked a moment later.
    park_later: ParkLater,
    timers: Timers,
    sh: Shared,
    shutdown: Arc<AtomicBool>,
    drain: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
    /// `/readyz` says 503 while the loop still serves (SIGUSR2, a
    /// balancer's cue before the drain; docs/edge.md).
    unready: Arc<AtomicBool>,
    waker: Arc<Waker>,
    /// Set when a drain began: the time it must end by.
    drain_deadline: Option<Instant>,
    /// In a drain with `TCP_DEFER_ACCEPT`: when the listener closes
    /// (`drain::DEFERRED_GRACE` after the drain began).
    listener_close_at: Option<Instant>,
    accept_paused_until: Option<Instant>,
    at_capacity: bool,
    /// When the connection-cap warning was last logged (once per
    /// `CAP_WARN_EVERY`, not on every flap).
    cap_warned_at: Option<Instant>,
    /// The thread that re-resolves upstream host names (none if every
    /// server is an IP literal).
    resolver: Option<ResolverThread>,
    /// The admin listener and its connections, if `--admin` is set.
    admin: Option<Admin>,
    /// Where this loop publishes its numbers for the admin endpoints.
    obs: Option<Observer>,
    /// When the buffer free list is trimmed next (`BufferPool::trim`).
    next_trim: Instant,
    /// Descriptors for client and upstream sockets (`listen::FdBudget`).
    fd_budget: usize,
    /// This loop's part of the process-wide descriptor account.
    fd_share: FdShare,
    /// The accept `EMFILE` line: one a second.
    emfile_warn: crate::warn_limit::WarnLimit,
    /// A successor serves on this loop's listening socket: its drain
    /// closes only its own descriptor of it.
    handed_over: Arc<AtomicBool>,
    /// Where a successor asks for this loop's servers' health.
    carry: Arc<crate::upstreams::carry::CarrySlot>,
}

impl Server {
    /// Validates `config`, binds its `listen` address and prepares the loop.
    ///
    /// Errors: an invalid config (`InvalidInput`, naming the knob), or the
    /// bind/poll setup failed.
    pub fn bind(config: Config, filter: impl Filter + Send + 'static) -> io::Result<Server> {
        Self::bind_with_resolver(config, filter, Arc::new(SystemResolver))
    }

    /// [`Server::bind`] with host names of upstream servers resolved by
    /// `resolver` (at start on this thread, then on the resolver thread).
    ///
    /// Errors: as `bind`; also `InvalidInput` naming a host that does not
    /// resolve (unless its group has `resolve = "lazy"`).
    pub fn bind_with_resolver(
        config: Config,
        filter: impl Filter + Send + 'static,
        resolver: Arc<dyn Resolver>,
    ) -> io::Result<Server> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let obs = Observer::standalone(&config)?;
        Server::build(config, filter, obs, resolver, Vec::new())
    }

    /// Like [`Server::bind`], with the metrics region and admin listener
    /// given (a worker's, from [`Observer::from_env`]); `None`: no admin
    /// endpoints.
    ///
    /// Errors: as [`Server::bind`].
    pub fn bind_with(
        config: Config,
        filter: impl Filter + Send + 'static,
        obs: Option<Observer>,
    ) -> io::Result<Server> {
        Server::build(config, filter, obs, Arc::new(SystemResolver), Vec::new())
    }

    /// Like [`Server::bind_with`], for the loop that succeeds
    /// `predecessor` in this process (a reload with `--workers 1`): it
    /// serves on copies of the predecessor's listening sockets (listener
    /// `i` of the one is listener `i` of the other: a reload that changes
    /// `listen` or `listen_tls` is refused before this), so the accept
    /// queues are the same and nothing queued on them is reset when the
    /// predecessor drains (nginx's workers inherit their listeners the
    /// same way); no bind that could fail. Without a predecessor, or if it
    /// closed its listeners already, it binds as `bind_with` does.
    ///
    /// Errors: as [`Server::bind`].
    pub fn succeed(
        config: Config,
        filter: impl Filter + Send + 'static,
        obs: Option<Observer>,
        predecessor: Option<&ServerHandle>,
    ) -> io::Result<Server> {
        let inherited = match predecessor {
            Some(p) => p.listener_copies()?,
            None => Vec::new(),
        };
        let mut server = Server::build(config, filter, obs, Arc::new(SystemResolver), inherited)?;
        if let Some(p) = predecessor {
            p.handed_over.store(true, Ordering::SeqCst);
            // Health survives the reload (issue 27 item 4).
            if let Some((old, taken)) = p.health() {
                let later = Instant::now().saturating_duration_since(taken);
                server.take_over(&old, later, "reload", "");
            }
        }
        Ok(server)
    }

    /// Binds and assembles the loop: the listeners, the admin endpoints of
    /// `obs`, the upstream groups (host names resolved by `resolver`, and
    /// re-resolved on its thread), the pool, the buffers, the access log.
    /// `inherited`: a predecessor's listening sockets to serve on instead
    /// of binding (by listener index; `None` or missing: bind).
    fn build(
        config: Config,
        filter: impl Filter + Send + 'static,
        obs: Option<Observer>,
        resolver: Arc<dyn Resolver>,
        inherited: Vec<Option<std::net::TcpListener>>,
    ) -> io::Result<Server> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut config = config;
        let fd_share = FdShare::join();
        let budget = fit_to_fd_limit(config.max_connections);
        config.max_connections = budget.max_connections;
        // Before any bind: a bad token file is the configuration's fault
        // (exit 2, as `--check-config` says), whatever holds the ports.
        let write = admin_write::WriteAccess::from_config(&config)?;
        let poll = Poll::new()?;
        let inherits: Vec<bool> = inherited.iter().map(Option::is_some).collect();
        let (listeners, tls) = listen::open_listeners(&config, inherited, poll.registry())?;
        // The first plain address, else the first TLS one (there is one:
        // `open_listeners` refuses none).
        let local_addr = match listeners.first() {
            Some(l) => l.socket.local_addr()?,
            None => return Err(io::Error::other("no listener")),
        };
        let waker = Arc::new(Waker::new(poll.registry(), token::WAKER)?);
        let (admin, obs) = Admin::new(obs, poll.registry(), write)?;
        let registry = poll.registry().try_clone()?;
        let (groups, names) = build_groups(&config, resolver.as_ref())?;
        let resolver = if names.is_empty() {
            None
        } else {
            Some(ResolverThread::spawn(names, resolver, waker.clone())?)
        };
        let pool = IdlePool::new(
            config.pool_max_idle_per_peer,
            config.pool_max_idle_total,
            config.pool_idle_timeout,
        );
        let access = AccessLog::open(&config.access_log, config.access_log_format)?;
        for (l, _) in listeners.iter().zip(inherits).filter(|(_, i)| *i) {
            // Last: a reload that fails leaves the shared sockets as they were.
            listen::set_defer(&*l.socket, config.defer_accept)?;
        }
        let mut sh = Shared::new(config, Box::new(filter), registry, pool, groups, access);
        // Upstream sockets may use what one socket per client leaves.
        sh.ups
            .set_socket_cap(budget.descriptors.saturating_sub(budget.max_connections));
        sh.intern_tls_groups()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        sh.cert_store = tls.as_ref().map(|t| t.store.clone());
        sh.via_name = crate::conn::via_pseudonym(&sh.cfg.via_name, local_addr);
        // Room for every client up front: the slab and the timer heap never
        // grow by copying (the old storage would stay as a hole in the
        // heap), and room no connection touched costs no RSS.
        let cap = sh.cfg.max_connections;
        let mut server = Server {
            poll,
            listeners,
            tls,
            local_addr,
            clients: Slab::with_capacity(cap),
            generations: Generations::default(),
            runnable: Vec::new(),
            runnable_spare: Vec::new(),
            park_later: ParkLater::default(),
            timers: Timers::with_capacity(cap),
            sh,
            shutdown: Arc::new(AtomicBool::new(false)),
            drain: Arc::new(AtomicBool::new(false)),
            reopen: Arc::new(AtomicBool::new(false)),
            unready: Arc::new(AtomicBool::new(false)),
            waker,
            drain_deadline: None,
            listener_close_at: None,
            accept_paused_until: None,
            at_capacity: false,
            cap_warned_at: None,
            resolver,
            admin,
            obs,
            next_trim: Instant::now() + TRIM_EVERY,
            fd_budget: budget.descriptors,
            fd_share,
            emfile_warn: Default::default(),
            handed_over: Arc::new(AtomicBool::new(false)),
            carry: Arc::default(),
        };
        // A worker: the other workers' board (health of the previous
        // generation, the modes table).
        let started = crate::upstreams::carry::epoch_ms(std::time::SystemTime::now());
        server.join_board(started)?;
        Ok(server)
    }

    /// The address the first listener is bound to (the real port if 0
    /// was asked): the first `listen` address, or without one the first
    /// `listen_tls` address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The first TLS listener's address, if `--listen-tls` is set.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addrs().first().copied()
    }

    /// Every plain listener's address, in the order of `listen` (real
    /// ports).
    pub fn plain_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(false)
    }

    /// Every TLS listener's address, in the order of `listen_tls` (real
    /// ports).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(true)
    }

    fn addrs(&self, tls: bool) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter(|l| l.tls == tls)
            .filter_map(|l| l.socket.local_addr().ok())
            .collect()
    }

    /// The admin listener's address, if `--admin` is set.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(Admin::local_addr)
    }

    /// The loop's counters, shared.
    pub fn stats(&self) -> Arc<Stats> {
        self.sh.stats.clone()
    }

    /// The loop drains, or was asked to say it is not ready (its
    /// `/readyz` part and its `/status` draining flag).
    fn not_ready(&self) -> bool {
        self.drain.load(Ordering::SeqCst) || self.unready.load(Ordering::SeqCst)
    }

    /// A handle that can stop the loop from another thread.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            shutdown: self.shutdown.clone(),
            drain: self.drain.clone(),
            reopen: self.reopen.clone(),
            unready: self.unready.clone(),
            waker: Arc::downgrade(&self.waker),
            listeners: self
                .listeners
                .iter()
                .map(|l| Arc::downgrade(&l.socket))
                .collect(),
            handed_over: self.handed_over.clone(),
            carry: self.carry.clone(),
        }
    }

    /// Runs the loop until [`ServerHandle::shutdown`]. Errors only if
    /// `poll` itself fails; a connection's error ends that connection.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        for addr in self.plain_addrs() {
            info!("listening on {addr}");
        }
        if let Some(o) = self.obs.as_mut() {
            o.publish(&self.sh.stats, false);
        }
        while !self.shutdown.load(Ordering::SeqCst) {
            let now = Instant::now();
            let timeout = if self.runnable.is_empty() {
                poll_timeout(
                    now,
                    [
                        self.timers.next(),
                        self.sh.ups.next_deadline(),
                        self.sh.checks.next_deadline(),
                        self.accept_paused_until,
                        self.drain_deadline,
                        self.listener_close_at,
                        self.sh.access.next_flush(),
                        self.admin.as_ref().and_then(|a| a.next_deadline(now)),
                        self.sh.may_trim().then_some(self.next_trim),
                        self.sh.board.as_ref().and_then(|b| b.next_deadline()),
                        self.park_later.due(),
                    ],
                )
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let returned = Instant::now();
            // When this turn's readiness came (the pool's quick-close ages,
            // issue 14): a poll that waited was woken by it just now; a
            // busy loop's batch arrived after the previous poll returned.
            // Neither charges the loop's own latency to the server.
            self.sh.events_at = if returned.saturating_duration_since(now) >= POLL_WAITED {
                returned
            } else {
                self.sh.now
            };
            self.sh.now = returned;
            self.sh.date.update(std::time::SystemTime::now());
            for event in events.iter() {
                let t = event.token();
                match token::listener_index(t) {
                    Some(i) => self.accept_on(i),
                    None if t == token::WAKER => self.apply_dns(),
                    None if t == token::TIER_WAKE => board::apply_modes(&mut self.sh),
                    None => {
                        let draining = self.not_ready();
                        let now = self.sh.now;
                        if !admin::dispatch(
                            &mut self.admin,
                            t,
                            self.poll.registry(),
                            now,
                            draining,
                            &mut self.sh,
                        ) {
                            self.record(t, event);
                        }
                    }
                }
            }
            self.drive_runnable();
            self.fire_timers();
            self.park_idle();
            let now = self.sh.now;
            // Descriptors a check may take: what the budget leaves.
            let room = self
                .fd_budget
                .saturating_sub(self.own_fds() + self.fd_share.others());
            let sh = &mut self.sh;
            sh.ups.expire(now, &sh.stats);
            if sh.checks.next_deadline().is_some_and(|t| t <= now) {
                let (ids, group_tls) = (&sh.tls_ids, &sh.group_tls);
                let tls_of = |g: usize, origin: Option<usize>| {
                    let id = crate::conn::server_tls(group_tls, g, origin)?;
                    ids.get(id).cloned()
                };
                let out = sh.checks.on_time(
                    now,
                    &mut sh.groups,
                    &sh.registry,
                    &sh.stats,
                    (room, &tls_of),
                );
                for addr in out {
                    sh.server_out(addr);
                }
            }
            if self.next_trim <= now {
                self.next_trim = now + TRIM_EVERY;
                self.sh.trim_spare();
                self.sh.bufs.trim();
            }
            if self.accept_paused_until.is_some_and(|t| t <= now) {
                self.accept_paused_until = None;
                self.accept();
            }
            if self.reopen.swap(false, Ordering::SeqCst) {
                self.sh.access.reopen();
            }
            self.sh.access.flush_if_due(now);
            let draining = self.drain.load(Ordering::SeqCst);
            self.share_turn(draining);
            self.count_lost_records();
            let own = self.own_fds();
            self.fd_share.publish(own);
            if let Some(a) = self.admin.as_mut() {
                a.expire(now, self.poll.registry());
            }
            let not_ready = self.not_ready();
            if let Some(o) = self.obs.as_mut() {
                o.publish(&self.sh.stats, not_ready);
            }
            if self.drain.load(Ordering::SeqCst) && self.drain_step() {
                break;
            }
        }
        self.stop();
        // The last records: a stalled log reader is waited for until the
        // drain deadline (a stop at once tries once; a second stop signal
        // during the wait ends it).
        let now = Instant::now();
        let stop_now = self.shutdown.load(Ordering::SeqCst);
        let deadline = match self.drain_deadline {
            _ if stop_now => now,
            Some(t) => t,
            None => now + crate::access_log::FLUSH_EVERY,
        };
        let shutdown = self.shutdown.clone();
        self.sh
            .access
            .finish(deadline, &|| shutdown.load(Ordering::SeqCst));
        self.count_lost_records();
        // The last counts go to the totals; the loop slot is freed when
        // `self` drops.
        if let Some(o) = self.obs.as_mut() {
            o.publish(&self.sh.stats, true);
        }
        Ok(())
    }
}

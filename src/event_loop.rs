//! The event loop: the only caller of `poll()`. It owns the listener, the
//! `Slab<Session>` of downstream connections, the upstream connections (in
//! `Shared`) and the timer heap, and dispatches events to them.
//!
//! One turn: poll (timeout = earliest deadline), record each event's
//! readiness on its entry and queue the session it concerns, drive every
//! queued session once, fire due timers, expire idle pooled connections,
//! and resume accepting if it was paused. Sessions are freed only while
//! driving, after the batch's events were all recorded, and every token
//! carries a generation, so a stale event never reaches a reused slot.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Waker};
use slab::Slab;

use crate::buffer::BufferPool;
use crate::config::Config;
use crate::conn::Shared;
use crate::conn::downstream::Session;
use crate::conn::token::{self, Kind};
use crate::conn::upstream::Upstreams;
use crate::filter::Filter;
use crate::pool::IdlePool;
use crate::stats::Stats;
use crate::timer::{Timers, poll_timeout};

/// How long accepting pauses after `EMFILE`/`ENFILE` (out of descriptors),
/// instead of spinning on a listener that stays readable.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Length of the accept queue asked of the kernel (capped by somaxconn).
const LISTEN_BACKLOG: i32 = 1024;

/// Shortest time between two "connection cap reached" warnings.
const CAP_WARN_EVERY: Duration = Duration::from_secs(10);

/// Descriptors kept aside from the connection budget (poll, waker,
/// listener, logging, signal pipe).
const FD_RESERVE: usize = 32;

/// Most free body buffers kept for reuse (each `high_watermark` bytes).
const MAX_FREE_BUFFERS: usize = 256;

/// A bound proxy, ready to `run` on the current thread.
pub struct Server {
    poll: Poll,
    listener: Option<TcpListener>,
    local_addr: SocketAddr,
    sessions: Slab<Session>,
    runnable: Vec<(usize, u32)>,
    runnable_spare: Vec<(usize, u32)>,
    timers: Timers,
    sh: Shared,
    shutdown: Arc<AtomicBool>,
    drain: Arc<AtomicBool>,
    waker: Arc<Waker>,
    /// Set when a drain began: the time it must end by.
    drain_deadline: Option<Instant>,
    accept_paused_until: Option<Instant>,
    at_capacity: bool,
    /// When the connection-cap warning was last logged (once per
    /// `CAP_WARN_EVERY`, not on every flap).
    cap_warned_at: Option<Instant>,
}

/// Stops a running [`Server`] from another thread (a signal handler
/// thread, a test).
#[derive(Clone)]
pub struct ServerHandle {
    shutdown: Arc<AtomicBool>,
    drain: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl ServerHandle {
    /// Asks the loop to stop now: open connections are closed, `run`
    /// returns soon after.
    pub fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Asks for a graceful drain: the listener closes (connections already
    /// queued on it are accepted first), idle keep-alive clients are
    /// closed, in-flight exchanges finish with `Connection: close`, pooled
    /// upstream connections are closed, and `run` returns when no client
    /// connection is left or after `drain_timeout`.
    pub fn drain(&self) {
        self.drain.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }
}

impl Server {
    /// Validates `config`, binds its `listen` address and prepares the loop.
    ///
    /// Errors: an invalid config (`InvalidInput`, naming the knob), or the
    /// bind/poll setup failed.
    pub fn bind(config: Config, filter: impl Filter + Send + 'static) -> io::Result<Server> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut config = config;
        config.max_connections = fit_to_fd_limit(config.max_connections);
        let poll = Poll::new()?;
        let mut listener = bind_listener(config.listen)?;
        let local_addr = listener.local_addr()?;
        poll.registry()
            .register(&mut listener, token::LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), token::WAKER)?);
        let registry = poll.registry().try_clone()?;
        let pool = IdlePool::new(
            config.pool_max_idle_per_peer,
            config.pool_max_idle_total,
            config.pool_idle_timeout,
        );
        let bufs = BufferPool::new(config.high_watermark, MAX_FREE_BUFFERS);
        let sh = Shared::new(
            config,
            Box::new(filter),
            registry,
            bufs,
            Upstreams::new(pool),
            Arc::new(Stats::default()),
        );
        Ok(Server {
            poll,
            listener: Some(listener),
            local_addr,
            sessions: Slab::new(),
            runnable: Vec::new(),
            runnable_spare: Vec::new(),
            timers: Timers::default(),
            sh,
            shutdown: Arc::new(AtomicBool::new(false)),
            drain: Arc::new(AtomicBool::new(false)),
            waker,
            drain_deadline: None,
            accept_paused_until: None,
            at_capacity: false,
            cap_warned_at: None,
        })
    }

    /// The address the listener is bound to (the real port if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The loop's counters, shared.
    pub fn stats(&self) -> Arc<Stats> {
        self.sh.stats.clone()
    }

    /// A handle that can stop the loop from another thread.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            shutdown: self.shutdown.clone(),
            drain: self.drain.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Runs the loop until [`ServerHandle::shutdown`]. Errors only if
    /// `poll` itself fails; a connection's error ends that connection.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        info!("listening on {}", self.local_addr);
        while !self.shutdown.load(Ordering::SeqCst) {
            let now = Instant::now();
            let timeout = if self.runnable.is_empty() {
                poll_timeout(
                    now,
                    [
                        self.timers.next(),
                        self.sh.ups.next_deadline(),
                        self.accept_paused_until,
                        self.drain_deadline,
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
            self.sh.now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    token::LISTENER => self.accept(),
                    token::WAKER => {}
                    t => self.record(t, event),
                }
            }
            self.drive_runnable();
            self.fire_timers();
            let now = self.sh.now;
            let sh = &mut self.sh;
            sh.ups.expire(now, &sh.registry, &sh.stats);
            if self.accept_paused_until.is_some_and(|t| t <= now) {
                self.accept_paused_until = None;
                self.accept();
            }
            if self.drain.load(Ordering::SeqCst) && self.drain_step() {
                break;
            }
        }
        self.stop();
        Ok(())
    }

    fn record(&mut self, t: mio::Token, event: &mio::event::Event) {
        let Some((kind, key, generation)) = token::split(t) else {
            return;
        };
        match kind {
            Kind::Session => {
                if let Some(s) = self
                    .sessions
                    .get_mut(key)
                    .filter(|s| s.generation == generation)
                {
                    s.io_mut().on_event(event);
                    queue(&mut self.runnable, s);
                }
            }
            Kind::Upstream => {
                let Some(up) = self.sh.ups.get_gen_mut(key, generation) else {
                    return;
                };
                up.io.on_event(event);
                match up.owner {
                    Some((skey, sgeneration)) => {
                        if let Some(s) = self
                            .sessions
                            .get_mut(skey)
                            .filter(|s| s.generation == sgeneration)
                        {
                            queue(&mut self.runnable, s);
                        }
                    }
                    None => {
                        let sh = &mut self.sh;
                        sh.ups.on_idle_event(key, &sh.registry, &sh.stats);
                    }
                }
            }
        }
    }

    fn drive_runnable(&mut self) {
        // Swap with the spare list (both keep their capacity): sessions
        // queued while driving wait for the next turn.
        let mut list = std::mem::take(&mut self.runnable_spare);
        std::mem::swap(&mut list, &mut self.runnable);
        for &(key, generation) in &list {
            let Some(s) = self
                .sessions
                .get_mut(key)
                .filter(|s| s.generation == generation)
            else {
                continue;
            };
            s.dirty = false;
            let more = s.drive(&mut self.sh);
            self.after_drive(key, more);
        }
        list.clear();
        self.runnable_spare = list;
    }

    /// Frees a closed session, or arms its next deadline.
    fn after_drive(&mut self, key: usize, more: bool) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if s.is_closed() {
            let s = self.sessions.remove(key);
            s.close(&mut self.sh);
            if self.at_capacity && self.sessions.len() < self.sh.cfg.max_connections {
                self.at_capacity = false;
                self.accept();
            }
            return;
        }
        if let Some((at, _)) = s.deadline(&self.sh)
            && s.armed.is_none_or(|a| at < a)
        {
            s.armed = Some(at);
            self.timers.push(at, key, s.generation);
        }
        if more {
            queue(&mut self.runnable, s);
        }
    }

    fn fire_timers(&mut self) {
        while let Some((at, key, generation)) = self.timers.pop_due(self.sh.now) {
            let Some(s) = self
                .sessions
                .get_mut(key)
                .filter(|s| s.generation == generation)
            else {
                continue;
            };
            if s.armed != Some(at) {
                continue;
            }
            s.armed = None;
            s.on_timer(&mut self.sh);
            self.after_drive(key, false);
        }
    }

    fn accept(&mut self) {
        let Some(listener) = self.listener.as_ref() else {
            return;
        };
        if self.accept_paused_until.is_some() {
            return;
        }
        loop {
            if self.sessions.len() >= self.sh.cfg.max_connections {
                if !self.at_capacity
                    && self
                        .cap_warned_at
                        .is_none_or(|t| self.sh.now.saturating_duration_since(t) >= CAP_WARN_EVERY)
                {
                    self.cap_warned_at = Some(self.sh.now);
                    warn!(
                        "connection cap {} reached: accepting paused",
                        self.sh.cfg.max_connections
                    );
                }
                self.at_capacity = true;
                return;
            }
            match listener.accept() {
                Ok((stream, addr)) => {
                    let generation = self.sh.next_gen();
                    let entry = self.sessions.vacant_entry();
                    let key = entry.key();
                    match Session::new(key, generation, stream, addr, &mut self.sh) {
                        Ok(s) => {
                            entry.insert(s);
                            Stats::add(&self.sh.stats.downstream_accepted, 1);
                            Stats::add(&self.sh.stats.downstream_active, 1);
                            if let Some(s) = self.sessions.get_mut(key)
                                && let Some((at, _)) = s.deadline(&self.sh)
                            {
                                s.armed = Some(at);
                                self.timers.push(at, key, generation);
                            }
                        }
                        Err(e) => debug!("register of {addr} failed: {e}"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    warn!("accept: {e}: pausing accepts for {ACCEPT_BACKOFF:?}");
                    self.accept_paused_until = Some(self.sh.now + ACCEPT_BACKOFF);
                    return;
                }
                Err(e) => debug!("accept: {e}"),
            }
        }
    }

    /// One turn of a graceful drain; true when the loop may return.
    fn drain_step(&mut self) -> bool {
        let now = self.sh.now;
        if self.drain_deadline.is_none() {
            let timeout = self.sh.cfg.drain_timeout;
            info!(
                "draining: {} client connections, up to {timeout:?}",
                self.sessions.len()
            );
            self.drain_deadline = Some(now + timeout);
            // Serve what is already queued on the listener, then close it
            // so new connections go to the other processes on the port.
            self.accept_paused_until = None;
            self.at_capacity = false;
            self.accept();
            if let Some(mut l) = self.listener.take() {
                let _ = self.sh.registry.deregister(&mut l);
            }
            let keys: Vec<usize> = self.sessions.iter().map(|(k, _)| k).collect();
            for key in keys {
                if let Some(s) = self.sessions.get_mut(key) {
                    s.begin_drain();
                    queue(&mut self.runnable, s);
                }
            }
            self.drive_runnable();
        }
        let sh = &mut self.sh;
        sh.ups.close_idle(&sh.registry, &sh.stats);
        if self.sessions.is_empty() {
            info!("drained");
            return true;
        }
        if self.drain_deadline.is_some_and(|t| t <= now) {
            warn!(
                "drain timeout: closing {} client connections",
                self.sessions.len()
            );
            return true;
        }
        false
    }

    fn stop(&mut self) {
        if let Some(mut l) = self.listener.take() {
            let _ = self.sh.registry.deregister(&mut l);
        }
        let keys: Vec<usize> = self.sessions.iter().map(|(k, _)| k).collect();
        for key in keys {
            if let Some(s) = self.sessions.try_remove(key) {
                s.close(&mut self.sh);
            }
        }
        let sh = &mut self.sh;
        sh.ups.close_idle(&sh.registry, &sh.stats);
        let st = sh.stats.snapshot();
        info!(
            "stopped: requests={} accepted={} active={} idle={} buffered={} peak_buffered={} \
             buffers_in_use={} pauses={} resumes={} upstream_connects={} reuses={} retries={} \
             evicted(peer_closed={} unexpected_data={} idle_timeout={} cap={}) \
             timeouts(keepalive={} head={} gap={} connect={}) \
             status(400={} 408={} 431={} 501={} 502={} 504={}) upstream_open={}",
            st.requests,
            st.downstream_accepted,
            st.downstream_active,
            st.downstream_idle,
            st.buffered_bytes,
            st.buffered_bytes_peak,
            st.buffers_in_use,
            st.read_pauses,
            st.read_resumes,
            st.upstream_connects,
            st.upstream_reuses,
            st.retries,
            st.pool_evicted_peer_closed,
            st.pool_evicted_unexpected_data,
            st.pool_evicted_idle_timeout,
            st.pool_evicted_cap,
            st.timeouts_keepalive,
            st.timeouts_head,
            st.timeouts_gap,
            st.timeouts_connect,
            st.status_400,
            st.status_408,
            st.status_431,
            st.status_501,
            st.status_502,
            st.status_504,
            sh.ups.open_count()
        );
    }
}

/// A listening socket with `SO_REUSEADDR` and `SO_REUSEPORT`, so several
/// processes can share the port and the kernel spreads connections across
/// them.
fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one and fits
/// `max_connections` to it: client sockets alone must fit (else it is
/// lowered, with a warning, so a full house pauses accepting instead of
/// failing on `EMFILE`), and a warning says when a client and its upstream
/// socket each (2 per connection, HAProxy's rule) could exhaust the limit
/// under full load. Idle keep-alive clients hold no upstream socket, so the
/// limit is not halved up front.
fn fit_to_fd_limit(max_connections: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    let soft = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return max_connections;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        lim.rlim_cur
    };
    let soft = usize::try_from(soft).unwrap_or(usize::MAX);
    let clients_fit = soft.saturating_sub(FD_RESERVE).max(1);
    let max_connections = if clients_fit < max_connections {
        warn!(
            "max-connections {max_connections} lowered to {clients_fit}: the open-file limit is \
             {soft}; raise it with ulimit -n"
        );
        clients_fit
    } else {
        max_connections
    };
    if max_connections.saturating_mul(2).saturating_add(FD_RESERVE) > soft {
        warn!(
            "max-connections {max_connections} with an open-file limit of {soft}: if every \
             client is busy at once, upstream connects can fail (502); raise ulimit -n to \
             {} or more",
            max_connections.saturating_mul(2).saturating_add(FD_RESERVE)
        );
    }
    max_connections
}

fn queue(runnable: &mut Vec<(usize, u32)>, s: &mut Session) {
    if !s.dirty {
        s.dirty = true;
        runnable.push((s.key, s.generation));
    }
}

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

/// Most free body buffers kept for reuse (each `high_watermark` bytes).
const MAX_FREE_BUFFERS: usize = 256;

/// A bound proxy, ready to `run` on the current thread.
pub struct Server {
    poll: Poll,
    listener: Option<TcpListener>,
    local_addr: SocketAddr,
    sessions: Slab<Session>,
    runnable: Vec<(usize, u32)>,
    timers: Timers,
    sh: Shared,
    shutdown: Arc<AtomicBool>,
    waker: Arc<Waker>,
    accept_paused_until: Option<Instant>,
    at_capacity: bool,
}

/// Stops a running [`Server`] from another thread.
#[derive(Clone)]
pub struct ServerHandle {
    shutdown: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl ServerHandle {
    /// Asks the loop to stop; `run` returns soon after.
    pub fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
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
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(config.listen)?;
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
            timers: Timers::default(),
            sh,
            shutdown: Arc::new(AtomicBool::new(false)),
            waker,
            accept_paused_until: None,
            at_capacity: false,
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
        let list = std::mem::take(&mut self.runnable);
        for (key, generation) in list {
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
        if let Some((at, _)) = s.deadline(&self.sh) {
            if s.armed.is_none_or(|a| at < a) {
                s.armed = Some(at);
                self.timers.push(at, key, s.generation);
            }
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
                if !self.at_capacity {
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
                            if let Some(s) = self.sessions.get_mut(key) {
                                if let Some((at, _)) = s.deadline(&self.sh) {
                                    s.armed = Some(at);
                                    self.timers.push(at, key, generation);
                                }
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
            "stopped: requests={} accepted={} upstream_connects={} reuses={} retries={} \
             502={} 504={} peak_buffered={} pauses={} resumes={} upstream_open={}",
            st.requests,
            st.downstream_accepted,
            st.upstream_connects,
            st.upstream_reuses,
            st.retries,
            st.status_502,
            st.status_504,
            st.buffered_bytes_peak,
            st.read_pauses,
            st.read_resumes,
            sh.ups.open_count()
        );
    }
}

fn queue(runnable: &mut Vec<(usize, u32)>, s: &mut Session) {
    if !s.dirty {
        s.dirty = true;
        runnable.push((s.key, s.generation));
    }
}

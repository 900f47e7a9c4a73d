//! The set of all upstream connections with the idle pool over them
//! (ARCHITECTURE.md §7); one connection's machine is `machine.rs`.
//!
//! States ([`UpState`]) of one [`UpstreamConn`]:
//! - `Connecting`: a non-blocking connect was started; WRITABLE reports
//!   its end ([`UpstreamConn::finish_connect`]).
//! - `Active`: carrying one exchange for one client connection (`owner`):
//!   the request goes up and the response comes down through the relay.
//! - `Idle`: parked in the [`IdlePool`] after a clean exchange. It stays
//!   registered for READABLE: an event on it means the upstream closed it
//!   (EOF: evict) or sent bytes it should not have (close); either way it
//!   leaves the pool before anyone takes it.
//! - closed: the entry is removed from the slab and the socket dropped
//!   (closing also takes it out of the epoll set: no `epoll_ctl`).
//!
//! Every upstream socket is an entry of one slab; its token stays the same
//! for its whole life, so taking it from the pool or parking it costs no
//! `epoll_ctl`.
//!
//! What it must not know: HTTP (the exchange decides what to write and
//! whether the connection may be parked), the client connection beyond the
//! opaque id of its owner.

use std::io;
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::Registry;
use mio::net::TcpStream;
use slab::Slab;

mod machine;

use super::io::Io;
use super::transport::{Peeked, Tls, Transport};
use crate::event_loop::token::{ConnId, Generations, Kind};
use crate::filter::Peer;
use crate::idle_limit::QUICK_CLOSE;
use crate::pool::{Choice, EvictReason, IdlePool};
use crate::stats::Stats;
use crate::tls::identity::TlsIdentity;
use machine::Taken;
pub(crate) use machine::{Connect, UpState, UpstreamConn};

/// Why a connection left the pool without being used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eviction {
    PeerClosed,
    UnexpectedData,
    Cap(EvictReason),
}

/// A slab slot: the machine and the generation in its token.
#[derive(Debug)]
struct Slot {
    conn: UpstreamConn,
    generation: u32,
}

/// Key of an upstream connection in [`Upstreams`].
pub(crate) type UpKey = usize;

/// All upstream connections of the loop and the idle pool over them.
pub(crate) struct Upstreams {
    slab: Slab<Slot>,
    pool: IdlePool<Peer>,
    generations: Generations,
    /// The `EMFILE` line of `acquire`: one a second (docs/observability.md, "Logs").
    emfile_warn: crate::warn_limit::WarnLimit,
    /// Most upstream sockets open at once (pooled ones included): the
    /// descriptor budget less one socket per client up to
    /// `max_connections` (docs/operations.md, "Descriptor budget"), so
    /// that upstream sockets never take the descriptors accepting needs
    /// (an HTTP/2 client holds one per stream). `usize::MAX` until set.
    socket_cap: usize,
}

impl Upstreams {
    /// An empty set over `pool` (its caps and idle timeout).
    pub(crate) fn new(pool: IdlePool<Peer>) -> Self {
        Upstreams {
            slab: Slab::new(),
            pool,
            generations: Generations::default(),
            emfile_warn: Default::default(),
            socket_cap: usize::MAX,
        }
    }

    /// The connection `key`, if it exists.
    pub(crate) fn get_mut(&mut self, key: UpKey) -> Option<&mut UpstreamConn> {
        self.slab.get_mut(key).map(|s| &mut s.conn)
    }

    /// The connection `key`, read-only.
    pub(crate) fn get(&self, key: UpKey) -> Option<&UpstreamConn> {
        self.slab.get(key).map(|s| &s.conn)
    }

    /// Number of upstream sockets open (in use and parked).
    pub(crate) fn open_count(&self) -> usize {
        self.slab.len()
    }

    /// Sets the most upstream sockets open at once (see `socket_cap`).
    pub(crate) fn set_socket_cap(&mut self, cap: usize) {
        self.socket_cap = cap.max(1);
    }

    /// A connection to `peer` for client connection `owner`: a live parked
    /// one as the pool's choice rule allows for a request that is
    /// `idempotent` or not (`IdlePool::choose`: learned idle limits, LIFO),
    /// else a new non-blocking connect; always a new one if `fresh` (a
    /// retry, ARCHITECTURE.md §7). Returns its key and whether it was
    /// reused.
    ///
    /// Errors: the connect failed at once (e.g. `EMFILE` even after one
    /// idle pooled socket was closed to make room); `QuotaExceeded` when
    /// the upstream sockets' share of the descriptor budget is in use and
    /// no idle pooled socket can make room (`socket_cap`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire(
        &mut self,
        peer: Peer,
        tls: Option<&TlsIdentity>,
        owner: ConnId,
        fresh: bool,
        idempotent: bool,
        preface: Vec<u8>,
        registry: &Registry,
        stats: &Stats,
        now: Instant,
    ) -> io::Result<(UpKey, bool)> {
        // A connection that starts with a PROXY header is this client's
        // alone: always new, never pooled.
        let private = !preface.is_empty();
        // Bounded: every turn takes one connection out of the pool.
        if !fresh && !private {
            loop {
                let (key, idle, older, check) = match self.pool.choose(&peer, now, idempotent) {
                    Choice::Open { for_risk } => {
                        if for_risk {
                            Stats::add(&stats.pool_new_for_risk, 1);
                        }
                        break;
                    }
                    Choice::Retire(key) => {
                        Stats::add(&stats.pool_retired_near_limit, 1);
                        debug!("pool retire: peer={} near its idle limit", peer.addr);
                        self.close(key, stats);
                        self.sync_idle_gauge(stats);
                        continue;
                    }
                    Choice::Take {
                        id,
                        idle,
                        older,
                        check,
                    } => (id, idle, older, check),
                };
                let verdict = match self.slab.get_mut(key) {
                    // Hot and no event since it was parked: no syscall.
                    Some(s) if !check && !s.conn.io.readable => {
                        Stats::add(&stats.pool_take_unchecked, 1);
                        None
                    }
                    Some(s) => probe(&mut s.conn, stats),
                    None => continue,
                };
                if let Some(why) = verdict {
                    if why == Eviction::PeerClosed {
                        self.pool.observe_close(&peer, idle, now);
                    }
                    self.evict(key, why, stats);
                    continue;
                }
                self.sync_idle_gauge(stats);
                Stats::add(
                    if older {
                        &stats.pool_take_older
                    } else {
                        &stats.pool_take_newest
                    },
                    1,
                );
                if let Some(s) = self.slab.get_mut(key) {
                    let up = &mut s.conn;
                    up.owner = owner;
                    up.set_state(UpState::Active { owner });
                    up.uses += 1;
                    up.taken = Some(Taken {
                        at: now,
                        idle,
                        checked: check,
                    });
                    // A parked socket is writable (nothing is pending).
                    up.io.writable = true;
                    Stats::add(&stats.upstream_reuses, 1);
                    debug!(
                        "pool take: peer={} port={} uses={} idle={idle:?}",
                        peer.addr, up.local_port, up.uses
                    );
                }
                return Ok((key, true));
            }
        }
        if self.slab.len() >= self.socket_cap {
            // The rest of the budget is the clients' own sockets: an
            // idle pooled socket goes first, else no new one (503).
            let Some(oldest) = self.pool.pop_oldest() else {
                return Err(io::Error::new(
                    io::ErrorKind::QuotaExceeded,
                    format!(
                        "{} upstream sockets open, their share of the descriptor budget (the \
                         rest is kept for accepting clients)",
                        self.slab.len()
                    ),
                ));
            };
            self.evict(oldest, Eviction::Cap(EvictReason::GlobalCap), stats);
        }
        let stream = match TcpStream::connect(peer.addr) {
            Ok(s) => s,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                // Out of descriptors: an idle pooled socket is worth less
                // than this request. Close the globally oldest and try once
                // more.
                if let Some(more) = self.emfile_warn.allow(now) {
                    warn!(
                        "upstream connect to {}: {e}: closing an idle pooled connection{more}",
                        peer.addr
                    );
                }
                let Some(oldest) = self.pool.pop_oldest() else {
                    return Err(e);
                };
                self.evict(oldest, Eviction::Cap(EvictReason::GlobalCap), stats);
                TcpStream::connect(peer.addr)?
            }
            Err(e) => return Err(e),
        };
        let _ = stream.set_nodelay(true);
        let stream = match tls {
            Some(id) => {
                let conn = rustls::client::UnbufferedClientConnection::new(
                    id.config.clone(),
                    id.server_name.clone(),
                )
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                Transport::tls(stream, Tls::client(conn))
            }
            None => Transport::plain(stream),
        };
        let generation = self.generations.next();
        let entry = self.slab.vacant_entry();
        let key = entry.key();
        let mut conn = UpstreamConn {
            stream,
            token: ConnId::new(key, generation).token(Kind::Upstream),
            peer,
            io: Io::default(),
            state: UpState::Connecting { since: now },
            owner,
            local_port: 0,
            uses: 0,
            taken: None,
            write_shut: false,
            tcp_connected: false,
            preface,
            private,
            handshake_error: None,
        };
        conn.set_interest(registry, true, true)?;
        entry.insert(Slot { conn, generation });
        Stats::add(&stats.upstream_connects, 1);
        Ok((key, false))
    }

    /// An event for the upstream slot `id` arrived (at about `now`, see
    /// `Shared::events_at`): records its readiness. Returns the owner to
    /// drive if the connection is in use; a parked one is checked here and
    /// evicted unless the event was spurious (the pool learns the idle age
    /// of a close). A stale event (the slot was freed or reused) is
    /// dropped.
    pub(crate) fn on_event(
        &mut self,
        id: ConnId,
        event: &mio::event::Event,
        stats: &Stats,
        now: Instant,
    ) -> Option<ConnId> {
        let slot = self
            .slab
            .get_mut(id.key())
            .filter(|s| s.generation == id.generation())?;
        slot.conn.io.on_event(event);
        if slot.conn.state != UpState::Idle {
            return Some(slot.conn.owner);
        }
        if let Some(why) = probe(&mut slot.conn, stats) {
            let peer = slot.conn.peer;
            if why == Eviction::PeerClosed
                && let Some(idle) = self.pool.idle_for(id.key(), now)
            {
                self.pool.observe_close(&peer, idle, now);
            }
            self.evict(id.key(), why, stats);
        }
        None
    }

    /// The reused connection `key` failed before any response byte at
    /// `now` (the server closed it as the request went out): the pool
    /// learns the close. Checked alive when taken, the server closed it
    /// after that: at an idle age of at least the one it had then (a
    /// lower bound, the safe side for a limit). Unchecked, the FIN may
    /// have been waiting unread, so the age is only known to be under the
    /// time from parking to now: that says the server closes after
    /// responses (the safe side for the quick-close guard), not where its
    /// limit is.
    pub(crate) fn observe_failed_reuse(&mut self, key: UpKey, now: Instant) {
        let Some(up) = self.get(key) else {
            return;
        };
        let (peer, Some(t)) = (up.peer, up.taken) else {
            return;
        };
        let age = if t.checked {
            t.idle
        } else {
            let upper = t.idle + now.saturating_duration_since(t.at);
            upper.min(QUICK_CLOSE.saturating_sub(Duration::from_micros(1)))
        };
        self.pool.observe_close(&peer, age, now);
    }

    /// Parks `key` (its exchange ended cleanly and nothing is unread). It
    /// stays registered for READABLE. A cap may evict another connection.
    /// `hint`: the idle limit the response announced (`Keep-Alive:
    /// timeout=N`), which the pool learns.
    pub(crate) fn park(
        &mut self,
        key: UpKey,
        hint: Option<Duration>,
        registry: &Registry,
        stats: &Stats,
        now: Instant,
    ) {
        let Some(up) = self.get_mut(key) else {
            return;
        };
        let peer = up.peer;
        if let Some(h) = hint {
            self.pool.observe_hint(&peer, h, now);
        }
        let Some(up) = self.get_mut(key) else {
            return;
        };
        if up.private {
            // Its PROXY header named one client (docs/edge.md).
            debug!(
                "upstream {} port {}: not pooled (PROXY header)",
                peer.addr, up.local_port
            );
            self.close(key, stats);
            return;
        }
        // Check at park: an event already reported the upstream's FIN (it
        // came with the answer, and no new edge will announce it), or the
        // socket may still hold unread bytes: look without blocking.
        let verdict = if up.io.read_closed {
            Some(Eviction::PeerClosed)
        } else if up.io.readable {
            probe(up, stats)
        } else {
            None
        };
        if let Some(why) = verdict {
            // A FIN that came with the answer: never parked, so no risk to
            // a later take and no age for the guard, but a close right
            // after a response for the rule's share.
            if why == Eviction::PeerClosed {
                self.pool.observe_close_with_answer(&peer, now);
            }
            self.evict(key, why, stats);
            return;
        }
        up.set_state(UpState::Idle);
        up.stream.fit_idle();
        if up.set_interest(registry, true, false).is_err() {
            self.close(key, stats);
            return;
        }
        debug!("pool put: peer={} port={}", peer.addr, up.local_port);
        Stats::add(&stats.pool_puts, 1);
        if let Some((evicted, reason)) = self.pool.put(peer, key, now) {
            self.evict(evicted, Eviction::Cap(reason), stats);
        }
        self.sync_idle_gauge(stats);
    }

    /// Parked connections now.
    pub(crate) fn idle_count(&self) -> usize {
        self.pool.len()
    }

    /// What the pool learned of each peer's idle limit, at `now`.
    pub(crate) fn export_limits(
        &self,
        now: Instant,
    ) -> Vec<(Peer, crate::idle_limit::PortableLearned)> {
        self.pool.export_limits(now)
    }

    /// Takes over another loop's learned idle limit of `peer` (taken
    /// `later` ago).
    pub(crate) fn import_limit(
        &mut self,
        peer: Peer,
        learned: &crate::idle_limit::PortableLearned,
        later: std::time::Duration,
        now: Instant,
    ) {
        self.pool.import_limit(peer, learned, later, now);
    }

    /// Parked connections to `peer` now.
    pub(crate) fn idle_to(&self, peer: &Peer) -> usize {
        self.pool.len_for(peer)
    }

    /// Closes the globally oldest parked connection to free its descriptor
    /// (the descriptor budget). Returns false if none was parked.
    pub(crate) fn evict_oldest_idle(&mut self, stats: &Stats) -> bool {
        let Some(oldest) = self.pool.pop_oldest() else {
            return false;
        };
        self.evict(oldest, Eviction::Cap(EvictReason::GlobalCap), stats);
        true
    }

    /// Closes every parked connection whose idle deadline passed.
    pub(crate) fn expire(&mut self, now: Instant, stats: &Stats) {
        while let Some(key) = self.pool.pop_expired(now) {
            self.evict(key, Eviction::Cap(EvictReason::IdleTimeout), stats);
        }
    }

    /// Earliest idle deadline in the pool.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pool.next_deadline()
    }

    /// Closes the parked connections to `peer` (its server was taken out
    /// of its group or removed).
    pub(crate) fn close_idle_to(&mut self, peer: Peer, stats: &Stats) {
        while let Some(key) = self.pool.take(&peer) {
            debug!("pool close: peer={} (server out)", peer.addr);
            self.close(key, stats);
        }
        self.sync_idle_gauge(stats);
    }

    /// Closes every parked connection (drain, shutdown).
    pub(crate) fn close_idle(&mut self, stats: &Stats) {
        for key in self.pool.drain() {
            self.close(key, stats);
        }
        self.sync_idle_gauge(stats);
    }

    /// Closes `key`, parked or not. A TLS session whose handshake
    /// completed first says so with `close_notify` (RFC 8446 §6.1: each
    /// party sends one before closing its write side; one try, no wait).
    /// Dropping the socket closes it, which also takes it out of the epoll
    /// set (one syscall, no `epoll_ctl`); stale events of this batch are
    /// dropped by the token's generation.
    pub(crate) fn close(&mut self, key: UpKey, stats: &Stats) {
        self.pool.remove(key);
        if let Some(mut up) = self.slab.try_remove(key) {
            up.conn.goodbye(stats);
        }
    }

    fn evict(&mut self, key: UpKey, why: Eviction, stats: &Stats) {
        let (peer, port) = match self.get(key) {
            Some(up) => (up.peer.addr, up.local_port),
            None => return,
        };
        let (field, reason) = match why {
            Eviction::PeerClosed => (&stats.pool_evicted_peer_closed, "peer closed"),
            Eviction::UnexpectedData => (&stats.pool_evicted_unexpected_data, "unexpected data"),
            Eviction::Cap(EvictReason::IdleTimeout) => {
                (&stats.pool_evicted_idle_timeout, "idle timeout")
            }
            Eviction::Cap(EvictReason::PeerCap) => (&stats.pool_evicted_cap, "per-peer cap"),
            Eviction::Cap(EvictReason::GlobalCap) => (&stats.pool_evicted_cap, "global cap"),
        };
        debug!("pool evict: peer={peer} port={port} reason={reason}");
        self.close(key, stats);
        self.sync_idle_gauge(stats);
        // Counted once the gauge is down: whoever sees the eviction
        // counted sees the connection gone from `pool_idle` too.
        Stats::add(field, 1);
    }

    fn sync_idle_gauge(&self, stats: &Stats) {
        stats
            .pool_idle
            .store(self.pool.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Checks a parked connection without blocking: `None` if it looks
/// usable, else why not. EOF or an error means the upstream closed it;
/// bytes mean it sent something outside any exchange. A TLS connection is
/// read through its session (`Transport::idle_look`): a ticket or a key
/// update is absorbed and keeps it, `close_notify` is EOF, data evicts it.
fn probe(up: &mut UpstreamConn, stats: &Stats) -> Option<Eviction> {
    match up.stream.idle_look(&mut up.io, stats) {
        Peeked::Quiet => None,
        Peeked::Data => Some(Eviction::UnexpectedData),
        Peeked::Eof | Peeked::Failed(_) => Some(Eviction::PeerClosed),
    }
}

//! Upstream connections: connect, hand out, park, evict (DESIGN.md §7).
//!
//! Every upstream socket is an entry of one `Slab<Upstream>`; its token
//! stays the same for its whole life, so taking it from the pool or parking
//! it costs no `epoll_ctl`. An entry has an owner (the downstream session
//! using it) or none (parked in the `IdlePool`, which knows only its key).
//! A parked socket stays registered for READABLE: an event on it means the
//! upstream closed it (EOF: evict) or sent bytes it should not have (close);
//! either way it leaves the pool before anyone takes it.

use std::io;
use std::time::Instant;

use log::{debug, warn};
use mio::net::TcpStream;
use mio::{Interest, Registry};
use slab::Slab;

use super::io::Io;
use super::token;
use crate::filter::Peer;
use crate::pool::{EvictReason, IdlePool};
use crate::stats::Stats;

/// One upstream TCP connection.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// The socket (non-blocking).
    pub stream: TcpStream,
    /// Generation in this entry's token.
    pub generation: u32,
    /// Where it goes (the pool key).
    pub peer: Peer,
    /// Readiness and registered interest.
    pub io: Io,
    /// The non-blocking connect has not completed yet.
    pub connecting: bool,
    /// When the connect began.
    pub connect_started: Instant,
    /// Session `(key, generation)` using it; `None` while parked.
    pub owner: Option<(usize, u32)>,
    /// Local port of the socket (for the access log), 0 until connected.
    pub local_port: u16,
    /// Requests sent on it before the current one.
    pub uses: u64,
}

/// Why a connection left the pool without being used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eviction {
    PeerClosed,
    UnexpectedData,
    Cap(EvictReason),
}

/// All upstream connections of the loop and the idle pool over them.
pub(crate) struct Upstreams {
    slab: Slab<Upstream>,
    pool: IdlePool<Peer>,
}

impl Upstreams {
    /// An empty set with the pool caps and idle timeout of the config.
    pub(crate) fn new(pool: IdlePool<Peer>) -> Self {
        Upstreams {
            slab: Slab::new(),
            pool,
        }
    }

    /// The entry `key`, if it exists.
    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut Upstream> {
        self.slab.get_mut(key)
    }

    /// The entry `key`, read-only.
    pub(crate) fn peek(&self, key: usize) -> Option<&Upstream> {
        self.slab.get(key)
    }

    /// The entry `key` if its generation is `generation` (a token from an event).
    pub(crate) fn get_gen_mut(&mut self, key: usize, generation: u32) -> Option<&mut Upstream> {
        self.slab
            .get_mut(key)
            .filter(|u| u.generation == generation)
    }

    /// Number of upstream sockets open (in use and parked).
    pub(crate) fn open_count(&self) -> usize {
        self.slab.len()
    }

    /// A connection to `peer` for session `owner`: the newest live parked
    /// one (LIFO), else a new non-blocking connect; always a new one if
    /// `fresh` (a retry, DESIGN.md §7). Returns its key and whether it was
    /// reused. Errors: the connect failed at once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire(
        &mut self,
        peer: Peer,
        owner: (usize, u32),
        generation: u32,
        fresh: bool,
        registry: &Registry,
        stats: &Stats,
        now: Instant,
    ) -> io::Result<(usize, bool)> {
        while let Some(key) = if fresh { None } else { self.pool.take(&peer) } {
            let verdict = match self.slab.get_mut(key) {
                Some(up) => probe(&up.stream),
                None => continue,
            };
            match verdict {
                None => {
                    self.sync_idle_gauge(stats);
                    if let Some(up) = self.slab.get_mut(key) {
                        up.owner = Some(owner);
                        up.uses += 1;
                        Stats::add(&stats.upstream_reuses, 1);
                        debug!(
                            "pool take: peer={} port={} uses={}",
                            peer.addr, up.local_port, up.uses
                        );
                    }
                    return Ok((key, true));
                }
                Some(why) => self.evict(key, why, registry, stats),
            }
        }
        let stream = match TcpStream::connect(peer.addr) {
            Ok(s) => s,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                // Out of descriptors: an idle pooled socket is worth less
                // than this request. Close the globally oldest and try once
                // more.
                warn!(
                    "upstream connect to {}: {e}: closing an idle pooled connection",
                    peer.addr
                );
                let Some(oldest) = self.pool.pop_oldest() else {
                    return Err(e);
                };
                self.evict(
                    oldest,
                    Eviction::Cap(EvictReason::GlobalCap),
                    registry,
                    stats,
                );
                TcpStream::connect(peer.addr)?
            }
            Err(e) => return Err(e),
        };
        let _ = stream.set_nodelay(true);
        let entry = self.slab.vacant_entry();
        let key = entry.key();
        let mut up = Upstream {
            stream,
            generation,
            peer,
            io: Io::default(),
            connecting: true,
            connect_started: now,
            owner: Some(owner),
            local_port: 0,
            uses: 0,
        };
        let tok = token::upstream(key, generation);
        up.io.set_interest(
            &mut up.stream,
            registry,
            tok,
            Some(Interest::READABLE | Interest::WRITABLE),
        )?;
        entry.insert(up);
        Stats::add(&stats.upstream_connects, 1);
        Ok((key, false))
    }

    /// Parks `key` (its exchange ended cleanly and nothing is unread). It
    /// stays registered for READABLE. A cap may evict another connection.
    pub(crate) fn park(&mut self, key: usize, registry: &Registry, stats: &Stats, now: Instant) {
        let Some(up) = self.slab.get_mut(key) else {
            return;
        };
        // Check at park: an event already reported the upstream's FIN (it
        // came with the answer, and no new edge will announce it), or the
        // socket may still hold unread bytes: look without blocking.
        let verdict = if up.io.read_closed {
            Some(Eviction::PeerClosed)
        } else if up.io.readable {
            probe(&up.stream)
        } else {
            None
        };
        if let Some(why) = verdict {
            self.evict(key, why, registry, stats);
            return;
        }
        let Some(up) = self.slab.get_mut(key) else {
            return;
        };
        up.owner = None;
        let tok = token::upstream(key, up.generation);
        if up
            .io
            .set_interest(&mut up.stream, registry, tok, Some(Interest::READABLE))
            .is_err()
        {
            self.close(key, registry);
            return;
        }
        let peer = up.peer;
        debug!("pool put: peer={} port={}", peer.addr, up.local_port);
        Stats::add(&stats.pool_puts, 1);
        if let Some((evicted, reason)) = self.pool.put(peer, key, now) {
            self.evict(evicted, Eviction::Cap(reason), registry, stats);
        }
        self.sync_idle_gauge(stats);
    }

    /// An event arrived on `key`, which has no owner (parked): find out why
    /// and evict it unless it was spurious.
    pub(crate) fn on_idle_event(&mut self, key: usize, registry: &Registry, stats: &Stats) {
        let verdict = match self.slab.get(key) {
            Some(up) if up.owner.is_none() => probe(&up.stream),
            _ => return,
        };
        if let Some(why) = verdict {
            self.evict(key, why, registry, stats);
        }
    }

    /// Closes every parked connection whose idle deadline passed.
    pub(crate) fn expire(&mut self, now: Instant, registry: &Registry, stats: &Stats) {
        while let Some(key) = self.pool.pop_expired(now) {
            self.evict(
                key,
                Eviction::Cap(EvictReason::IdleTimeout),
                registry,
                stats,
            );
        }
    }

    /// Earliest idle deadline in the pool.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pool.next_deadline()
    }

    /// Closes every parked connection (shutdown).
    pub(crate) fn close_idle(&mut self, registry: &Registry, stats: &Stats) {
        for key in self.pool.drain() {
            self.close(key, registry);
        }
        self.sync_idle_gauge(stats);
    }

    /// Closes `key`, parked or not. Dropping the socket closes it, which
    /// also takes it out of the epoll set (one syscall, no `epoll_ctl`);
    /// stale events of this batch are dropped by the token's generation.
    pub(crate) fn close(&mut self, key: usize, _registry: &Registry) {
        self.pool.remove(key);
        drop(self.slab.try_remove(key));
    }

    fn evict(&mut self, key: usize, why: Eviction, registry: &Registry, stats: &Stats) {
        let (peer, port) = match self.slab.get(key) {
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
        Stats::add(field, 1);
        debug!("pool evict: peer={peer} port={port} reason={reason}");
        self.close(key, registry);
        self.sync_idle_gauge(stats);
    }

    fn sync_idle_gauge(&self, stats: &Stats) {
        stats
            .pool_idle
            .store(self.pool.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Checks a parked socket without blocking: `None` if it looks usable,
/// else why not. EOF or an error means the upstream closed it; bytes mean
/// it sent something outside any exchange.
fn probe(stream: &TcpStream) -> Option<Eviction> {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte) {
        Ok(0) => Some(Eviction::PeerClosed),
        Ok(_) => Some(Eviction::UnexpectedData),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
        Err(_) => Some(Eviction::PeerClosed),
    }
}

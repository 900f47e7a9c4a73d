//! Accepting client connections: the connection cap and the descriptor
//! budget (ARCHITECTURE.md §4), the accept pause on `EMFILE`, and closing
//! the longest-idle keep-alive client to make room.
//!
//! What it must not know: HTTP.

use super::*;
use crate::conn::client::{admit_client, sends_proxy_header};
use crate::conn::transport::{Tls, Transport};

impl Server {
    /// Accepts what waits on every listener (at a cap or a pause that
    /// ends, and at a drain's start: they share one budget).
    pub(super) fn accept(&mut self) {
        for i in 0..self.listeners.len() {
            self.accept_on(i);
        }
    }

    /// Accepts what waits on listener `index` (`token::listener`), until
    /// its queue is empty, the connection cap, the descriptor budget or
    /// an `EMFILE` pause.
    pub(super) fn accept_on(&mut self, index: usize) {
        let Some(l) = self.listeners.get(index) else {
            return;
        };
        let (listener, tls) = (l.socket.clone(), l.tls);
        let listener = &*listener;
        if self.accept_paused_until.is_some() {
            return;
        }
        loop {
            if self.clients.len() >= self.sh.cfg.max_connections
                && has_pending(listener)
                && close_idle_client(&mut self.clients, &mut self.sh)
            {
                continue;
            }
            if self.clients.len() >= self.sh.cfg.max_connections {
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
            // Each client is budgeted two descriptors; pooled idle upstream
            // sockets live on what is left and go first. The budget is the
            // process's: other loops of it (a reload's drain) count too.
            let others = self.fd_share.others();
            while self.own_fds() + 2 + others > self.fd_budget
                && self.sh.ups.evict_oldest_idle(&self.sh.stats)
            {}
            if self.own_fds() + 2 + others > self.fd_budget {
                // The other loops hold the rest: they drain, so look again
                // soon (the connection waits in the accept queue).
                let own = self.own_fds();
                self.fd_share.publish(own);
                self.accept_paused_until = Some(self.sh.now + SHARED_RECHECK);
                return;
            }
            match listener.accept() {
                Ok((stream, addr)) => {
                    // Counted now unless a PROXY header is to give the
                    // client's address (then once it did).
                    let proxied = sends_proxy_header(&self.sh.cfg, addr);
                    let counted = self.sh.cfg.max_connections_per_client > 0 && !proxied;
                    if counted && !admit_client(&mut self.sh, addr) {
                        // Closed at accept: dropping the socket.
                        continue;
                    }
                    let generation = self.generations.next();
                    let entry = self.clients.vacant_entry();
                    let id = ConnId::new(entry.key(), generation);
                    let transport = match (tls, self.tls.as_ref()) {
                        (true, Some(cfg)) => {
                            match rustls::server::UnbufferedServerConnection::new(
                                cfg.config.clone(),
                            ) {
                                Ok(c) => {
                                    let mut t =
                                        Tls::server(c, cfg.sni_check(), cfg.handshake_gate());
                                    if proxied {
                                        // Before the ClientHello, below the session.
                                        t.expect_proxy_header();
                                    }
                                    Transport::tls(stream, t)
                                }
                                Err(e) => {
                                    debug!("TLS session for {addr}: {e}");
                                    if counted {
                                        self.sh.conns.release(addr.ip());
                                    }
                                    continue;
                                }
                            }
                        }
                        _ => Transport::plain(stream),
                    };
                    match ClientConn::new(id, transport, addr, &mut self.sh) {
                        Ok(mut conn) => {
                            if counted {
                                conn.set_counted();
                            }
                            let conn = Client::from(conn);
                            let armed = conn.deadline(&self.sh).map(|(at, _)| at);
                            if let Some(at) = armed {
                                self.timers.push(at, id.key(), generation);
                            }
                            let e = entry.insert(Entry {
                                conn,
                                generation,
                                queued: false,
                                park_listed: false,
                                armed,
                            });
                            if self.drain_deadline.is_some() {
                                // Accepted while the listener drains its
                                // deferred connections: served, then closed.
                                e.conn.begin_drain(&mut self.sh);
                            }
                            if self.sh.cfg.defer_accept {
                                // Its request came with it (`listen::set_defer_accept`).
                                queue(&mut self.runnable, id, e);
                            }
                            let own = self.own_fds();
                            self.fd_share.publish(own);
                            Stats::add(&self.sh.stats.downstream_accepted, 1);
                            Stats::add(&self.sh.stats.downstream_active, 1);
                        }
                        Err(e) => {
                            if counted {
                                self.sh.conns.release(addr.ip());
                            }
                            debug!("register of {addr} failed: {e}");
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    if let Some(more) = self.emfile_warn.allow(self.sh.now) {
                        warn!("accept: {e}: pausing accepts for {ACCEPT_BACKOFF:?}{more}");
                    }
                    self.accept_paused_until = Some(self.sh.now + ACCEPT_BACKOFF);
                    return;
                }
                Err(e) => debug!("accept: {e}"),
            }
        }
    }
}

impl Server {
    /// Descriptors this loop reserves (docs/operations.md, "Descriptor
    /// budget"): one per client connection, one upstream socket per client
    /// plus one per pooled idle upstream socket (or the upstream sockets
    /// open, when more: an HTTP/2 client holds one per stream in flight),
    /// one per health check in flight.
    pub(super) fn own_fds(&self) -> usize {
        // One upstream socket kept in reserve per client, or the sockets
        // really open when more (an HTTP/2 client holds one per stream).
        let clients = self.clients.len();
        let reserved = clients.saturating_add(self.sh.ups.idle_count());
        clients
            .saturating_add(reserved.max(self.sh.ups.open_count()))
            .saturating_add(self.sh.checks.in_flight())
    }
}

/// At the connection cap: closes the client connection idle the longest
/// (no byte of a request pending) to make room for a new one. One scan of
/// the slab, only at the cap. Returns false if every connection is busy.
fn close_idle_client(clients: &mut Slab<Entry>, sh: &mut Shared) -> bool {
    let Some(key) = clients
        .iter()
        .filter_map(|(k, e)| e.conn.idle_since().map(|t| (t, k)))
        .min()
        .map(|(_, k)| k)
    else {
        return false;
    };
    let Some(e) = clients.try_remove(key) else {
        return false;
    };
    let mut conn = e.conn;
    conn.close_for_room(sh);
    conn.close(sh, false);
    true
}

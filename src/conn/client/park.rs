//! A client connection as the loop's slab holds it: the whole machine
//! ([`ClientConn`], boxed) while it has something to do, and only what
//! waiting needs ([`Parked`], inline) while it waits for a request with
//! no byte of it buffered — a fresh connection before its first byte, and
//! a keep-alive connection between requests (ARCHITECTURE.md §4, "What an
//! idle connection holds").
//!
//! Why: most client connections of a busy proxy wait (10,000 idle
//! keep-alive clients is an ordinary evening). The machine is 456 bytes
//! (buffer slots, head scanner, exchange, access-record fields, timer
//! inputs); a slab of them costs that per connection. Parked, a connection
//! costs its id, transport (socket and TLS session box), readiness,
//! address, idle time, request count and five flags: 88 bytes in a
//! release build (mio adds a selector id to each socket in debug builds),
//! and no heap allocation. The machine is rebuilt (one allocation of its
//! size, freed when it parks) when an event or timer needs it, and parked
//! after a timer that leaves it waiting, or by the loop up to 50 ms after
//! a drive that leaves it waiting (`event_loop::park_later`: a busy
//! keep-alive connection is not parked between its requests).
//!
//! What it must not know: HTTP, how bytes move; it only decides which
//! form a connection takes and delegates everything to the machine.

use std::net::SocketAddr;
use std::time::Instant;

use crate::conn::h2::H2Conn;
use crate::conn::transport::Transport;

use super::deadline::wait_deadline;
use super::{ClientConn, ClientSide, State};
use crate::conn::io::Io;
use crate::conn::{KeepAlive, Shared};
use crate::error::Timeout;
use crate::event_loop::token::ConnId;
use crate::http::HeadScanner;

/// What a client connection keeps while it waits for a request with no
/// byte of it buffered: everything else of the machine is then at its
/// starting value (no buffers, no exchange, a fresh head scanner).
pub(crate) struct Parked {
    id: ConnId,
    stream: Transport,
    io: Io,
    addr: SocketAddr,
    /// Since when it waits: accepted at (a TLS connection: its handshake
    /// ended at), or its last response went out.
    idle_since: Instant,
    /// Requests served on it (`ClientConn::requests`, at most
    /// `u32::MAX`: `max_requests_per_connection` is a `u32`, and a
    /// connection that reached it is never parked again). Four bytes
    /// that fit in what was padding: the form stays the same size.
    requests: u32,
    keep_alive: KeepAlive,
    draining: bool,
    idle_counted: bool,
    /// Its PROXY header is still to come (`ClientConn::await_proxy`).
    await_proxy: bool,
    /// A PROXY header was taken (`ClientConn::proxied`).
    proxied: bool,
    /// Counted per client address (`ClientConn::conn_counted`).
    conn_counted: bool,
}

/// One client connection in the loop's slab: parked or live, or an
/// HTTP/2 connection.
pub(crate) enum Client {
    /// Waiting with nothing buffered.
    Parked(Parked),
    /// The whole machine.
    Live(Box<ClientConn>),
    /// An HTTP/2 connection (`conn::h2`): never parked; an idle one holds
    /// no buffer.
    H2(Box<H2Conn>),
    /// Only for the instant a connection moves between the two forms.
    Moving,
}

impl From<ClientConn> for Client {
    /// A machine in the slab's form: parked if it waits with nothing
    /// buffered (a freshly accepted connection does).
    fn from(c: ClientConn) -> Self {
        if c.parkable() {
            Client::Parked(c.into_parked())
        } else {
            Client::Live(Box::new(c))
        }
    }
}

impl Client {
    /// Records an event of the client socket (the loop then drives it).
    pub(crate) fn on_event(&mut self, event: &mio::event::Event) {
        match self {
            Client::Parked(p) => p.io.on_event(event),
            Client::Live(c) => c.side.io.on_event(event),
            Client::H2(h) => h.on_event(event),
            Client::Moving => {}
        }
    }

    /// The connection ended; the loop frees it with `close`.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Client::Parked(_) => false,
            Client::Live(c) => c.is_closed(),
            Client::H2(h) => h.is_closed(),
            Client::Moving => true,
        }
    }

    /// [`ClientConn::drive`] (the loop parks it later if it waits:
    /// [`Client::waits_live`]); a
    /// connection that turned to HTTP/2 is handed over and driven as such.
    pub(crate) fn drive(&mut self, sh: &mut Shared) -> bool {
        if let Client::H2(h) = self {
            return h.drive(sh);
        }
        let more = self.live().is_some_and(|c| c.drive(sh));
        if self.hand_over_h2(sh) {
            return self.drive(sh);
        }
        more
    }

    /// True if the machine is live and waits with nothing buffered: the
    /// loop parks it a moment later ([`Client::park`], `event_loop::park_later`)
    /// unless a request comes first.
    pub(crate) fn waits_live(&self) -> bool {
        matches!(self, Client::Live(c) if c.parkable())
    }

    /// Turns a connection that asked for HTTP/2 into the HTTP/2 machine.
    /// True if it did.
    fn hand_over_h2(&mut self, sh: &mut Shared) -> bool {
        if let Client::Live(c) = self
            && c.wants_h2()
            && let Client::Live(c) = std::mem::replace(self, Client::Moving)
        {
            *self = Client::H2(Box::new(H2Conn::new(c.into_h2(), sh)));
            return true;
        }
        false
    }

    /// [`ClientConn::on_timer`], parked again afterwards if it waits.
    pub(crate) fn on_timer(&mut self, sh: &mut Shared) {
        if let Client::H2(h) = self {
            h.on_timer(sh);
            return;
        }
        if let Some(c) = self.live() {
            c.on_timer(sh);
        }
        self.park();
    }

    /// [`ClientConn::begin_drain`] (the loop drives it next).
    pub(crate) fn begin_drain(&mut self, sh: &mut Shared) {
        if let Client::H2(h) = self {
            h.begin_drain(sh);
            return;
        }
        if let Some(c) = self.live() {
            c.begin_drain();
        }
    }

    /// [`ClientConn::close_for_room`].
    pub(crate) fn close_for_room(&mut self, sh: &mut Shared) {
        if let Client::H2(h) = self {
            h.close_for_room(sh);
            return;
        }
        if let Some(c) = self.live() {
            c.close_for_room(&sh.stats);
        }
    }

    /// [`ClientConn::deadline`]; a parked connection's is the wait's.
    pub(crate) fn deadline(&self, sh: &Shared) -> Option<(Instant, Timeout)> {
        match self {
            Client::Parked(p) => Some(wait_deadline(
                &sh.cfg,
                p.requests > 0,
                p.draining,
                p.idle_since,
            )),
            Client::Live(c) => c.deadline(sh),
            Client::H2(h) => h.deadline(sh),
            Client::Moving => None,
        }
    }

    /// [`ClientConn::idle_since`]: since when it waits in keep-alive.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        match self {
            Client::Parked(p) => (p.requests > 0 && !p.draining).then_some(p.idle_since),
            Client::Live(c) => c.idle_since(),
            Client::H2(h) => h.idle_since(),
            Client::Moving => None,
        }
    }

    /// [`ClientConn::close`] (a parked connection is rebuilt in place for
    /// it, without an allocation).
    pub(crate) fn close(self, sh: &mut Shared, cut: bool) {
        match self {
            Client::Parked(p) => ClientConn::unpark(p).close(sh, cut),
            Client::Live(c) => c.close(sh, cut),
            Client::H2(h) => h.close(sh, cut),
            Client::Moving => {}
        }
    }

    /// The machine, rebuilt from the parked form if needed.
    fn live(&mut self) -> Option<&mut ClientConn> {
        if let Client::Parked(_) = self
            && let Client::Parked(p) = std::mem::replace(self, Client::Moving)
        {
            *self = Client::Live(Box::new(ClientConn::unpark(p)));
        }
        match self {
            Client::Live(c) => Some(c),
            _ => None,
        }
    }

    /// Parks a live connection that waits with nothing buffered (any
    /// other is left as it is).
    pub(crate) fn park(&mut self) {
        if let Client::Live(c) = self
            && c.parkable()
            && let Client::Live(c) = std::mem::replace(self, Client::Moving)
        {
            *self = Client::Parked(c.into_parked());
        }
    }
}

impl ClientConn {
    /// True when nothing but [`Parked`]'s fields differs from a fresh
    /// machine's: waiting for a head with no byte of it, nothing to write,
    /// no exchange or own answer, no EOF, no lingering close pending.
    fn parkable(&self) -> bool {
        self.state == State::Head
            && self.side.inbuf.is_none()
            && self.side.out.is_none()
            && !self.side.read_eof
            && self.exchange.is_none()
            && self.own_reply.is_none()
            && self.head_started.is_none()
            && !self.linger
            && !self.pipelined
            // A TLS session mid-handshake keeps its own deadline, and one
            // holding records or plaintext must be driven, not wait for
            // an event that will not come.
            && !self.side.stream.holds_work()
    }

    /// The parked form (only for a [`ClientConn::parkable`] machine: what
    /// else it holds is dropped).
    fn into_parked(mut self) -> Parked {
        // A TLS session gives its record storage back (§4).
        self.side.stream.fit_idle();
        Parked {
            id: self.id,
            stream: self.side.stream,
            io: self.side.io,
            addr: self.side.addr,
            // While no request was served, `idle_since` is the accept
            // time, or a TLS handshake's end (`ClientConn::idle_since`).
            idle_since: self.idle_since,
            requests: u32::try_from(self.requests).unwrap_or(u32::MAX),
            keep_alive: self.keep_alive,
            draining: self.draining,
            idle_counted: self.idle_counted,
            await_proxy: self.await_proxy,
            proxied: self.proxied,
            conn_counted: self.conn_counted,
        }
    }

    /// The machine of a parked connection. What parking dropped was at its
    /// starting value; the last write to the client is taken as the start
    /// of the wait (nothing was pending since, so no timer reads it
    /// before the next write).
    fn unpark(p: Parked) -> ClientConn {
        ClientConn {
            id: p.id,
            side: ClientSide {
                stream: p.stream,
                io: p.io,
                addr: p.addr,
                inbuf: None,
                out: None,
                read_eof: false,
                write_shut: false,
                write_at: p.idle_since,
            },
            state: State::Head,
            keep_alive: p.keep_alive,
            scanner: HeadScanner::new(),
            exchange: None,
            own_reply: None,
            requests: u64::from(p.requests),
            accepted_at: p.idle_since,
            idle_since: p.idle_since,
            head_started: None,
            idle_counted: p.idle_counted,
            draining: p.draining,
            linger: false,
            linger_queued: usize::MAX,
            pipelined: false,
            await_proxy: p.await_proxy,
            proxied: p.proxied,
            client: None,
            conn_counted: p.conn_counted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Client, Parked};
    use crate::conn::transport::Transport;

    /// A parked connection is its transport (whose size differs between
    /// debug and release builds: mio's selector id) and 72 bytes; the
    /// request count sits where padding was. The slab holds `Client`, no
    /// larger.
    #[test]
    fn the_parked_form_stays_small() {
        let rest = std::mem::size_of::<Parked>() - std::mem::size_of::<Transport>();
        assert!(rest <= 72, "{rest} bytes beside the transport");
        assert_eq!(std::mem::size_of::<Client>(), std::mem::size_of::<Parked>());
    }
}

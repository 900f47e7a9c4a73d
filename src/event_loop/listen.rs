//! The listening socket and the descriptor budget (ARCHITECTURE.md §4,
//! §12).
//!
//! What it must not know: connections, HTTP.

use std::io;
use std::net::SocketAddr;

use std::sync::Arc;

use log::info;
use mio::Interest;
use mio::net::TcpListener;

use crate::config::Config;

/// Length of the accept queue asked of the kernel (capped by somaxconn).
const LISTEN_BACKLOG: i32 = 1024;

/// Descriptors kept aside from the connection budget (poll, waker,
/// listener, logging, signal pipe).
const FD_RESERVE: usize = 32;

/// A listening socket with `SO_REUSEADDR` and `SO_REUSEPORT`, so this
/// process's own workers (and a deliberate takeover) share the port and the
/// kernel spreads connections across them.
///
/// Unless `takeover`, the address is first bound *without* `SO_REUSEPORT`
/// ([`check_free`]): if anything listens there already (another sluice
/// included, whose sockets have `SO_REUSEPORT`), that bind fails with
/// `EADDRINUSE` and so does this call, instead of silently sharing the port
/// with an unrelated process.
///
/// With `defer_accept`, the listener has `TCP_DEFER_ACCEPT`
/// ([`DEFER_ACCEPT_SECS`]): see [`set_defer_accept`].
///
/// Errors name the address: `bind() to 127.0.0.1:80 failed: Permission
/// denied (os error 13)` (nginx's wording).
pub(crate) fn bind_listener(
    addr: SocketAddr,
    takeover: bool,
    defer_accept: bool,
) -> io::Result<TcpListener> {
    let bind = || -> io::Result<TcpListener> {
        let addr = if takeover { addr } else { check_free(addr)? };
        let socket = reuse_port_socket(addr)?;
        socket.set_nonblocking(true)?;
        // Accepted sockets inherit TCP_NODELAY from the listener (Linux
        // copies it at accept): no setsockopt per client connection.
        socket.set_tcp_nodelay(true)?;
        if defer_accept {
            set_defer_accept(&socket, DEFER_ACCEPT_SECS)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        Ok(TcpListener::from_std(socket.into()))
    };
    bind().map_err(|e| bind_error(addr, e))
}

/// A listening socket inherited from a predecessor loop of this process
/// (`Server::succeed`); it keeps the options it was bound with
/// (`TCP_DEFER_ACCEPT` is set once the new loop is built: [`set_defer`]).
///
/// Errors: the `fcntl` error.
pub(crate) fn inherit(listener: std::net::TcpListener) -> io::Result<TcpListener> {
    listener.set_nonblocking(true)?;
    Ok(TcpListener::from_std(listener))
}

/// Turns `TCP_DEFER_ACCEPT` on ([`DEFER_ACCEPT_SECS`]) or off.
///
/// Errors: the `setsockopt` error.
pub(crate) fn set_defer(socket: &impl std::os::fd::AsRawFd, on: bool) -> io::Result<()> {
    set_defer_accept(socket, if on { DEFER_ACCEPT_SECS } else { 0 })
}

/// How long, in seconds, the kernel holds a connection that sent no byte
/// before handing it to `accept` anyway (`TCP_DEFER_ACCEPT`; Linux rounds
/// it up to its SYN-ACK retransmission steps: the first is at 1 s).
pub(crate) const DEFER_ACCEPT_SECS: i32 = 1;

/// Sets `TCP_DEFER_ACCEPT` to `secs` (0: off) on a listening socket: the
/// kernel completes the handshake as usual, but wakes the loop and lets
/// `accept` return the connection only once its first bytes (the request)
/// arrived, or `secs` passed. An HTTP client speaks first, so the loop
/// accepts and reads a connection in one wake-up instead of two, and a
/// connection that sends nothing takes no descriptor or slot until then.
/// nginx: `listen … deferred`; HAProxy: `bind … defer-accept`.
///
/// Errors: the `setsockopt` error.
pub(crate) fn set_defer_accept(socket: &impl std::os::fd::AsRawFd, secs: i32) -> io::Result<()> {
    let value: libc::c_int = secs;
    // SAFETY: a valid descriptor and a pointer to a c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An unbound TCP socket for `addr` with `SO_REUSEADDR` + `SO_REUSEPORT`.
pub fn reuse_port_socket(addr: SocketAddr) -> io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    Ok(socket)
}

/// Checks that nothing listens on `addr`: binds it without `SO_REUSEPORT`
/// (with `SO_REUSEADDR`, so connections in `TIME_WAIT` do not count) and
/// closes that socket again. Returns the address with its real port (port
/// 0 becomes the port the kernel chose).
///
/// Errors: the bind's own error (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`).
pub fn check_free(addr: SocketAddr) -> io::Result<SocketAddr> {
    use socket2::{Domain, Protocol, Socket, Type};
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    probe.bind(&addr.into())?;
    probe
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("bound address is not an IP address"))
}

/// `e` with the address in front, nginx's way: `bind() to ADDR failed: …`.
pub fn bind_error(addr: SocketAddr, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("bind() to {addr} failed: {e}"))
}

/// True if a connection waits in `listener`'s accept queue (one `poll`
/// with a zero timeout; asked only at the connection cap, before an idle
/// client is closed to make room for it).
pub(crate) fn has_pending(listener: &TcpListener) -> bool {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut fds, 1, 0) };
    n > 0 && fds.revents & libc::POLLIN != 0
}

/// The descriptor budget (docs/operations.md, "Descriptor budget"): what the open-file
/// limit leaves for connections, and how many clients fit in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FdBudget {
    /// Descriptors for client and upstream sockets: the soft limit minus
    /// `FD_RESERVE`.
    pub descriptors: usize,
    /// Clients accepted at most: each is budgeted two descriptors, its own
    /// and one upstream socket reserved for it, so a busy client never
    /// finds none (HAProxy's rule: `maxconn` × 2 + reserve ≤ `ulimit -n`).
    pub max_connections: usize,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one and fits
/// `max_connections` to it: every client is budgeted two descriptors (its
/// socket and an upstream one), so the cap is lowered to half of what the
/// limit leaves after `FD_RESERVE`: with a warning if the user asked for
/// more, at `info` if the default did (an expected adjustment).
/// The loops of one process share that budget (`fd_share`). Pooled idle upstream
/// sockets use what busy clients leave; the loop closes them first when
/// a new client needs the room.
pub(crate) fn fit_to_fd_limit(max_connections: usize) -> FdBudget {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    let soft = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return FdBudget {
                descriptors: usize::MAX,
                max_connections,
            };
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
    let descriptors = soft.saturating_sub(FD_RESERVE).max(2);
    let clients_fit = descriptors / 2;
    let max_connections = if clients_fit < max_connections {
        // Once per value asked for: a reload binds a new loop, mostly with
        // the same setting.
        static WARNED_FOR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        if WARNED_FOR.swap(max_connections, std::sync::atomic::Ordering::Relaxed) != max_connections
        {
            // The default is fitted quietly; a value the user chose, loudly.
            let level = if max_connections == crate::Config::default().max_connections {
                log::Level::Info
            } else {
                log::Level::Warn
            };
            log::log!(
                level,
                "max-connections {max_connections} lowered to {clients_fit}: the open-file limit \
                 is {soft} and each client is budgeted 2 descriptors (its own and an upstream \
                 one); raise it with ulimit -n"
            );
        }
        clients_fit
    } else {
        max_connections
    };
    FdBudget {
        descriptors,
        max_connections,
    }
}

/// One listening socket of the loop: shared with the handle (`Weak`), so
/// that a reload's successor can serve on the same socket
/// (`Server::succeed`), and whether its connections speak TLS.
#[derive(Debug)]
pub(super) struct Listener {
    /// The socket, registered under `token::listener(its index)`.
    pub socket: Arc<TcpListener>,
    /// A `listen_tls` address: accepted connections get a server session.
    pub tls: bool,
}

/// The listeners of `config`, in order (every `listen` address, then
/// every `listen_tls` one; listener `i` is registered under
/// [`super::token::listener`]`(i)`), and the server configuration the TLS
/// ones' connections use (`tls::server_config`: certificates, SNI, ALPN,
/// tickets; `None` without `listen_tls`). `inherited[i]`: a predecessor's
/// copy of listener `i` to serve on instead of binding (its
/// `TCP_DEFER_ACCEPT` is set to `config`'s once the loop is built,
/// [`set_defer`]).
///
/// Errors: no address at all, a bind (the error names the address), the
/// certificates (the error names the file).
pub(super) fn open_listeners(
    config: &Config,
    mut inherited: Vec<Option<std::net::TcpListener>>,
    registry: &mio::Registry,
) -> io::Result<(Vec<Listener>, Option<crate::tls::ServerTls>)> {
    if config.listen.is_empty() && config.listen_tls.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no listener is configured (listen or listen_tls)",
        ));
    }
    let tls = if config.listen_tls.is_empty() {
        None
    } else {
        Some(
            crate::tls::server_config(config)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
        )
    };
    inherited.resize_with(config.listen.len() + config.listen_tls.len(), || None);
    let addrs = config.listen.iter().map(|a| (a, false));
    let addrs = addrs.chain(config.listen_tls.iter().map(|a| (a, true)));
    let mut listeners = Vec::with_capacity(inherited.len());
    for (i, ((addr, tls), old)) in addrs.zip(inherited).enumerate() {
        let mut socket = match old {
            Some(l) => inherit(l)?,
            None => bind_listener(*addr, config.takeover, config.defer_accept)?,
        };
        registry.register(&mut socket, super::token::listener(i), Interest::READABLE)?;
        if tls {
            info!("listening for TLS on {}", socket.local_addr()?);
        }
        listeners.push(Listener {
            socket: Arc::new(socket),
            tls,
        });
    }
    Ok((listeners, tls))
}

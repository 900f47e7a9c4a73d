//! The listening socket and the descriptor budget (ARCHITECTURE.md §4,
//! §12).
//!
//! What it must not know: connections, HTTP.

use std::io;
use std::net::SocketAddr;

use log::warn;
use mio::net::TcpListener;

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
/// Errors name the address: `bind() to 127.0.0.1:80 failed: Permission
/// denied (os error 13)` (nginx's wording).
pub(crate) fn bind_listener(addr: SocketAddr, takeover: bool) -> io::Result<TcpListener> {
    let bind = || -> io::Result<TcpListener> {
        let addr = if takeover { addr } else { check_free(addr)? };
        let socket = reuse_port_socket(addr)?;
        socket.set_nonblocking(true)?;
        // Accepted sockets inherit TCP_NODELAY from the listener (Linux
        // copies it at accept): no setsockopt per client connection.
        socket.set_tcp_nodelay(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        Ok(TcpListener::from_std(socket.into()))
    };
    bind().map_err(|e| bind_error(addr, e))
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

/// Raises the soft `RLIMIT_NOFILE` to the hard one and fits
/// `max_connections` to it: client sockets alone must fit (else it is
/// lowered, with a warning, so a full house pauses accepting instead of
/// failing on `EMFILE`), and a warning says when a client and its upstream
/// socket each (2 per connection, HAProxy's rule) could exhaust the limit
/// under full load. Idle keep-alive clients hold no upstream socket, so the
/// limit is not halved up front.
pub(crate) fn fit_to_fd_limit(max_connections: usize) -> usize {
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

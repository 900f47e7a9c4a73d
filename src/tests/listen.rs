//! The listener hands out sockets with TCP_NODELAY already set (inherited
//! at accept), so no setsockopt is needed per client connection; it has
//! TCP_DEFER_ACCEPT unless told not to.

use std::time::{Duration, Instant};

use crate::event_loop::listen::bind_listener;

#[test]
fn accepted_sockets_inherit_tcp_nodelay_from_the_listener() {
    let listener = bind_listener("127.0.0.1:0".parse().unwrap(), false, true).unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = std::net::TcpStream::connect(addr).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    let (accepted, _) = loop {
        match listener.accept() {
            Ok(pair) => break pair,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    assert!(accepted.nodelay().unwrap());
}

/// The listener's `TCP_DEFER_ACCEPT`, in seconds as the kernel reports it.
fn defer_accept_of(listener: &mio::net::TcpListener) -> libc::c_int {
    use std::os::fd::AsRawFd;
    let mut value: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid descriptor, a c_int and its length.
    let rc = unsafe {
        libc::getsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
    value
}

#[test]
fn the_listener_defers_accepts_unless_told_not_to() {
    let on = bind_listener("127.0.0.1:0".parse().unwrap(), false, true).unwrap();
    assert!(defer_accept_of(&on) > 0);
    let off = bind_listener("127.0.0.1:0".parse().unwrap(), false, false).unwrap();
    assert_eq!(defer_accept_of(&off), 0);
}

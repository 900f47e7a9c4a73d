//! The listener hands out sockets with TCP_NODELAY already set (inherited
//! at accept), so no setsockopt is needed per client connection.

use std::time::{Duration, Instant};

use crate::event_loop::listen::bind_listener;

#[test]
fn accepted_sockets_inherit_tcp_nodelay_from_the_listener() {
    let listener = bind_listener("127.0.0.1:0".parse().unwrap(), false).unwrap();
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

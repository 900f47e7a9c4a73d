//! What the pool learned of an upstream's idle limit survives a reload
//! (issue 27 item 4): a server that closes idle keep-alive connections
//! after 2 s without saying so is seen doing it once; after SIGHUP the
//! new loop still knows, so a POST does not take a pooled connection
//! that is close to that limit (it could be closed under the request,
//! which a POST cannot be retried after) but opens a new one. With
//! `--workers 2` the new worker of the index that learned it says so.

mod util;

use std::net::SocketAddr;
use std::time::Duration;

use util::*;

/// The server closes a connection idle this long.
const SERVER_IDLE: Duration = Duration::from_secs(2);

/// Waits (bounded) until the admin's `/metrics` shows a pooled
/// connection closed by its peer.
fn wait_peer_closed(admin: SocketAddr) {
    let mut text = String::new();
    assert!(
        wait_until(Duration::from_secs(6), || {
            text = String::from_utf8_lossy(&http_get(admin, "/metrics").1).into_owned();
            text.lines().any(|l| {
                l.starts_with("sluice_pool_evictions_total{")
                    && l.contains("reason=\"peer_closed\"")
                    && l.ends_with(" 1")
            })
        }),
        "{text}"
    );
}

fn config(port: u16, admin: SocketAddr, up: SocketAddr, workers: usize) -> TempFile {
    TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"{admin}\"\nworkers = {workers}\n\
         access_log = \"off\"\n[[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n"
    ))
}

#[test]
fn a_learned_idle_limit_survives_a_reload_and_keeps_a_post_off_an_old_connection() {
    let up = Upstream::start(close_when_idle(SERVER_IDLE, ok_response("x")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = config(port, admin, up.addr, 1);
    let p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    // Learn: one connection parked until the server closes it.
    assert_eq!(
        Client::connect(loopback(port)).round_trip(get("/")).status,
        200
    );
    wait_peer_closed(admin);
    p.signal(libc::SIGHUP);
    let kept = p.wait_line(WAIT, |l| l.contains("reload: kept the health"));
    assert!(kept.contains("the idle limits of 1 peer"), "{kept}");
    p.wait_line(WAIT, |l| l.contains("SIGHUP: reloaded"));
    // The new loop parks a connection; a POST comes when it has been idle
    // for more than seven eighths of the learned limit (1.75 s), before
    // the server closes it (2 s).
    let mut c = Client::connect(loopback(port));
    assert_eq!(c.round_trip(get("/")).status, 200);
    let before = up.accepted();
    std::thread::sleep(Duration::from_millis(1850));
    let post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    let r = Client::connect(loopback(port)).round_trip(post);
    assert_eq!(r.status, 200);
    // A new connection for the POST: the old one was passed over.
    assert_eq!(up.accepted(), before + 1);
}

#[test]
fn with_workers_the_successor_of_the_worker_that_learned_keeps_it() {
    let up = Upstream::start(close_when_idle(SERVER_IDLE, ok_response("x")));
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = config(port, admin, up.addr, 2);
    let mut p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("all workers ready"));
    p.adopt_workers();
    assert_eq!(
        Client::connect(loopback(port)).round_trip(get("/")).status,
        200
    );
    wait_peer_closed(admin);
    p.signal(libc::SIGHUP);
    p.wait_line(Duration::from_secs(10), |l| l.contains("SIGHUP: reloaded"));
    // One of the two new workers took over what its predecessor learned.
    p.wait_line(WAIT, |l| {
        l.contains("reload: kept the health") && l.contains("the idle limits of 1 peer from worker")
    });
}

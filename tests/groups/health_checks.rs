//! Active checks: a dead server out and back after rise, an unanswered check timed out.

use super::*;

#[test]
fn active_checks_take_a_dead_server_out_and_bring_it_back_after_rise() {
    let a = named("a", alive());
    let b = named("b", alive());
    let b_addr = b.addr;
    let servers = [a.addr.to_string(), b_addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, checked(50, 500))], vec![]);
    drop(b);
    assert_eventually("b marked down", || {
        proxy.stats.snapshot().servers_marked_down >= 1
    });
    let seen = spread(proxy.addr, 1, 20, |_| get("/"));
    assert_eq!(seen.get("b"), None, "{seen:?}");
    // b comes back on the same port.
    let _b2 = restart_on(b_addr, "b");
    assert_eventually("b used again", || {
        spread(proxy.addr, 1, 4, |_| get("/")).contains_key("b")
    });
}

/// A server answering with `name` on `addr` (a port freed a moment ago).
fn restart_on(addr: SocketAddr, name: &'static str) -> thread::JoinHandle<()> {
    let mut l = std::net::TcpListener::bind(addr);
    // The killed server's accept thread lets go of the port a moment later.
    wait_until(WAIT, || {
        l = std::net::TcpListener::bind(addr);
        l.is_ok()
    });
    let l = l.expect("rebind the killed server's port");
    thread::spawn(move || {
        for s in l.incoming().take(50) {
            let Ok(s) = s else { continue };
            thread::spawn(move || {
                let mut w = Wire::new(s, Duration::from_secs(2));
                while let Ok(Some(_)) = w.read_head() {
                    if w.write(&ok_response(name)).is_err() {
                        return;
                    }
                }
            });
        }
    })
}

#[test]
fn a_health_check_that_is_never_answered_times_out_and_counts() {
    let silent = Upstream::start(never_answer());
    let a = named("a", alive());
    let servers = [silent.addr.to_string(), a.addr.to_string()];
    let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
    let proxy = proxy_with(vec![group("app", &refs, checked(50, 100))], vec![]);
    assert_eventually("the silent server marked down", || {
        let s = proxy.stats.snapshot();
        s.health_checks_failed >= 2 && s.servers_marked_down >= 1
    });
    let seen = spread(proxy.addr, 1, 10, |_| get("/"));
    assert_eq!(seen.get("a"), Some(&10));
}

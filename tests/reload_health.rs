//! Health survives a reload (issue 27 item 4): a server the checks took
//! down is still down in the new loop after SIGHUP with the file
//! unchanged, so no request is sent to it (the old code forgot, and the
//! next requests failed over with `retry 1 … connection refused` until
//! the checks took it out again).

mod util;

use std::time::Duration;

use util::*;

#[test]
fn a_server_checked_down_is_still_down_after_a_reload() {
    let a = Upstream::start(respond_forever(ok_response("a")));
    let b = Upstream::start(respond_forever(ok_response("b")));
    let b_addr = b.addr;
    let port = free_port();
    // A long interval: after the reload, the new loop's first check of b
    // comes late, so only carried health keeps it out.
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\naccess_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\", \"{b_addr}\"]\n\
         [upstream.health_check]\ninterval = \"150ms\"\ntimeout = \"100ms\"\n\
         fall = 2\nrise = 2\n",
        a.addr
    ));
    let p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    drop(b);
    p.wait_line(WAIT, |l| l.contains("-> checked_down"));
    p.signal(libc::SIGHUP);
    let kept = p.wait_line(WAIT, |l| l.contains("reload: kept the health"));
    assert!(
        kept.contains(&format!("app {b_addr} checked_down")),
        "{kept}"
    );
    p.wait_line(WAIT, |l| l.contains("SIGHUP: reloaded"));
    let mut c = Client::connect(loopback(port));
    for i in 0..10 {
        let r = c.round_trip(get("/"));
        assert_eq!((r.status, r.body_str()), (200, "a".to_string()), "{i}");
    }
    // Wait a little for a retry line the old code would have written.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.count(|l| l.contains("retry ")), 0, "{}", p.log());
}

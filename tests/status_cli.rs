//! `sluice status` (issue 27 items 3 and 5): the incident as a table — one
//! server ejected, one checked down, one in maintenance set with
//! `sluice status --maintenance` — from the built binary.

mod util;

use util::*;

#[test]
fn sluice_status_prints_each_server_with_its_state_and_sets_maintenance() {
    let refused = refused_addr();
    let good = Upstream::start(respond_forever(ok_response("good")));
    let spare = Upstream::start(respond_forever(ok_response("spare")));
    let dead = Upstream::start(close_on_request());
    let (port, admin) = (free_port(), loopback(free_port()));
    let cfg = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"{admin}\"\nadmin_write = true\n\
         access_log = \"off\"\n\
         [[upstream]]\nname = \"app\"\nmax_fails = 1\n\
         servers = [\"{refused}\", \"{}\", \"{}\"]\n\
         [[upstream]]\nname = \"api\"\nservers = [\"{}\"]\n\
         [upstream.health_check]\ninterval = \"50ms\"\ntimeout = \"300ms\"\nfall = 2\n",
        spare.addr, good.addr, dead.addr
    ));
    let p = SluiceProcess::start(&["--config", cfg.path()]);
    p.wait_line(STARTUP, |l| l.contains("listening on"));
    let admin_s = admin.to_string();
    let spare_s = spare.addr.to_string();
    let set = run_sluice(&[
        "status",
        "--admin",
        &admin_s,
        "--maintenance",
        "app",
        &spare_s,
    ]);
    assert!(set.status.success(), "{}", set.stderr);
    p.wait_line(WAIT, |l| {
        l.contains("ready -> maintenance (asked by 127.0.0.1:")
    });
    assert_eq!(
        Client::connect(loopback(port)).round_trip(get("/")).status,
        200
    );
    p.wait_line(WAIT, |l| l.contains("-> checked_down"));
    let out = run_sluice(&["status", "--admin", &admin_s]);
    assert!(out.status.success(), "{}", out.stderr);
    let t = &out.stdout;
    println!("{t}");
    let line = |addr: &str| {
        t.lines()
            .find(|l| l.contains(addr))
            .unwrap_or("")
            .to_string()
    };
    assert!(t.starts_with("GROUP"), "{t}");
    assert!(line(&refused.to_string()).contains("ejected"), "{t}");
    assert!(
        line(&refused.to_string()).contains("connect refused"),
        "{t}"
    );
    assert!(line(&spare_s).contains("maintenance"), "{t}");
    assert!(line(&good.addr.to_string()).contains(" up "), "{t}");
    assert!(line(&dead.addr.to_string()).contains("checked_down"), "{t}");
    // An admin address nothing listens on: exit 1, with the reason.
    let no = run_sluice(&[
        "status",
        "--admin",
        "127.0.0.1:1",
        "--ready",
        "app",
        &spare_s,
    ]);
    assert_eq!(no.status.code(), Some(1), "{}", no.stderr);
}

#[test]
fn sluice_status_refuses_two_state_flags_and_an_answer_that_is_not_a_sluice_status() {
    // Found by a break-it pass: --drain with --ready applied the drain
    // only and said success; another server's JSON printed an empty table
    // with exit 0.
    let conflict = run_sluice(&[
        "status",
        "--admin",
        "127.0.0.1:9",
        "--drain",
        "app",
        "127.0.0.1:1",
        "--ready",
        "app",
        "127.0.0.1:1",
    ]);
    assert_eq!(conflict.status.code(), Some(2), "{}", conflict.stderr);
    assert!(
        conflict.stderr.contains("cannot be used with"),
        "{}",
        conflict.stderr
    );
    let other = Upstream::start(respond_forever(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
            .to_vec(),
    ));
    let wrong = run_sluice(&["status", "--admin", &other.addr.to_string()]);
    assert_eq!(wrong.status.code(), Some(1), "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains("not a sluice /status"),
        "{}",
        wrong.stderr
    );
    // A proxy port given for the admin one: its redirect said only
    // "301: 301 Moved Permanently" (found by a new-user pass).
    let proxy_port = Upstream::start(respond_forever(
        b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://x/status\r\nContent-Length: 0\r\n\r\n"
            .to_vec(),
    ));
    let redirected = run_sluice(&["status", "--admin", &proxy_port.addr.to_string()]);
    assert_eq!(redirected.status.code(), Some(1), "{}", redirected.stderr);
    assert!(
        redirected.stderr.contains("answered GET /status with 301")
            && redirected.stderr.contains("is it the `admin` address"),
        "{}",
        redirected.stderr
    );
}

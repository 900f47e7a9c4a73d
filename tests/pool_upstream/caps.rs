//! The per-peer and global caps on idle connections, under concurrency too.

use super::*;

#[test]
fn twenty_connections_returned_at_once_leave_per_peer_cap_idle() {
    const N: usize = 20;
    const CAP: usize = 16;
    let gate = Gate::default();
    let conns = Conns::default();
    let upstream = Upstream::start(conns.track(tagged(gate.clone())));
    let proxy = start_forward_proxy(upstream.addr, |c| c.pool_max_idle_per_peer = CAP);
    let mut clients: Vec<Client> = (0..N)
        .map(|i| {
            let mut c = proxy.client();
            c.send(get(&format!("/hold/{i}")));
            c
        })
        .collect();
    gate.wait_arrived(N);
    assert_eq!(upstream.accepted(), N);
    gate.release_all();
    for (i, c) in clients.iter_mut().enumerate() {
        let resp = c.read_response();
        assert_eq!(resp.status, 200, "client {i}");
        assert_eq!(resp.body_str(), format!("/hold/{i}"));
    }
    wait_stat(&proxy, "pool_puts", N as u64, |s| s.pool_puts);
    let st = proxy.stats.snapshot();
    assert_eq!(st.pool_idle, CAP as u64, "{st:?}");
    assert_eq!(st.pool_evicted_cap, (N - CAP) as u64, "{st:?}");
    assert_eventually("the upstream sees 4 connections closed", || {
        conns.ended().len() == N - CAP
    });
    assert_stays(Duration::from_millis(100), "16 stay open", || {
        conns.open() == CAP && conns.ended().len() == N - CAP
    });
}

#[test]
fn global_cap_closes_the_globally_oldest_idle_connection() {
    let (gate_a, gate_b) = (Gate::default(), Gate::default());
    let (conns_a, conns_b) = (Conns::default(), Conns::default());
    let a = Upstream::start(conns_a.track(tagged(gate_a.clone())));
    let b = Upstream::start(conns_b.track(tagged(gate_b.clone())));
    let proxy = start_proxy(
        |c| c.pool_max_idle_total = 2,
        ByPath {
            routes: vec![("/a", a.addr), ("/hold/a", a.addr)],
            default: b.addr,
        },
    );
    // a0 parks first: the globally oldest.
    let mut c1 = proxy.client();
    assert_eq!(conn_of(&c1.round_trip(get("/a/1"))), 0);
    wait_stat(&proxy, "pool_idle", 1, |s| s.pool_idle);

    // Two overlapping requests to b: b0 and b1, returned in that order.
    let mut c2 = proxy.client();
    c1.send(get("/hold/b/1"));
    c2.send(get("/hold/b/2"));
    gate_b.wait_arrived(2);
    gate_b.release("/hold/b/1");
    let first_b = conn_of(&c1.read_response());
    wait_stat(&proxy, "pool_idle", 2, |s| s.pool_idle); // a0, first_b: full
    assert!(conns_a.ended().is_empty() && conns_b.ended().is_empty());
    gate_b.release("/hold/b/2");
    let second_b = conn_of(&c2.read_response());
    // Its put finds the pool full: the oldest (a0, another peer) goes.
    wait_stat(&proxy, "pool_evicted_cap", 1, |s| s.pool_evicted_cap);
    assert_eventually("a0 is closed", || conns_a.ended() == [0]);
    let st = proxy.stats.snapshot();
    assert_eq!(st.pool_idle, 2, "{st:?}");
    assert!(conns_b.ended().is_empty(), "b lost {:?}", conns_b.ended());

    // A new a connection parks: now the oldest is the b returned first.
    assert_eq!(conn_of(&c1.round_trip(get("/a/2"))), 1);
    wait_stat(&proxy, "pool_evicted_cap", 2, |s| s.pool_evicted_cap);
    assert_eventually("the b connection returned first is closed", || {
        conns_b.ended() == [first_b]
    });
    assert_stays(Duration::from_millis(100), "the newer ones stay", || {
        conns_b.ended() == [first_b] && conns_a.ended() == [0]
    });
    assert_eq!(proxy.stats.snapshot().pool_idle, 2);
    // The survivor of b is the one handed out next.
    assert_eq!(conn_of(&c2.round_trip(get("/b/3"))), second_b);
}

#[test]
fn many_puts_never_leave_more_idle_connections_than_the_caps() {
    const CLIENTS: usize = 30;
    const REQUESTS: usize = 200;
    const PER_PEER: usize = 4;
    const TOTAL: usize = 6;
    let (conns_a, conns_b) = (Conns::default(), Conns::default());
    let a = Upstream::start(conns_a.track(tagged(Gate::default())));
    let b = Upstream::start(conns_b.track(tagged(Gate::default())));
    let proxy = start_proxy(
        |c| {
            c.pool_max_idle_per_peer = PER_PEER;
            c.pool_max_idle_total = TOTAL;
        },
        ByPath {
            routes: vec![("/a", a.addr)],
            default: b.addr,
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let monitor = {
        let (stop, peak, stats) = (stop.clone(), peak.clone(), proxy.stats.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                peak.fetch_max(stats.snapshot().pool_idle, Ordering::SeqCst);
                thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (next, addr) = (next.clone(), proxy.addr);
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= REQUESTS {
                        return;
                    }
                    let target = format!("/{}/c{c}/r{i}", if i % 2 == 0 { "a" } else { "b" });
                    let resp = client.round_trip(get(&target));
                    assert_eq!(resp.status, 200, "{target}");
                    assert_eq!(resp.body_str(), target);
                }
            })
        })
        .collect();
    for (c, h) in clients.into_iter().enumerate() {
        assert!(h.join().is_ok(), "client {c} failed");
    }
    // Settled: no request in flight, so every upstream connection still
    // open is parked, and the pool holds no more than the caps.
    assert_eventually("open upstream connections == pool_idle", || {
        let st = proxy.stats.snapshot();
        conns_a.open() + conns_b.open() == st.pool_idle as usize
            && st.upstream_connects
                == st.pool_idle + st.pool_evicted_cap + st.pool_evicted_peer_closed
    });
    stop.store(true, Ordering::SeqCst);
    monitor.join().unwrap();
    let st = proxy.stats.snapshot();
    assert!(st.pool_idle as usize <= TOTAL, "{st:?}");
    assert!(
        peak.load(Ordering::SeqCst) as usize <= TOTAL,
        "pool_idle peaked at {} > {TOTAL}",
        peak.load(Ordering::SeqCst)
    );
    assert!(conns_a.open() <= PER_PEER, "a open: {}", conns_a.open());
    assert!(conns_b.open() <= PER_PEER, "b open: {}", conns_b.open());
    assert_eq!(st.pool_evicted_peer_closed, 0, "{st:?}");
    assert_eq!(
        st.upstream_reuses + st.upstream_connects,
        REQUESTS as u64,
        "{st:?}"
    );
    assert_eq!((st.status_502, st.retries), (0, 0), "{st:?}");
}

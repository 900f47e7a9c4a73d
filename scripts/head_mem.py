#!/usr/bin/env python3
"""Memory per half-sent head and after a peak (issue 14), sluice beside
nginx and HAProxy in the same run. Driven by scripts/head_mem.sh (--bin,
--tmp).

Upstream: nginx serving /big (1 MiB) and / ("ok"). Peers: sluice
(`--workers 1 --max-connections 20000`), nginx as a reverse proxy
(keepalive 128 to the same upstream, worker_connections 16000,
client_header_timeout 10s, access log off) and HAProxy (bench's
haproxy.cfg.in: nbthread 1, maxconn 16000, ulimit-n 20000, timeout
http-request 10s, client/server 60s, no log), each started fresh per phase.
Without haproxy (not installed, not installable) the peers are sluice and
nginx, and the output says so.
  A  N connections that sent nothing (RSS per connection), then 37 bytes
     of a head on each (`GET /part HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n`):
     RSS per connection; threshold (sluice): 4 KiB with a partial head.
  B  READERS slow readers: GET /big, never read; after 5 s all close. Peak
     RSS, and the seconds until RSS is within 2 x base + the free list's
     bound (256 x 64 KiB + 1,024 x 1 KiB); threshold 60 s (sluice).
  C  slowhttptest -H (slowloris) -c 4000 -r 400 -l 30 -i 10 -x 24: peak RSS
     growth over the run and RSS 5 s after; threshold: sluice's growth <=
     the best (smallest) of nginx's and HAProxy's.
Everything on 127.0.0.1; every process stopped by its PID; loops bounded.
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import time

from sluicebench import haproxy, net, nginx, procfs
from sluicebench.procs import Proc, main_guard, run_cmd, wait_for

KiB = 1024
MiB = 1024 * KiB
FREE_LIST_BOUND = 256 * 64 * KiB + 1024 * KiB
PEER_CONNS = 16000  # nginx's worker_connections and HAProxy's maxconn
PEER_NOFILE = 20000  # nginx's worker_rlimit_nofile and HAProxy's ulimit-n
PARTIAL = b"GET /part HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # 37 bytes
assert len(PARTIAL) == 37


def rss(p):
    return procfs.rss_kib(p.pids()) * KiB


def start_peer(kind, args, up_port, tag):
    if kind == "sluice":
        port = net.free_port()
        p = Proc(f"sluice-{tag}", [args.bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                                   f"127.0.0.1:{up_port}", "--workers", "1", "--max-connections", "20000"],
                 os.path.join(args.tmp, f"sluice-{tag}.log"),
                 env=dict(os.environ, RUST_LOG="warn"))
        if not wait_for(lambda: net.listening(port), 10):
            raise RuntimeError("sluice did not start:\n" + p.log_tail())
        return p, port
    if kind == "haproxy":
        p, port, _ = haproxy.start(f"haproxy-{tag}", args.tmp, up_port, PEER_CONNS, PEER_NOFILE)
        return p, port
    p, port, _ = nginx.start(f"nginx-{tag}", args.tmp, nginx.PROXY_LOCATION, upstream_port=up_port,
                             http_extra="client_header_timeout 10s;", nofile=PEER_NOFILE, conns=PEER_CONNS)
    return p, port


def warm(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        net.read_response(s)


def settle(p, secs=1.0):
    time.sleep(secs)
    return rss(p)


def phase_a(args, up_port, kind):
    p, port = start_peer(kind, args, up_port, "a")
    socks = []
    try:
        warm(port)
        base = settle(p, 0.5)
        for _ in range(args.conns):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        silent = settle(p)
        for s in socks:
            s.sendall(PARTIAL)
        partial = settle(p)
        return {"silent": (silent - base) / args.conns, "partial": (partial - base) / args.conns}
    finally:
        for s in socks:
            s.close()
        p.stop()


def phase_b(args, up_port, kind):
    p, port = start_peer(kind, args, up_port, "b")
    socks = []
    try:
        warm(port)
        base = settle(p, 0.5)
        for _ in range(args.readers):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            socks.append(s)
        peak = 0
        for _ in range(10):
            peak = max(peak, rss(p))
            time.sleep(0.5)
        for s in socks:
            s.close()
        socks = []
        target = 2 * base + FREE_LIST_BOUND
        t0 = time.monotonic()
        back = None
        last = rss(p)
        for _ in range(args.recover_secs):
            last = rss(p)
            if last <= target:
                back = time.monotonic() - t0
                break
            time.sleep(1)
        return {"base": base, "peak": peak, "after": last, "target": target, "back": back}
    finally:
        for s in socks:
            s.close()
        p.stop()


def phase_c(args, up_port, kind):
    p, port = start_peer(kind, args, up_port, "c")
    try:
        warm(port)
        base = settle(p, 0.5)
        argv = ["slowhttptest", "-H", "-c", str(args.slow_conns), "-r", str(args.slow_rate),
                "-l", str(args.slow_secs), "-i", "10", "-x", "24", "-p", "3",
                "-u", f"http://127.0.0.1:{port}/", "-o", os.path.join(args.tmp, f"slow-{kind}")]
        log = open(os.path.join(args.tmp, f"slowhttptest-{kind}.log"), "wb")
        sh = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        peak = base
        deadline = time.monotonic() + args.slow_secs + 60
        while sh.poll() is None and time.monotonic() < deadline:
            peak = max(peak, rss(p))
            time.sleep(0.5)
        if sh.poll() is None:
            sh.kill()
        sh.wait(5)
        log.close()
        after = settle(p, 5.0)
        lines = [l for l in open(log.name, errors="replace").read().splitlines() if "service available" in l]
        available = re.sub(r"\x1b\[[0-9;]*m", "", lines[-1].split(":")[-1]).strip() if lines else "?"
        return {"base": base, "peak": peak, "growth": peak - base, "after": after - base,
                "available": available}
    finally:
        p.stop()


def mib(x):
    return f"{x / MiB:.1f} MiB"


def run(args):
    up, up_port, d = nginx.start("origin", args.tmp, """location = /big { root @DIR@; }
        location / { return 200 "ok"; }""")
    # The origin's file (written after start: the root is its directory).
    with open(os.path.join(d, "big"), "wb") as f:
        f.write(b"x" * MiB)
    ok = True
    try:
        peers = ["sluice", "nginx"]
        if haproxy.find():
            peers.append("haproxy")
        else:
            print("haproxy not found and not installed: peers are sluice and nginx only; "
                  "C's threshold is nginx's growth alone\n")
        a = {k: phase_a(args, up_port, k) for k in peers}
        print(f"A. {args.conns} connections (RSS per connection)")
        print("| peer | sent nothing | 37 bytes of a head | threshold | verdict |")
        print("|---|---|---|---|---|")
        for k in peers:
            good = k != "sluice" or a[k]["partial"] <= 4 * KiB
            ok &= good
            print(f"| {k} | {a[k]['silent'] / KiB:.2f} KiB | {a[k]['partial'] / KiB:.2f} KiB | "
                  f"{'4 KiB' if k == 'sluice' else '-'} | {('PASS' if good else 'FAIL') if k == 'sluice' else '-'} |")
        b = {k: phase_b(args, up_port, k) for k in peers}
        print(f"\nB. {args.readers} slow readers, then all close")
        print("| peer | base | peak | after | 2 x base + free list | back within | threshold | verdict |")
        print("|---|---|---|---|---|---|---|---|")
        for k in peers:
            r = b[k]
            good = k != "sluice" or r["back"] is not None
            ok &= good
            back = "never (%d s)" % args.recover_secs if r["back"] is None else f"{r['back']:.0f} s"
            print(f"| {k} | {mib(r['base'])} | {mib(r['peak'])} | {mib(r['after'])} | {mib(r['target'])} | "
                  f"{back} | {'60 s' if k == 'sluice' else '-'} | {('PASS' if good else 'FAIL') if k == 'sluice' else '-'} |")
        c = {k: phase_c(args, up_port, k) for k in peers}
        print(f"\nC. slowhttptest -H -c {args.slow_conns} -r {args.slow_rate} -l {args.slow_secs}")
        print("| peer | base | peak growth | growth 5 s after | service available (end) | threshold | verdict |")
        print("|---|---|---|---|---|---|---|")
        others = [k for k in peers if k != "sluice"]
        best_peer = min(others, key=lambda k: c[k]["growth"])
        best = c[best_peer]["growth"]
        for k in peers:
            r = c[k]
            good = k != "sluice" or r["growth"] <= best
            ok &= good
            print(f"| {k} | {mib(r['base'])} | {mib(r['growth'])} | {mib(r['after'])} | {r['available']} | "
                  f"{'<= ' + mib(best) + ' (' + best_peer + ')' if k == 'sluice' else '-'} | {('PASS' if good else 'FAIL') if k == 'sluice' else '-'} |")
        return 0 if ok else 1
    finally:
        Proc.stop_all()


def main():
    ap = argparse.ArgumentParser(prog="head_mem.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--readers", type=int, default=5000)
    ap.add_argument("--recover-secs", type=int, default=60)
    ap.add_argument("--slow-conns", type=int, default=4000)
    ap.add_argument("--slow-rate", type=int, default=400)
    ap.add_argument("--slow-secs", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(conns=500, readers=1000, slow_conns=1000, slow_rate=200, slow_secs=10)
    args = ap.parse_args()
    if not (1 <= args.conns <= 5000 and 1 <= args.readers <= 6000 and 1 <= args.recover_secs <= 120):
        ap.error("--conns 1..5000, --readers 1..6000, --recover-secs 1..120")
    return main_guard(run, args, "head_mem")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Keep-alive races on pooled upstream connections (issue 14). Driven by
scripts/pool_race.sh (--bin, --tmp).

Upstreams (both kept for the whole run; requests and connections counted
at the upstream, as deltas per proxy):
  nginx    `keepalive_timeout 1s`, `return 200 "ok"`; its access log holds
           each request's connection serial number
  erratic  this file run as `pool_race.py upstream STATS`: thread per
           connection; closes an idle connection after a wait drawn in
           0.5-3 s, and 3 % of connections right after a response, silently
           (with --close-delay MS: a wait drawn in 0-MS ms after that
           response first, reading nothing: the issue's minimal case, where
           a request sent meanwhile is lost)
Proxies, one at a time against each upstream: sluice (`--workers 1`; its
counters from the `stopped:` line at SIGTERM), nginx (`keepalive 128`,
defaults otherwise), and with --sluice-old an older sluice.
Load: two wrk processes at once (GET, POST `a=1`), `-t1 -c25`, with
scripts/pool_race.lua: 700 ms bursts and pauses of 0.3-3 s, the same
schedule in both. Every 5xx is the proxy's own (both upstreams answer 200).
Everything on 127.0.0.1; every process stopped by its PID; loops bounded.
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from sluicebench import net, nginx, upstream
from sluicebench.net import read_head
from sluicebench.procs import Proc, main_guard, self_child, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


# ---------------------------------------------------------------------------
# The erratic upstream
# ---------------------------------------------------------------------------

def upstream_main(stats_path):
    lock = threading.Lock()
    close_delay = int(os.environ.get("RACE_CLOSE_DELAY_MS", "0")) / 1000.0
    c = {"conns": 0, "requests": 0, "idle_closes": 0, "quick_closes": 0}

    def write_stats():
        with lock:
            line = " ".join(f"{k}={v}" for k, v in c.items())
        with open(stats_path + ".new", "w") as f:
            f.write(line + "\n")
        os.replace(stats_path + ".new", stats_path)

    def on_term(*_):
        write_stats()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    srv = upstream.listen(4096)

    def serve(conn, index):
        rnd = random.Random(index * 7919 + 1)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            while True:
                conn.settimeout(rnd.uniform(0.5, 3.0))
                try:
                    head, buf = read_head(conn, buf)
                except socket.timeout:
                    with lock:
                        c["idle_closes"] += 1
                    return
                if head is None:
                    return
                conn.settimeout(10)
                got = upstream.read_body(conn, head, buf)
                if got is None:
                    return
                buf = got[1]
                conn.sendall(RESPONSE)
                with lock:
                    c["requests"] += 1
                if rnd.random() < 0.03:
                    with lock:
                        c["quick_closes"] += 1
                    if close_delay:
                        time.sleep(rnd.uniform(0, close_delay))
                    return
        except OSError:
            return
        finally:
            conn.close()

    def tick():
        while True:
            time.sleep(0.5)
            write_stats()

    threading.Thread(target=tick, daemon=True).start()

    def on_accept():
        with lock:
            c["conns"] += 1

    upstream.serve_threads(srv, serve, on_accept=on_accept, pass_index=True)


def read_kv(path):
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (kv.split("=") for kv in f.read().split())}
    except (OSError, ValueError):
        return {}


# ---------------------------------------------------------------------------
# Counting at the upstreams
# ---------------------------------------------------------------------------

class NginxCount:
    """Requests and distinct connections in the nginx origin's access log
    since the last mark."""

    def __init__(self, path):
        self.path = path
        self.offset = 0

    def mark(self):
        self.offset = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def since(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            lines = f.read().split()
        return len(lines), len(set(lines))


class ErraticCount:
    def __init__(self, path):
        self.path = path
        self.base = {}

    def mark(self):
        self.base = read_kv(self.path)

    def since(self):
        now = read_kv(self.path)
        return (now.get("requests", 0) - self.base.get("requests", 0),
                now.get("conns", 0) - self.base.get("conns", 0))


# ---------------------------------------------------------------------------
# One proxy against one upstream
# ---------------------------------------------------------------------------

def start_proxy(kind, args, up_port, tag):
    if kind in ("sluice", "sluice-old"):
        binary = args.bin if kind == "sluice" else args.sluice_old
        port = net.free_port()
        p = Proc(tag, [binary, "--listen", f"127.0.0.1:{port}", "--upstream", f"127.0.0.1:{up_port}",
                       "--workers", "1"],
                 os.path.join(args.tmp, tag + ".log"),
                 env=dict(os.environ, RUST_LOG="warn,sluice::event_loop=info"))
        if not wait_for(lambda: net.listening(port), 10):
            raise RuntimeError(f"{tag} did not start:\n{p.log_tail()}")
        return p, port
    p, port, _ = nginx.start(tag, args.tmp, nginx.PROXY_LOCATION, upstream_port=up_port)
    return p, port


def wrk(port, method, secs, start_ms, seed, out, pauses):
    env = dict(os.environ, RACE_START_MS=str(start_ms), RACE_SEED=str(seed), RACE_METHOD=method,
               RACE_PAUSE_MIN_MS=str(pauses[0]), RACE_PAUSE_MAX_MS=str(pauses[1]))
    argv = ["wrk", "-t1", "-c25", "-d", f"{secs}s", "--timeout", "5s", "-s",
            os.path.join(HERE, "pool_race.lua"), f"http://127.0.0.1:{port}/race"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)


def parse_wrk(text):
    r = {"requests": 0, "errors": 0}
    m = re.search(r"(\d+) requests in", text)
    if m:
        r["requests"] = int(m.group(1))
    m = re.search(r"RACE (.*)", text)
    if m:
        for kv in m.group(1).split():
            k, v = kv.split("=")
            r[k] = int(v)
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["errors"] = sum(int(x) for x in m.groups())
    return r


def stopped_counters(logpath):
    try:
        text = open(logpath, errors="replace").read()
    except OSError:
        return {}
    line = [l for l in text.splitlines() if "stopped:" in l]
    if not line:
        return {}
    out = {}
    for k, v in re.findall(r"([a-z_0-9]+)=(\d+)", line[-1]):
        out.setdefault(k, int(v))
    return out


def one_run(args, kind, up_name, up_port, counter, seed):
    tag = f"{kind}-{up_name}"
    p, port = start_proxy(kind, args, up_port, tag)
    counter.mark()
    start_ms = int(time.time() * 1000) + 500
    outs = {}
    procs = {}
    for method in ("GET", "POST"):
        outs[method] = open(os.path.join(args.tmp, f"wrk-{tag}-{method}.txt"), "w+b")
        procs[method] = wrk(port, method, args.seconds, start_ms, seed, outs[method],
                            (args.pause_min, args.pause_max))
    for method in procs:
        try:
            procs[method].wait(args.seconds + 60)
        except subprocess.TimeoutExpired:
            procs[method].kill()
            procs[method].wait(5)
    time.sleep(1.0)
    p.stop()
    res = {}
    for method in procs:
        outs[method].seek(0)
        res[method] = parse_wrk(outs[method].read().decode("utf-8", "replace"))
        outs[method].close()
    ups_requests, ups_conns = counter.since()
    c = stopped_counters(os.path.join(args.tmp, tag + ".log")) if kind != "nginx" else {}
    return {"kind": kind, "upstream": up_name, "wrk": res, "ups_requests": ups_requests,
            "ups_conns": ups_conns, "sluice": c}


def five(r):
    return r.get("s502", 0) + r.get("s503", 0) + r.get("s504", 0) + r.get("s5xx_other", 0)


def run(args):
    t0 = time.monotonic()
    origin, origin_port, odir = nginx.start(
        "origin", args.tmp, 'location / { return 200 "ok"; }',
        http_extra="keepalive_timeout 1s;", access=True)
    stats_path = os.path.join(args.tmp, "erratic.stats")
    erratic = Proc("erratic", self_child(__file__, "upstream", stats_path), os.path.join(args.tmp, "erratic.log"),
                   env=dict(os.environ, RACE_CLOSE_DELAY_MS=str(args.close_delay)))
    erratic_port = None
    for _ in range(100):
        try:
            first = open(erratic.logpath).readline().strip()
        except OSError:
            first = ""
        if first.isdigit():
            erratic_port = int(first)
            break
        time.sleep(0.1)
    if erratic_port is None:
        raise RuntimeError("erratic upstream did not start")
    ups = [("nginx", origin_port, NginxCount(os.path.join(odir, "access.log"))),
           ("erratic", erratic_port, ErraticCount(stats_path))]
    ups = [u for u in ups if u[0] in args.upstreams.split(",")]
    kinds = ["sluice", "nginx"] + (["sluice-old"] if args.sluice_old else [])
    rows = []
    try:
        for i, (up_name, up_port, counter) in enumerate(ups):
            for kind in kinds:
                rows.append(one_run(args, kind, up_name, up_port, counter, seed=1 + i))
    finally:
        Proc.stop_all()
    ok = True
    total = 0
    print(f"Per proxy and upstream: {args.seconds} s of GET + POST (wrk -t1 -c25 each), "
          f"700 ms bursts, pauses {args.pause_min}-{args.pause_max} ms"
          + (f"; erratic closes 0-{args.close_delay} ms after a response." if args.close_delay else "."))
    print("| proxy | upstream | GET requests / 5xx | POST requests / 5xx | 5xx rate | socket errors | "
          "retries | evicted (peer closed) | choice newest/older/new-for-risk/retired | "
          "requests per upstream conn |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rate = {}
    reuse = {}
    for r in rows:
        g, p = r["wrk"]["GET"], r["wrk"]["POST"]
        n = g["requests"] + p["requests"]
        total += n
        bad = five(g) + five(p)
        rate[(r["kind"], r["upstream"])] = bad / n if n else 1.0
        reuse[(r["kind"], r["upstream"])] = r["ups_requests"] / r["ups_conns"] if r["ups_conns"] else 0.0
        c = r["sluice"]
        choice = (f"{c.get('newest', '-')}/{c.get('older', '-')}/{c.get('new_for_risk', '-')}/"
                  f"{c.get('retired', '-')}" if c else "n/a")
        print(f"| {r['kind']} | {r['upstream']} | {g['requests']:,} / {five(g)} | {p['requests']:,} / {five(p)} | "
              f"{100 * rate[(r['kind'], r['upstream'])]:.3f} % | {g['errors'] + p['errors']} | "
              f"{c.get('retries', 'n/a')} | {c.get('peer_closed', 'n/a')} | {choice} | "
              f"{reuse[(r['kind'], r['upstream'])]:.1f} |")
    checks = []
    names = [u[0] for u in ups]
    if "nginx" in names:
        checks.append(("sluice vs nginx upstream: 0 proxy-made 5xx", rate[("sluice", "nginx")] == 0))
    if "erratic" in names:
        checks.append(("sluice vs erratic: 5xx rate <= nginx's (as a proxy) in this run",
                       rate[("sluice", "erratic")] <= rate[("nginx", "erratic")]))
    if args.sluice_old:
        for up in names:
            old = reuse[("sluice-old", up)]
            checks.append((f"requests per upstream connection vs {up} within 10 % of --sluice-old "
                           f"({reuse[('sluice', up)]:.1f} vs {old:.1f})",
                           reuse[("sluice", up)] >= 0.9 * old))
    if not args.quick and len(names) == 2:
        checks.append((f"at least 1,000,000 requests in the run ({total:,})", total >= 1_000_000))
    print()
    for what, good in checks:
        ok &= good
        print(f"- {'PASS' if good else 'FAIL'}: {what}")
    print(f"Total {total:,} requests in {time.monotonic() - t0:.0f} s.")
    return 0 if ok else 1


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "upstream":
        upstream_main(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(prog="pool_race.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=int, default=90, help="per proxy and upstream (90)")
    ap.add_argument("--sluice-old", help="an older sluice binary to compare reuse with")
    ap.add_argument("--quick", action="store_true", help="12 s per proxy and upstream")
    ap.add_argument("--pause-min", type=int, default=300, help="shortest pause, ms (300)")
    ap.add_argument("--pause-max", type=int, default=3000, help="longest pause, ms (3000)")
    ap.add_argument("--upstreams", default="nginx,erratic", help="nginx,erratic (both)")
    ap.add_argument("--close-delay", type=int, default=0,
                    help="the erratic upstream's closes after a response come 0-MS ms late, unread (0)")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(seconds=12)
    args = ap.parse_args()
    if not 5 <= args.seconds <= 900:
        ap.error("--seconds must be 5..900")
    if not 0 <= args.pause_min <= args.pause_max <= 60000:
        ap.error("--pause-min <= --pause-max, both 0..60000 ms")
    if not 0 <= args.close_delay <= 1000:
        ap.error("--close-delay must be 0..1000 ms")
    if not args.upstreams or not set(args.upstreams.split(",")) <= {"nginx", "erratic"}:
        ap.error("--upstreams: nginx, erratic or both")
    return main_guard(run, args, "pool_race")


if __name__ == "__main__":
    sys.exit(main())

"""The edge rules' cost, measured (issue 25's benchmark row; docs/edge.md
"What the edge rules cost"): S1 (keep-alive GET of a 1 KiB static file
from nginx, wrk -c64) through sluice twice in one run, side by side:
`plain` (one route, no rules) and `edge` (the same route with two header
rules and a rate limit that is never tripped). Runs alternate, REPS of
each; the result is sluice's CPU microseconds per request (user + system,
schedstat, every thread) of each run, the medians, and the ratio
edge / plain (the issue's bound: within 5 %).

Usage: python3 scripts/edge_bench.py --bin SLUICE --tmp DIR [--reps N] [--secs S]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluicebench import nginx, net, procfs  # noqa: E402
from sluicebench.procs import Proc, wait_for  # noqa: E402

EDGE_ROUTE = """
set_request_headers = { "X-Env" = "prod" }
set_response_headers = { "Strict-Transport-Security" = "max-age=63072000" }
rate_limit = { requests_per_second = 1000000, burst = 1000000 }
"""


def start_sluice(args, name, upstream_port, extra):
    port = net.free_port()
    conf = os.path.join(args.tmp, name + ".toml")
    with open(conf, "w") as f:
        f.write('listen = "127.0.0.1:%d"\nworkers = 1\n' % port)
        f.write('[[upstream]]\nname = "app"\nservers = ["127.0.0.1:%d"]\n' % upstream_port)
        f.write('[[route]]\nupstream = "app"\n' + extra)
    p = Proc(name, [args.bin, "--config", conf], os.path.join(args.tmp, name + ".log"),
             env=dict(os.environ, RUST_LOG="warn"))
    if not wait_for(lambda: net.listening(port), 10):
        raise RuntimeError("%s did not start:\n%s" % (name, p.log_tail()))
    return p, port


def run_wrk(port, secs):
    out = subprocess.run(["wrk", "-t2", "-c64", "-d%ds" % secs, "http://127.0.0.1:%d/s1-1k.bin" % port],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors|Non-2xx", out)
    if not m or errors:
        raise RuntimeError("wrk: " + out)
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--secs", type=int, default=8)
    args = ap.parse_args()
    www = os.path.join(args.tmp, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "s1-1k.bin"), "wb") as f:
        f.write(b"x" * 1024)
    origin, oport, _ = nginx.start("origin", args.tmp, "root %s; location / { }" % www)
    sluices = {}
    try:
        for name, extra in (("plain", ""), ("edge", EDGE_ROUTE)):
            sluices[name] = start_sluice(args, name, oport, extra)
        for name, (_, port) in sluices.items():
            run_wrk(port, 2)  # warm-up
        us = {"plain": [], "edge": []}
        for rep in range(args.reps):
            for name in (("plain", "edge") if rep % 2 == 0 else ("edge", "plain")):
                p, port = sluices[name]
                before = procfs.cpu_seconds([p.pid])
                n = run_wrk(port, args.secs)
                cpu = procfs.cpu_seconds([p.pid]) - before
                us[name].append(cpu * 1e6 / n)
                print("rep %d %-5s requests=%d cpu_us_per_req=%.2f" % (rep + 1, name, n, us[name][-1]),
                      flush=True)
        plain, edge = statistics.median(us["plain"]), statistics.median(us["edge"])
        ratios = [e / p for p, e in zip(us["plain"], us["edge"])]
        print("| S1 1 KiB, 64 conns, sluice | CPU µs/request (median of %d) |" % args.reps)
        print("|---|---|")
        print("| no rules | %.2f |" % plain)
        print("| two header rules + rate limit (not tripped) | %.2f |" % edge)
        print("| ratio edge / plain (median of paired runs) | %.3f |" % statistics.median(ratios))
        return 0
    finally:
        for p, _ in sluices.values():
            p.stop()
        origin.stop()


if __name__ == "__main__":
    sys.exit(main())

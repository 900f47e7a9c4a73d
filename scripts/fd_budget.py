#!/usr/bin/env python3
"""The descriptor budget (issue 14). Driven by scripts/fd_budget.sh.

The upstream (this file run as `fd_budget.py upstream`): thread per
connection, keep-alive, answers each request after 100 ms.
Run 1: sluice under `prlimit --nofile=NOFILE:NOFILE`; CLIENTS threads
connect at once, each sends one GET and waits up to 15 s. Counted: statuses,
clients without an answer, sluice's warnings (`Too many open files`, caps),
its open descriptors before, at the peak, and after the upstream went away
(its FINs evict the pooled connections).
Run 2: sluice `--max-connections 1`: one client does a GET and stays idle
in keep-alive; a second client's GET must be answered within 3 s.
Before issue 14 (ulimit 256, 1,000 clients): 224 x 200, 585 x 502, 191 no
answer within 15 s; run 2 hung.
"""

import argparse
import collections
import os
import socket
import sys
import threading
import time

from sluicebench import net, procfs, upstream
from sluicebench.net import read_head, read_response
from sluicebench.procs import Proc, Procs, main_guard, self_child, start_port_child, wait_for


def upstream_main():
    upstream.exit_on_term()
    srv = upstream.listen(4096)

    def handle(conn):
        buf = b""
        try:
            while True:
                head, buf = read_head(conn, buf)
                if head is None:
                    return
                time.sleep(0.1)
                upstream.reply(conn, 200, b"ok")
        except OSError:
            return
        finally:
            conn.close()

    upstream.serve_threads(srv, handle)


GET = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def client(port, out, i):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=15)
        s.settimeout(15)
        s.sendall(GET)
        status, _, _, _ = read_response(s)
        out[i] = status
        s.close()
    except (OSError, ValueError):
        out[i] = 0


def start_sluice(args, up_port, tag, extra, prefix=()):
    port = net.free_port()
    p = Proc(tag, [*prefix, args.bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                   f"127.0.0.1:{up_port}", "--workers", "1", *extra],
             os.path.join(args.tmp, tag + ".log"), env=dict(os.environ, RUST_LOG="warn"))
    if not wait_for(lambda: net.listening(port), 10):
        raise RuntimeError(f"{tag} did not start:\n{p.log_tail()}")
    return p, port


def run(args):
    procs = Procs()
    ok = True
    try:
        up, up_port = start_port_child(procs, self_child(__file__, "upstream"))
        p, port = start_sluice(args, up_port, "sluice-budget", [],
                               prefix=("prlimit", f"--nofile={args.nofile}:{args.nofile}"))
        pid = p.pid
        fds_before = procfs.fd_count(pid)
        out = [None] * args.clients
        threads = [threading.Thread(target=client, args=(port, out, i)) for i in range(args.clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        peak = fds_before
        while any(t.is_alive() for t in threads) and time.monotonic() - t0 < 30:
            peak = max(peak, procfs.fd_count(pid))
            time.sleep(0.05)
        for t in threads:
            t.join(20)
        took = time.monotonic() - t0
        # The upstream goes away: its FINs evict every pooled connection, so
        # sluice's descriptors must fall back to where they started.
        procs.stop([up])
        wait_for(lambda: procfs.fd_count(pid) <= fds_before, 5)
        fds_after = procfs.fd_count(pid)
        p.stop()
        up, up_port = start_port_child(procs, self_child(__file__, "upstream"))
        log = open(p.logpath, errors="replace").read()
        c = collections.Counter(out)
        lowered = [l for l in log.splitlines() if "lowered to" in l]
        print(f"Run 1: ulimit -n {args.nofile}, {args.clients} clients at once, one GET each")
        print("| 200 | 502 | 503 | other | no answer in 15 s | seconds | 'Too many open files' lines | "
              "sluice fds before / peak / after |")
        print("|---|---|---|---|---|---|---|---|")
        other = sum(v for k, v in c.items() if k not in (200, 502, 503, 0))
        print(f"| {c[200]} | {c[502]} | {c[503]} | {other} | {c[0]} | {took:.1f} | "
              f"{log.count('Too many open files')} | {fds_before} / {peak} / {fds_after} |")
        if lowered:
            print("sluice: " + lowered[0].split("]", 1)[-1].strip())
        ok &= c[502] == 0 and c[0] == 0 and fds_after <= fds_before + 1 and peak <= args.nofile

        p2, port2 = start_sluice(args, up_port, "sluice-cap1", ["--max-connections", "1"])
        idle = socket.create_connection(("127.0.0.1", port2), timeout=5)
        idle.sendall(GET)
        read_response(idle)
        fresh = socket.create_connection(("127.0.0.1", port2), timeout=5)
        fresh.settimeout(3)
        fresh.sendall(GET)
        try:
            status = read_response(fresh)[0]
        except (OSError, ValueError):
            status = 0
        idle.close()
        fresh.close()
        p2.stop()
        print(f"\nRun 2: --max-connections 1, one idle keep-alive client: the new client got "
              f"{status or 'no answer in 3 s'}")
        ok &= status == 200
        print(f"\n{'PASS' if ok else 'FAIL'} (thresholds: 0 x 502, every client answered, no "
              f"descriptor leak, peak <= the limit, the new client answered)")
        return 0 if ok else 1
    finally:
        Proc.stop_all()
        procs.stop_all()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "upstream":
        upstream_main()
        return 0
    ap = argparse.ArgumentParser(prog="fd_budget.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--nofile", type=int, default=256)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="300 clients")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(clients=300)
    args = ap.parse_args()
    if not (64 <= args.nofile <= 65536 and 1 <= args.clients <= 5000):
        ap.error("--nofile 64..65536, --clients 1..5000")
    return main_guard(run, args, "fd_budget")


if __name__ == "__main__":
    sys.exit(main())

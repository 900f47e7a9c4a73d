#!/usr/bin/env python3
"""RSS per idle client connection of sluice (ARCHITECTURE.md §4: idle connections
hold no body buffers). Driven by scripts/idle_mem.sh (which builds the
binary, raises `ulimit -n` and passes --bin and --tmp).

Two phases, each with a fresh sluice (`--max-connections 20000
--keepalive-timeout 120s --request-head-timeout 120s`) in front of a small
keep-alive upstream (this file run as `idle_mem.py upstream`: one thread,
selectors, HTTP/1.1, `Content-Length: 2` answers):
  keep-alive  N connections, each sends one GET and reads its answer, then
              stays idle in keep-alive (requests one at a time, so at most one
              exchange's buffers exist at any moment)
  silent      N connections that send nothing at all
Each phase: one warm-up request on its own connection (closed), VmRSS,
the N connections, 1 s wait, VmRSS again once settled (two reads 0.5 s
apart equal); bytes per connection = (after - before) / N. PASS if <=
--threshold (300, issue 11) in both phases. N stays below sluice's client
cap (half the open-file limit, minus a margin), which would otherwise close
the longest-idle connections for room.
Everything on 127.0.0.1; every child stopped by its PID; loops bounded.
"""

import argparse
import os
import resource
import selectors
import signal
import socket
import sys
import time

from sluicebench import procfs, upstream
from sluicebench.net import read_response, still_open
from sluicebench.procs import Fail, Procs, self_child, start_listening, start_port_child

KiB = 1024
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
BUDGET = 50.0  # s for the whole run (the brief: under 60 s)


def serve():
    """Keep-alive upstream: answers every request head with RESPONSE."""
    upstream.exit_on_term()
    srv = upstream.listen(1024)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    bufs = {}
    while True:
        for key, _ in sel.select():
            if key.fileobj is srv:
                for _ in range(256):
                    try:
                        c, _ = srv.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    sel.register(c, selectors.EVENT_READ)
                    bufs[c] = b""
                continue
            c = key.fileobj
            try:
                data = c.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(c)
                c.close()
                del bufs[c]
                continue
            buf = bufs[c] + data
            out = b""
            while b"\r\n\r\n" in buf:  # GETs only: no request bodies
                _, buf = buf.split(b"\r\n\r\n", 1)
                out += RESPONSE
            bufs[c] = buf
            if out:
                try:
                    c.sendall(out)  # small; fits the empty send buffer
                except OSError:
                    pass


REQ = b"GET /idle HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: idle-mem\r\n\r\n"


def get(s):
    """One GET on socket S (blocking, timeout set); returns the status line."""
    s.sendall(REQ)
    try:
        _, head, _, _ = read_response(s)
    except ValueError as e:
        raise Fail(str(e)) from None
    return head.split(b"\r\n", 1)[0].decode("latin-1")


def phase(args, up_port, name, t_end):
    logpath = os.path.join(args.tmp, f"sluice-{name}.log")
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    procs = Procs()
    socks = []
    try:
        sl, port, _ = start_listening(
            lambda port: [args.bin, "--listen", f"127.0.0.1:{port}", "--upstream", f"127.0.0.1:{up_port}",
                          "--max-connections", str(max(20000, args.conns + 100)),
                          "--keepalive-timeout", "120s", "--request-head-timeout", "120s"],
            logpath, procs, env=env)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as w:  # warm-up
            status = get(w)
            if " 200 " not in status + " ":
                raise Fail(f"warm-up request: {status}")
        time.sleep(0.5)
        fds0 = procfs.fd_count(sl.pid)
        before = procfs.settled(lambda: procfs.rss(sl.pid))
        t0 = time.monotonic()
        bad = 0
        for i in range(args.conns):
            if time.monotonic() > t_end:
                raise Fail(f"{name}: out of time after {i} connections")
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(s)
            if name == "keep-alive":
                if " 200 " not in get(s) + " ":
                    bad += 1
            elif i % 500 == 499:  # let sluice's accept keep up with the backlog
                for _ in range(100):
                    if procfs.fd_count(sl.pid) >= fds0 + i - 1000 or time.monotonic() > t_end:
                        break
                    time.sleep(0.01)
        opened = time.monotonic() - t0
        for _ in range(200):  # all accepted?
            if procfs.fd_count(sl.pid) >= fds0 + args.conns or time.monotonic() > t_end:
                break
            time.sleep(0.05)
        time.sleep(1.0)
        after = procfs.settled(lambda: procfs.rss(sl.pid))
        fds = procfs.fd_count(sl.pid) - fds0
        if sl.poll() is not None:
            raise Fail(f"sluice exited ({sl.returncode}): {open(logpath).read()[-500:]}")
        alive = 0
        for s in socks:  # a closed connection would be readable (EOF) now
            alive += still_open(s, idle=True)  # EOF or unexpected bytes: not idle and open
        return {"name": name, "before": before, "after": after, "fds": fds, "bad": bad,
                "alive": alive, "opened": opened,
                "per": (after - before) / args.conns}
    finally:
        for s in socks:
            s.close()
        procs.stop_all()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "upstream":
        serve()
        return 0
    ap = argparse.ArgumentParser(prog="idle_mem.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--conns", type=int, default=int(os.environ.get("IDLE_CONNS", "10000")),
                    help="client connections per phase (10000)")
    ap.add_argument("--threshold", type=int, default=int(os.environ.get("IDLE_THRESHOLD", "300")),
                    help="max RSS bytes per idle connection (300)")
    ap.add_argument("--quick", action="store_true", help="smoke run: --conns 1000 (unless given)")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(conns=1000)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_end = time.monotonic() + BUDGET

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(65536, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # children inherit it
        soft = want
    # the client holds N sockets; sluice budgets two descriptors per client
    # (its own and an upstream one) and caps clients at about half the limit
    cap = soft // 2 - 100
    if args.conns > cap:
        print(f"idle_mem: open-file limit {soft}: reducing connections from {args.conns} "
              f"to {cap} (sluice's client cap is about half the limit)")
        args.conns = cap
    if args.conns < 100:
        print(f"idle_mem: open-file limit {soft} is too low to measure", file=sys.stderr)
        return 1
    print(f"idle_mem: {args.conns} connections per phase, open-file limit {soft} "
          f"(hard {hard}), sluice {args.bin}")

    procs = Procs()
    results = []
    try:
        _, up_port = start_port_child(procs, self_child(__file__, "upstream"))
        for name in ("keep-alive", "silent"):
            results.append(phase(args, up_port, name, t_end))
    except Fail as e:
        print(f"idle_mem: FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()

    ok = True
    print(f"\n| phase | connections | what each did | sluice RSS before | RSS after | "
          f"bytes/conn | limit | result |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        what = ("1 GET + response, then idle keep-alive" if r["name"] == "keep-alive"
                else "connected, sent nothing")
        good = r["per"] <= args.threshold and r["bad"] == 0 and r["alive"] == args.conns
        ok &= good
        print(f"| {r['name']} | {args.conns} | {what} | {r['before'] / KiB:.0f} KiB | "
              f"{r['after'] / KiB:.0f} KiB | {r['per']:.0f} | {args.threshold} | "
              f"{'PASS' if good else 'FAIL'} |")
    for r in results:
        print(f"{r['name']}: opened in {r['opened']:.1f} s; sluice fds +{r['fds']} "
              f"(clients + pooled upstream); {r['alive']}/{args.conns} still open after 1 s"
              + (f"; {r['bad']} non-200 answers" if r["bad"] else ""))
    print("bytes/conn = (VmRSS after - VmRSS before) / connections; kernel socket memory "
          "is not in RSS.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Upstream-pool churn run for sluice (ARCHITECTURE.md §7, §8).

Driven by scripts/pool_churn.sh, which builds the release binary and passes
--bin and --tmp. Everything runs on 127.0.0.1; every process started here is
stopped here by its own PID; every loop is bounded in count and time.

The upstream (this file run as `pool_churn.py upstream`, its own process):
HTTP/1.1 keep-alive, a thread per connection, Content-Length responses whose
body is the request target. After each response it picks at random:
  CLOSE_PCT %   `Connection: close` in the response, then close;
  SILENT_PCT %  no such field, close right after the response (the nasty
                case: sluice may park the connection and hand it out before
                the FIN arrives; the request must be retried, not failed);
  else          keep the connection.
It answers `stats` on stdin with one JSON line of its counters.

sluice runs with RUST_LOG=sluice=debug into a file, --workers 1 and the pool
caps given. THREADS clients each send REQUESTS sequential GETs on keep-alive
connections (a new connection when sluice closes one, and every 50
requests), bounded by SECONDS. Then the run settles (clients closed) and we
count:
  - responses by status, client errors, wrong bodies  (must be all 200)
  - from sluice's log: `connected, port` (new upstream connections),
    `pool take`, `pool put`, `pool evict ... reason=` by reason, `retry`,
    access lines by status, and the final `stopped:` line on SIGTERM
  - sockets from sluice to the upstream port in /proc/net/tcp: ESTABLISHED
    (must be <= the per-peer cap) and CLOSE_WAIT (must be 0: a FIN from the
    upstream evicts the idle connection)
  - sluice's open fds (/proc/PID/fd) before and after: after - before must
    equal the idle upstream sockets left (no leak)
Exit status 1 on any non-200, client error, cap overrun, CLOSE_WAIT or leak.
"""

import argparse
import collections
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from sluicebench import procfs, upstream
from sluicebench.net import CLOSE_WAIT, ESTABLISHED, LISTEN, TIME_WAIT, read_head, read_response, tcp_table
from sluicebench.procs import Procs, self_child, start_port_child, wait_for

# ---------------------------------------------------------------------------
# The upstream process
# ---------------------------------------------------------------------------


def upstream_main(args):
    lock = threading.Lock()
    c = collections.Counter()
    open_now = [0]
    lst = upstream.listen(1024)

    def count(key, n=1):
        with lock:
            c[key] += n

    def serve(sock, index):
        rnd = random.Random(args.seed * 1_000_003 + index)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(args.idle)
        buf = b""
        try:
            while True:
                head, buf = read_head(sock, buf)
                if head is None:
                    count("closed_by_proxy")
                    return
                got = upstream.read_body(sock, head, buf)
                if got is None:
                    count("closed_by_proxy")
                    return
                buf = got[1]
                target = head.split(b" ", 2)[1]
                count("requests")
                r = rnd.random() * 100
                mode = (
                    "close"
                    if r < args.close_pct
                    else "silent" if r < args.close_pct + args.silent_pct else "keep"
                )
                fields = b"Content-Length: %d\r\n" % len(target)
                if mode == "close":
                    fields += b"Connection: close\r\n"
                sock.sendall(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n" + target)
                if mode != "keep":
                    count("close_" + mode)
                    return
        except OSError:
            count("conn_errors")
        finally:
            try:
                sock.close()
            finally:
                with lock:
                    open_now[0] -= 1

    def accepted():
        with lock:
            c["accepted"] += 1
            open_now[0] += 1

    threading.Thread(target=upstream.serve_threads, args=(lst, serve), daemon=True,
                     kwargs={"on_accept": accepted, "pass_index": True}).start()
    for line in sys.stdin:
        if line.strip() == "stats":
            with lock:
                snap = dict(c)
                snap["open_now"] = open_now[0]
            print(json.dumps(snap), flush=True)
        elif line.strip() == "quit":
            break
    return 0


# ---------------------------------------------------------------------------
# Helpers of the driver
# ---------------------------------------------------------------------------


def tcp_sockets():
    """[(local_port, remote_port, state)] from /proc/net/tcp (IPv4)."""
    return [r[:3] for r in tcp_table()]


class Client:
    """One keep-alive connection to sluice with bounded reads."""

    def __init__(self, port, timeout):
        self.port, self.timeout = port, timeout
        self.sock, self.buf = None, b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock, self.buf = None, b""

    def get(self, target):
        """(status, body, sluice_closes) or raises OSError/ValueError."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
            self.sock.settimeout(self.timeout)
        self.sock.sendall(
            b"GET " + target + b" HTTP/1.1\r\nHost: churn.test\r\n\r\n"
        )
        status, head, body, self.buf = read_response(self.sock, self.buf)
        closes = re.search(rb"\r\nconnection:[^\r]*close", head, re.I) is not None
        return status, body, closes


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    up = sub.add_parser("upstream")
    for p in (ap, up):
        p.add_argument("--close-pct", type=float, default=30.0)
        p.add_argument("--silent-pct", type=float, default=10.0)
        p.add_argument("--seed", type=int, default=1)
    up.add_argument("--idle", type=float, default=120.0)
    ap.add_argument("--bin", required=False)
    ap.add_argument("--tmp", required=False)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--requests", type=int, default=200, help="per thread")
    ap.add_argument("--seconds", type=float, default=60.0, help="bound of the load phase")
    ap.add_argument("--per-peer", type=int, default=16)
    ap.add_argument("--total", type=int, default=32)
    ap.add_argument("--keep-log", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --threads 10 --requests 50 --seconds 20 (flags given still win)")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(threads=10, requests=50, seconds=20.0)
    args = ap.parse_args()
    if args.cmd == "upstream":
        return upstream_main(args)
    if not args.bin or not args.tmp:
        ap.error("--bin and --tmp are required (run scripts/pool_churn.sh)")
    return drive(args)


def drive(args):
    failures = []
    procs = Procs()

    def on_term(signum, _frame):
        procs.stop_all(grace=5)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        return run(args, procs, failures)
    finally:
        procs.stop_all(grace=5)


def run(args, procs, failures):
    # Upstream.
    try:
        up, uport = start_port_child(
            procs, self_child(__file__, "upstream", "--close-pct", args.close_pct,
                              "--silent-pct", args.silent_pct, "--seed", args.seed),
            stdin=subprocess.PIPE, text=True)
    except Exception as e:
        raise SystemExit(f"pool_churn: {e}") from None

    def upstream_stats():
        up.stdin.write("stats\n")
        up.stdin.flush()
        r, _, _ = select.select([up.stdout], [], [], 5)
        return json.loads(up.stdout.readline()) if r else {}

    # sluice.
    log_path = os.path.join(args.tmp, "sluice.log")
    env = dict(os.environ, RUST_LOG="sluice=debug")
    with open(log_path, "wb") as log:
        sluice = procs.start(
            [args.bin, "--listen", "127.0.0.1:0", "--upstream", f"127.0.0.1:{uport}",
             "--workers", "1", "--pool-max-idle-per-peer", str(args.per_peer),
             "--pool-max-idle-total", str(args.total)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
        )

    def log_text():
        with open(log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    m = wait_for(lambda: re.search(r"listening on 127\.0\.0\.1:(\d+)", log_text()), 10)
    if not m or sluice.poll() is not None:
        print(log_text()[-2000:], file=sys.stderr)
        raise SystemExit("pool_churn: sluice did not start")
    sport = int(m.group(1))
    fds_before = procfs.fd_count(sluice.pid)

    # Load.
    lock = threading.Lock()
    statuses = collections.Counter()
    errors = collections.Counter()
    bad_bodies = [0]
    done = [0]
    client_conns = [0]
    deadline = time.monotonic() + args.seconds

    def worker(t):
        cl = Client(sport, 10.0)
        mine, errs, bodies, conns, n = collections.Counter(), collections.Counter(), 0, 0, 0
        for i in range(args.requests):
            if time.monotonic() >= deadline:
                break
            if i % 50 == 0:
                cl.close()
            if cl.sock is None:
                conns += 1
            target = f"/t{t}/r{i}".encode()
            try:
                status, body, closes = cl.get(target)
            except (OSError, ValueError) as e:
                errs[type(e).__name__ + ": " + str(e)[:60]] += 1
                cl.close()
                n += 1
                continue
            n += 1
            mine[status] += 1
            if status == 200 and body != target:
                bodies += 1
            if closes or status != 200:
                cl.close()
        cl.close()
        with lock:
            statuses.update(mine)
            errors.update(errs)
            bad_bodies[0] += bodies
            done[0] += n
            client_conns[0] += conns

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(args.seconds + 30)
    load_secs = time.monotonic() - t0
    hung = sum(th.is_alive() for th in threads)

    # Settle: clients are gone; sluice closes their connections and keeps
    # only idle upstream sockets.
    def snapshot():
        socks = tcp_sockets()
        return {
            "fds": procfs.fd_count(sluice.pid),
            "up_est": sum(1 for lp, rp, st in socks if rp == uport and st == ESTABLISHED),
            "up_close_wait": sum(1 for lp, rp, st in socks if rp == uport and st == CLOSE_WAIT),
            "up_other": sum(1 for lp, rp, st in socks
                            if rp == uport and st not in (ESTABLISHED, CLOSE_WAIT, TIME_WAIT)),
            "down_open": sum(1 for lp, rp, st in socks if lp == sport and st not in (LISTEN, TIME_WAIT)),
        }

    prev = [None]

    def settled():
        # Clients gone and nothing changing for one sample interval.
        s = snapshot()
        stable = s["down_open"] == 0 and s == prev[0]
        prev[0] = s
        return s if stable else None

    settle = wait_for(settled, 15, step=0.5)
    after = settle or snapshot()
    held = after["up_est"] + after["up_close_wait"] + after["up_other"]
    ustats = upstream_stats()

    # Stop sluice (SIGTERM: graceful drain, then the `stopped:` line).
    sluice.send_signal(signal.SIGTERM)
    try:
        sluice.wait(10)
    except subprocess.TimeoutExpired:
        failures.append("sluice did not exit within 10 s of SIGTERM")
        sluice.kill()
        sluice.wait()
    text = log_text()

    # Log counts.
    evict = collections.Counter(re.findall(r"pool evict: .* reason=([a-z -]+)", text))
    access = collections.Counter(re.findall(r"access .* status=(\d+) ", text))
    upconn = collections.Counter(re.findall(r"access .* upconn=(new|reused):", text))
    stopped = re.search(r"stopped: (.*)", text)
    logc = {
        "connected": len(re.findall(r"connected, port \d+", text)),
        "pool_take": text.count("pool take:"),
        "pool_put": text.count("pool put:"),
        "retry": len(re.findall(r"\bretry \d+: ", text)),
    }
    total = sum(statuses.values())
    non200 = total - statuses.get(200, 0) + sum(errors.values())

    print(f"pool_churn: {args.threads} threads x {args.requests} GETs, upstream closes "
          f"{args.close_pct:g}% with Connection: close, {args.silent_pct:g}% silently; "
          f"caps per-peer={args.per_peer} total={args.total}")
    print(f"requests            {done[0]} in {load_secs:.1f} s "
          f"({done[0] / max(load_secs, 1e-9):.0f}/s), client connections {client_conns[0]}"
          + (f", {hung} client threads hung" if hung else ""))
    print(f"statuses            {dict(sorted(statuses.items()))}")
    print(f"non-200             {non200} (errors {sum(errors.values())}, "
          f"502s {statuses.get(502, 0)}, 504s {statuses.get(504, 0)}, wrong bodies {bad_bodies[0]})")
    for k, v in errors.most_common(5):
        print(f"  client error      {v} x {k}")
    print(f"retries (log)       {logc['retry']}")
    print(f"upstream conns      opened {logc['connected']} (log 'connected, port'), "
          f"accepted {ustats.get('accepted', '?')} (upstream)")
    print(f"pool                take {logc['pool_take']}, put {logc['pool_put']}, "
          f"access upconn {dict(upconn)}")
    print(f"evictions           {dict(evict) or '{}'}")
    print(f"upstream            requests {ustats.get('requests', '?')}, "
          f"close-with-header {ustats.get('close_close', 0)}, silent {ustats.get('close_silent', 0)}, "
          f"closed by proxy {ustats.get('closed_by_proxy', 0)}, open now {ustats.get('open_now', '?')}")
    print(f"access log statuses {dict(sorted(access.items()))}")
    print(f"after settle        {'settled' if settle else 'NOT settled in 15 s'}: "
          f"upstream ESTABLISHED {after['up_est']} (cap {args.per_peer}), "
          f"CLOSE_WAIT {after['up_close_wait']}, other {after['up_other']}, "
          f"downstream open {after['down_open']}")
    print(f"sluice fds          before {fds_before}, after {after['fds']} "
          f"(before + upstream sockets held = {fds_before + held})")
    print(f"stopped line        {stopped.group(1) if stopped else '(none)'}")

    if hung:
        failures.append(f"{hung} client threads did not finish")
    if done[0] < args.threads * args.requests:
        failures.append(f"only {done[0]} of {args.threads * args.requests} requests in {args.seconds:g} s")
    if non200:
        failures.append(f"{non200} non-200 responses or errors to idempotent GETs")
    if bad_bodies[0]:
        failures.append(f"{bad_bodies[0]} responses with the wrong body")
    if held > min(args.per_peer, args.total):
        failures.append(f"{held} idle upstream sockets > cap {min(args.per_peer, args.total)}")
    if after["up_close_wait"]:
        failures.append(f"{after['up_close_wait']} upstream sockets in CLOSE_WAIT: closed by the "
                        "upstream, still held by sluice (FIN not evicted)")
    if after["fds"] != fds_before + held:
        failures.append(f"fd leak: {after['fds']} fds != {fds_before} before + {held} upstream sockets held")
    if after["down_open"]:
        failures.append(f"{after['down_open']} downstream sockets still open")
    if stopped:
        m = re.search(r"upstream_open=(\d+)", stopped.group(1))
        if m and int(m.group(1)) != 0:
            failures.append(f"upstream_open={m.group(1)} after shutdown closed the pool")
    if ustats.get("open_now") not in (None, after["up_est"]) and settle:
        failures.append(f"upstream sees {ustats.get('open_now')} open, sluice side {after['up_est']}")
    if args.keep_log:
        keep = os.path.join(os.getcwd(), "pool_churn.log")
        with open(keep, "w") as f:
            f.write(text)
        print(f"log kept            {keep}")
    for f in failures:
        print(f"FAIL {f}")
    print("pool_churn: " + ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

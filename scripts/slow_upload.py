#!/usr/bin/env python3
"""Slow uploads through sluice (issue 14): the timers while a body flows.

Driven by scripts/slow_upload.sh (--bin, --tmp). Everything on 127.0.0.1;
every process started here is stopped here by its PID; every loop bounded.

The upstream (this file run as `slow_upload.py upstream`): reads each
request whole (Content-Length) and answers 200 with the body size.

Cases (each a client thread; the ones sharing flags share one sluice):
  quick  steady  --upstream-read-timeout 2s; 10 B every 0.5 s for 10 s -> 200
         stall   --client-body-timeout 2s --upstream-read-timeout 1s; 20 of
                 100 body bytes, then nothing                         -> 408
  full   80k     default flags; 80,000 B at 1,000 B/s (80 s)          -> 200
         3min    default flags; 90,000 B at 500 B/s (180 s)           -> 200
Before this fix the steady case got 504 at 2.0 s and the 80k one 504 at
60.6 s after 61,000 bytes; the stall got 504 (now 408).
"""

import argparse
import os
import socket
import sys
import threading
import time

from sluicebench import net, upstream
from sluicebench.net import read_head, read_response
from sluicebench.procs import Proc, Procs, main_guard, self_child, start_port_child, wait_for


def upstream_main():
    upstream.exit_on_term()
    srv = upstream.listen()

    def handle(conn):
        buf = b""
        try:
            while True:
                head, buf = read_head(conn, buf)
                if head is None:
                    return
                got = upstream.read_body(conn, head, buf)
                if got is None:
                    return
                body, buf = got
                upstream.reply(conn, 200, b"got %d\n" % len(body))
        except OSError:
            return
        finally:
            conn.close()

    upstream.serve_threads(srv, handle)


CASES = {
    # name: (flags, total bytes, step bytes, pause s, stall after bytes or None, expected)
    "steady": (["--upstream-read-timeout", "2s"], 200, 10, 0.5, None, 200),
    "stall": (["--client-body-timeout", "2s", "--upstream-read-timeout", "1s"], 100, 20, 0.0, 20, 408),
    "80k": ([], 80_000, 1_000, 1.0, None, 200),
    "3min": ([], 90_000, 250, 0.5, None, 200),
}


def upload(port, total, step, pause, stall, result):
    """One client: the head, then STEP bytes every PAUSE s (or STALL bytes and
    nothing more); RESULT gets status, bytes sent, seconds."""
    t0 = time.monotonic()
    sent = 0
    status = 0
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % total)
        limit = stall if stall is not None else total
        for _ in range(total // max(step, 1) + 1):
            if sent >= limit:
                break
            try:
                s.sendall(b"u" * min(step, limit - sent))
            except OSError:
                break  # the proxy answered and closed: read its answer
            sent += min(step, limit - sent)
            if pause:
                time.sleep(pause)
        s.settimeout(total / max(step, 1) * pause + 30)
        status, _head, _body, _rest = read_response(s)
        s.close()
    except (OSError, ValueError) as e:
        result["error"] = str(e)
    result.update(status=status, sent=sent, secs=time.monotonic() - t0)


def run(args):
    procs = Procs()
    try:
        up, up_port = start_port_child(procs, self_child(__file__, "upstream"))
        names = ["steady", "stall"] + ([] if args.quick else ["80k", "3min"])
        by_flags = {}
        for n in names:
            by_flags.setdefault(tuple(CASES[n][0]), []).append(n)
        sluices = []
        results = {n: {} for n in names}
        threads = []
        for flags, group in by_flags.items():
            port = net.free_port()
            p = Proc("sluice", [args.bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                                f"127.0.0.1:{up_port}", "--workers", "1", *flags],
                     os.path.join(args.tmp, f"sluice-{len(sluices)}.log"))
            sluices.append(p)
            if not wait_for(lambda: net.listening(port), 10):
                print("slow_upload: sluice did not start\n" + p.log_tail(), file=sys.stderr)
                return 1
            for n in group:
                _, total, step, pause, stall, _ = CASES[n]
                t = threading.Thread(target=upload, args=(port, total, step, pause, stall, results[n]))
                t.start()
                threads.append(t)
        for t in threads:
            t.join(400)
        ok = True
        print("| case | sluice flags | body bytes sent | seconds | status | expected | verdict |")
        print("|---|---|---|---|---|---|---|")
        for n in names:
            flags, total, _, _, _, want = CASES[n]
            r = results[n]
            good = r.get("status") == want
            ok &= good
            print(f"| {n} | {' '.join(flags) or '(defaults)'} | {r.get('sent', 0):,} of {total:,} | "
                  f"{r.get('secs', 0):.1f} | {r.get('status', 0)} | {want} | {'PASS' if good else 'FAIL'} |")
        for p in sluices:
            p.stop()
        return 0 if ok else 1
    finally:
        Proc.stop_all()
        procs.stop_all()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "upstream":
        upstream_main()
        return 0
    ap = argparse.ArgumentParser(prog="slow_upload.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="the two short cases only (about 12 s)")
    return main_guard(run, ap.parse_args(), "slow_upload")


if __name__ == "__main__":
    sys.exit(main())

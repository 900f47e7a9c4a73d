#!/usr/bin/env python3
"""User-space instructions per small keep-alive request (S1) of one or more
sluice binaries, side by side, under callgrind. Driven by
scripts/callgrind.sh (which builds the binary and passes --bin and --tmp).

One nginx upstream serving /small (the benchmark's, scripts/bench.py) on
CPU 0; each binary in turn runs under `valgrind --tool=callgrind` on CPU 1
(`--access-log off`, or a text access log with --access-log), is loaded
with `wrk -t1 -cCONNS` for WARM + SECS seconds, and is stopped by its PID.
Instructions per request = the program's total (startup included) over the
requests wrk completed. A `rep movsb` copy counts one instruction per byte,
so copies weigh more here than in time. With --profiles DIR the raw
profiles are written there (callgrind-N.out, N the binary's place in the
list), for `callgrind_annotate`.
"""

import argparse
import os
import shutil
import subprocess
import sys

from sluicebench import runstate
from sluicebench.net import free_port
from sluicebench.origins import NginxUpstream
from sluicebench.plan import PROXY_CPU
from sluicebench.procs import Fail, Proc, main_guard
from sluicebench.ready import wait_ready
from sluicebench.wrk import run_wrk


def instructions(profile):
    """The PROGRAM TOTALS line of callgrind_annotate, as an int."""
    out = subprocess.run(["callgrind_annotate", profile], capture_output=True, text=True,
                         timeout=120).stdout
    for line in out.splitlines():
        if "PROGRAM TOTALS" in line:
            return int(line.split()[0].replace(",", ""))
    raise RuntimeError("no PROGRAM TOTALS in " + profile)


def measure(args, binary, n, up_port):
    """Runs BINARY under callgrind behind wrk; returns (requests, instructions)."""
    port = free_port()
    profile = os.path.join(args.profiles or args.tmp, "callgrind-%d.out" % n)
    log = ["--access-log", os.path.join(args.tmp, "access-%d.log" % n), "--access-log-format", "text"] \
        if args.access_log else ["--access-log", "off"]
    argv = runstate.pinned(PROXY_CPU, [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=" + profile, binary,
        "--listen", "127.0.0.1:%d" % port, "--upstream", "127.0.0.1:%d" % up_port] + log)
    proc = Proc("sluice %d" % n, argv, os.path.join(args.tmp, "sluice-%d.log" % n),
                env=dict(os.environ, RUST_LOG="warn"))
    try:
        wait_ready(proc, port, timeout=60.0)
        requests = 0
        for secs in (args.warm, args.secs):
            requests += run_wrk("callgrind %s" % binary, port, args.conns, secs)["requests"]
    finally:
        proc.stop(timeout=30.0)
    return requests, instructions(profile)


def run(args):
    for binary in args.bin:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise Fail("--bin %s: not an executable file" % binary)
    if (os.cpu_count() or 1) < 2 or not shutil.which("taskset"):
        runstate.PIN = False
    if args.profiles:
        try:
            os.makedirs(args.profiles, exist_ok=True)
        except OSError as e:
            raise Fail("--profiles %s: %s" % (args.profiles, e)) from e
    os.makedirs(os.path.join(args.tmp, "www"), exist_ok=True)
    up = NginxUpstream(args.tmp, os.path.join(args.tmp, "www"), 4096)
    rows = []
    try:
        for n, binary in enumerate(args.bin):
            requests, instr = measure(args, binary, n, up.port)
            rows.append((binary, requests, instr))
    except RuntimeError as e:  # wait_ready: the proxy did not come up
        raise Fail(str(e)) from e
    finally:
        up.proc.stop()
    print("| binary | access log | wrk -c%d requests | instructions | per request |" % args.conns)
    print("|---|---|---|---|---|")
    for binary, requests, instr in rows:
        print("| %s | %s | %d | %d | %.1fk |" % (
            binary, "text" if args.access_log else "off", requests, instr, instr / max(requests, 1) / 1000))
    if runstate.PROBLEMS:
        for where, cmd, output in runstate.PROBLEMS:
            print("callgrind: %s: %s\n%s" % (where, cmd, output), file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", required=True, help="a sluice binary (repeat to compare)")
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--conns", type=at_least(1), default=64)
    ap.add_argument("--warm", type=at_least(1), default=2, help="seconds of load before the measured ones")
    ap.add_argument("--secs", type=at_least(1), default=6)
    ap.add_argument("--access-log", action="store_true", help="a text access log instead of none")
    ap.add_argument("--profiles", help="keep the raw profiles in this directory")
    return main_guard(run, ap.parse_args(), "callgrind")


def at_least(low):
    """An argparse type: an int >= low."""
    def parse(text):
        n = int(text)
        if n < low:
            raise argparse.ArgumentTypeError("must be at least %d" % low)
        return n
    return parse


if __name__ == "__main__":
    sys.exit(main())

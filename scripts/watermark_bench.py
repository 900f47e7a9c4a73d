#!/usr/bin/env python3
"""Large-body throughput and CPU per MiB of sluice at several watermark
settings (ARCHITECTURE.md §9: confirm the 64 KiB / 16 KiB default by benchmark).
Driven by scripts/watermark_bench.sh (which builds the binary and passes
--bin and --tmp).

For each repetition, for each HIGH/LOW setting (the order rotates between
repetitions): a fresh sluice `--high-watermark HIGH --low-watermark LOW`
pinned to CPU 0 (`taskset -c 0`), the upstream and curl pinned to CPU 1;
  download  curl -o /dev/null of SIZE bytes the upstream sends from memory
  upload    curl -T of a SIZE-byte sparse file to an upstream that discards it
MiB/s = size / curl's time_total; CPU ms/MiB = sluice's utime+stime
(/proc/PID/stat, clock ticks) during the transfer / MiB; also the same from
/proc/PID/schedstat (ns). A direct run (curl to the upstream, no proxy) each
repetition shows the ceiling of this client/upstream pair. Medians of the
repetitions in a markdown table. Exit 1 if a transfer fails or is slower
than --min-mibs.

The upstream is this file run as `watermark_bench.py upstream SIZE`: a thread
per connection; GET /big answers SIZE bytes from memory in one sendall();
PUT /sink reads the body in 1 MiB recv_into() calls and answers 200.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

from sluicebench import procfs, upstream
from sluicebench.net import read_head
from sluicebench.procfs import loadavg, tcp_ext, tcp_mem
from sluicebench.procs import Fail, Procs, main_guard, self_child, start_listening, start_port_child
from sluicebench.stats import fmt, median
from sluicebench.units import MiB, label, parse_size

BUDGET = 225.0  # s: the brief asks for under 4 minutes


# --------------------------------------------------------------------------
# upstream

def handle(conn, data):
    try:
        buf = b""
        sink = bytearray(MiB)
        for _ in range(1000):  # requests per connection
            head, buf = read_head(conn, buf)
            req = head and upstream.parse_request(head)
            if not req:
                return
            method, target, _, fields = req
            length = int(fields.get("content-length", "0") or 0)
            if method == "GET" and target == "/big":
                conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             f"Content-Length: {len(data)}\r\n\r\n".encode())
                conn.sendall(data)
            elif method in ("PUT", "POST") and target == "/sink":
                got = min(len(buf), length)
                buf = buf[got:]
                while got < length:
                    n = conn.recv_into(sink, min(len(sink), length - got))
                    if not n:
                        return
                    got += n
                conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(str(got)) + 1}\r\n\r\n"
                             f"{got}\n".encode())
            else:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
    except OSError:
        pass
    finally:
        conn.close()


def serve(size):
    upstream.exit_on_term()
    size = int(size)
    block = os.urandom(MiB)
    data = memoryview(block * (size // MiB) + block[: size % MiB])
    upstream.serve_threads(upstream.listen(128), handle, data)


# --------------------------------------------------------------------------
# orchestration

class Runner:
    def __init__(self, args):
        self.args = args
        self.procs = Procs()
        self.slowest = (0.0, "", 0)
        self.kernel = {}  # TcpExt counter increases during transfers
        self.slow = []    # transfers slower than --slow
        self.tag = ""
        ncpu = os.cpu_count() or 1
        if not shutil.which("taskset"):
            self.pin_proxy, self.pin_other = [], []
            self.pin_note = "taskset not found: nothing pinned"
        elif ncpu < 2:
            self.pin_proxy, self.pin_other = [], []
            self.pin_note = "1 CPU: nothing pinned"
        else:
            self.pin_proxy, self.pin_other = ["taskset", "-c", "0"], ["taskset", "-c", "1"]
            self.pin_note = "sluice on CPU 0; upstream and curl on CPU 1 (taskset)"

    def curl(self, argv, kind):
        a = self.args
        r = subprocess.run(self.pin_other + ["curl", "-sS", "--http1.1", "--max-time", str(a.max_time),
                                             "-w", "%{http_code} %{size_download} %{size_upload} %{time_total}",
                                             *argv],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=a.max_time + 10)
        fields = r.stdout.decode().split()
        if r.returncode != 0 or len(fields) != 4 or fields[0] != "200":
            raise Fail(f"curl {' '.join(argv)}: exit {r.returncode}, {r.stdout.decode()!r} "
                       f"{r.stderr.decode().strip()[:200]}")
        size = int(float(fields[1] if kind == "down" else fields[2]))
        if size != a.size:
            raise Fail(f"curl {' '.join(argv)}: moved {size} bytes, not {a.size}")
        return float(fields[3])

    def transfer(self, port, kind, sl=None):
        """--transfers transfers through PORT, one after the other; returns
        (MiB/s over their summed time_total, sluice CPU s from ticks, from schedstat)."""
        a = self.args
        argv = (["-o", os.devnull, f"http://127.0.0.1:{port}/big"] if kind == "down" else
                ["-o", os.devnull, "-H", "Expect:", "-T", a.upfile, f"http://127.0.0.1:{port}/sink"])
        c0 = procfs.cpu_times(sl.pid) if sl else (0, 0)
        times = []
        for _ in range(a.transfers):
            e0 = tcp_ext()
            times.append(self.curl(argv, kind))
            grew = {k: v - e0.get(k, 0) for k, v in tcp_ext().items() if v > e0.get(k, 0)}
            for k, v in grew.items():
                self.kernel[k] = self.kernel.get(k, 0) + v
            if times[-1] > a.slow:
                self.slow.append(f"{kind}load {'via sluice ' + self.tag if sl else 'direct'} "
                                 f"{times[-1]:.2f} s" + (" (kernel: " + ", ".join(
                                     f"{k} +{v}" for k, v in grew.items()) + ")" if grew else ""))
        secs = sum(times)
        self.slowest = max(self.slowest, (max(times), kind, port))
        if a.verbose:
            print(f"    {kind} via {'sluice' if sl else 'direct'}: " +
                  " ".join(f"{t:.2f}s" for t in times))
        c1 = procfs.cpu_times(sl.pid) if sl else (0, 0)
        ns = c1[1] - c0[1] if sl and c0[1] is not None else None
        return a.size * a.transfers / MiB / secs, c1[0] - c0[0], ns

    def start_sluice(self, up_port, high, low, tag):
        logpath = os.path.join(self.args.tmp, f"sluice-{tag}.log")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        try:
            sl, port, _ = start_listening(
                lambda port: self.pin_proxy + [self.args.bin, "--listen", f"127.0.0.1:{port}",
                                               "--upstream", f"127.0.0.1:{up_port}",
                                               "--high-watermark", str(high), "--low-watermark", str(low)],
                logpath, self.procs, env=env)
        except Fail as e:
            raise Fail(f"sluice (high {high}, low {low}): {e}") from None
        return sl, port, logpath


def run(args):
    r = Runner(args)
    t_end = time.monotonic() + BUDGET
    settings = []
    for item in args.settings.split(","):
        high, _, low = item.partition("/")
        settings.append((parse_size(high), parse_size(low or str(parse_size(high) // 4))))
    args.upfile = os.path.join(args.tmp, "upload.bin")
    with open(args.upfile, "wb") as f:
        f.truncate(args.size)  # sparse: reading it costs the client little
    print(f"watermark_bench: {args.size // MiB} MiB per transfer, {args.transfers} transfers per "
          f"measurement, {args.reps} repetitions, "
          f"settings {' '.join(f'{label(h)}/{label(l)}' for h, l in settings)}; {r.pin_note}; "
          f"{os.cpu_count()} CPUs; load average {loadavg()}; kernel TCP memory {tcp_mem()} "
          f"(pressure threshold); sluice {args.bin}")
    res = {}  # key -> {"down": [...], "up": [...], "hwm": [...]}
    notes = []
    try:
        _, up_port = start_port_child(r.procs, r.pin_other + self_child(__file__, "upstream", args.size))
        for rep in range(args.reps):
            order = settings[rep % len(settings):] + settings[: rep % len(settings)]
            if time.monotonic() > t_end - 20:
                notes.append(f"time budget reached: stopped after {rep} repetition(s)")
                break
            d = res.setdefault("direct", {"down": [], "up": [], "hwm": []})
            d["down"].append(r.transfer(up_port, "down"))
            if not args.no_upload:
                d["up"].append(r.transfer(up_port, "up"))
            for high, low in order:
                key = (high, low)
                e = res.setdefault(key, {"down": [], "up": [], "hwm": []})
                sl, port, logpath = r.start_sluice(up_port, high, low, f"{label(high)}-{rep}")
                r.tag = f"{label(high)}/{label(low)}"
                try:
                    e["down"].append(r.transfer(port, "down", sl))
                    if args.no_upload:
                        pass
                    elif time.monotonic() < t_end - 15:
                        e["up"].append(r.transfer(port, "up", sl))
                    elif "upload skipped" not in " ".join(notes):
                        notes.append("upload skipped for some runs: time budget")
                    if sl.poll() is not None:
                        raise Fail(f"sluice exited ({sl.returncode})")
                    e["hwm"].append(procfs.hwm(sl.pid))
                except Fail as ex:
                    with open(logpath, errors="replace") as f:
                        raise Fail(f"{ex}\nsluice log tail:\n{f.read()[-800:]}") from None
                finally:
                    r.procs.stop([sl])
                if args.verbose:
                    dn = e["down"][-1]
                    print(f"  rep {rep + 1} {label(high)}/{label(low)}: down {dn[0]:.0f} MiB/s "
                          f"cpu {dn[1] * 1000:.0f} ms" + (f", up {e['up'][-1][0]:.0f} MiB/s "
                                                          f"cpu {e['up'][-1][1] * 1000:.0f} ms"
                                                          if e["up"] else ""))
    finally:
        r.procs.stop_all()

    mib = args.size * args.transfers / MiB
    print(f"\n| high/low | download MiB/s | download CPU ms/MiB | upload MiB/s | upload CPU ms/MiB "
          f"| sluice peak RSS |")
    print("|---|---|---|---|---|---|")
    failed = []
    for key, e in res.items():
        name = "direct, no proxy" if key == "direct" else f"{label(key[0])}/{label(key[1])}"
        cells = []
        for kind in ("down", "up"):
            runs = e[kind]
            mbps = median([x[0] for x in runs])
            tick = median([x[1] * 1000 / mib for x in runs]) if key != "direct" else None
            ns = median([x[2] * 1000 / mib if x[2] is not None else None for x in runs]) \
                if key != "direct" else None
            cpu_cell = "-" if tick is None else f"{tick:.2f}" + (f" ({ns:.2f})" if ns is not None else "")
            cells += [fmt(mbps, ".0f"), cpu_cell]
            if key != "direct" and mbps is not None and mbps < args.min_mibs:
                failed.append(f"{name} {kind}load {mbps:.0f} MiB/s < --min-mibs {args.min_mibs}")
        peak = median(e["hwm"])
        print(f"| {name} | {' | '.join(cells)} | {f'{peak / MiB:.1f} MiB' if peak else '-'} |")
    print(f"Medians of {len(res.get('direct', {}).get('down', []))} repetition(s) of "
          f"{args.transfers} x {args.size // MiB} MiB. CPU ms/MiB: sluice utime+stime "
          f"(/proc/PID/stat, {1000 // procfs.TICK} ms ticks), in parentheses the same from "
          f"/proc/PID/schedstat (ns). MiB/s from curl's time_total. Load average at the end "
          f"{loadavg()} (other work on these CPUs makes MiB/s noisy).")
    print(f"Slowest single transfer: {r.slowest[0]:.2f} s ({r.slowest[1]}load of {args.size // MiB} MiB).")
    if r.slow:
        print(f"Transfers slower than {args.slow} s: {len(r.slow)}: " + "; ".join(r.slow[:8]))
    if r.kernel.get("TCPMemoryPressures") or r.kernel.get("TCPRcvQDrop"):
        print("note: kernel TCP memory pressure / receive-queue drops during transfers (" +
              ", ".join(f"{k} +{v}" for k, v in r.kernel.items()) + f"; TCP memory now {tcp_mem()}): "
              "loopback segments were dropped and retransmitted, so MiB/s medians are disturbed; "
              "rerun on a quiet host")
    elif r.kernel:
        print(f"note: receive queues pruned/collapsed during transfers (PruneCalled "
              f"+{r.kernel.get('PruneCalled', 0)}), no drops")
    for n in notes:
        print(f"note: {n}")
    for f in failed:
        print(f"FAIL: {f}")
    return 1 if failed else 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "upstream":
        serve(sys.argv[2])
        return 0
    env = os.environ.get
    ap = argparse.ArgumentParser(prog="watermark_bench.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--settings", default=env("WM_SETTINGS", "16K/4K,32K/8K,64K/16K,256K/64K"),
                    help="comma-separated HIGH/LOW pairs (16K/4K,32K/8K,64K/16K,256K/64K)")
    ap.add_argument("--size", type=parse_size, default=env("WM_SIZE", "256M"),
                    help="bytes per transfer (256M)")
    ap.add_argument("--reps", type=int, default=int(env("WM_REPS", "3")), help="repetitions (3)")
    ap.add_argument("--transfers", type=int, default=int(env("WM_TRANSFERS", "4")),
                    help="transfers per measurement, one after the other on one sluice (4)")
    ap.add_argument("--no-upload", action="store_true", help="downloads only")
    ap.add_argument("--min-mibs", type=float, default=float(env("WM_MIN_MIBS", "50")),
                    help="FAIL below this median MiB/s through sluice (50)")
    ap.add_argument("--max-time", type=int, default=20, help="curl --max-time per transfer (20)")
    ap.add_argument("--slow", type=float, default=1.0,
                    help="list transfers slower than this many seconds (1.0)")
    ap.add_argument("--verbose", action="store_true", help="print every run")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run, about 10 s: --settings 32K/8K --size 64M --transfers 1 --reps 1 "
                         "(flags given explicitly still win)")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(settings="32K/8K", size=64 * MiB, transfers=1, reps=1)
    args = ap.parse_args()
    if not 1 <= args.transfers <= 20:
        ap.error("--transfers must be 1..20")
    if not 1 <= args.reps <= 10:
        ap.error("--reps must be 1..10")
    if not MiB <= args.size <= 4096 * MiB:
        ap.error("--size must be 1M..4G")
    return main_guard(run, args, "watermark_bench: FAIL")


if __name__ == "__main__":
    sys.exit(main())

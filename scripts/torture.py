#!/usr/bin/env python3
"""Slow-reader and slow-upload torture runs for sluice (ARCHITECTURE.md §4).

Driven by scripts/torture.sh, which builds the release binary and passes
--bin and --tmp. Everything runs on 127.0.0.1; every process started here is
stopped here by its own PID; every loop is bounded in count and time.

Scenarios:
  one     one slow reader of a big file (default 100 MiB)
  many    READERS concurrent slow readers of a smaller file each
  upload  a python client sends a file as fast as it can; the upstream reads
          it slowly (4 KiB recvs paced to --upload-rate)
Slow readers (--client): `curl --limit-rate RATE --max-time SECONDS`, and/or
`torture.py readers`, one python process that reads each socket at exactly
RATE bytes/s (curl 7.x lets a burst of several MiB through before its limiter
engages, then reads nothing for a while; the paced reader keeps sluice cycling
between its watermarks for the whole run).

Reported per scenario: sluice's idle RSS (VmRSS before any request), peak RSS
(VmRSS every 0.5 s, and VmHWM) and growth; bytes the source sent vs bytes the
sink received and the gap; during the run, the part of the gap in kernel
socket queues (sock_diag netlink, else /proc/net/tcp: send + receive queues
of every socket on the proxy and upstream ports) and the rest, held by sluice
(ARCHITECTURE.md §4: <= high watermark + one read per direction); sluice's own
peak_buffered counter when its log has one. Exit status 1 on any FAIL.

The upstream is this file run as `torture.py upstream DIR COUNTERS`: a thread
per connection, HTTP/1.1 with Content-Length; its byte counters live in the
small file COUNTERS (mmap), read at any time without asking it:
  GET /f/NAME                 the file DIR/NAME, written in 64 KiB sends
  PUT /slow-upload?rate=BPS   reads the body at BPS bytes/s in 4 KiB recvs
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from sluicebench import procfs
from sluicebench.net import TCP_STATES, tcp_live
from sluicebench.procs import (Procs, log_tail, main_guard, self_child, start_listening,
                               start_port_child)
from sluicebench.units import KiB, human, parse_size
from torture_children import RECEIVED, SEND_CHUNK, SENT, Shm, paced_readers, serve, uploader

STATE_PER_EXCHANGE = 16 * KiB  # heads, session state, an upstream connection
LINGER_WAIT = 3.0              # s for sluice to drop a finished exchange's sockets


# --------------------------------------------------------------------------
# measurement helpers

def kernel_queued(ports, sluice_inodes):
    """(bytes queued in all sockets on PORTS, the part in sluice's own sockets)."""
    total = own = 0
    for lp, rp, _, tx, rx, ino in tcp_live():
        if lp in ports or rp in ports:
            total += tx + rx
            if ino in sluice_inodes:
                own += tx + rx
    return total, own


def sluice_conns(pid):
    """sluice's connected TCP sockets: [(lport, rport, state, sendq, recvq)]."""
    mine = procfs.socket_inodes(pid)
    return [r[:5] for r in tcp_live() if r[5] in mine]


def log_peak_buffered(path):
    try:
        with open(path, "rb") as f:
            m = re.findall(rb"peak_buffered=(\d+)", f.read())
        return int(m[-1]) if m else None
    except OSError:
        return None


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    with open(path, "wb") as out:
        subprocess.run(["head", "-c", str(size), "/dev/urandom"], stdout=out, check=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.procs = Procs()
        self.up = None
        self.up_port = None
        self.up_ctr = None

    def start_upstream(self):
        path = os.path.join(self.args.tmp, "upstream.counters")
        self.up_ctr = Shm(path, create=True)
        self.up, self.up_port = start_port_child(self.procs, self_child(__file__, "upstream", self.args.tmp, path))

    def start_sluice(self, name):
        logpath = os.path.join(self.args.tmp, f"sluice-{name}.log")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        p, port, argv = start_listening(
            lambda port: [self.args.bin, "--listen", f"127.0.0.1:{port}",
                          "--upstream", f"127.0.0.1:{self.up_port}", *self.args.sluice_extra],
            logpath, self.procs, env=env)
        time.sleep(0.3)
        return p, port, logpath, argv


def sample(sl, port, b, src, dst):
    """One sample; the two byte counters are read before and after the kernel
    queues and averaged, so the skew of the (short) netlink read cancels."""
    inodes = procfs.socket_inodes(sl.pid)
    s1, d1 = src(), dst()
    kq, own = kernel_queued({port, b.up_port}, inodes)
    d2, s2 = dst(), src()
    rss, _ = procfs.rss_hwm(sl.pid)
    return {"rss": rss, "sent": (s1 + s2) / 2, "recv": (d1 + d2) / 2, "kq": kq, "own": own}


def sample_run(sl, seconds, t0, take, go_on, keep):
    """A sample from take() every 0.5 s while sluice runs, for at most SECONDS
    + 10 s after T0; stops once go_on() is false after a sample, and keeps
    the samples for which keep() is true (with their time "t")."""
    samples = []
    for _ in range(int((seconds + 10) / 0.5) + 1):
        if time.monotonic() > t0 + seconds + 10 or sl.poll() is not None:
            break
        t = time.monotonic() - t0
        smp = take()
        if not go_on():
            break
        if keep():
            smp["t"] = t
            samples.append(smp)
        time.sleep(0.5)
    return samples


def after_run(b, sl, port, logpath, res, idle_rss, samples, what, linger_fails, pooled_ok=0):
    """Peak RSS, lingering connections, sluice's own counters; stops sluice.
    POOLED_OK: idle upstream connections that may stay (exchanges that completed)."""
    hwm = 0
    ext = procfs.tcp_ext()
    grew = {k: v - res["ext0"].get(k, 0) for k, v in ext.items() if v > res["ext0"].get(k, 0)}
    if grew:
        res.setdefault("notes", []).append(
            "kernel TCP memory pressure / drops during the run (" +
            ", ".join(f"{k} +{v}" for k, v in grew.items()) +
            "): the host's TCP memory (tcp_mem) ran short; this run and others on the host may stall")
    if sl.poll() is None:
        _, hwm = procfs.rss_hwm(sl.pid)
        left, pooled = [], []
        for _ in range(int(LINGER_WAIT / 0.1)):
            left = sluice_conns(sl.pid)
            pooled = [c for c in left if c[0] != port and c[2] == 1 and c[3] == c[4] == 0][:pooled_ok]
            left = [c for c in left if c not in pooled]
            if not left:
                break
            time.sleep(0.1)
        if pooled:
            res.setdefault("notes", []).append(
                f"{len(pooled)} idle upstream connection(s) kept in sluice's pool "
                f"({pooled_ok} download(s) completed)")
        if left:
            desc = ", ".join(f"{TCP_STATES[st] if st < len(TCP_STATES) else st} "
                             f"{'client' if lp == port else 'upstream'} side sendq={human(tx)} "
                             f"recvq={human(rx)}" for lp, rp, st, tx, rx in left[:4])
            msg = (f"sluice still has {len(left)} connection(s) {LINGER_WAIT:.0f} s after the "
                   f"{what} ended: {desc}")
            (res["fails"] if linger_fails else res.setdefault("notes", [])).append(msg)
    else:
        res["fails"].append(f"sluice exited with status {sl.returncode} during the run")
        res["log"] = log_tail(logpath)
    b.procs.stop([sl])
    res["peak_buffered"] = log_peak_buffered(logpath)
    return max([s["rss"] for s in samples] + [hwm, idle_rss])


# --------------------------------------------------------------------------
# scenarios

class CurlReaders:
    """READERS `curl --limit-rate` processes, each writing to its own file."""

    def __init__(self, b, url, count, rate_text, seconds, tag):
        self.b = b
        self.outs = [os.path.join(b.args.tmp, f"{tag}-out-{i}") for i in range(count)]
        self.procs = [b.procs.start(
            ["curl", "-sS", "--http1.1", "--limit-rate", rate_text, "--max-time", str(seconds),
             "-o", out, "-w", "%{size_download} %{http_code}", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            for out in self.outs]
        self.count = count

    def received(self):
        return sum(os.path.getsize(o) if os.path.exists(o) else 0 for o in self.outs)

    def all_running(self):
        return all(p.poll() is None for p in self.procs)

    def any_running(self):
        return any(p.poll() is None for p in self.procs)

    def finish(self):
        """Returns (bytes received per reader, list of failures)."""
        self.b.procs.stop(self.procs)
        got, bad = [], []
        for p in self.procs:
            out, err = p.communicate()
            fields = out.decode().split()
            got.append(int(fields[0]) if fields else 0)
            code = fields[1] if len(fields) > 1 else "?"
            if p.returncode not in (0, 28) or code != "200":
                bad.append(f"curl exit {p.returncode}, HTTP {code}: {err.decode().strip()[:200]}")
        for o in self.outs:
            if os.path.exists(o):
                os.unlink(o)
        return got, bad


class PyClient:
    """One python client process (`torture.py readers|upload ...`) with a shared counter."""

    def __init__(self, b, sub, argv, tag):
        self.b = b
        path = os.path.join(b.args.tmp, f"{tag}.counters")
        self.shm = Shm(path, create=True)
        self.proc = b.procs.start(self_child(__file__, sub, *argv, path),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL)

    def received(self):
        return self.shm.get(0)

    def all_running(self):
        return self.proc.poll() is None

    any_running = all_running

    def result(self):
        self.b.procs.stop([self.proc])
        out, err = self.proc.communicate()
        try:
            return json.loads(out.decode()), None
        except ValueError:
            return None, f"client failed (exit {self.proc.returncode}): {err.decode()[-300:]}"

    def finish(self):
        r, err = self.result()
        if r is None:
            return [], [err]
        return r["got"], [f"{n} reader(s): {what}" for what, n in r["errors"].items()]


def run_download(b, name, readers, size, rate_text, seconds, threshold, thr_note, client):
    a = b.args
    rate = parse_size(rate_text)
    fname = f"{name}-{size}.bin"
    make_file(os.path.join(a.tmp, fname), size)
    tag = f"{name}-{client}"
    res = {"name": f"{name} ({client})", "fails": [], "threshold": threshold}
    sl, port, logpath, argv = b.start_sluice(tag)
    res["cmd"] = " ".join(argv)
    idle_rss, _ = procfs.rss_hwm(sl.pid)
    res["ext0"] = procfs.tcp_ext()
    base = b.up_ctr.get(SENT)
    t0 = time.monotonic()
    if client == "curl":
        cl = CurlReaders(b, f"http://127.0.0.1:{port}/f/{fname}", readers, rate_text, seconds, tag)
    else:
        cl = PyClient(b, "readers", [port, f"/f/{fname}", readers, rate, seconds], tag)
    samples = sample_run(sl, seconds, t0,
                         lambda: sample(sl, port, b, lambda: b.up_ctr.get(SENT) - base, cl.received),
                         go_on=cl.any_running, keep=cl.all_running)  # keep: nobody left during the sample
    if cl.any_running():
        res["fails"].append(f"client(s) still running {seconds + 10} s after start (stalled?)")
    got, bad = cl.finish()
    received = sum(got)
    sent_total = b.up_ctr.get(SENT) - base
    expected = rate * seconds
    short = sum(1 for g in got if g < expected * 0.5 and g < size)
    if bad:
        res["fails"].append(f"{len(bad)} kind(s) of reader failure, first: {bad[0]}")
    if short:
        res["fails"].append(f"{short} reader(s) got < 50% of rate x time ({human(expected)}): stall?")
    if client == "curl" and received > 2 * expected * readers:
        res.setdefault("notes", []).extend([f"curl got {received / (expected * readers):.1f} x rate x time: its --limit-rate "
                        f"lets a burst of several MiB through at the start (also without sluice), "
                        f"then it reads nothing for a while"])
    complete = sum(1 for g in got if g >= size)
    peak = after_run(b, sl, port, logpath, res, idle_rss, samples, "downloads", linger_fails=True,
                     pooled_ok=complete)
    what = "curl --limit-rate" if client == "curl" else "python, paced at"
    return finish(res, a, samples, idle_rss, peak, readers, sent_total, received,
                  label=(f"{readers} slow reader(s) ({what} {rate_text}), {human(size)} file each, "
                         f"{seconds} s"),
                  frm="upstream sent", to="client received", thr_note=thr_note,
                  expected=expected * readers)


def run_upload(b):
    a = b.args
    size, seconds = a.upload_size, a.upload_seconds
    up_rate = parse_size(a.upload_rate)
    res = {"name": "upload", "fails": [], "threshold": a.threshold}
    sl, port, logpath, argv = b.start_sluice("upload")
    res["cmd"] = " ".join(argv)
    idle_rss, _ = procfs.rss_hwm(sl.pid)
    res["ext0"] = procfs.tcp_ext()
    base = b.up_ctr.get(RECEIVED)
    t0 = time.monotonic()
    cl = PyClient(b, "upload", [port, f"/slow-upload?rate={up_rate}", size, seconds], "upload")
    samples = sample_run(sl, seconds, t0,
                         lambda: sample(sl, port, b, cl.received, lambda: b.up_ctr.get(RECEIVED) - base),
                         go_on=cl.all_running, keep=lambda: True)
    if cl.all_running():
        res["fails"].append(f"client still running {seconds + 10} s after start (stalled?)")
    r, err = cl.result()
    if r is None:
        res["fails"].append(err)
        r = {"sent": cl.received()}
    elif r["error"]:
        res["fails"].append(f"upload client: {r['error']}")
    client_sent = r["sent"]
    up_recv = b.up_ctr.get(RECEIVED) - base
    expected = up_rate * seconds
    if up_recv < 0.5 * min(expected, size):
        res["fails"].append(f"upstream received {human(up_recv)} < 50% of its read rate x time "
                            f"({human(expected)}): stall?")
    peak = after_run(b, sl, port, logpath, res, idle_rss, samples, "upload", linger_fails=False)
    return finish(res, a, samples, idle_rss, peak, 1, client_sent, up_recv,
                  label=(f"python client PUTs {human(size)} as fast as it can, upstream reads "
                         f"{a.upload_rate}/s, {seconds} s"),
                  frm="client sent", to="upstream received", thr_note="same as one reader",
                  expected=expected)


def finish(res, a, samples, idle_rss, peak, conns, frm_total, to_total, label, frm, to,
           thr_note, expected):
    growth = peak - idle_rss
    gap = frm_total - to_total
    steady = [s for s in samples if s["t"] >= 2.0] or samples  # TCP windows open in the 1st s
    held = [s["sent"] - s["recv"] - s["kq"] for s in steady]
    held_med = statistics.median(held) if held else 0
    held_max = max(held) if held else 0
    kq_med = statistics.median([s["kq"] for s in steady]) if steady else 0
    own_med = statistics.median([s["own"] for s in steady]) if steady else 0
    gap_med = statistics.median([s["sent"] - s["recv"] for s in steady]) if steady else 0
    bound = conns * (a.high + SEND_CHUNK) + 256 * KiB
    if growth > res["threshold"]:
        res["fails"].append(f"RSS growth {human(growth)} > threshold {human(res['threshold'])}")
    if held and held_med > bound:
        res["fails"].append(f"sluice holds ~{human(held_med)} (gap - kernel queues) > "
                            f"{conns} x (high {human(a.high)} + 64 KiB) + 256 KiB = {human(bound)}")
    res.update(idle=idle_rss, peak=peak, growth=growth, frm_total=frm_total, to_total=to_total,
               gap=gap, held=held_med if held else None)
    print(f"\n== {res['name']}: {label} ==")
    print(f"  sluice: {res['cmd']}")
    print(f"  sluice idle RSS            {human(idle_rss)}")
    print(f"  sluice peak RSS            {human(peak)}  (growth {human(growth)}; "
          f"threshold {human(res['threshold'])} = {thr_note})")
    print(f"  {frm:<27}{human(frm_total)}")
    print(f"  {to:<27}{human(to_total)}  (rate x time = {human(expected)})")
    print(f"  gap at the end             {human(gap)}")
    if held:
        print(f"  during the run, median of {len(steady)} samples after 2 s:")
        print(f"    gap                      {human(gap_med)}")
        print(f"    in kernel socket queues  {human(kq_med)}  (of which in sluice's own sockets "
              f"{human(own_med)}: kernel memory, not in RSS)")
        print(f"    held by sluice           {human(held_med)}  (max {human(held_max)}; "
              f"bound {conns} x (high + 64 KiB) + 256 KiB = {human(bound)})")
    if res.get("peak_buffered") is not None:
        print(f"  sluice's peak_buffered     {human(res['peak_buffered'])}  (its own counter, from its log)")
    if a.verbose and samples:
        print("    t(s)   RSS        from        to          gap         kernel")
        for s in samples[::4]:
            print(f"    {s['t']:5.1f}  {human(s['rss']):10} {human(s['sent']):11} {human(s['recv']):11} "
                  f"{human(s['sent'] - s['recv']):11} {human(s['kq'])}")
    for n in res.get("notes", []):
        print(f"  note: {n}")
    for f in res["fails"]:
        print(f"  FAIL: {f}")
    if "log" in res:
        print("  sluice log tail:\n" + res["log"])
    res["ok"] = not res["fails"]
    print(f"  => {'PASS' if res['ok'] else 'FAIL'}")
    return res


def run(args):
    b = Bench(args)
    results = []
    t_start = time.monotonic()
    try:
        b.start_upstream()
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            wmem = int(f.read().split()[2])
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            rmem = int(f.read().split()[2])
        print(f"torture: sluice {args.bin}; upstream pid {b.up.pid} port {b.up_port}; "
              f"high watermark {human(args.high)}; kernel tcp_wmem/tcp_rmem max "
              f"{human(wmem)}/{human(rmem)} (what the kernel may queue per socket)")
        scen = ["one", "many", "upload"] if args.scenario == "all" else [args.scenario]
        clients = ["curl", "python"] if args.client == "both" else [args.client]
        for s in scen:
            for client in (clients if s != "upload" else ["python"]):
                if s == "one":
                    results.append(run_download(b, "one", 1, args.size, args.rate, args.seconds,
                                                args.threshold, "--threshold", client))
                elif s == "many":
                    per = args.high + STATE_PER_EXCHANGE
                    thr = args.many_threshold or args.readers * per + args.threshold
                    note = (f"{args.readers} x (high {human(args.high)} + {human(STATE_PER_EXCHANGE)} "
                            f"state) + {human(args.threshold)}"
                            if not args.many_threshold else "--many-threshold")
                    results.append(run_download(b, "many", args.readers, args.many_size, args.rate,
                                                args.many_seconds, thr, note, client))
                else:
                    results.append(run_upload(b))
    finally:
        b.procs.stop_all()
    print("\n| scenario | idle RSS | peak RSS | growth | threshold | from | to | gap at end "
          "| held by sluice | result |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        held = human(r["held"]) if r["held"] is not None else "-"
        print(f"| {r['name']} | {human(r['idle'])} | {human(r['peak'])} | {human(r['growth'])} | "
              f"{human(r['threshold'])} | {human(r['frm_total'])} | {human(r['to_total'])} | "
              f"{human(r['gap'])} | {held} | {'PASS' if r['ok'] else 'FAIL'} |")
    print(f"from/to: upstream sent/client received (downloads), client sent/upstream received "
          f"(upload); held by sluice = median of (gap - kernel queues) during the run. "
          f"Total {time.monotonic() - t_start:.0f} s.")
    return 0 if all(r["ok"] for r in results) else 1


def main():
    env = os.environ.get
    sub = sys.argv[1] if len(sys.argv) > 1 else ""
    if sub in ("upstream", "readers", "upload"):
        signal.signal(signal.SIGTERM, lambda *_: os._exit(1))
        {"upstream": serve, "readers": paced_readers, "upload": uploader}[sub](*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(prog="torture.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--scenario", choices=["one", "many", "upload", "all"],
                    default=env("TORTURE_SCENARIO", "all"))
    ap.add_argument("--client", choices=["curl", "python", "both"], default=env("TORTURE_CLIENT", "both"),
                    help="slow readers: curl --limit-rate, a python reader paced exactly, or both "
                         "one after the other (both)")
    ap.add_argument("--size", type=parse_size, default=env("TORTURE_SIZE", "100M"),
                    help="file for the one slow reader (100M)")
    ap.add_argument("--rate", default=env("TORTURE_RATE", "100k"),
                    help="read rate per reader, curl --limit-rate syntax (100k = 102400 B/s)")
    ap.add_argument("--seconds", type=int, default=int(env("TORTURE_SECONDS", "20")),
                    help="duration of the one-reader run (20)")
    ap.add_argument("--threshold", type=parse_size, default=env("TORTURE_THRESHOLD", "4M"),
                    help="max RSS growth for one reader and for the upload (4M)")
    ap.add_argument("--readers", type=int, default=int(env("TORTURE_READERS", "200")),
                    help="concurrent slow readers in 'many' (200)")
    ap.add_argument("--many-size", type=parse_size, default=env("TORTURE_MANY_SIZE", "20M"),
                    help="file per reader in 'many' (20M)")
    ap.add_argument("--many-seconds", type=int, default=int(env("TORTURE_MANY_SECONDS", "15")))
    ap.add_argument("--many-threshold", type=parse_size, default=env("TORTURE_MANY_THRESHOLD"),
                    help="default: readers x (high + 16 KiB) + --threshold")
    ap.add_argument("--upload-size", type=parse_size, default=env("TORTURE_UPLOAD_SIZE", "50M"))
    ap.add_argument("--upload-rate", default=env("TORTURE_UPLOAD_RATE", "100k"),
                    help="bytes/s the upstream reads the upload at (100k)")
    ap.add_argument("--upload-seconds", type=int, default=int(env("TORTURE_UPLOAD_SECONDS", "15")))
    ap.add_argument("--high", type=parse_size, default=env("TORTURE_HIGH"),
                    help="run sluice with --high-watermark HIGH --low-watermark HIGH/4 "
                         "(default: sluice's own, 64k)")
    ap.add_argument("--verbose", action="store_true", help="print every 4th sample")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run, about 25 s: --scenario one --size 20M --seconds 5 "
                         "(flags given explicitly still win)")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(scenario="one", size=parse_size("20M"), seconds=5)
    args = ap.parse_args()
    if not 1 <= args.readers <= 2000:
        ap.error("--readers must be 1..2000")
    for name in ("seconds", "many_seconds", "upload_seconds"):
        if not 1 <= getattr(args, name) <= 600:
            ap.error(f"--{name.replace('_', '-')} must be 1..600")
    args.sluice_extra = []
    if args.high:
        args.sluice_extra = ["--high-watermark", str(args.high), "--low-watermark", str(args.high // 4)]
    else:
        args.high = 64 * KiB
    return main_guard(run, args, "torture")


if __name__ == "__main__":
    sys.exit(main())

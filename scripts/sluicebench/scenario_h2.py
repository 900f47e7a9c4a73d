"""The HTTP/2 scenarios of issue 24 (h2 over TLS): keep-alive GETs with
h2load (H1), a 100 MiB download on one stream (H2), slow streams held by
flow control beside a fast download (H3, sluicebench/h2slow.py)."""

import os
import re
import shlex
import time

from . import h2load, h2slow
from .plan import (BIG_SIZE, H1_CONNS, H1_STREAMS, H3_CONNS, H3_RATE, H3_SAMPLE_SECS, H3_STREAMS, H3_WINDOW,
                   LOAD_CPU, MIB, T_SIZE, s1_path)
from .procfs import busy_pct, cpu_busy_ticks, cpu_user_sys, settled
from .procs import run_cmd
from .runstate import pinned, problem, say
from .stats import median, ratio
from .tools import tool_path


def run_h2load(where, peer, args, path, timeout, warm_up=False):
    """One h2load run (pinned to the load CPU) against PEER's PATH over
    https: its parsed summary (sluicebench.h2load.parse). A failed,
    errored or non-2xx request, or a protocol other than h2, is a problem;
    in a WARM_UP run only one that is not h2 or not 2xx (a loaded machine
    may finish no request in a 1 s warm-up: the measured run says)."""
    cmd = pinned(LOAD_CPU, [tool_path("h2load")] + list(args) + ["https://127.0.0.1:%d%s" % (peer.port, path)])
    rc, out = run_cmd(cmd, timeout)
    r = h2load.parse(out)
    broken = r["protocol"] != "h2" or r["non2xx"]
    if broken or not warm_up and (rc != 0 or not r["succeeded"] or r["failed"] or r["errored"] or r["timeout"]):
        problem(where, shlex.join(cmd), out[-3000:])
    elif warm_up and not r["succeeded"]:
        say("%s: no request finished (%d started)" % (where, r["started"]))
    return r


def h1(ctx, peer, where):
    """H1: keep-alive 1 KiB GETs over h2, h2load -c64 -m10 for ctx.dur s
    after an unmeasured warm-up: req/s, p50/p99 of the successful requests
    (h2load's --log-file), proxy CPU µs/request in total, user and system."""
    load = ["-c%d" % H1_CONNS, "-m%d" % H1_STREAMS]
    if ctx.warmup:
        run_h2load(where + " (warm-up)", peer, load + ["-D%d" % ctx.warmup], s1_path(T_SIZE), ctx.warmup + 30,
                   warm_up=True)
    log = os.path.join(ctx.tmp, "h2load-%s.log" % re.sub(r"\W+", "-", where))
    pids = peer.pids()
    c0, us0, b0 = peer.cpu(), cpu_user_sys(pids), cpu_busy_ticks(LOAD_CPU)
    r = run_h2load(where, peer, load + ["-D%d" % ctx.dur, "--log-file", log], s1_path(T_SIZE), ctx.dur + 30)
    cpu, us1 = peer.cpu() - c0, cpu_user_sys(pids)
    n = r["succeeded"]
    res = {"requests": n, "rps": n / r["secs"] if r["secs"] else None, "load_busy": busy_pct(b0, cpu_busy_ticks(LOAD_CPU))}
    try:
        res.update(h2load.percentiles(log))
    except OSError as e:
        problem(where, "read " + log, str(e))
    if peer.proc and n:
        res["cpu_us_req"] = cpu * 1e6 / n
        res["usr_us_req"] = (us1[0] - us0[0]) * 1e6 / n
        res["sys_us_req"] = (us1[1] - us0[1]) * 1e6 / n
    return res


def h2_downloads(ctx, peer, where):
    """ctx.transfers downloads of the 100 MiB file on one h2 stream each
    (h2load -n1 -c1, windows 2^30-1): {"mibs": median MiB/s over h2load's
    "finished in", "cpu_ms_mib": proxy CPU over all of them per MiB}, {}
    after a problem."""
    speeds = []
    c0 = peer.cpu()
    for i in range(ctx.transfers):
        r = run_h2load("%s #%d" % (where, i + 1), peer, ["-n1", "-c1"], "/files/big.bin", 300)
        if r["data_bytes"] != BIG_SIZE or not r["secs"]:
            problem(where, "h2load -n1 -c1 /files/big.bin", "%d bytes of data (expected %d) in %.3f s"
                    % (r["data_bytes"], BIG_SIZE, r["secs"]))
            return {}
        speeds.append(BIG_SIZE / MIB / r["secs"])
    res = {"mibs": median(speeds)}
    if peer.proc:
        res["cpu_ms_mib"] = (peer.cpu() - c0) * 1e3 / (ctx.transfers * BIG_SIZE / MIB)
    return res


def h2(ctx, peer, where):
    """H2: the 100 MiB download on one stream (h2_downloads)."""
    return h2_downloads(ctx, peer, where)


def h3(ctx, peer, where):
    """H3: the fast download alone; then H3_CONNS x H3_STREAMS slow streams
    (sluicebench/h2slow.py, H3_RATE bytes/s each by flow control) and the
    proxy's RSS growth over its settled RSS, peak over H3_SAMPLE_SECS
    once they all started, per slow stream; then the fast download beside
    them, and beside ÷ alone."""
    if not peer.proc:
        return {}
    alone = h2_downloads(ctx, peer, where + " alone")
    if not alone:
        return {}
    base = settled(peer.rss)
    slow = h2slow.Driver(peer.port, tls=True, conns=H3_CONNS, streams=H3_STREAMS, rate=H3_RATE, window=H3_WINDOW,
                         secs=ctx.slow_secs + 120, argv_prefix=pinned(LOAD_CPU, []))
    n = H3_CONNS * H3_STREAMS
    try:
        started = slow.line(20.0).split()
        if len(started) < 4 or started[0] != "started" or int(started[1]) != n:
            problem(where, shlex.join(slow.argv), "not every slow stream started: %r" % " ".join(started))
            return {}
        time.sleep(1.0)
        peak = base
        for _ in range(int(H3_SAMPLE_SECS / 0.1)):
            peak = max(peak, peer.rss())
            time.sleep(0.1)
        beside = h2_downloads(ctx, peer, where + " beside")
        done = slow.stop().split()
    finally:
        slow.kill()
    if len(done) < 6 or done[0] != "done" or int(done[1]) != n or int(done[4]):
        problem(where, shlex.join(slow.argv), "slow streams at the end: %r (expected %d ok, 0 errors)"
                % (" ".join(done), n))
    res = {"rss_slow_mib": (peak - base) / 1024.0, "rss_kib_stream": (peak - base) / n,
           "fast_alone": alone["mibs"], "fast_beside": beside.get("mibs")}
    res["fast_ratio"] = ratio(res["fast_beside"], res["fast_alone"])
    if len(done) >= 4:
        res["slow_rate"] = float(done[3]) / 1000.0
    return res

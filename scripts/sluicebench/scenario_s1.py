"""Scenario S1 (and T1, the same over TLS): one timed keep-alive wrk run on
a static file of each body size; and, in a separate untimed run, the
proxy's syscalls per request by call (perf tracepoints or strace -c)."""

import os
import re
import shlex
import time

from . import perfsys
from .peers import scheme_of
from .plan import LOAD_CPU, PROXY_CPU, S1_BYTES, s1_path
from .procfs import busy_pct, cpu_busy_ticks, cpu_user_sys, tracer_pid
from .procs import Proc, wait_for
from .runstate import pinned, problem
from .tools import tool_path
from .wrk import run_wrk, warm_up


def s1(ctx, peer, where, conns, tag):
    """One timed S1 run: wrk -t1 -cCONNS on the static file of body size
    TAG. CPU per request in total (schedstat, ns) and split into user and
    system (utime and stime of /proc/PID/stat, clock ticks), summed over
    the proxy's processes."""
    path = s1_path(tag)
    warm_up(ctx, peer, where, conns, path=path)
    mark = ctx.up.mark()
    pids = peer.pids()
    c0, t0, b0 = peer.cpu(), time.time(), cpu_busy_ticks(LOAD_CPU)
    us0 = cpu_user_sys(pids)
    r = run_wrk(where, peer.port, conns, ctx.dur, path=path, scheme=scheme_of(peer))
    wall = time.time() - t0
    cpu = peer.cpu() - c0
    us1 = cpu_user_sys(pids)
    load_busy = busy_pct(b0, cpu_busy_ticks(LOAD_CPU))
    reqs, upconns = ctx.up.count_since(mark)
    res = {"rps": r["rps"], "p50": r["p50"], "p99": r["p99"], "requests": r["requests"], "body": S1_BYTES[tag],
           "conns": conns}
    if peer.proc and r["requests"]:
        res["cpu_us_req"] = cpu * 1e6 / r["requests"]
        res["usr_us_req"] = (us1[0] - us0[0]) * 1e6 / r["requests"]
        res["sys_us_req"] = (us1[1] - us0[1]) * 1e6 / r["requests"]
        res["cpu_pct"] = 100.0 * cpu / wall
    res["reuse"] = reqs / upconns if upconns else None
    res["load_busy"] = load_busy
    return res


def parse_strace_c(text):
    """{syscall: calls} from the summary table of `strace -c` (columns
    % time, seconds, usecs/call, calls, [errors], syscall; the total line is
    left out)."""
    calls = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) < 5 or not re.match(r"^[\d.]+$", t[0]) or t[-1] == "total":
            continue
        try:
            calls[t[-1]] = calls.get(t[-1], 0) + int(t[3])
        except ValueError:
            continue
    return calls


def s1_syscalls(ctx, peer, where, conns, tag):
    """Syscalls per request in a separate (untimed) S1 run: after the usual
    warm-up, a counter attached to every process of the proxy during one
    `wrk -cCONNS` run of ctx.syscall_secs on body size TAG; {"sc_total":
    calls/request, "sc_NAME": calls of NAME/request}. The counter is perf's
    syscall tracepoints (--syscalls perf, the default), or strace -c."""
    pids = peer.pids()
    if not pids:
        return {}
    # at least 1 s of warm-up, --quick too: the counts are of the steady state
    # (upstream connections open), not of the first connects
    run_wrk(where + " (warm-up)", peer.port, conns, max(1, ctx.warmup), path=s1_path(tag), scheme=scheme_of(peer))
    pids = peer.pids()
    if ctx.syscalls == "perf":
        return s1_syscalls_perf(ctx, peer, where, conns, tag, pids)
    out = os.path.join(ctx.tmp, "strace-%s.txt" % re.sub(r"\W+", "-", where))
    argv = pinned(PROXY_CPU, [tool_path("strace"), "-c", "-f", "-o", out] + sum((["-p", str(p)] for p in pids), []))
    st = Proc("strace", argv, out + ".log")
    try:
        if not wait_for(lambda: all(tracer_pid(p) == st.pid for p in pids) or not st.alive(), 10.0) or not st.alive():
            raise RuntimeError("strace did not attach to %s within 10 s:\n%s" % (pids, st.log_tail()))
        r = run_wrk(where, peer.port, conns, ctx.syscall_secs, path=s1_path(tag), scheme=scheme_of(peer))
    finally:
        st.stop()  # SIGTERM: strace detaches and writes its summary
    try:
        with open(out) as f:
            calls = parse_strace_c(f.read())
    except OSError:
        calls = {}
    if not calls or not r["requests"]:
        raise RuntimeError("no strace summary or no requests (%d):\n%s" % (r["requests"], st.log_tail()))
    res = {"sc_total": sum(calls.values()) / r["requests"], "syscall_requests": r["requests"], "syscall_tool": "strace"}
    for name, n in calls.items():
        res["sc_" + name] = n / r["requests"]
    return res


def s1_syscalls_perf(ctx, peer, where, conns, tag, pids):
    """s1_syscalls with `perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_NAME,...
    -p PID,...`: counted in the kernel while the proxy runs at full speed;
    sc_other = all syscalls less the ones counted by name."""
    out = os.path.join(ctx.tmp, "perf-%s.txt" % re.sub(r"\W+", "-", where))
    c = perfsys.Counter(tool_path("perf"), ctx.perf_events, pids, out, limit_s=ctx.syscall_secs + 60,
                        argv_prefix=pinned(LOAD_CPU, []))
    before = perfsys.tids(pids)
    try:
        if not c.wait_attached():
            raise RuntimeError("perf stat did not attach to %s in time: %s\n%s"
                               % (pids, shlex.join(c.argv), c.log_tail()))
        slept = perfsys.sleeps(pids)
        r = run_wrk(where, peer.port, conns, ctx.syscall_secs, path=s1_path(tag), scheme=scheme_of(peer))
        slept = perfsys.sleeps(pids) - slept
        late = perfsys.tids(pids) - before
    finally:
        calls = c.stop()
    if late:
        problem(where, shlex.join(c.argv), "%d thread(s) of the proxy started after perf attached; their "
                "syscalls are not counted: %s" % (len(late), sorted(late)))
    if "total" not in calls or not r["requests"]:
        raise RuntimeError("no perf counts or no requests (%d): %s\n%s" % (r["requests"], shlex.join(c.argv),
                                                                              c.log_tail()))
    n = r["requests"]
    res = {"sc_total": calls["total"] / n, "syscall_requests": n, "syscall_tool": "perf",
           "slept": max(0, slept) / n}
    named = 0
    for name, v in calls.items():
        if name != "total":
            res["sc_" + name] = v / n
            named += v
    # each tracepoint counts from its own enable; a negative rest is that skew
    res["sc_other"] = max(0, calls["total"] - named) / n
    return res

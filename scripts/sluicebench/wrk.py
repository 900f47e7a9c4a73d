"""wrk, the HTTP/1.1 load generator of S1, S2 and T1: one pinned run and
its parsed summary, and the unmeasured warm-up run before a measured one."""

import re
import shlex

from .peers import scheme_of
from .plan import LOAD_CPU
from .procs import run_cmd
from .runstate import pinned, problem

UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def parse_wrk(out):
    """{requests, rps, p50, p99 (ms, or None), socket_errors (connect,
    read, write, timeout), non2xx} from wrk --latency's output."""
    r = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    r["requests"] = int(m.group(1)) if m else 0
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    r["rps"] = float(m.group(1)) if m else 0.0
    for pct in ("50", "99"):
        m = re.search(r"^\s*%s(?:\.0+)?%%\s+([\d.]+)(us|ms|s|m)\b" % pct, out, re.M)
        r["p" + pct] = float(m.group(1)) * UNIT[m.group(2)] if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = tuple(int(x) for x in m.groups()) if m else (0, 0, 0, 0)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    return r


def run_wrk(where, port, conns, dur, extra=(), path="/small", scheme="http"):
    """One `wrk -t1 -cCONNS -dDURs --latency` run (pinned to the load CPU)
    of PATH on 127.0.0.1:PORT; its parse_wrk summary. A failed run, no
    request, a non-2xx answer, no p99 or a socket error is a problem."""
    cmd = pinned(LOAD_CPU, ["wrk", "-t1", "-c%d" % conns, "-d%ds" % dur, "--latency"] + list(extra)
                 + ["%s://127.0.0.1:%d%s" % (scheme, port, path)])
    rc, out = run_cmd(cmd, dur + 30)
    r = parse_wrk(out)
    if rc != 0 or r["requests"] == 0 or r["non2xx"] or r["p99"] is None:
        problem(where, shlex.join(cmd), out)
    elif any(r["socket_errors"]):
        problem(where, shlex.join(cmd), out)
    return r


def warm_up(ctx, peer, where, conns, extra=(), path="/small"):
    """An unmeasured wrk run of ctx.warmup seconds first, so that every peer
    is measured in its steady state (upstream connections open, buffers
    and pools at their working size), not in its first second."""
    if ctx.warmup:
        run_wrk(where + " (warm-up)", peer.port, conns, ctx.warmup, extra, path, scheme_of(peer))

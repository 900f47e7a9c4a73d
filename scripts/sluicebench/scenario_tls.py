"""The TLS scenarios of issue 23 that are not an S scenario over TLS (T1 is
S1's run, T4 S3's, T6 S5's with its own readers): full and resumed
handshakes (T2, T3, openssl s_time) and idle TLS connections (T5)."""

import os
import re
import shlex
import subprocess
import time

from . import tls as tlsbench
from .plan import LOAD_CPU, S1_BYTES, T6_RATE, T6_READERS, T_SIZE, T_STIME_PROCS, s1_path
from .procfs import settled
from .runstate import pinned, problem
from .scenario_s2_s6 import s5
from .tools import tool_path


def t_handshakes(ctx, peer, where, resume):
    """T2 (RESUME false: `s_time -new`, every handshake full) or T3 (RESUME
    true: `s_time -reuse`, every connection after the first resumes): T_STIME_PROCS
    s_time clients at once for ctx.dur s, each a connection at a time (TLS
    1.3 handshake, GET of the 1 KiB file over HTTP/1.0, close). Proxy CPU per
    connection, connections/s, and the share of them that resumed (from
    s_time's progress marks)."""
    if not peer.proc:
        return {}
    argv = pinned(LOAD_CPU, [tool_path("openssl"), "s_time", "-connect", "127.0.0.1:%d" % peer.port,
                             "-reuse" if resume else "-new", "-tls1_3", "-www", s1_path(T_SIZE),
                             "-time", str(ctx.dur)])
    outs = [os.path.join(ctx.tmp, "s_time-%s-%d.txt" % (re.sub(r"\W+", "-", where), i))
            for i in range(T_STIME_PROCS)]
    c0, t0 = peer.cpu(), time.time()
    procs = []
    try:
        for out in outs:
            with open(out, "wb") as f:
                procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT))
        for p in procs:
            try:
                p.wait(ctx.dur + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    cpu, wall = peer.cpu() - c0, time.time() - t0
    conns = new = reused = 0
    for p, out in zip(procs, outs):
        with open(out, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        r = tlsbench.parse_s_time(text)
        if p.returncode != 0 or r is None or r["bytes_per_conn"] < S1_BYTES[T_SIZE]:
            problem(where, shlex.join(argv), "exit %s; %s" % (p.returncode, text[-1500:]))
            return {}
        conns, new, reused = conns + r["conns"], new + r["new"], reused + r["reused"]
    if not conns:
        problem(where, shlex.join(argv), "no connection completed")
        return {}
    resumed_pct = 100.0 * reused / max(1, new + reused)
    if resume and resumed_pct < 99.0 or not resume and resumed_pct > 0:
        problem(where, shlex.join(argv), "%.1f%% of the handshakes resumed (%d new, %d resumed)"
                % (resumed_pct, new, reused))
    return {"cps": conns / wall, "cpu_us_hs": cpu * 1e6 / conns, "resumed_pct": resumed_pct, "conns": conns}


def t2(ctx, peer, where):
    """T2: full TLS 1.3 handshakes (t_handshakes, s_time -new)."""
    return t_handshakes(ctx, peer, where, resume=False)


def t3(ctx, peer, where):
    """T3: resumed TLS 1.3 handshakes (t_handshakes, s_time -reuse)."""
    return t_handshakes(ctx, peer, where, resume=True)


def t5(ctx, peer, where):
    """T5: ctx.idle_n idle TLS keep-alive connections held by their own
    process (sluicebench/tls_idle.py), after its warm-up bursts: bytes of
    the proxy's RSS per connection."""
    if not peer.proc:
        return {}
    client = tlsbench.IdleClient(peer.port, ctx.idle_n, "/small", argv_prefix=pinned(LOAD_CPU, []))
    cmd = shlex.join(client.argv)
    n = 0
    try:
        warm = client.line()
        if not warm.startswith("warm "):
            problem(where, cmd, "no warm-up: %r" % warm)
            return {}
        if warm != "warm 0":
            problem(where, cmd, "warm-up errors: %s" % warm)
        base = settled(peer.rss)
        held = client.next().split(" ", 4)
        if len(held) < 4 or held[0] != "held":
            problem(where, cmd, "the client stopped: %r" % " ".join(held))
            return {}
        time.sleep(1.0)
        rss = settled(peer.rss)
        n, errors, alive = int(held[1]), int(held[2]), int(held[3])
        if errors or alive < min(200, n):
            problem(where, cmd, "%d failed, %d of the first %d still open after 1 s; first error: %s"
                    % (errors, alive, min(200, n), held[4] if len(held) > 4 else "-"))
        client.next()
    finally:
        client.stop()
    if not n:
        return {}
    return {"bytes_conn": (rss - base) * 1024.0 / n, "conns": n}


def t6(ctx, peer, where):
    """T6: S5 over TLS with T6_READERS readers at T6_RATE."""
    return s5(ctx, peer, where, n=T6_READERS, rate=T6_RATE)

"""bench.py's main: the command line, the preparations (prepare), then
every (scenario, peer, repetition) run with the peers alternating, the
untimed syscall runs, and the report."""

import datetime
import os
import shlex
import sys
import time

from . import cli, prepare, report, runstate
from .peers import Peer, measure
from .plan import (H2_SCENARIOS, S1_CONNS, S1_LOG_SIZE, SLUICES, T1_CONNS, T1_SYS, T_SIZE, TLS_SCENARIOS,
                   s1_key)
from .runstate import H2_FLAG, TLS_FLAG, say, stop_all
from .scenario_h2 import h1, h2, h3
from .scenario_s1 import s1, s1_syscalls
from .scenario_s2_s6 import s2, s3, s4, s5, s6
from .scenario_tls import t2, t3, t5, t6
from .tables import on_off_ratios


class Ctx:
    """What the scenario functions read: reps, s1_reps, dur, warmup,
    slow_secs, slow_n, transfers, idle_n, syscall_secs, syscalls (main);
    perf_events, tmp, tls, big, up (prepare)."""


def new_ctx(args):
    """The Ctx of ARGS (--quick, --reps, ...) before the preparations."""
    ctx = Ctx()
    ctx.reps = args.reps or (1 if args.quick else 3)
    ctx.s1_reps = args.s1_reps or args.reps or (1 if args.quick else 7)
    ctx.dur = args.duration or (2 if args.quick else 5)
    ctx.warmup = 0 if args.quick else 1
    ctx.slow_secs = 4 if args.quick else 10
    ctx.slow_n = 200
    ctx.transfers = 1 if args.quick else 3
    ctx.idle_n = 10000
    ctx.syscall_secs = args.syscall_secs or (2 if args.quick else 3)
    ctx.syscalls = args.syscalls
    return ctx


def plan_runs(bench):
    """The timed runs, [(run key, scenario, fn(ctx, peer, where))], in
    scenario order (none with --syscalls-only); sets bench.log_tag, the
    body size of the access-log-on row (None when it does not run)."""
    args, scenarios, tags, peers, extras = bench.args, bench.scenarios, bench.tags, bench.peers, bench.extras

    def s1_run(conns, tag):
        return lambda c, p, w: s1(c, p, w, conns, tag)

    log_tag = (S1_LOG_SIZE if S1_LOG_SIZE in tags else tags[0]) if tags and extras and not args.syscalls_only \
        and set(SLUICES) & set(peers) else None
    runs = []  # (run key, scenario, fn)
    for sc in scenarios if not args.syscalls_only else []:
        if sc == "S1":
            for tag in tags:
                for conns in S1_CONNS:
                    runs.append((s1_key(tag, conns), sc, s1_run(conns, tag)))
            if log_tag:
                runs.append((s1_key(log_tag, 64, "log"), sc, s1_run(64, log_tag)))
        elif sc == "T1":
            runs.append(("T1", sc, s1_run(T1_CONNS, T_SIZE)))
        else:
            runs.append((sc, sc, {"S2": s2, "S3": s3, "S4": s4, "S5": s5, "S6": s6, "T2": t2, "T3": t3, "T4": s3,
                                  "T5": t5, "T6": t6, "H1": h1, "H2": h2, "H3": h3}[sc]))
    bench.log_tag = log_tag
    return runs


def run_timed(bench, ctx, runs):
    """Every timed run of RUNS, repetition by repetition, each on every
    peer that has it (their order rotated from one repetition to the
    next). Returns results {(run key, peer): [result per repetition]}, the
    raw list for --json, and the last run id."""
    peers, scenarios, tags, tmp, bins = bench.peers, bench.scenarios, bench.tags, bench.tmp, bench.bins
    up, sink = bench.up, bench.sink
    say("peers: %s; scenarios: %s%s; %d repetition(s) of S1, %d of the others; tmp dir %s" % (
        ",".join(peers), ",".join(scenarios), " (S1 body sizes %s)" % ",".join(tags) if "S1" in scenarios else "",
        ctx.s1_reps, ctx.reps, tmp))
    results = {}
    raw = []
    run_id = 0
    for rep in range(1, max([ctx.reps if sc != "S1" else ctx.s1_reps for _, sc, _ in runs] or [0]) + 1):
        # The peers' order rotates from one repetition to the next, so
        # that no peer always runs first (or right after the same one).
        shift = (rep - 1) % len(peers)
        order = peers[shift:] + peers[:shift]
        for key, sc, fn in runs:
            if rep > (ctx.s1_reps if sc == "S1" else ctx.reps):
                continue
            for name in order:
                if name == "direct" and (sc in ("S5", "S6") or sc in TLS_SCENARIOS + H2_SCENARIOS):
                    continue  # nothing between client and upstream to measure; no TLS
                if key.endswith("log") and name not in SLUICES:
                    continue  # the access-log-on row is sluice's own
                if sc in TLS_SCENARIOS and name in SLUICES and not TLS_FLAG.get(name):
                    continue  # a build without TLS
                if sc in H2_SCENARIOS and name in SLUICES and not H2_FLAG.get(name):
                    continue  # a build without HTTP/2
                run_id += 1
                where = "%s %s rep %d" % (key, name, rep)
                upstream_port = sink.port if sc == "S4" else up.port
                tls = ctx.tls if sc in TLS_SCENARIOS + H2_SCENARIOS else None
                res = measure(ctx, where, lambda: Peer(name, tmp, bins, upstream_port, run_id,
                                                       access_log=key.endswith("log"), tls=tls,
                                                       h2=sc in H2_SCENARIOS), fn)
                results.setdefault((key, name), []).append(res)
                raw.append({"run": key, "peer": name, "rep": rep, **res})
                if not up.proc.alive():
                    sys.exit("bench: the upstream died:\n" + up.proc.log_tail())
    return results, raw, run_id


def run_syscalls(bench, ctx, results, raw, run_id):
    """The untimed syscall runs after the timed ones (see bench.py's doc):
    each S1 body size and peer, sluice's with its access log on, then
    T1's; adds them to RESULTS and RAW."""
    args, peers, scenarios, tags, tmp, bins, up = (bench.args, bench.peers, bench.scenarios, bench.tags, bench.tmp,
                                                   bench.bins, bench.up)
    sc_tool, log_tag, syscall_conns = bench.sc_tool, bench.log_tag, bench.syscall_conns
    if sc_tool and tags:
        # separate, untimed runs (see the module doc): every body size, each
        # peer one after the other; then sluice's with its access log on
        sys_runs = [(s1_key(t, c, "sys"), t, c, False) for t in tags for c in syscall_conns]
        if log_tag:
            sys_runs.append((s1_key(log_tag, 64, "logsys"), log_tag, 64, True))
        for key, tag, conns, log_on in sys_runs:
            for name in peers:
                if name == "direct" or (log_on and name not in SLUICES):
                    continue
                run_id += 1
                where = "%s %s" % (key, name)
                res = measure(ctx, where, lambda: Peer(name, tmp, bins, up.port, run_id, access_log=log_on),
                              lambda c, p, w: s1_syscalls(c, p, w, conns, tag))
                results[(key, name)] = [res]
                raw.append({"run": key, "peer": name, "rep": 1, **res})
    if sc_tool and "T1" in scenarios and not args.syscalls_only:
        # T1's, likewise: a separate untimed run per peer over TLS
        for name in peers:
            if name == "direct" or (name in SLUICES and not TLS_FLAG.get(name)):
                continue
            run_id += 1
            res = measure(ctx, "%s %s" % (T1_SYS, name),
                          lambda: Peer(name, tmp, bins, up.port, run_id, tls=ctx.tls),
                          lambda c, p, w: s1_syscalls(c, p, w, T1_CONNS, T_SIZE))
            results[(T1_SYS, name)] = [res]
            raw.append({"run": T1_SYS, "peer": name, "rep": 1, **res})


def main(doc):
    """Runs the benchmark the command line asks for (DOC: bench.py's
    docstring, its --help) and prints the report; the exit status, 1 when
    any run had a problem."""
    bench = cli.parse(doc)
    runstate.SLUICE_ARGS = bench.sluice_args

    bench.started_at = datetime.datetime.now().astimezone()
    bench.t_start = time.time()
    bench.command = os.environ.get("BENCH_COMMAND") or shlex.join([sys.argv[0]] + sys.argv[1:])
    ctx = new_ctx(bench.args)

    prepare.check_tools(bench, ctx)
    prepare.workspace(bench, ctx)
    www = prepare.files(ctx, bench.tmp)
    prepare.upstreams(bench, ctx, www)
    prepare.tool_versions(bench, ctx)

    runs = plan_runs(bench)
    results, raw, run_id = run_timed(bench, ctx, runs)
    if bench.log_tag:
        on_off_ratios(results, bench.peers, bench.log_tag)
    run_syscalls(bench, ctx, results, raw, run_id)
    bench.results, bench.raw = results, raw

    bench.elapsed = time.time() - bench.t_start
    stop_all()
    return report.write(bench, ctx)

"""bench.py's report, markdown on stdout: the head (date, command, CPU,
versions, notes, how each kind of row was measured), the main table, the
syscalls by call, the S1 paired ratios, the targets of issues 22-24, the
new/old table and the problems; and the --json file."""

import json
import os
import shlex

from . import runstate
from .plan import (BEST_OF, H1_CONNS, H1_STREAMS, H2_SCENARIOS, H3_CONNS, H3_RATE, H3_SAMPLE_SECS, H3_STREAMS,
                   H3_WINDOW, LOAD_CPU, MIB, S1_BYTES, S1_CONNS, S1_LABEL, SLOW_SIZE, SLUICES, T1_CONNS, T6_RATE,
                   T6_READERS, T_SIZE, T_STIME_PROCS, TLS_SCENARIOS, s1_path)
from .peers import nginx_http2
from .procfs import CPU_SOURCE, TICK, cpu_model
from .runstate import ACCESS_LOG_FLAG, PROBLEMS, TLS_FACTS
from .scenario_s2_s6 import S6_WARMUP, S6_WARMUP_BATCH
from .tables import new_old_table, report_rows, syscall_keys, syscall_table, table
from .targets import H2_TARGETS, paired_s1, paired_table, paired_targets, targets, targets_text, tls_targets


def head(bench, ctx):
    """The report's title and its list of facts: when, the command, the
    machine, the versions, the notes, and how each kind of row was
    measured; a list of lines."""
    args, notes, versions, up_desc, sink = bench.args, bench.notes, bench.versions, bench.up_desc, bench.sink
    started_at, elapsed, command = bench.started_at, bench.elapsed, bench.command
    scenarios, tags, log_tag, sc_tool, syscall_conns = (bench.scenarios, bench.tags, bench.log_tag, bench.sc_tool,
                                                        bench.syscall_conns)
    out = []
    out.append("## sluice side-by-side benchmark")
    out.append("")
    out.append("- date: %s (took %.0f s)" % (started_at.strftime("%Y-%m-%d %H:%M:%S %Z"), elapsed))
    out.append("- command: `%s`" % command)
    out.append("- CPU: %s, %d CPUs online" % (cpu_model(), os.cpu_count() or 0))
    out.append("- " + "; ".join("%s: %s" % kv for kv in versions.items()))
    for n in notes:
        if not (args.syscalls_only and n.startswith("RLIMIT_NOFILE")):
            out.append("- " + n)
    out.append("- upstream: " + up_desc + ("; S4 sink: scripts/bench/upstream.py (CPU %d)" % LOAD_CPU if sink else ""))
    if ctx.tls and not args.syscalls_only:
        out.append("- TLS rows: one ECDSA P-256 certificate (openssl, SNI localhost) for every peer; clients TLS 1.3 "
                   "only. Negotiated with a Python (OpenSSL) TLS 1.3 probe, and whether its second connection "
                   "resumed the first's session: %s. T1: wrk -t1 -c%d over https (%s, as wrk chooses); T2/T3: %d x "
                   "`openssl s_time -new|-reuse -tls1_3 -www %s` for %d s; T4: curl --tlsv1.3; T5: %d connections "
                   "(sluicebench/tls_idle.py, its own process); T6: %d x `curl --tlsv1.3 --limit-rate %s` for %d s."
                   % ("; ".join("%s %s %s (resumes: %s)" % (n, f["version"], f["cipher"], "yes" if f["resumes"] else "NO")
                                for n, f in TLS_FACTS.items()) or "no probe answered",
                      T1_CONNS, "OpenSSL", T_STIME_PROCS, s1_path(T_SIZE), ctx.dur, ctx.idle_n, T6_READERS, T6_RATE,
                      ctx.slow_secs))
    if set(H2_SCENARIOS) & set(scenarios):
        h2_listen, h2_on = nginx_http2(runstate.NGINX_VERSION)
        out.append("- HTTP/2 rows: TLS as in the T rows, every peer offering h2 by ALPN and chosen by it "
                   "(checked once ready): nginx `listen ... ssl%s`%s, HAProxy `bind ... ssl crt FILE alpn "
                   "h2,http/1.1`, sluice --listen-tls (h2 on by default); each peer's HTTP/2 defaults. H1: `h2load "
                   "-c%d -m%d -D%d` (one thread) after a %d s warm-up run, p50/p99 from its --log-file; H2: `h2load "
                   "-n1 -c1` of the 100 MiB file (windows 2^30-1), %d per run, median MiB/s; H3: %d x %d slow streams "
                   "(sluicebench/h2slow.py: window %d bytes, then %d bytes/s each by WINDOW_UPDATE) on a 16 MiB file, "
                   "RSS peak over %.0f s after they started minus the settled RSS before, and the fast download "
                   "(H2's) beside them ÷ alone."
                   % (h2_listen, (" + `%s`" % h2_on) if h2_on else "", H1_CONNS, H1_STREAMS, ctx.dur, ctx.warmup,
                      ctx.transfers, H3_CONNS, H3_STREAMS, H3_WINDOW, H3_RATE, H3_SAMPLE_SECS))
    if args.syscalls_only:
        out.append("- --syscalls-only: no timed runs; S1 body sizes %s" % ", ".join(S1_LABEL[t] for t in tags))
    else:
        out.append("- %d repetition(s) of S1, %d of S2-S6, T1-T6 and H1-H3, peers alternating inside each, their order rotated from one "
               "to the next; medians. wrk -t1 -d%ds, after an unmeasured "
               "%d s warm-up run on the same proxy (S1, S2); S1 at %s connections for each body size (%s); S2 -c64; S5 %d x "
               "`curl --limit-rate 100k` for %d s on a %d MiB file; S6 %d connections, one GET each, one after the other, "
               "after %d warm-up bursts of %d; RSS read settled. "
               "S3/S4: %d transfers per run, median MiB/s. spread = (max-min)/median over the repetitions, "
               "worst peer of the row." % (ctx.s1_reps, ctx.reps, ctx.dur, ctx.warmup, " and ".join(map(str, S1_CONNS)),
                                           ", ".join(S1_LABEL[t] for t in tags) or "-", ctx.slow_n,
                                           ctx.slow_secs, SLOW_SIZE // MIB, ctx.idle_n,
                                           S6_WARMUP, S6_WARMUP_BATCH, ctx.transfers))
    if not args.syscalls_only:
        out.append("- proxy CPU = user+system of the proxy's processes over the run (%s); user / system CPU = utime / "
               "stime of /proc/PID/stat (clock ticks of 1/%d s), summed over the proxy's processes; RSS = VmRSS summed over them, "
               "growth over the idle proxy. Every proxy gets 20000 max connections; nginx keepalive_requests "
               "1000000; nginx-nobuf = proxy_buffering off + proxy_request_buffering off; nginx-deferred = listen ... deferred (TCP_DEFER_ACCEPT, as sluice by default); sluice RUST_LOG=warn%s."
               % ("/proc/PID/task/*/schedstat" if CPU_SOURCE == "schedstat" else "/proc/PID/stat", TICK,
                  (" " + shlex.join(runstate.SLUICE_ARGS)) if runstate.SLUICE_ARGS else ""))
    if sc_tool == "perf":
        how = ("`perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_NAME,... -p PID,...` (kernel tracepoints: "
               "counted in the kernel, the proxy runs at full speed; all = raw_syscalls:sys_enter, other = all less "
               "the calls counted by name)")
    elif sc_tool == "strace":
        how = "`strace -c -f -p` (it slows the proxy many times over)"
    else:
        how = None
    out.append("- access logs: off for every peer (nginx access_log off, HAProxy no log; %s), except the "
               "'sluice access log on' rows (%s, body %s).%s"
               % ("; ".join("%s %s" % (n, "--access-log off" if ACCESS_LOG_FLAG.get(n) else "RUST_LOG=warn")
                            for n in SLUICES if n in ACCESS_LOG_FLAG) or "-",
                  "; ".join("%s %s" % (n, "--access-log FILE --access-log-format text" if ACCESS_LOG_FLAG.get(n)
                                       else "RUST_LOG=info, access lines on stderr to a file")
                            for n in SLUICES if n in ACCESS_LOG_FLAG) or "-",
                  S1_LABEL.get(log_tag, "not run"),
                  (" Syscall rows: %s attached to every process of the proxy during a separate, untimed "
                   "`wrk -t1 -c%s -d%ds` run per peer and body size%s (after a warm-up of at least 1 s); "
                   "calls / wrk's requests." % (how, ",".join(map(str, syscall_conns)), ctx.syscall_secs,
                                                "" if args.syscalls_only else " after the timed runs")) if how else ""))
    return out


def write(bench, ctx):
    """Prints the report (and writes --json FILE); returns the exit status,
    1 when any run had a problem."""
    args, peers, scenarios, tags, log_tag, sc_tool = (bench.args, bench.peers, bench.scenarios, bench.tags,
                                                      bench.log_tag, bench.sc_tool)
    results, raw, sources, command, versions = bench.results, bench.raw, bench.sources, bench.command, bench.versions
    out = head(bench, ctx)
    out.append("")
    rows = report_rows(results, tags if not args.syscalls_only else [], log_tag, sc_tool)
    out.append(table(results, peers, scenarios, ctx, rows))
    out.append("")
    if syscall_keys(results):
        out.append("### S1 (and T1) syscalls per request, by call")
        out.append("")
        out.append("calls / wrk's requests in the syscall run (%s); `all` is every syscall the proxy's processes made; "
                   "`slept` is their voluntary context switches per request (polls that blocked; perf runs only)."
                   % ("perf tracepoints" if sc_tool == "perf" else "strace -c"))
        out.append("")
        out.append(syscall_table(results, peers, sc_tool))
        out.append("")
    paired = paired_s1(results, peers, tags) if "sluice" in peers else []
    if paired:
        out.append("### S1 paired ratios")
        out.append("")
        out.append("Each cell: the median of the per-repetition ratios (min–max over the repetitions). The best peer "
                   "of a row is the one of %s with the lowest median CPU µs/req in that row; each repetition's "
                   "sluice value is divided by that peer's value in the same repetition (the peers of a repetition "
                   "run back to back, so the machine's drift between repetitions cancels out)."
                   % ", ".join(p for p in BEST_OF if p in peers))
        out.append("")
        out.append(paired_table(paired, "sluice-old" in peers))
        out.append("")
    tg = targets(results, paired) if "sluice" in peers and "S1" in scenarios else []
    if args.syscalls_only:
        tg = tg[:1]  # only the syscall target: no timed runs
    if tg:
        out.append("### Issue 22 targets, from this run")
        out.append("")
        out.append(targets_text(tg))
        out.append("")
    ttg = tls_targets(results, peers) if "sluice" in peers and set(TLS_SCENARIOS) & set(scenarios) else []
    if ttg:
        out.append("### Issue 23 TLS targets, from this run")
        out.append("")
        out.append("sluice ÷ the best of %s in each row (or ÷ the peer named): the median of the per-repetition "
                   "ratios (min–max over the repetitions)." % ", ".join(p for p in BEST_OF if p in peers))
        out.append("")
        out.append(targets_text(ttg))
        out.append("")
    htg = paired_targets(results, peers, H2_TARGETS) if "sluice" in peers and set(H2_SCENARIOS) & set(scenarios) \
        else []
    if htg:
        out.append("### Issue 24 HTTP/2 targets, from this run")
        out.append("")
        out.append("sluice ÷ the best of %s in each row (or ÷ the peer named; 'own': sluice's own ratio): the "
                   "median of the per-repetition values (min–max over the repetitions)."
                   % ", ".join(p for p in BEST_OF if p in peers))
        out.append("")
        out.append(targets_text(htg))
        out.append("")
    if "sluice" in peers and "sluice-old" in peers:
        out.append("### sluice new/old")
        out.append("")
        out.append("new = %s, old = %s; medians as above; new/old = sluice / sluice-old (below 1 is better for "
                   "'lower' rows, above 1 for 'higher' rows)." % (sources["sluice"], sources["sluice-old"]))
        out.append("")
        out.append(new_old_table(results, scenarios, ctx, rows))
        out.append("")
    if PROBLEMS:
        out.append("### problems (%d)" % len(PROBLEMS))
        for where, cmd, text in PROBLEMS:
            out.append("")
            out.append("- %s: `%s`" % (where, cmd))
            out.append("```")
            out.append(text[-3000:])
            out.append("```")
    else:
        out.append("No errors: every run completed with only 2xx responses and no socket errors.")
    print("\n".join(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "versions": versions, "s1_sizes": {t: S1_BYTES[t] for t in tags},
                       "syscall_tool": sc_tool, "perf_events": getattr(ctx, "perf_events", None) if sc_tool == "perf"
                       else None, "runs": raw, "paired": paired, "targets": tg, "tls_targets": ttg,
                       "h2_targets": htg, "tls_facts": TLS_FACTS, "problems": PROBLEMS}, f, indent=1)
    return 1 if PROBLEMS else 0

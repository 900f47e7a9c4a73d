"""The markdown tables of bench.py's report: the rows (S1's per body size,
the access-log-on rows, the syscall rows, ROWS for S2-S6, T1-T6 and
H1-H3), the main table, the syscalls-by-call table and the new/old table."""

import re

from .plan import BEST_OF, PEERS, S1_CONNS, S1_LABEL, S1_SIZES, SLUICES, T1_CONNS, T1_SYS, T_SIZE, s1_key
from .stats import median, ratio, spread


def s1_rows(tag):
    """The table rows of S1 body size TAG, 64 then 512 connections."""
    rows = []
    for conns in S1_CONNS:
        k, w = s1_key(tag, conns), "S1 %s, %d conns" % (S1_LABEL[tag], conns)
        rows += [
            ("S1", k, "rps", "%s: req/s" % w, "higher", "%.0f"),
            ("S1", k, "p50", "%s: latency p50 ms" % w, "lower", "%.2f"),
            ("S1", k, "p99", "%s: latency p99 ms" % w, "lower", "%.2f"),
            ("S1", k, "cpu_us_req", "%s: proxy CPU µs/req" % w, "lower", "%.2f"),
            ("S1", k, "usr_us_req", "%s: proxy user CPU µs/req" % w, "lower", "%.2f"),
            ("S1", k, "sys_us_req", "%s: proxy system CPU µs/req" % w, "lower", "%.2f"),
            ("S1", k, "cpu_pct", "%s: proxy CPU %% of its core" % w, "", "%.0f"),
            ("S1", k, "reuse", "%s: upstream reuse (req/upstream conn)" % w, "higher", "%.0f"),
            ("S1", k, "load_busy", "%s: CPU 0 (wrk + upstream) busy %%" % w, "", "%.0f"),
        ]
    return rows


ROWS = [  # (scenario, run key, metric key, label, better, format); S1's come from s1_rows()
    ("S2", "S2", "rps", "S2 new connection per request: req/s", "higher", "%.0f"),
    ("S2", "S2", "cpu_us_req", "S2: proxy CPU µs/req", "lower", "%.1f"),
    ("S3", "S3", "mibs", "S3 100 MiB download: MiB/s", "higher", "%.0f"),
    ("S3", "S3", "cpu_ms_mib", "S3: proxy CPU ms/MiB", "lower", "%.2f"),
    ("S4", "S4", "mibs", "S4 100 MiB upload: MiB/s", "higher", "%.0f"),
    ("S4", "S4", "cpu_ms_mib", "S4: proxy CPU ms/MiB", "lower", "%.2f"),
    ("S5", "S5", "rss_peak_mib", "S5 200 slow readers: peak RSS growth MiB", "lower", "%.1f"),
    ("S5", "S5", "rss_kib_conn", "S5: peak RSS growth KiB/conn", "lower", "%.1f"),
    ("S6", "S6", "rss_kib_conn", "S6 10k idle keep-alive conns: RSS KiB/conn", "lower", "%.2f"),
    ("T1", "T1", "rps", "T1 keep-alive 1 KiB GET over TLS, 64 conns: req/s", "higher", "%.0f"),
    ("T1", "T1", "p99", "T1: latency p99 ms", "lower", "%.2f"),
    ("T1", "T1", "cpu_us_req", "T1: proxy CPU µs/req", "lower", "%.2f"),
    ("T1", "T1", "usr_us_req", "T1: proxy user CPU µs/req", "lower", "%.2f"),
    ("T1", "T1", "sys_us_req", "T1: proxy system CPU µs/req", "lower", "%.2f"),
    ("T2", "T2", "cps", "T2 new TLS 1.3 connection per request, full handshake: conns/s", "higher", "%.0f"),
    ("T2", "T2", "cpu_us_hs", "T2: proxy CPU µs/handshake", "lower", "%.1f"),
    ("T2", "T2", "resumed_pct", "T2: handshakes resumed %", "", "%.1f"),
    ("T3", "T3", "cps", "T3 new TLS 1.3 connection per request, resumed: conns/s", "higher", "%.0f"),
    ("T3", "T3", "cpu_us_hs", "T3: proxy CPU µs/handshake", "lower", "%.1f"),
    ("T3", "T3", "resumed_pct", "T3: handshakes resumed %", "", "%.1f"),
    ("T4", "T4", "mibs", "T4 100 MiB download over TLS: MiB/s", "higher", "%.0f"),
    ("T4", "T4", "cpu_ms_mib", "T4: proxy CPU ms/MiB", "lower", "%.2f"),
    ("T5", "T5", "bytes_conn", "T5 10k idle TLS keep-alive conns: RSS bytes/conn", "lower", "%.0f"),
    ("T6", "T6", "rss_peak_mib", "T6 100 slow TLS readers (10 KiB/s): peak RSS growth MiB", "lower", "%.1f"),
    ("T6", "T6", "rss_kib_conn", "T6: peak RSS growth KiB/reader", "lower", "%.1f"),
    ("H1", "H1", "rps", "H1 h2 keep-alive 1 KiB GET, 64 conns x 10 streams: req/s", "higher", "%.0f"),
    ("H1", "H1", "p50", "H1: latency p50 ms", "lower", "%.2f"),
    ("H1", "H1", "p99", "H1: latency p99 ms", "lower", "%.2f"),
    ("H1", "H1", "cpu_us_req", "H1: proxy CPU µs/req", "lower", "%.2f"),
    ("H1", "H1", "usr_us_req", "H1: proxy user CPU µs/req", "lower", "%.2f"),
    ("H1", "H1", "sys_us_req", "H1: proxy system CPU µs/req", "lower", "%.2f"),
    ("H1", "H1", "load_busy", "H1: CPU 0 (h2load + upstream) busy %", "", "%.0f"),
    ("H2", "H2", "mibs", "H2 100 MiB download on one h2 stream: MiB/s", "higher", "%.0f"),
    ("H2", "H2", "cpu_ms_mib", "H2: proxy CPU ms/MiB", "lower", "%.2f"),
    ("H3", "H3", "rss_slow_mib", "H3 100 slow h2 streams (10 kB/s) on 10 conns: RSS growth MiB", "lower", "%.2f"),
    ("H3", "H3", "rss_kib_stream", "H3: RSS growth KiB/slow stream", "lower", "%.1f"),
    ("H3", "H3", "slow_rate", "H3: slow streams' mean rate kB/s", "", "%.1f"),
    ("H3", "H3", "fast_alone", "H3: fast 100 MiB download alone MiB/s", "higher", "%.0f"),
    ("H3", "H3", "fast_beside", "H3: fast download beside the slow streams MiB/s", "higher", "%.0f"),
    ("H3", "H3", "fast_ratio", "H3: fast download beside ÷ alone", "higher", "%.2f"),
]


def log_rows(tag):
    """The rows of S1 (body size TAG, 64 connections) with sluice's access
    log on (sluice peers only), and each sluice peer's on/off ratio within
    a repetition (median over repetitions)."""
    k, w = s1_key(tag, 64, "log"), "S1 %s, 64 conns" % S1_LABEL[tag]
    return [
        ("S1", k, "rps", "%s, sluice access log on: req/s" % w, "higher", "%.0f"),
        ("S1", k, "p99", "%s, sluice access log on: latency p99 ms" % w, "lower", "%.2f"),
        ("S1", k, "cpu_us_req", "%s, sluice access log on: proxy CPU µs/req" % w, "lower", "%.2f"),
        ("S1", k, "cpu_on_off", "%s: sluice CPU/req, access log on ÷ off" % w, "", "%.3f"),
        ("S1", k, "p99_on_off", "%s: sluice p99, access log on ÷ off" % w, "", "%.3f"),
    ]


# the syscall table's columns even when 0 (then the others made >= 0.05 times per request)
SYSCALLS_SHOWN = ("recvfrom", "sendto", "readv", "writev", "recvmsg", "sendmsg", "read", "write", "epoll_wait",
                  "epoll_ctl", "getsockopt")


def on_off_ratios(results, peers, tag):
    """Adds cpu_on_off and p99_on_off to each access-log-on result: the
    ratio to the access-log-off run of the same peer, size and repetition."""
    for name in peers:
        for on, off in zip(results.get((s1_key(tag, 64, "log"), name), []),
                           results.get((s1_key(tag, 64), name), [])):
            on["cpu_on_off"] = ratio(on.get("cpu_us_req"), off.get("cpu_us_req"))
            on["p99_on_off"] = ratio(on.get("p99"), off.get("p99"))


def syscall_keys(results):
    """The syscall runs' keys in the results, in S1_SIZES order, the access-log-on one, then T1's."""
    keys = {k for k, _ in results if k.endswith("sys")}
    order = [s1_key(t, c, kind) for kind in ("sys", "logsys") for t, _ in S1_SIZES for c in S1_CONNS] + [T1_SYS]
    return [k for k in order if k in keys]


def syscall_what(key):
    """'S1 1 KiB, 64 conns' (', sluice access log on') for a syscall run key."""
    if key == T1_SYS:
        return "T1 %s over TLS, %d conns" % (S1_LABEL[T_SIZE], T1_CONNS)
    m = re.match(r"S1-(\w+)/c(\d+)(log)?sys$", key)
    return "S1 %s, %s conns%s" % (S1_LABEL[m.group(1)], m.group(2), ", sluice access log on" if m.group(3) else "")


def syscall_calls(results, keys):
    """The per-call columns of the syscall table: SYSCALLS_SHOWN, then every
    other call some peer made at least 0.05 times per request (most first),
    then sc_other."""
    most = {}
    for (k, _), rs in results.items():
        for r in rs if k in keys else []:
            for m, v in r.items():
                if m.startswith("sc_") and m not in ("sc_total", "syscall_requests", "syscall_tool", "sc_other"):
                    most[m[3:]] = max(most.get(m[3:], 0.0), v)
    extra = sorted((c for c in most if c not in SYSCALLS_SHOWN and most[c] >= 0.05), key=lambda c: -most[c])
    return [c for c in SYSCALLS_SHOWN if c in most or c in ("sendto", "recvfrom")] + extra


def syscall_rows(results, tool="perf"):
    """Rows of the main table for the syscall runs: all syscalls per request
    of each body size (the calls one by one are in syscall_table)."""
    how = "perf tracepoints" if tool == "perf" else "strace -c"
    return [("T1" if key == T1_SYS else "S1", key, "sc_total",
             "%s: syscalls/req (%s, separate run)" % (syscall_what(key), how), "lower", "%.2f")
            for key in syscall_keys(results)]


def syscall_table(results, peers, tool="perf"):
    """Per call: one line per (S1 body size, peer), one column per call;
    calls / wrk's requests in that run."""
    keys = syscall_keys(results)
    calls = syscall_calls(results, keys)
    show_other = any(r.get("sc_other", 0) for (k, _), rs in results.items() if k in keys for r in rs)
    show_slept = any("slept" in r for (k, _), rs in results.items() if k in keys for r in rs)
    head = ["run", "peer", "requests", "all"] + calls + (["other"] if show_other else []) \
        + (["slept"] if show_slept else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        for p in [p for p in PEERS if p in peers]:
            for r in results.get((key, p), []):
                if not r:
                    lines.append("| %s | %s | failed |%s" % (syscall_what(key), p, " |" * (len(head) - 3)))
                    continue
                cells = [syscall_what(key), p, "%d" % r.get("syscall_requests", 0), "**%.2f**" % r["sc_total"]]
                cells += ["%.2f" % r.get("sc_" + c, 0.0) for c in calls]
                if show_other:
                    cells.append("%.2f" % r.get("sc_other", 0.0))
                if show_slept:
                    cells.append("%.2f" % r["slept"] if "slept" in r else "-")
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_rows(results, tags, log_tag, tool):
    """The S1 rows of each body size in TAGS, the access-log-on rows (body
    size LOG_TAG), S1's syscall rows, then ROWS (S2-S6, T1-T6) with T1's
    syscall row after T1's."""
    s1 = sum((s1_rows(t) for t in tags), [])
    sys_rows = syscall_rows(results, tool)
    rows = s1 + (log_rows(log_tag) if log_tag else []) + [r for r in sys_rows if r[0] == "S1"]
    for r in ROWS:
        rows.append(r)
        if r[0] == "T1" and r[2] == "sys_us_req":
            rows += [x for x in sys_rows if x[0] == "T1"]
    return rows


def row_label(sc, label, ctx):
    """LABEL with the counts this run used (S5's readers, S6's and T5's
    connections)."""
    if sc == "S5":
        return label.replace("200", str(ctx.slow_n))
    if sc in ("S6", "T5"):
        return label.replace("10k", "%d" % ctx.idle_n)
    return label


def medians(results, key, metric, cols):
    """{peer: median of METRIC over the repetitions of run KEY} for COLS."""
    return {p: median([r.get(metric) for r in results.get((key, p), [])]) for p in cols}


def paired_best(results, key, metric, better, best_of):
    """Median over the repetitions of sluice's value divided by the best of
    best_of in the same repetition. The peers of a repetition run back to
    back, so a pair shares the machine's state; the machine's drift from one
    repetition to the next (often 20%) cancels out of each pair."""
    pairs = []
    for i, r in enumerate(results.get((key, "sluice"), [])):
        vals = [rs[i].get(metric) for rs in (results.get((key, p), []) for p in best_of) if i < len(rs)]
        vals = [v for v in vals if v is not None]
        if vals and better:
            pairs.append(ratio(r.get(metric), min(vals) if better == "lower" else max(vals)))
    return median(pairs)


def table(results, peers, scenarios, ctx, rows=ROWS):
    """The main table; "sluice/best peer" divides by the best of BEST_OF in
    the row (lowest for "lower" rows, highest for "higher" ones), from the
    medians; "paired" is the median of the same ratio taken within each
    repetition (paired_best)."""
    cols = [p for p in PEERS if p in peers]
    others = [p for p in cols if p != "sluice"]
    best_of = [p for p in BEST_OF if p in cols]
    head = (["scenario / metric", "better"] + cols + (["sluice/" + p for p in others] if "sluice" in cols else [])
            + (["sluice/best peer", "paired"] if "sluice" in cols and best_of else []) + ["spread"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc, key, metric, label, better, fmt in rows:
        if sc not in scenarios or not any((key, p) in results for p in cols):
            continue
        meds = medians(results, key, metric, cols)
        cells = [row_label(sc, label, ctx), better or "-"]
        for p in cols:
            cells.append(fmt % meds[p] if meds[p] is not None else "n/a")
        if "sluice" in cols:
            for p in others:
                r = ratio(meds["sluice"], meds[p]) if better else None
                cells.append("%.2f" % r if r is not None else "-")
            if best_of:
                vals = [meds[p] for p in best_of if meds[p] is not None]
                best = (min(vals) if better == "lower" else max(vals)) if vals and better else None
                r = ratio(meds["sluice"], best)
                cells.append("%.2f" % r if r is not None else "-")
                r = paired_best(results, key, metric, better, best_of)
                cells.append("%.2f" % r if r is not None else "-")
        spreads = [spread([r.get(metric) for r in results.get((key, p), [])]) for p in cols]
        spreads = [x for x in spreads if x is not None]
        cells.append("%.0f%%" % (100 * max(spreads)) if spreads else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# the rows of the new/old table, first: the ones the comparison is for
NEW_OLD_FIRST = ([(s1_key(t, c), m) for t, _ in S1_SIZES for c in S1_CONNS for m in ("cpu_us_req", "usr_us_req")]
                 + [(s1_key(t, 64, "sys"), "sc_total") for t, _ in S1_SIZES]
                 + [("S3", "mibs"), ("S3", "cpu_ms_mib"), ("S5", "rss_kib_conn")])


def new_old_table(results, scenarios, ctx, rows=ROWS):
    """sluice vs sluice-old: medians and new/old for every sluice row (the
    NEW_OLD_FIRST rows first). new/old < 1 is better for 'lower' rows, > 1
    for 'higher' rows; 'verdict' says which, by more than 3% and more than
    the spread of either peer's repetitions."""
    rows = [r for r in rows if r[0] in scenarios and r[4] and any((r[1], p) in results for p in SLUICES)]
    first = [r for k in NEW_OLD_FIRST for r in rows if (r[1], r[2]) == k]
    rows = first + [r for r in rows if r not in first]
    lines = ["| scenario / metric | better | sluice (new) | sluice-old | new/old | verdict |",
             "|---|---|---|---|---|---|"]
    for sc, key, metric, label, better, fmt in rows:
        meds = medians(results, key, metric, SLUICES)
        if meds["sluice"] is None and meds["sluice-old"] is None:
            continue
        r = ratio(meds["sluice"], meds["sluice-old"])
        spreads = [spread([x.get(metric) for x in results.get((key, p), [])]) for p in SLUICES]
        noise = max([0.03] + [x for x in spreads if x is not None])
        if r is None:
            verdict = "-"
        elif abs(r - 1) < noise:
            verdict = "same (within %.0f%%)" % (100 * noise)
        else:
            verdict = "new better" if (r < 1) == (better == "lower") else "new worse"
        if r is not None and None in spreads:
            verdict += " (1 repetition: may be noise)"
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            row_label(sc, label, ctx), better,
            *(fmt % meds[p] if meds[p] is not None else "n/a" for p in SLUICES),
            "%.3f" % r if r is not None else "-", verdict))
    return "\n".join(lines)

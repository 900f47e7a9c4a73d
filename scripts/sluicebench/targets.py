"""The paired per-repetition ratios (sluice ÷ the best peer, sluice ÷
sluice-old) and the targets of issues 22 (S1), 23 (TLS) and 24 (HTTP/2),
each judged met or not on this run."""

from .plan import BEST_OF, PEERS, S1_BYTES, S1_CONNS, S1_LABEL, S1_SIZES, T1_SYS, s1_key
from .stats import median, ratio

SYSCALL_TARGET = 4.1  # issue 22: syscalls per S1 request, every body size
TARGET_SIZES = ("1k", "16k")  # issue 22: the S1 sizes with CPU / user CPU / p99 targets
CPU_TARGET, USER_TARGET, P99_TARGET = 0.9, 0.8, 1.0  # sluice ÷ best peer

PAIRED_METRICS = (("cpu_us_req", "CPU"), ("usr_us_req", "user CPU"), ("sys_us_req", "system CPU"), ("p99", "p99"))


def best_peer(results, key, cols):
    """The peer of BEST_OF (among COLS) with the lowest median CPU µs/req in
    run KEY, and that median; (None, None) when none has one."""
    cands = [(median([r.get("cpu_us_req") for r in results.get((key, p), [])]), p) for p in BEST_OF if p in cols]
    cands = [(v, p) for v, p in cands if v is not None]
    return (min(cands)[1], min(cands)[0]) if cands else (None, None)


def per_rep(results, key, metric, a, b):
    """A's METRIC ÷ B's in each repetition of run KEY (results[(key, peer)]
    holds one entry per repetition, {} for a failed run)."""
    out = []
    for x, y in zip(results.get((key, a), []), results.get((key, b), [])):
        r = ratio(x.get(metric), y.get(metric))
        if r is not None:
            out.append(r)
    return out


def summary_of(xs):
    """{"median", "min", "max", "n", "each"} of a list of ratios, None if empty."""
    if not xs:
        return None
    return {"median": median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "each": xs}


def paired_s1(results, peers, tags):
    """For each S1 row (body size, connections): the best peer (lowest
    median CPU µs/req of BEST_OF) and the per-repetition ratios sluice ÷
    best peer of CPU, user CPU, system CPU and p99 (median, min, max); and
    sluice ÷ sluice-old likewise when it ran."""
    cols = [p for p in PEERS if p in peers]
    out = []
    for tag in tags:
        for conns in S1_CONNS:
            key = s1_key(tag, conns)
            if (key, "sluice") not in results:
                continue
            best, best_cpu = best_peer(results, key, cols)
            row = {"run": key, "size": tag, "body": S1_BYTES[tag], "conns": conns, "best": best,
                   "best_median_cpu_us_req": best_cpu,
                   "sluice_cpu_us_req": median([r.get("cpu_us_req") for r in results.get((key, "sluice"), [])])}
            for m, _ in PAIRED_METRICS:
                row["best_" + m] = summary_of(per_rep(results, key, m, "sluice", best)) if best else None
                if "sluice-old" in cols:
                    row["old_" + m] = summary_of(per_rep(results, key, m, "sluice", "sluice-old"))
            out.append(row)
    return out


def fmt_ratio(sm):
    """'0.85 (0.80–0.90)' for a summary_of, '0.85 (1 rep)', or '-'."""
    if not sm:
        return "-"
    if sm["n"] == 1:
        return "%.2f (1 rep)" % sm["median"]
    return "%.2f (%.2f–%.2f)" % (sm["median"], sm["min"], sm["max"])


def paired_table(paired, with_old):
    """The markdown table of paired_s1's rows (WITH_OLD: the sluice ÷
    sluice-old columns too)."""
    head = ["S1 row", "best peer (median CPU µs/req)", "reps"] + ["sluice ÷ best: " + n for _, n in PAIRED_METRICS]
    if with_old:
        head += ["sluice ÷ sluice-old: " + n for _, n in PAIRED_METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in paired:
        n = max([(row.get("best_" + m) or {}).get("n", 0) for m, _ in PAIRED_METRICS])
        cells = ["S1 %s, %d conns" % (S1_LABEL[row["size"]], row["conns"]),
                 "%s (%.2f)" % (row["best"], row["best_median_cpu_us_req"]) if row["best"] else "-", str(n)]
        cells += [fmt_ratio(row.get("best_" + m)) for m, _ in PAIRED_METRICS]
        if with_old:
            cells += [fmt_ratio(row.get("old_" + m)) for m, _ in PAIRED_METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(results, paired):
    """Issue 22's targets judged on this run: [{"target", "met" (True, False
    or None: not measured), "detail"}]. Syscalls: sluice's all-syscalls per
    request in the 64-connection syscall run of each body size. CPU, user
    CPU, p99: the median of the paired per-repetition ratios sluice ÷ best
    peer, for each of the 1 KiB and 16 KiB rows at 64 and 512 connections."""
    out = []
    vals = []
    for tag, _ in S1_SIZES:
        rs = results.get((s1_key(tag, 64, "sys"), "sluice"), [])
        v = rs[0].get("sc_total") if rs else None
        vals.append((tag, v))
    measured = [(t, v) for t, v in vals if v is not None]
    missing = [S1_LABEL[t] for t, v in vals if v is None]
    met = False if any(v > SYSCALL_TARGET for _, v in measured) else (None if missing else True)
    detail = ", ".join("%s %.2f" % (S1_LABEL[t], v) for t, v in measured) or "no syscall run"
    if missing:
        detail += "; not measured: " + ", ".join(missing)
    out.append({"target": "syscalls per S1 request ≤ %.1f for every body size (sluice, 64 conns)" % SYSCALL_TARGET,
                "met": met, "detail": detail})
    rows = {(r["size"], r["conns"]): r for r in paired}
    for metric, name, limit in (("cpu_us_req", "CPU µs/req", CPU_TARGET), ("usr_us_req", "user CPU µs/req", USER_TARGET),
                                ("p99", "p99", P99_TARGET)):
        parts, verdicts = [], []
        for tag in TARGET_SIZES:
            for conns in S1_CONNS:
                r = rows.get((tag, conns))
                sm = r.get("best_" + metric) if r else None
                if not sm:
                    parts.append("%s c%d not measured" % (S1_LABEL[tag], conns))
                    verdicts.append(None)
                    continue
                ok = sm["median"] <= limit
                verdicts.append(ok)
                parts.append("%s c%d %s vs %s %s" % (S1_LABEL[tag], conns, fmt_ratio(sm), r["best"],
                                                     "met" if ok else "NOT met"))
        met = False if False in verdicts else (None if None in verdicts else True)
        what = "≤ the best peer's" if limit == 1.0 else "≤ %.1f× the best peer" % limit
        out.append({"target": "S1 1 KiB and 16 KiB, 64 and 512 conns: %s %s (median of paired ratios)" % (name, what),
                    "met": met, "detail": "; ".join(parts)})
    return out


# issue 23's TLS targets: (run key, metric, what, better, limit, fixed peer or None for the best)
TLS_TARGETS = [
    ("T1", "cpu_us_req", "T1 CPU µs/request", "lower", 0.8, None),
    ("T2", "cpu_us_hs", "T2 CPU µs/full handshake", "lower", 0.8, None),
    ("T3", "cpu_us_hs", "T3 CPU µs/resumed handshake", "lower", 0.8, None),
    ("T4", "mibs", "T4 MiB/s", "higher", 1.1, None),
    ("T4", "cpu_ms_mib", "T4 CPU ms/MiB", "lower", 0.9, None),
    ("T5", "bytes_conn", "T5 RSS bytes per idle TLS connection", "lower", 0.5, None),
    ("T6", "rss_kib_conn", "T6 RSS per slow TLS reader", "lower", 1.0, "haproxy"),
]


# issue 24's HTTP/2 targets, as TLS_TARGETS; "own": sluice's own value (a
# ratio already) against the limit
H2_TARGETS = [
    ("H1", "cpu_us_req", "H1 CPU µs/request", "lower", 0.8, None),
    ("H1", "p99", "H1 latency p99", "lower", 1.0, None),
    ("H2", "mibs", "H2 MiB/s", "higher", 1.0, None),
    ("H3", "rss_kib_stream", "H3 RSS per slow stream", "lower", 1.0, "haproxy"),
    ("H3", "fast_ratio", "H3 fast download beside the slow streams ÷ alone", "higher", 0.9, "own"),
]


def paired_targets(results, peers, spec):
    """Targets judged on this run: [{"target", "met", "detail", "ratio"}]
    for each (run key, metric, what, better, limit, against) of SPEC: the
    median of the paired per-repetition ratios sluice ÷ the best peer of
    BEST_OF in that row (against None: the lowest median, the highest for
    a 'higher' metric), or ÷ the peer named; against "own": the median of
    sluice's own values (each a ratio already)."""
    cols = [p for p in PEERS if p in peers]
    out = []
    for key, metric, what, better, limit, fixed in spec:
        if (key, "sluice") not in results:
            continue
        sign = "≤" if better == "lower" else "≥"
        best = None
        if fixed == "own":
            sm = summary_of([r.get(metric) for r in results[(key, "sluice")] if r.get(metric) is not None])
            name = "%s %s %.1f (sluice's own)" % (what, sign, limit)
        else:
            if fixed:
                best = fixed if fixed in cols and (key, fixed) in results else None
            else:
                cands = [(median([r.get(metric) for r in results.get((key, p), [])]), p) for p in BEST_OF
                         if p in cols]
                cands = [(v, p) for v, p in cands if v is not None]
                pick = (min(cands) if better == "lower" else max(cands)) if cands else None
                best = pick[1] if pick else None
            sm = summary_of(per_rep(results, key, metric, "sluice", best)) if best else None
            name = "%s %s %.1f× %s" % (what, sign, limit, fixed or "the best peer")
        if not sm:
            out.append({"target": name, "met": None, "detail": "not measured", "ratio": None})
            continue
        ok = sm["median"] <= limit if better == "lower" else sm["median"] >= limit
        if not best:
            out.append({"target": name, "met": ok, "ratio": sm,
                        "detail": "%s: %s" % (fmt_ratio(sm), "met" if ok else "NOT met")})
            continue
        mine = median([r.get(metric) for r in results.get((key, "sluice"), [])])
        theirs = median([r.get(metric) for r in results.get((key, best), [])])
        out.append({"target": name, "met": ok, "ratio": sm,
                    "detail": "%s vs %s (sluice %.4g, %s %.4g): %s" % (fmt_ratio(sm), best, mine, best, theirs,
                                                                   "met" if ok else "NOT met")})
    return out


def tls_targets(results, peers):
    """Issue 23's targets judged on this run (paired_targets of
    TLS_TARGETS), then the syscalls per T1 request beside the peers' (no
    target)."""
    cols = [p for p in PEERS if p in peers]
    out = paired_targets(results, peers, TLS_TARGETS)
    sys_vals = ["%s %.2f" % (p, r[0]["sc_total"]) for p in cols for r in [results.get((T1_SYS, p), [])]
                if r and r[0].get("sc_total") is not None]
    if sys_vals:
        out.append({"target": "syscalls per T1 request (no target; beside the peers')", "met": "info",
                    "detail": ", ".join(sys_vals), "ratio": None})
    return out


def targets_text(tg):
    """A markdown list of the targets TG, each met, not met, not measured
    in full, or measured (no target)."""
    lines = []
    for t in tg:
        verdict = ("measured" if t["met"] == "info" else "**met**" if t["met"] else
                   "not measured in full" if t["met"] is None else "**not met**")
        lines.append("- %s: %s — %s" % (t["target"], verdict, t["detail"]))
    return "\n".join(lines)

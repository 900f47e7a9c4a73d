"""bench.py's command line: its flags (--help prints them between the first
paragraph of bench.py's docstring and the rest) and what they select: the
scenarios, S1's body sizes, the syscall runs' connection counts, the peers."""

import argparse
import os
import re
import shlex
from types import SimpleNamespace

from .plan import OPT_IN, PEERS, S1_BYTES, S1_CONNS, S1_SIZES, SCENARIOS


def parse(doc):
    """Parses sys.argv; DOC is bench.py's docstring (--help's text). Exits
    with argparse's message (status 2) on a bad flag or combination.
    Returns a namespace: args (argparse's), sluice_args (--sluice-args,
    split), scenarios, tags (S1's body sizes), syscall_conns, peers."""
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=doc.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true",
                    help="1 repetition, 2 s wrk runs, no warm-up, 4 s S5 (for development)")
    ap.add_argument("--only", "--scenarios", dest="only", default="",
                    help="comma-separated scenarios, e.g. S1,S3,S5 (default: all); S1 is every body size, "
                         "S1-200, S1-1k, S1-16k one each; S is S1-S6, T the TLS rows T1-T6, H the HTTP/2 "
                         "rows H1-H3")
    ap.add_argument("--peers", default="", help="comma-separated peers of %s (default: all but %s; "
                    "sluice-old too with --sluice-old)" % (",".join(PEERS), " and ".join(OPT_IN)))
    ap.add_argument("--sluice-old", default=os.environ.get("SLUICE_OLD", ""), metavar="PATH",
                    help="another sluice binary, run as the peer sluice-old next to sluice; the report "
                         "adds a new/old table (env SLUICE_OLD=PATH)")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions of S2-S6, and of S1 unless --s1-reps is given (default 3, or 1 with --quick)")
    ap.add_argument("--s1-reps", type=int, default=None,
                    help="repetitions of S1 (default: --reps when given, else 7; 1 with --quick)")
    ap.add_argument("--duration", type=int, default=None, metavar="SECS",
                    help="length of each timed wrk run, S1 and S2 (default 5, or 2 with --quick)")
    ap.add_argument("--json", default="", help="also write every run's raw numbers to this file")
    ap.add_argument("--upstream", choices=["auto", "nginx", "python"], default="auto",
                    help="origin server: nginx (auto: when installed) or scripts/bench/upstream.py")
    ap.add_argument("--sluice-args", default="", help="extra sluice flags, e.g. '--pool-max-idle-per-peer 512'")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (configs, logs) for inspection")
    ap.add_argument("--no-build", action="store_true", help="use target/release/sluice (or $SLUICE_BIN) as is")
    ap.add_argument("--no-install", action="store_true", help="never run apt-get; skip what is missing")
    ap.add_argument("--no-s1-extras", action="store_true",
                    help="S1 without the access-log-on row and the syscall rows")
    ap.add_argument("--syscalls", choices=["perf", "strace", "off"], default="perf",
                    help="how the S1 syscall rows are counted: perf (kernel tracepoints, the default), "
                         "strace (strace -c -f, slows the proxy), off (no syscall rows)")
    ap.add_argument("--syscalls-only", action="store_true",
                    help="only the S1 syscall runs (no timed runs): the per-call table, quickly")
    ap.add_argument("--syscall-secs", "--strace-secs", dest="syscall_secs", type=int, default=None, metavar="SECS",
                    help="length of each syscall-counting wrk run (default 3, or 2 with --quick)")
    ap.add_argument("--syscall-conns", default="64", metavar="N[,N]",
                    help="client connections of the syscall runs, 64 and/or 512 (default 64)")
    ap.add_argument("--all-syscalls", action="store_true",
                    help="with --syscalls perf: count every syscall's tracepoint, not only the usual ones")
    args = ap.parse_args()

    sluice_args = shlex.split(args.sluice_args)
    scenarios, tags = [], []
    wanted = []
    for s in [s.strip() for s in args.only.split(",") if s.strip()] or SCENARIOS:
        wanted += [x for x in SCENARIOS if x[0] == s.upper()] if s.upper() in ("S", "T", "H") else [s]
    for s in wanted:
        m = re.match(r"^[sS]1-(\w+)$", s)
        if m and m.group(1).lower() in S1_BYTES:
            tags.append(m.group(1).lower())
            s = "S1"
        elif s.upper() == "S1":
            tags += [t for t, _ in S1_SIZES]
        s = s.upper()
        if s not in SCENARIOS:
            ap.error("unknown scenario %r (choose from %s, or S1-%s)" % (s, ",".join(SCENARIOS),
                                                                        ", S1-".join(t for t, _ in S1_SIZES)))
        if s not in scenarios:
            scenarios.append(s)
    tags = [t for t, _ in S1_SIZES if t in tags]
    if args.syscalls_only:
        if "S1" not in scenarios:
            ap.error("--syscalls-only counts S1's syscalls: give --scenarios S1 (or S1-1k, ...)")
        if args.syscalls == "off" or args.no_s1_extras:
            ap.error("--syscalls-only needs the syscall runs (not --syscalls off or --no-s1-extras)")
        scenarios = ["S1"]
    try:
        syscall_conns = sorted({int(x) for x in args.syscall_conns.split(",") if x.strip()})
    except ValueError:
        ap.error("--syscall-conns: a comma-separated list of 64 and 512")
    if not syscall_conns or not set(syscall_conns) <= set(S1_CONNS):
        ap.error("--syscall-conns: a comma-separated list of 64 and 512")
    peers = [p.strip() for p in args.peers.split(",") if p.strip()] or [
        p for p in PEERS if p not in OPT_IN or (p == "sluice-old" and args.sluice_old)]
    for p in peers:
        if p not in PEERS:
            ap.error("unknown peer %r (choose from %s)" % (p, ",".join(PEERS)))
    if "sluice-old" in peers:
        if not args.sluice_old:
            ap.error("peer sluice-old needs --sluice-old PATH (or SLUICE_OLD=PATH)")
        if not os.access(args.sluice_old, os.X_OK):
            ap.error("--sluice-old: not an executable file: %s" % args.sluice_old)
    return SimpleNamespace(args=args, sluice_args=sluice_args, scenarios=scenarios, tags=tags,
                           syscall_conns=syscall_conns, peers=peers)

"""Before bench.py's runs: the tools (installed, or their peers and
scenarios skipped with the reason) and CPU pinning; the descriptor limit,
the sluice binaries (copied, and what each supports), the temp dir with the
TLS certificate and the files served; the upstreams; the versions."""

import atexit
import os
import platform
import shutil
import signal
import sys
import tempfile

from . import perfsys, runstate
from . import tls as tlsbench
from .origins import NginxUpstream, PyUpstream
from .peers import has_flag
from .plan import (BIG_SIZE, H2_SCENARIOS, LOAD_CPU, MIB, PROXY_CPU, S1_SIZES, SLOW_SIZE, SLUICES, SMALL_SIZE,
                   TLS_SCENARIOS)
from .runstate import ACCESS_LOG_FLAG, H2_FLAG, TLS_FLAG, raise_nofile, say, stop_all
from .tools import build_sluice, copy_bin, ensure_tools, find_tool, have, needed_tools, tool_path, version_of


def check_tools(bench, ctx):
    """Installs the tools the chosen peers and scenarios need where it can;
    pins this process to the load CPU (or turns pinning off, saying why);
    drops the peers and scenarios whose tool is missing, and the syscall
    runs when they cannot be counted (ctx.perf_events: the perf events).
    Sets bench.notes, bench.extras, bench.sc_tool ("perf", "strace" or
    None) and narrows bench.peers and bench.scenarios."""
    args, peers, scenarios = bench.args, bench.peers, bench.scenarios
    notes = []
    missing = ensure_tools(args, needed_tools(args, peers, scenarios))
    skipped = {}
    usable = os.sched_getaffinity(0)
    if "taskset" in missing or not {LOAD_CPU, PROXY_CPU} <= usable:
        runstate.PIN = False
        notes.append("NOT pinned: %s" % (missing.get("taskset") or "CPUs 0 and 1 are not both available"))
    else:
        os.sched_setaffinity(0, {LOAD_CPU})
        notes.append("CPU pinning: every proxy under test on CPU %d (taskset -c %d); load generators, upstreams "
                     "and this script on CPU %d (taskset -c %d)." % (PROXY_CPU, PROXY_CPU, LOAD_CPU, LOAD_CPU))
    for peer, tool in (("nginx", "nginx"), ("nginx-nobuf", "nginx"), ("nginx-deferred", "nginx"), ("haproxy", "haproxy")):
        if peer in peers and tool in missing:
            skipped[peer] = missing[tool]
    for sc, tool in (("S1", "wrk"), ("S2", "wrk"), ("S3", "curl"), ("S4", "curl"), ("S5", "curl"), ("T1", "wrk"),
                     ("T2", "openssl"), ("T3", "openssl"), ("T4", "curl"), ("T6", "curl")) + tuple(
                         (t, "openssl") for t in TLS_SCENARIOS + H2_SCENARIOS) + tuple(
                         (h, "h2load") for h in H2_SCENARIOS):
        if sc in scenarios and tool in missing and sc not in skipped:
            skipped[sc] = missing[tool]
    extras = "S1" in scenarios and not args.no_s1_extras
    sys_extras = bool({"S1", "T1"} & set(scenarios)) and not args.no_s1_extras
    sc_tool = args.syscalls if sys_extras and args.syscalls != "off" else None
    sc_skip = None
    if sc_tool and sc_tool in missing:
        sc_skip = missing[sc_tool]
    elif sc_tool == "perf":
        ok, why = perfsys.available(tool_path("perf"), mount=True)
        if not ok:
            sc_skip = "syscall tracepoints unavailable: " + why
        else:
            if why:
                notes.append("Syscall tracepoints: " + why)
            wanted = None if args.all_syscalls else list(perfsys.CALLS)
            ctx.perf_events, lacking = perfsys.events_for(wanted)
            if lacking:
                notes.append("This kernel has no tracepoint for: %s (not counted by name)" % ", ".join(lacking))
    if sc_skip:
        skipped["S1/T1 syscalls per request (%s)" % sc_tool] = sc_skip
        sc_tool = None
        if args.syscalls_only:
            sys.exit("bench: --syscalls-only, but the syscalls cannot be counted: " + sc_skip)
    for what, why in skipped.items():
        say("SKIPPING %s: %s" % (what, why))
        notes.append("Skipped %s: %s" % (what, why))
    peers = [p for p in peers if p not in skipped]
    scenarios = [s for s in scenarios if s not in skipped]
    bench.notes, bench.extras, bench.sc_tool = notes, extras, sc_tool
    bench.peers, bench.scenarios = peers, scenarios


def workspace(bench, ctx):
    """Raises RLIMIT_NOFILE (and lowers ctx.idle_n below it); builds or
    takes the sluice binaries and copies them into a new temp dir (ctx.tmp,
    removed at exit unless --keep-tmp), noting what each supports; makes
    the TLS certificate when a T or H row runs (ctx.tls); stops every child
    at exit and on SIGTERM / SIGINT. Sets bench.nofile, bench.sources,
    bench.tmp and bench.bins."""
    args, peers, scenarios, notes = bench.args, bench.peers, bench.scenarios, bench.notes
    nofile = raise_nofile()
    # sluice budgets 2 descriptors per client (its own and an upstream one) and
    # caps clients at half the open-file limit minus 32, closing the longest-idle
    # one beyond that: S6 stays below that cap, for every peer alike
    budget = nofile // 2 - 100 if set(SLUICES) & set(peers) else nofile - 2000
    if budget < ctx.idle_n:
        ctx.idle_n = max(100, budget)
        notes.append("RLIMIT_NOFILE is %d: S6 and T5 use %d connections" % (nofile, ctx.idle_n))

    sources = {}
    if "sluice" in peers:
        sources["sluice"] = build_sluice(args)
    if "sluice-old" in peers:
        sources["sluice-old"] = os.path.abspath(args.sluice_old)

    tmp = tempfile.mkdtemp(prefix="sluice-bench-")
    ctx.tmp = tmp
    if not args.keep_tmp:
        atexit.register(lambda: shutil.rmtree(tmp, ignore_errors=True))
    bins = {name: copy_bin(path, tmp, name) for name, path in sources.items()}
    for name, path in bins.items():
        ACCESS_LOG_FLAG[name] = has_flag(path, "--access-log")
        TLS_FLAG[name] = has_flag(path, "--listen-tls")
        H2_FLAG[name] = TLS_FLAG[name] and has_flag(path, "--no-http2")
    for name, path in sources.items():
        notes.append("%s: %s" % (name, path))
    ctx.tls = None
    if (set(TLS_SCENARIOS) | set(H2_SCENARIOS)) & set(scenarios):
        cert, key, combined = tlsbench.make_cert(os.path.join(tmp, "tls"), tool_path("openssl"))
        ctx.tls = {"cert": cert, "key": key, "combined": combined}
        for name in SLUICES:
            if name in bins and not TLS_FLAG.get(name):
                notes.append("%s has no --listen-tls: no T or H rows for it" % name)
            elif name in bins and set(H2_SCENARIOS) & set(scenarios) and not H2_FLAG.get(name):
                notes.append("%s has no --no-http2 (no HTTP/2): no H rows for it" % name)
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    bench.nofile, bench.sources, bench.tmp, bench.bins = nofile, sources, tmp, bins


def files(ctx, tmp):
    """The files the upstreams serve, under TMP/www/files: the 100 MiB
    big.bin (S3, S4's upload: ctx.big), the 16 MiB slow.bin (S5) and S1's
    static files; returns the www dir."""
    www = os.path.join(tmp, "www")
    os.makedirs(os.path.join(www, "files"))
    os.chmod(tmp, 0o755)
    ctx.big = os.path.join(www, "files", "big.bin")
    block = os.urandom(MIB)
    with open(ctx.big, "wb") as f:
        for _ in range(BIG_SIZE // MIB):
            f.write(block)
    with open(os.path.join(www, "files", "slow.bin"), "wb") as f:
        for _ in range(SLOW_SIZE // MIB):
            f.write(block)
    for tag, size in S1_SIZES:  # S1's static files
        with open(os.path.join(www, "files", "s1-%s.bin" % tag), "wb") as f:
            f.write((b"0123456789abcdef" * (size // 16 + 1))[:size])
    return www


def upstreams(bench, ctx, www):
    """Starts the upstream (nginx, or scripts/bench/upstream.py; ctx.up) and
    for S4 the sink. Sets bench.up, bench.up_desc (the report's line) and
    bench.sink (None without S4)."""
    args, tmp, nofile, notes, scenarios = bench.args, bench.tmp, bench.nofile, bench.notes, bench.scenarios
    nginx_ok = find_tool("nginx") is not None
    if args.upstream == "nginx" and not nginx_ok:
        sys.exit("bench: --upstream nginx, but nginx is not installed")
    if nginx_ok and args.upstream != "python":
        up = NginxUpstream(tmp, www, nofile)
        up_desc = ("nginx (1 worker, CPU %d): S1 GETs static files /files/s1-{%s}.bin (%s bytes) with nginx's usual "
                   "response head (Server, Date, Content-Type, Content-Length, Last-Modified, Connection, ETag, "
                   "Accept-Ranges), sendfile on; /small (S2) returns %d bytes" % (
                       LOAD_CPU, ",".join(t for t, _ in S1_SIZES), ", ".join(str(b) for _, b in S1_SIZES), SMALL_SIZE))
    else:
        up = PyUpstream(tmp, www, "upstream python")
        up_desc = "scripts/bench/upstream.py (CPU %d; it may be the bottleneck in S1/S2)" % LOAD_CPU
        if not nginx_ok:
            notes.append("nginx is missing: the origin is scripts/bench/upstream.py, S1/S2 numbers are bounded by it")
    sink = PyUpstream(tmp, www, "upstream sink") if "S4" in scenarios else None
    ctx.up = up
    bench.up, bench.up_desc, bench.sink = up, up_desc, sink


def tool_versions(bench, ctx):
    """bench.versions: each binary's and tool's version, for the report's
    head; and runstate.NGINX_VERSION."""
    bins, peers, up, sc_tool, scenarios = bench.bins, bench.peers, bench.up, bench.sc_tool, bench.scenarios
    versions = {name: version_of([bins[name], "--version"]) if name in bins else "-" for name in SLUICES
                if name == "sluice" or name in bins}
    if {"nginx", "nginx-nobuf", "nginx-deferred"} & set(peers) or up.kind == "nginx":
        versions["nginx"] = version_of([tool_path("nginx"), "-v"])
        runstate.NGINX_VERSION = versions["nginx"]
    if "haproxy" in peers:
        versions["haproxy"] = version_of([tool_path("haproxy"), "-v"])
    if sc_tool:
        versions[sc_tool] = version_of([tool_path(sc_tool), "--version"])
    for tool, argv in (("wrk", ["wrk", "-v"]), ("curl", ["curl", "--version"])):
        if have(tool):
            versions[tool] = version_of(argv)
    versions["python"] = "Python " + platform.python_version()
    versions["kernel"] = platform.release()
    if ctx.tls:
        versions["openssl"] = version_of([tool_path("openssl"), "version"])
    if set(H2_SCENARIOS) & set(scenarios):
        versions["h2load"] = version_of([tool_path("h2load"), "--version"])
    bench.versions = versions

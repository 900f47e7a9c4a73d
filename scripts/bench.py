#!/usr/bin/env python3
"""Side-by-side benchmark of sluice against nginx, nginx without buffering,
HAProxy, and a direct connection to the upstream (the limit); and, with
--sluice-old, against another sluice binary (an older build).

Usage: scripts/bench.sh [--quick] [--only|--scenarios S1,S3,T,H] [--peers sluice,nginx]
                        [--sluice-old PATH] [--reps N] [--s1-reps N] [--duration SECS]
                        [--json FILE] [--upstream nginx|python]
                        [--sluice-args '--high-watermark 262144 ...']
                        [--keep-tmp] [--no-build] [--no-install] [--no-s1-extras]
                        [--syscalls perf|strace|off] [--syscalls-only] [--all-syscalls]
                        [--syscall-secs N] [--syscall-conns 64[,512]]
Exit status 1 when any run had a problem (errors, non-2xx, a crash): the
report ends with each one's exact command and output.

Every proxy under test runs on CPU 1 (taskset -c 1); the load generator, the
upstream and this script run on CPU 0 (taskset -c 0). Each proxy is started
fresh for every measured run, on its own free 127.0.0.1 port, and stopped by
its PID afterwards. Inside each repetition the peers alternate (A B C, A B C,
...); the table holds medians over the repetitions. Progress goes to stderr,
the report (markdown) to stdout.

Scenarios:
  S1  keep-alive GET of a static file, one run per body size -- S1-200
      (200 bytes), S1-1k (1,024) and S1-16k (16,384); "S1" is all three --
      each at 64 and 512 client connections (wrk -t1 --latency). The nginx
      upstream serves the files as a plain static server, with its usual
      response head (Server, Date, Content-Type, Content-Length,
      Last-Modified, Connection, ETag, Accept-Ranges; about 240 bytes).
      Rows: req/s, p50, p99, proxy CPU µs/request in total and split into
      user and system, CPU % of its core, upstream reuse, CPU 0 busy %.
      7 repetitions by default (--s1-reps).
  S2  a new client connection per request (wrk -H 'Connection: close', /small, 256 bytes)
  S3  100 MiB download (curl)
  S4  100 MiB upload (curl -T; the upstream is scripts/bench/upstream.py)
  S5  200 slow readers (curl --limit-rate 100k) for 10 s: peak RSS growth
  S6  10,000 idle keep-alive client connections: RSS per connection. First
      4 bursts of 250 connections (each sends one GET, then all
      read, then all close), so what a burst of concurrent requests leaves
      behind (free lists, allocator holes) is in the baseline RSS; then the
      10,000 connections one after the other, each sending one GET and
      reading its answer, kept open. Per connection = (RSS after - RSS
      before) / connections, each RSS read once it settled (two reads 0.5 s
      apart equal, at most 5 s). Opened in bursts of 250 instead, the
      figure swung by several hundred bytes from run to run with where the
      allocator put the burst's buffers, not with what an idle connection
      holds.

TLS (issue 23; "T" runs all six): the peers terminate TLS in front of the
same plain upstream, each with the same ECDSA P-256 certificate (made with
openssl in the temp dir, SNI localhost), TLS 1.3 (the client asks for it
alone), access logs off, pinned as above; the direct peer has no T rows.
nginx: `listen ... ssl`, ssl_protocols TLSv1.2 TLSv1.3 (nginx 1.22's
default lacks 1.3), its other TLS defaults (tickets on, ssl_buffer_size
16k); HAProxy: `bind ... ssl crt FILE alpn http/1.1`, its defaults; sluice:
--listen-tls with --tls-cert/--tls-key. Each TLS peer is probed once it
answers (a TLS 1.3 GET, then a second offering the first's session): the
report lists its version, cipher and whether it resumed.
  T1  keep-alive 1 KiB GET over TLS, wrk -t1 -c64 (wrk speaks TLS): req/s,
      p99, proxy CPU µs/request (user, system); plus, in a separate untimed
      run like S1's, syscalls per T1 request by call (perf tracepoints).
  T2  a new TLS 1.3 connection per request with a full handshake: 4
      `openssl s_time -new -tls1_3 -www /files/s1-1k.bin` in parallel (each
      a connection at a time: handshake, GET, close): connections/s, proxy
      CPU µs per handshake. s_time -new never offers a session, so every
      handshake is full; its progress marks ('*' new, 'r' resumed) are
      counted and shown as "resumed %". wrk -H 'Connection: close' and
      h2load --h1 both resume after their first connection (they keep the
      OpenSSL session across reconnects: sluice counted 5,495 of 5,512 wrk
      handshakes and 1,984 of 2,000 h2load ones as resumed), so neither
      measures full handshakes.
  T3  the same with resumption: s_time -reuse (one full handshake, then
      every connection resumes its session: TLS 1.3 tickets).
  T4  100 MiB download over TLS (curl --tlsv1.3): MiB/s, CPU ms/MiB.
  T5  idle TLS keep-alive connections (10,000, or what the descriptor
      limit leaves, as S6): bytes of RSS per connection. The client is its
      own process (scripts/sluicebench/tls_idle.py: its own descriptors and
      TLS sessions): 4 warm-up bursts of 250, then the connections one after
      the other, each a TLS 1.3 handshake and one GET, kept open; RSS read
      settled before and after.
  T6  100 slow TLS readers (curl --limit-rate 10k) for 10 s on a 16 MiB
      file: peak RSS growth per reader.
The report ends with issue 23's targets, each met / not met from the
median of the paired per-repetition ratios sluice ÷ the best peer (the
lowest median, the highest for MiB/s): T1, T2, T3 CPU <= 0.8x; T4 MiB/s
>= 1.1x and CPU/MiB <= 0.9x; T5 bytes/connection <= 0.5x; T6 RSS per
reader <= HAProxy's.

HTTP/2 (issue 24; "H" runs all three): the peers terminate TLS as in the
T rows (the same certificate, pinning and access logs off; the direct
peer has no H rows) and offer h2 by ALPN, each in front of the same
HTTP/1.1 upstream. nginx: `listen ... ssl http2` (before 1.25.1; `http2
on` from 1.25.1), its HTTP/2 defaults (128 streams per connection);
HAProxy: `bind ... ssl crt FILE alpn h2,http/1.1`, its defaults (100
streams); sluice: --listen-tls (h2 is on by default; a build without
--no-http2 has no H rows). Each peer must choose h2 by ALPN once ready.
  H1  keep-alive 1 KiB GETs over h2: `h2load -c64 -m10` (64 connections x
      10 concurrent streams, one h2load thread) for --duration s after an
      unmeasured warm-up run: req/s, p50 and p99 (from h2load's
      per-request --log-file, successful requests), proxy CPU µs/request
      in total, user and system.
  H2  100 MiB download on one stream: `h2load -n1 -c1` (stream and
      connection windows 2^30-1), 3 in a row (1 with --quick): MiB/s (100 MiB
      over h2load's "finished in"), proxy CPU ms/MiB.
  H3  100 slow streams on 10 connections (10 each) beside one fast
      download. The slow client is scripts/sluicebench/h2slow.py (its own
      process, frames by hand): SETTINGS_INITIAL_WINDOW_SIZE 16 KiB, then
      1,000 bytes of window per stream every 100 ms (10 kB/s), the
      connection window wide open and the sockets read at once, so each
      stream is held by HTTP/2 flow control alone. Per run: the fast
      download (H2's) alone, the RSS settled; the slow streams started
      (16 MiB file, each gets a 200 and data), after 1 s the peak RSS over
      2 s: (peak - settled) / 100 = RSS per slow stream; then the fast
      download again beside them: MiB/s beside ÷ alone.
The report ends with issue 24's targets: H1 CPU µs/request <= 0.8x and
p99 <= 1x the best peer; H2 MiB/s >= 1x the best peer; H3 RSS per slow
stream <= HAProxy's, and sluice's fast download beside the slow streams
>= 0.9x of it alone (each the median of the per-repetition values).

CPU: total = the proxy's processes' on-CPU time from
/proc/PID/task/*/schedstat (ns); user and system = utime and stime of
/proc/PID/stat (clock ticks, 1/100 s: over a 5 s run at full load about
1% resolution), summed over the proxy's processes; all per wrk request.

With S1, two more measurements (both skipped by --no-s1-extras):
  S1 with the access log on: an extra 64-connection run (1 KiB body) for
      each sluice peer, logging every request (sluice: --access-log FILE in
      the temp dir, text format; a sluice without that flag, e.g. an older
      build: RUST_LOG=info, its access lines on stderr, to a file). In every
      other run each sluice peer logs nothing (--access-log off, or
      RUST_LOG=warn for an old build), like nginx and HAProxy (access_log
      off / no log): like with like.
  Syscalls per request, by call: after the timed runs, one separate short
      run per body size and proxy peer (and for sluice with the access log
      on), after the usual warm-up, with a counter attached to every process
      of the proxy during one `wrk -t1 -c64` run of --syscall-secs (3 s);
      the counts divided by wrk's request count, in total and per call name
      (sendto, recvfrom, writev, sendmsg, recvmsg, readv, read, write,
      epoll_wait, epoll_ctl, getsockopt, and any other counted call made
      >= 0.05 times a request; "other" = the rest), and "slept": the
      voluntary context switches of the proxy's threads in that run per
      request (/proc/PID/task/*/status), i.e. the polls that found nothing
      ready and blocked; `epoll_wait` less "slept" is the polls that returned
      at once with events that came while the previous batch was handled.
      The counter (--syscalls): perf (default) = `perf stat -e
      raw_syscalls:sys_enter,syscalls:sys_enter_sendto,... -p PID,PID...`,
      kernel tracepoints that count without stopping the process (apt
      package linux-perf; as root the script mounts tracefs on
      /sys/kernel/tracing when it is missing, and without working
      tracepoints it says why and leaves the rows out); --all-syscalls counts
      every syscall's tracepoint (slower to set up: perf takes ~15 s to open
      and close ~360 events). strace = `strace -c -f -p`, which slows the
      traced proxy many times over. Either way never during a timed run:
      while a syscall tracepoint is enabled the kernel sends every syscall
      of every process on the machine through its traced entry path (a small
      cost per call, so more for a peer that makes more calls), so the CPU
      and latency rows come from runs with no counter attached.
  --syscalls-only: only those syscall runs (no timed runs, no S2-S6): the
      per-call table for the given binaries in well under a minute with
      --quick (scripts/syscalls.sh is a shortcut).

S1 paired ratios: for each S1 row (body size x connections) the best peer is
the one of nginx, nginx-nobuf, nginx-deferred (when run) and HAProxy with
the lowest median CPU µs/request; the report gives sluice ÷ that peer
within each repetition for CPU, user CPU, system CPU and p99: the median of
the per-repetition ratios and their min-max; and sluice ÷ sluice-old
likewise with --sluice-old. Then issue 22's targets, each met / not met
from this run: syscalls per S1 request <= 4.1 for every body size (sluice,
64 conns); for S1 1 KiB and 16 KiB at 64 and 512 connections, the median
paired ratio of CPU <= 0.9, of user CPU <= 0.8, of p99 <= 1.

Old vs new: `--sluice-old PATH` (or SLUICE_OLD=PATH) adds the peer
"sluice-old", run exactly like "sluice" (same flags, pinning, RUST_LOG and
logging), and the report gains a new/old table: CPU and user CPU µs/request
and syscalls per request (S1, every body size), MiB/s and CPU ms/MiB (S3),
RSS growth per slow reader (S5) and the other sluice rows, each as
sluice/sluice-old. For a quick comparison:
  scripts/bench.sh --quick --sluice-old PATH --scenarios S1,S3,S5 --peers sluice,sluice-old
The final S1 measurement (7 repetitions, about 35 minutes on 2 cores):
  scripts/bench.sh --no-build --sluice-old OLD --peers sluice,sluice-old,nginx,nginx-nobuf,haproxy \
      --scenarios S1 --json FILE

--json FILE holds every run's raw numbers (S1: cpu_us_req, usr_us_req,
sys_us_req, p99, ...; syscall runs: sc_total, sc_NAME, sc_other,
syscall_requests), the S1 body sizes, the syscall counter and its events,
the paired ratios (each repetition's value too) and the targets.

Python 3 stdlib and scripts/sluicebench/. Needs wrk (S1, S2, T1), perf (the
syscall rows; strace with --syscalls strace), curl (S3-S5, T4, T6),
openssl (the T and H rows' certificate, T2, T3) and h2load (H1-H3, Debian
package nghttp2-client); nginx and
haproxy are peers (and nginx is the upstream) when present. As root on
Debian, what the chosen peers and scenarios need is installed with apt-get
(nginx also when --upstream nginx); otherwise the peer or scenario is
skipped with a printed reason.
"""

import argparse
import atexit
import datetime
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from sluicebench import h2load, h2slow, haproxy, perfsys
from sluicebench import tls as tlsbench
from sluicebench.net import free_port, http_get, read_response, still_open
from sluicebench.procfs import (CPU_SOURCE, TICK, busy_pct, cpu_busy_ticks, cpu_model, cpu_seconds, cpu_user_sys,
                                rss_kib, settled, tracer_pid)
from sluicebench.procs import Proc, run_cmd, wait_for
from sluicebench.stats import median, ratio, spread
from sluicebench.templates import BENCH_DIR, fill

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
PEERS = ["sluice", "sluice-old", "nginx", "nginx-nobuf", "nginx-deferred", "haproxy", "direct"]
# Run only when asked for with --peers (like sluice-old): nginx with `listen ... deferred`
# (TCP_DEFER_ACCEPT, which sluice sets by default), to compare like with like.
OPT_IN = ("sluice-old", "nginx-deferred")
SLUICES = ("sluice", "sluice-old")  # peers that are sluice binaries
SCENARIOS = ["S1", "S2", "S3", "S4", "S5", "S6", "T1", "T2", "T3", "T4", "T5", "T6", "H1", "H2", "H3"]
TLS_SCENARIOS = ("T1", "T2", "T3", "T4", "T5", "T6")  # issue 23: the peers terminate TLS
T_SIZE = "1k"  # T1-T3's body: /files/s1-1k.bin
T1_CONNS = 64
T_STIME_PROCS = 4  # parallel `openssl s_time` clients of T2/T3
T6_READERS, T6_RATE = 100, "10k"  # T6: slow TLS readers, curl --limit-rate
H2_SCENARIOS = ("H1", "H2", "H3")  # issue 24: the peers speak h2 over TLS
H1_CONNS, H1_STREAMS = 64, 10  # H1: h2load -c64 -m10
H3_CONNS, H3_STREAMS = 10, 10  # H3: slow streams, 10 on each of 10 connections
H3_RATE, H3_WINDOW = 10000, 16384  # H3: bytes/s per slow stream; their initial window
H3_SAMPLE_SECS = 2.0  # H3: RSS sampled this long, 1 s after the slow streams started
SMALL_SIZE = 256  # bytes of the S2 response body (/small)
# S1's body sizes: (tag, bytes); static files www/files/s1-TAG.bin that the
# upstream serves with its usual response head. Scenario S1 runs all of them,
# S1-TAG one (e.g. --scenarios S1-1k,S1-16k).
S1_SIZES = [("200", 200), ("1k", 1024), ("16k", 16384)]
S1_LABEL = {"200": "200 B", "1k": "1 KiB", "16k": "16 KiB"}
S1_BYTES = dict(S1_SIZES)
S1_CONNS = (64, 512)
S1_LOG_SIZE = "1k"  # the body size of the access-log-on row (the first size run if 1k is not)
SYSCALL_TARGET = 4.1  # issue 22: syscalls per S1 request, every body size
TARGET_SIZES = ("1k", "16k")  # issue 22: the S1 sizes with CPU / user CPU / p99 targets
CPU_TARGET, USER_TARGET, P99_TARGET = 0.9, 0.8, 1.0  # sluice ÷ best peer
BIG_SIZE = 100 * MIB  # S3 download and S4 upload
SLOW_SIZE = 16 * MIB  # S5 file (a reader gets ~1 MiB in 10 s at 100 KB/s)
PROXY_CPU = 1
LOAD_CPU = 0
MAX_CONNS = 20000  # connection limit given to every proxy (S6 needs > 10,000)

PROBLEMS = []  # (where, command, output) of everything that went wrong


def say(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def problem(where, cmd, output):
    PROBLEMS.append((where, cmd, output.strip()))
    say("PROBLEM in %s: %s\n%s" % (where, cmd, output.strip()[-2000:]))


# --------------------------------------------------------------------------
# processes


PIN = True  # False when the machine has fewer than 2 CPUs or no taskset


def pinned(cpu, argv):
    return (["taskset", "-c", str(cpu)] if PIN else []) + list(argv)


def stop_all():
    Proc.stop_all(say=say)


def wait_ready_tls(proc, port, path="/small", timeout=10.0):
    """wait_ready for a TLS peer: until a TLS 1.3 GET of PATH gets a 200;
    returns the peer's probe (version, cipher, resumes; sluicebench.tls)."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError("%s exited during startup (status %s): %s\n%s"
                               % (proc.name, proc.p.returncode, shlex.join(proc.argv), proc.log_tail()))
        try:
            facts = tlsbench.probe(port, path)
            if facts["status"] == 200:
                return facts
            last = "status %d" % facts["status"]
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.05)
    raise RuntimeError("%s did not answer a TLS GET %s on port %d within %.0f s (%s)" % (
        proc.name if proc else "?", path, port, timeout, last))


def wait_ready(proc, port, path="/small", timeout=10.0):
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(
                "%s exited during startup (status %s): %s\n%s"
                % (proc.name, proc.p.returncode, shlex.join(proc.argv), proc.log_tail())
            )
        try:
            status, _ = http_get(port, path)
            if status == 200:
                return
            last = "status %d" % status
        except (OSError, ValueError, IndexError) as e:
            last = str(e)
        time.sleep(0.05)
    raise RuntimeError("%s did not answer GET %s on port %d within %.0f s (%s)" % (
        proc.name if proc else "?", path, port, timeout, last))


# --------------------------------------------------------------------------
# tools, build, install


def have(tool):
    return shutil.which(tool) is not None


APT_UPDATED = []


def apt_install(packages):
    """apt-get install as root on Debian; apt-get update first if it fails."""
    if os.geteuid() != 0:
        return False, "not root, so not installing with apt-get"
    if not have("apt-get"):
        return False, "no apt-get on this machine"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y"] + packages
    say("running: " + shlex.join(cmd))
    rc, out = run_cmd(cmd, 900, env=env)
    if rc != 0 and not APT_UPDATED:
        APT_UPDATED.append(True)
        say("install failed; running apt-get update, then installing again")
        run_cmd(["apt-get", "update"], 900, env=env)
        rc, out = run_cmd(cmd, 900, env=env)
    lines = [l for l in out.strip().splitlines() if l.strip()]
    return rc == 0, ("apt-get install failed: " + lines[-1]) if rc != 0 and lines else ""


def find_tool(tool):
    return shutil.which(tool) or (os.access("/usr/sbin/" + tool, os.X_OK) and "/usr/sbin/" + tool) or None


def needed_tools(args, peers, scenarios):
    """The tools the chosen peers and scenarios use."""
    tools = ["taskset"]
    if {"S1", "S2", "T1"} & set(scenarios):
        tools.append("wrk")
    if {"S1", "T1"} & set(scenarios) and not args.no_s1_extras and args.syscalls != "off":
        tools.append("perf" if args.syscalls == "perf" else "strace")
    if {"S3", "S4", "S5", "T4", "T6"} & set(scenarios):
        tools.append("curl")
    if (set(TLS_SCENARIOS) | set(H2_SCENARIOS)) & set(scenarios):
        tools.append("openssl")
    if set(H2_SCENARIOS) & set(scenarios):
        tools.append("h2load")
    if {"nginx", "nginx-nobuf", "nginx-deferred"} & set(peers) or args.upstream == "nginx":
        tools.append("nginx")
    if "haproxy" in peers:
        tools.append("haproxy")
    return tools


def ensure_tools(args, tools):
    """Installs what of TOOLS is missing where it can; returns {tool: reason}
    for what is still missing (its peer or scenario is then skipped)."""
    packages = {"wrk": ["wrk"], "curl": ["curl"], "nginx": ["nginx-light"], "haproxy": ["haproxy"],
                "taskset": ["util-linux"], "strace": ["strace"], "perf": ["linux-perf"], "openssl": ["openssl"],
                "h2load": ["nghttp2-client"]}
    missing = [t for t in packages if t in tools and not find_tool(t)]
    if not missing:
        return {}
    if args.no_install:
        return {t: "%s not found, and --no-install given" % t for t in missing}
    ok, msg = apt_install(sum((packages[t] for t in missing), []))
    why = {t: msg for t in missing}
    can = "not root" not in msg and "no apt-get" not in msg
    if not ok and len(missing) > 1 and can:
        for t in missing:  # one at a time, so one unavailable package does not block the rest
            if not find_tool(t):
                ok, why[t] = apt_install(packages[t])
    if "nginx" in missing and not find_tool("nginx") and can:
        ok, why["nginx"] = apt_install(["nginx"])  # Debian 13 has no nginx-light
    return {t: "%s not found and not installed (%s)" % (t, why[t] or "?") for t in missing if not find_tool(t)}


def tool_path(tool):
    return find_tool(tool) or tool


def version_of(argv):
    rc, out = run_cmd(argv, 10)
    line = out.strip().splitlines()[0].strip() if out.strip() else "?"
    line = re.sub(r"^nginx version: ", "", line)
    line = re.sub(r" (Copyright|- https?:).*$", "", line)
    if line.startswith("curl "):
        line = " ".join(line.split()[:2])
    return line


def build_sluice(args):
    if args.no_build or os.environ.get("SLUICE_BIN"):
        path = os.environ.get("SLUICE_BIN") or os.path.join(ROOT, "target", "release", "sluice")
        say("not building; using " + path)
    else:
        if not have("cargo"):
            sys.exit("bench: cargo not found in PATH (or use --no-build / SLUICE_BIN=path)")
        say("cargo build --release")
        r = subprocess.run(["cargo", "build", "--release", "--bin", "sluice"], cwd=ROOT)
        if r.returncode != 0:
            sys.exit("bench: cargo build --release failed (status %d)" % r.returncode)
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
        path = os.path.join(target, "release", "sluice")
    if not os.access(path, os.X_OK):
        sys.exit("bench: sluice binary not found or not executable: " + path)
    return os.path.abspath(path)


def copy_bin(path, tmp, name):
    """A private copy of binary PATH in TMP: a rebuild during the run cannot swap it."""
    dst = os.path.join(tmp, "bin-" + name)
    shutil.copy2(path, dst)
    return dst


# --------------------------------------------------------------------------
# upstreams


def nginx_user_line():
    if os.geteuid() != 0:
        return ""
    import pwd

    return "user %s;" % pwd.getpwuid(os.geteuid()).pw_name


class NginxUpstream:
    """nginx serving /small and /files/*; counts upstream connections from
    an access log that holds $connection."""

    kind = "nginx"

    def __init__(self, tmp, www, nofile):
        self.dir = os.path.join(tmp, "upstream-nginx")
        os.makedirs(self.dir)
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        fill("nginx-upstream.conf.in", conf, {
            "USER": nginx_user_line(), "NOFILE": nofile, "WORKER_CONNECTIONS": MAX_CONNS + 1000,
            "DIR": self.dir, "PORT": self.port, "WWW": www,
            "SMALL_BODY": ("0123456789abcdef" * (SMALL_SIZE // 16 + 1))[:SMALL_SIZE],
        })
        self.log = os.path.join(self.dir, "access.log")
        self.proc = Proc("upstream nginx", pinned(LOAD_CPU, [
            tool_path("nginx"), "-p", self.dir, "-c", conf, "-g", "daemon off;"]),
            os.path.join(self.dir, "stderr.log"))
        wait_ready(self.proc, self.port)

    def mark(self):
        time.sleep(0.5)  # access log buffer flushes every 200 ms
        return os.path.getsize(self.log)

    def count_since(self, mark):
        """(requests, distinct upstream connections) logged since mark."""
        time.sleep(0.5)
        with open(self.log, "rb") as f:
            f.seek(mark)
            lines = f.read().split()
        return len(lines), len(set(lines))


class PyUpstream:
    """scripts/bench/upstream.py: the S4 sink, and the origin without nginx."""

    kind = "python"

    def __init__(self, tmp, www, name):
        self.port = free_port()
        self.proc = Proc(name, pinned(LOAD_CPU, [
            sys.executable, os.path.join(BENCH_DIR, "upstream.py"), "--port", str(self.port),
            "--root", www, "--small-size", str(SMALL_SIZE)]), os.path.join(tmp, name.replace(" ", "-") + ".log"))
        wait_ready(self.proc, self.port)

    def stats(self):
        _, body = http_get(self.port, "/__stats")
        d = json.loads(body)
        return d["requests"], d["connections"]

    def mark(self):
        return self.stats()

    def count_since(self, mark):
        r, c = self.stats()
        return r - mark[0], c - mark[1] - 1  # the /__stats GET opened one


# --------------------------------------------------------------------------
# proxies under test


def has_flag(binary, flag):
    """True when sluice BINARY's --help lists FLAG (an older build may lack
    --access-log: it logs access lines at RUST_LOG=info instead; or
    --listen-tls: it has no T rows; or --no-http2: no H rows)."""
    rc, out = run_cmd([binary, "--help"], 10)
    return rc == 0 and flag in out


def sluice_log_args(name, access_log, d):
    """(extra flags, RUST_LOG) for sluice peer NAME: access log off, or
    with ACCESS_LOG on into a file in D (text format) -- or, for a build
    without --access-log, its access lines at RUST_LOG=info on stderr (the
    peer's log file)."""
    if ACCESS_LOG_FLAG.get(name):
        if access_log:
            return ["--access-log", os.path.join(d, "access.log"), "--access-log-format", "text"], "warn"
        return ["--access-log", "off"], "warn"
    return [], "info" if access_log else "warn"


ACCESS_LOG_FLAG = {}  # sluice peer name -> its binary takes --access-log
TLS_FLAG = {}  # sluice peer name -> its binary takes --listen-tls
TLS_FACTS = {}  # peer name -> what its TLS listener negotiated (sluicebench.tls.probe)
H2_FLAG = {}  # sluice peer name -> its binary speaks h2 (takes --no-http2)


def nginx_http2(nginx_version):
    """(listen options, server directive) that turn HTTP/2 on in nginx
    NGINX_VERSION ("nginx/1.22.1"): `listen ... http2` before 1.25.1,
    `http2 on;` from it (the listen parameter is deprecated there)."""
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", nginx_version or "")
    if m and tuple(int(x) for x in m.groups()) >= (1, 25, 1):
        return "", "http2 on;"
    return " http2", ""


class Peer:
    """One proxy under test (or the direct connection), started fresh; with
    TLS ({"cert", "key", "combined"} paths) its listener speaks TLS only,
    and with H2 (and TLS) it offers h2 by ALPN too."""

    def __init__(self, name, tmp, bins, upstream_port, run_id, access_log=False, tls=None, h2=False):
        self.name = name
        self.proc = None
        self.tls = tls
        self.h2 = h2 and tls is not None
        self.facts = None  # the TLS probe's answer, once ready
        if name == "direct":
            self.port = upstream_port
            return
        self.port = free_port()
        d = os.path.join(tmp, "%s-%s" % (name, run_id))
        os.makedirs(d)
        log = os.path.join(d, "stderr.log")
        if name in SLUICES:
            log_args, level = sluice_log_args(name, access_log, d)
            listen = (["--listen-tls", "127.0.0.1:%d" % self.port, "--tls-cert", tls["cert"], "--tls-key", tls["key"]]
                      if tls else ["--listen", "127.0.0.1:%d" % self.port])
            argv = [bins[name]] + listen + ["--upstream", "127.0.0.1:%d" % upstream_port,
                                            "--max-connections", str(MAX_CONNS)] + log_args + SLUICE_ARGS
            env = dict(os.environ, RUST_LOG=level)
            self.proc = Proc(name, pinned(PROXY_CPU, argv), log, env=env)
        elif name in ("nginx", "nginx-nobuf", "nginx-deferred"):
            conf = os.path.join(d, "nginx.conf")
            h2_listen, h2_on = nginx_http2(NGINX_VERSION) if self.h2 else ("", "")
            fill("nginx-proxy.conf.in", conf, {
                "USER": nginx_user_line(), "NOFILE": NOFILE, "WORKER_CONNECTIONS": MAX_CONNS + 1000, "DIR": d,
                "PORT": self.port, "UPSTREAM_PORT": upstream_port,
                "BUFFERING": "proxy_buffering off; proxy_request_buffering off;" if name == "nginx-nobuf" else "",
                "LISTEN_OPTS": (" ssl" if tls else "") + h2_listen + (" deferred" if name == "nginx-deferred" else ""),
                "SSL": ("ssl_certificate %s; ssl_certificate_key %s; ssl_protocols TLSv1.2 TLSv1.3; %s"
                        % (tls["cert"], tls["key"], h2_on)) if tls else "",
            })
            self.proc = Proc(name, pinned(PROXY_CPU, [tool_path("nginx"), "-p", d, "-c", conf, "-g", "daemon off;"]), log)
        elif name == "haproxy":
            cfg = os.path.join(d, "haproxy.cfg")
            alpn = "h2,http/1.1" if self.h2 else "http/1.1"
            haproxy.write_config(cfg, self.port, upstream_port, MAX_CONNS, NOFILE,
                                 bind_opts=(" ssl crt %s alpn %s" % (tls["combined"], alpn)) if tls else "")
            self.proc = Proc(name, pinned(PROXY_CPU, [tool_path("haproxy"), "-db", "-f", cfg]), log)
        else:
            raise ValueError(name)

    def ready(self, path):
        if self.proc and self.tls:
            self.facts = wait_ready_tls(self.proc, self.port, path)
        elif self.proc:
            wait_ready(self.proc, self.port, path)
        if self.proc and self.h2:
            try:
                chosen = h2load.alpn(self.port)
            except OSError as e:
                raise RuntimeError("%s: the ALPN probe failed: %s" % (self.name, e)) from e
            if chosen != "h2":
                raise RuntimeError("%s, offered h2 and http/1.1 by ALPN, chose %r" % (self.name, chosen))
        time.sleep(0.2)  # let nginx's worker settle before the baseline

    def pids(self):
        return self.proc.pids() if self.proc else []

    def cpu(self):
        return cpu_seconds(self.pids())

    def rss(self):
        return rss_kib(self.pids())

    def check(self, where):
        """After a run: the proxy must still be alive, its log free of panics."""
        if not self.proc:
            return
        if not self.proc.alive():
            problem(where, shlex.join(self.proc.argv),
                    "%s exited with status %s during the run:\n%s" % (self.name, self.proc.p.returncode, self.proc.log_tail()))
            return
        tail = self.proc.log_tail(200)
        bad = [l for l in tail.splitlines() if "FD limit (" not in l and re.search(r"panick|\bERROR\b|\[emerg\]|\[alert\]|\[crit\]|\[ALERT\]", l)]
        if bad:
            problem(where, shlex.join(self.proc.argv), "log lines:\n" + "\n".join(bad[-20:]))

    def stop(self):
        if self.proc:
            self.proc.stop()


# --------------------------------------------------------------------------
# load generators

UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def parse_wrk(out):
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


def scheme_of(peer):
    """The URL scheme to reach PEER with: https for a TLS peer."""
    return "https" if peer.tls else "http"


def run_wrk(where, port, conns, dur, extra=(), path="/small", scheme="http"):
    cmd = pinned(LOAD_CPU, ["wrk", "-t1", "-c%d" % conns, "-d%ds" % dur, "--latency"] + list(extra)
                 + ["%s://127.0.0.1:%d%s" % (scheme, port, path)])
    rc, out = run_cmd(cmd, dur + 30)
    r = parse_wrk(out)
    if rc != 0 or r["requests"] == 0 or r["non2xx"] or r["p99"] is None:
        problem(where, shlex.join(cmd), out)
    elif any(r["socket_errors"]):
        problem(where, shlex.join(cmd), out)
    return r


# --------------------------------------------------------------------------
# scenarios: each returns {metric: value} for one (peer, repetition)


class Ctx:
    pass


def warm_up(ctx, peer, where, conns, extra=(), path="/small"):
    """An unmeasured wrk run of ctx.warmup seconds first, so that every peer
    is measured in its steady state (upstream connections open, buffers
    and pools at their working size), not in its first second."""
    if ctx.warmup:
        run_wrk(where + " (warm-up)", peer.port, conns, ctx.warmup, extra, path, scheme_of(peer))


def s1_path(tag):
    return "/files/s1-%s.bin" % tag


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


def s2(ctx, peer, where):
    warm_up(ctx, peer, where, 64, ["-H", "Connection: close"])
    c0 = peer.cpu()
    r = run_wrk(where, peer.port, 64, ctx.dur, ["-H", "Connection: close"])
    cpu = peer.cpu() - c0
    res = {"rps": r["rps"]}
    if peer.proc:
        res["cpu_us_req"] = cpu * 1e6 / r["requests"] if r["requests"] else None
    return res


def curl_transfer(ctx, where, peer, cmd, expect_bytes, body_file=None):
    """ctx.transfers sequential transfers on one proxy: the median MiB/s, and
    the proxy's CPU over all of them per MiB."""
    speeds = []
    c0 = peer.cpu()
    for _ in range(ctx.transfers):
        if body_file is not None and os.path.exists(body_file):
            os.unlink(body_file)
        rc, out = run_cmd(cmd, 300)
        try:
            code, size, total = out.strip().splitlines()[-1].split()
            code, size, total = int(code), int(float(size)), float(total)
        except (ValueError, IndexError):
            code, size, total = 0, 0, 0.0
        got = size
        if body_file is not None:  # the sink answers with the byte count it read
            try:
                with open(body_file) as f:
                    got = int(f.read().strip() or 0)
            except (OSError, ValueError):
                got = -1
        if rc != 0 or code != 200 or size != expect_bytes or got != expect_bytes or total <= 0:
            problem(where, shlex.join(cmd), "exit %s, status %s, %s bytes (expected %d, upstream got %s)\n%s"
                    % (rc, code, size, expect_bytes, got, out))
            return {}
        speeds.append(expect_bytes / MIB / total)
    cpu = peer.cpu() - c0
    res = {"mibs": median(speeds)}
    if peer.proc:
        res["cpu_ms_mib"] = cpu * 1e3 / (ctx.transfers * expect_bytes / MIB)
    return res


def curl_tls(peer):
    """curl's flags for PEER: TLS 1.3 without verifying the bench's own
    certificate, for a TLS peer; none for a plain one. HTTP/1.1 by ALPN:
    sluice offers h2 on TLS listeners by default, and curl would take it
    where the T rows' nginx and HAProxy offer only http/1.1."""
    return ["-k", "--tlsv1.3", "--tls-max", "1.3", "--http1.1"] if peer.tls else []


def s3(ctx, peer, where):
    """S3 (and T4 over TLS): ctx.transfers downloads of the 100 MiB file."""
    cmd = pinned(LOAD_CPU, ["curl", "-sS", "-o", "/dev/null", "--max-time", "120"] + curl_tls(peer) + [
        "-w", "%{http_code} %{size_download} %{time_total}\n",
        "%s://127.0.0.1:%d/files/big.bin" % (scheme_of(peer), peer.port)])
    return curl_transfer(ctx, where, peer, cmd, BIG_SIZE)


def s4(ctx, peer, where):
    resp = os.path.join(ctx.tmp, "sink-response")
    cmd = pinned(LOAD_CPU, ["curl", "-sS", "-o", resp, "--max-time", "120", "-H", "Expect:", "-T", ctx.big,
                            "-w", "%{http_code} %{size_upload} %{time_total}\n",
                            "http://127.0.0.1:%d/sink" % peer.port])
    return curl_transfer(ctx, where, peer, cmd, BIG_SIZE, body_file=resp)


def s5(ctx, peer, where, n=None, rate="100k"):
    """S5 (and T6 over TLS, N readers at RATE): N slow readers of the
    16 MiB file for ctx.slow_secs; peak RSS growth of the proxy."""
    if not peer.proc:
        return {}
    n = n or ctx.slow_n
    base = peer.rss()
    argv = ["curl", "-sS", "-o", "/dev/null", "--limit-rate", rate, "--max-time", str(ctx.slow_secs)] + curl_tls(
        peer) + ["-w", "%{http_code} %{size_download}\n",
                 "%s://127.0.0.1:%d/files/slow.bin" % (scheme_of(peer), peer.port)]
    cmd = pinned(LOAD_CPU, argv)
    procs = []
    peak = base
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        deadline = time.time() + ctx.slow_secs + 15
        while time.time() < deadline and any(p.poll() is None for p in procs):
            peak = max(peak, peer.rss())
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    outs, bad, total = [], [], 0
    for p in procs:
        out = p.communicate()[0].decode("utf-8", "replace").strip()
        last = out.splitlines()[-1] if out else ""
        parts = last.split()
        ok = p.returncode == 28 and len(parts) == 2 and parts[0] == "200"  # 28: --max-time reached
        if ok:
            total += int(float(parts[1]))
        else:
            bad.append("exit %s: %s" % (p.returncode, out[-300:]))
    expected_each = int(rate.rstrip("k")) * 1000 * ctx.slow_secs
    if bad or total < 0.5 * n * expected_each:
        problem(where, shlex.join(cmd) + "   (x%d at once)" % n,
                "%d of %d readers failed; %d bytes read in all (about %d expected)\n%s"
                % (len(bad), n, total, n * expected_each, "\n".join(bad[:10])))
    return {"rss_peak_mib": (peak - base) / 1024.0, "rss_kib_conn": (peak - base) / n}


S6_BATCH = 1  # connections opened (each sending its GET) before their answers are read
S6_WARMUP = 4  # bursts opened, answered and closed before the baseline
S6_WARMUP_BATCH = 250  # connections per warm-up burst


def s6_batch(port, count, req, errs):
    """COUNT connections to PORT, each sending REQ, then each response
    read: the sockets that got a 200 (the others closed, counted in ERRS)."""
    group, good = [], []
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(req)
            group.append(s)
        except OSError as e:
            errs.append(str(e))
    for s in group:
        try:
            status, head, _, _ = read_response(s)
            if status == 200 and head.startswith(b"HTTP/1.1 "):
                good.append(s)
                continue
            errs.append("bad response")
        except (OSError, ValueError) as e:
            errs.append(str(e))
        s.close()
    return good


def s6(ctx, peer, where):
    if not peer.proc:
        return {}
    n = ctx.idle_n
    socks, errs = [], []
    req = ("GET /small HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % peer.port).encode()
    deadline = time.time() + 120
    try:
        for _ in range(S6_WARMUP):
            for s in s6_batch(peer.port, S6_WARMUP_BATCH, req, errs):
                s.close()
        base = settled(peer.rss)
        for start in range(0, n, S6_BATCH):
            if time.time() > deadline:
                errs.append("time limit reached after %d connections" % len(socks))
                break
            socks += s6_batch(peer.port, min(S6_BATCH, n - start), req, errs)
        time.sleep(1.0)
        rss = settled(peer.rss)
        alive = sum(1 for s in socks[:200] if still_open(s))
    finally:
        for s in socks:
            s.close()
    if errs or alive < min(200, len(socks)):
        problem(where, "python: %d connections, one GET each, kept open (after %d x %d warm-up)"
                % (n, S6_WARMUP, S6_WARMUP_BATCH),
                "%d failed, %d of the first %d still open after 1 s; first errors: %s"
                % (len(errs), alive, min(200, len(socks)), "; ".join(errs[:5])))
    if not socks:
        return {}
    return {"rss_kib_conn": (rss - base) / len(socks)}


# --------------------------------------------------------------------------
# TLS scenarios (issue 23; T1 is s1 and T4 s3 over TLS, T6 s5)


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
    return t_handshakes(ctx, peer, where, resume=False)


def t3(ctx, peer, where):
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
    return s5(ctx, peer, where, n=T6_READERS, rate=T6_RATE)


# --------------------------------------------------------------------------
# HTTP/2 scenarios (issue 24): h2 over TLS, h2load and sluicebench/h2slow.py


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


# --------------------------------------------------------------------------
# the table

def s1_key(tag, conns, kind=""):
    """Run key of S1 body size TAG at CONNS connections: "S1-1k/c64";
    KIND "log" (access log on), "sys" (syscalls), "logsys"."""
    return "S1-%s/c%d%s" % (tag, conns, kind)


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
T1_SYS = "T1/sys"  # the run key of T1's syscall run


# S1 with sluice's access log on (sluice peers only), and each sluice peer's
# on/off ratio within a repetition (median over repetitions)
def log_rows(tag):
    k, w = s1_key(tag, 64, "log"), "S1 %s, 64 conns" % S1_LABEL[tag]
    return [
        ("S1", k, "rps", "%s, sluice access log on: req/s" % w, "higher", "%.0f"),
        ("S1", k, "p99", "%s, sluice access log on: latency p99 ms" % w, "lower", "%.2f"),
        ("S1", k, "cpu_us_req", "%s, sluice access log on: proxy CPU µs/req" % w, "lower", "%.2f"),
        ("S1", k, "cpu_on_off", "%s: sluice CPU/req, access log on ÷ off" % w, "", "%.3f"),
        ("S1", k, "p99_on_off", "%s: sluice p99, access log on ÷ off" % w, "", "%.3f"),
    ]


BEST_OF = ("nginx", "nginx-nobuf", "nginx-deferred", "haproxy")  # the peers "best peer" is chosen from
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
    if sc == "S5":
        return label.replace("200", str(ctx.slow_n))
    if sc in ("S6", "T5"):
        return label.replace("10k", "%d" % ctx.idle_n)
    return label


def medians(results, key, metric, cols):
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


# --------------------------------------------------------------------------
# S1: paired per-repetition ratios, and issue 22's targets

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
    if not sm:
        return "-"
    if sm["n"] == 1:
        return "%.2f (1 rep)" % sm["median"]
    return "%.2f (%.2f–%.2f)" % (sm["median"], sm["min"], sm["max"])


def paired_table(paired, with_old):
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
    lines = []
    for t in tg:
        verdict = ("measured" if t["met"] == "info" else "**met**" if t["met"] else
                   "not measured in full" if t["met"] is None else "**not met**")
        lines.append("- %s: %s — %s" % (t["target"], verdict, t["detail"]))
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


# --------------------------------------------------------------------------


NOFILE = 20000
NGINX_VERSION = ""  # `nginx -v`'s answer, once asked (the H rows' http2 directive depends on it)
SLUICE_ARGS = []


def raise_nofile():
    """Raise RLIMIT_NOFILE (inherited by every child) as far as allowed."""
    global NOFILE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))  # works as root
        except (ValueError, OSError):
            want = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard) if hard != resource.RLIM_INFINITY else hard))
    NOFILE = want
    return NOFILE


def measure(ctx, where, make_peer, fn):
    """Starts a fresh proxy (make_peer()), waits until it answers, runs
    fn(ctx, peer, where), checks the proxy survived, stops it by its PID;
    the result dict ({} after a problem, which is recorded)."""
    peer = None
    try:
        peer = make_peer()
        peer.ready("/small")
        if peer.facts:
            TLS_FACTS[peer.name] = peer.facts
        t0 = time.time()
        res = fn(ctx, peer, where)
        peer.check(where)
        say("%-22s %s (%.1f s)" % (where, " ".join("%s=%.4g" % (k, v) for k, v in sorted(res.items())
                                                   if isinstance(v, (int, float)) and not (k.startswith("sc_") and v < 0.05)),
                                   time.time() - t0))
        return res
    except RuntimeError as e:
        problem(where, shlex.join(peer.proc.argv) if peer and peer.proc else where, str(e))
        return {}
    finally:
        if peer:
            peer.stop()


def main():
    global PIN, SLUICE_ARGS, NGINX_VERSION
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
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

    SLUICE_ARGS = shlex.split(args.sluice_args)
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

    started_at = datetime.datetime.now().astimezone()
    t_start = time.time()
    command = os.environ.get("BENCH_COMMAND") or shlex.join([sys.argv[0]] + sys.argv[1:])

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

    # --- tools and CPUs -------------------------------------------------
    notes = []
    missing = ensure_tools(args, needed_tools(args, peers, scenarios))
    skipped = {}
    usable = os.sched_getaffinity(0)
    if "taskset" in missing or not {LOAD_CPU, PROXY_CPU} <= usable:
        PIN = False
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

    # --- upstreams ------------------------------------------------------
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

    versions = {name: version_of([bins[name], "--version"]) if name in bins else "-" for name in SLUICES
                if name == "sluice" or name in bins}
    if {"nginx", "nginx-nobuf", "nginx-deferred"} & set(peers) or up.kind == "nginx":
        versions["nginx"] = version_of([tool_path("nginx"), "-v"])
        NGINX_VERSION = versions["nginx"]
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

    if log_tag:
        on_off_ratios(results, peers, log_tag)
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

    elapsed = time.time() - t_start
    stop_all()

    # --- report ---------------------------------------------------------
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
        h2_listen, h2_on = nginx_http2(NGINX_VERSION)
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
                  (" " + shlex.join(SLUICE_ARGS)) if SLUICE_ARGS else ""))
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


if __name__ == "__main__":
    sys.exit(main())

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

# The code is in the package sluicebench/ (scripts/ is sys.path[0] when this
# file runs): runs.main, and the modules listed under "bench.py's parts" in
# the package's docstring (sluicebench/__init__.py).

import sys

from sluicebench import runs

if __name__ == "__main__":
    sys.exit(runs.main(__doc__))

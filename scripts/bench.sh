#!/usr/bin/env bash
# Side-by-side benchmark of sluice against nginx (buffered and unbuffered),
# HAProxy and a direct connection; prints a markdown table on stdout.
#
# Usage: scripts/bench.sh [--quick] [--only|--scenarios S1,S1-1k,S3,T,H] [--peers sluice,nginx] [--help]
#                         [--sluice-old PATH] [--reps N] [--s1-reps N] [--json FILE] [--no-build]
#                         [--no-install] [--no-s1-extras] [--syscalls perf|strace|off]
#                         [--syscalls-only] [--syscall-secs N] [--all-syscalls]
# S1 runs three body sizes (200 B, 1 KiB, 16 KiB static files from nginx) at
# 64 and 512 connections, 7 repetitions; it also runs sluice with its access
# log on, and (after the timed runs) one untimed wrk -c64 run per body size
# and proxy with perf's syscall tracepoints attached, for the syscalls-per-
# request table. The report ends with the paired per-repetition ratios
# sluice / best peer and issue 22's targets, met or not.
# T1-T6 (--scenarios T) are the TLS rows (issue 23): nginx `ssl`, HAProxy
# `ssl` and sluice --listen-tls with one ECDSA P-256 certificate made with
# openssl; T1 keep-alive 1 KiB GET over TLS (wrk, 64 conns) and its syscalls
# per request, T2 full handshakes and T3 resumed ones (openssl s_time -new /
# -reuse), T4 100 MiB download, T5 idle TLS connections (bytes each), T6
# 100 slow TLS readers; then issue 23's targets, met or not.
# TLS rows only, quickly: scripts/bench.sh --quick --scenarios T --peers sluice,nginx,haproxy
# H1-H3 (--scenarios H) are the HTTP/2 rows (issue 24): the same TLS peers
# offering h2 by ALPN (nginx `http2`, HAProxy `alpn h2,http/1.1`); H1
# h2load -c64 -m10 1 KiB GETs (CPU per request, p99), H2 a 100 MiB download
# on one stream (h2load -n1 -c1), H3 100 slow streams (10 kB/s each by flow
# control, scripts/sluicebench/h2slow.py) on 10 connections beside one fast
# download (RSS per slow stream; the fast one's MiB/s beside ÷ alone); then
# issue 24's targets, met or not.
# HTTP/2 rows only: scripts/bench.sh --scenarios H --peers sluice,nginx,haproxy
# Env:   SLUICE_BIN=path   skip the build and benchmark this binary
#        SLUICE_OLD=path   also run this (older) sluice as the peer sluice-old, with a new/old table
# Old vs new, quickly (about 2 minutes): scripts/bench.sh --quick --sluice-old PATH \
#        --scenarios S1,S3,S5 --peers sluice,sluice-old
# Syscalls only (under a minute): scripts/syscalls.sh (see its header).
# A full run takes about 40 minutes on 2 cores (S1 alone about 30); --quick
# about 2. The logic is in scripts/bench.py (see its --help) and the package
# scripts/sluicebench/ (runs.py is its main); templates in scripts/bench/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v python3 >/dev/null 2>&1 || { echo "bench: python3 not found in PATH" >&2; exit 1; }
BENCH_COMMAND="$0${*:+ $*}" exec python3 "$ROOT/scripts/bench.py" "$@"

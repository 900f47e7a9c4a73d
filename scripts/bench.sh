#!/usr/bin/env bash
# Side-by-side benchmark of sluice against nginx (buffered and unbuffered),
# HAProxy and a direct connection; prints a markdown table on stdout.
#
# Usage: scripts/bench.sh [--quick] [--only|--scenarios S1,S3] [--peers sluice,nginx] [--help]
#                         [--sluice-old PATH] [--reps N] [--json FILE] [--no-build] [--no-install]
#                         [--no-s1-extras] [--strace-secs N]
# S1 also runs sluice with its access log on, and (after the timed runs) one
# strace'd wrk -c64 run per proxy for the syscalls-per-request rows.
# Env:   SLUICE_BIN=path   skip the build and benchmark this binary
#        SLUICE_OLD=path   also run this (older) sluice as the peer sluice-old, with a new/old table
# Old vs new, quickly (about 2 minutes): scripts/bench.sh --quick --sluice-old PATH \
#        --scenarios S1,S3,S5 --peers sluice,sluice-old
# A full run takes about 8 minutes on 2 cores; --quick about 1. The logic
# is in scripts/bench.py (see its --help); templates in scripts/bench/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v python3 >/dev/null 2>&1 || { echo "bench: python3 not found in PATH" >&2; exit 1; }
BENCH_COMMAND="$0${*:+ $*}" exec python3 "$ROOT/scripts/bench.py" "$@"

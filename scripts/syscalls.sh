#!/usr/bin/env bash
# Syscalls per S1 keep-alive request, by call, for sluice (and any peers),
# counted with kernel tracepoints (perf stat -e raw_syscalls:sys_enter,
# syscalls:sys_enter_NAME,... -p PID): one short untimed wrk -t1 -c64 run per
# body size (200 B, 1 KiB, 16 KiB) and peer. About 40 s for three peers.
#
# Usage: scripts/syscalls.sh [bench.sh flags]
#   scripts/syscalls.sh                                  # build, then sluice vs nginx vs HAProxy
#   SLUICE_BIN=path scripts/syscalls.sh --peers sluice   # one binary, no build
#   scripts/syscalls.sh --no-build --sluice-old OLD --peers sluice,sluice-old,nginx,haproxy
#   scripts/syscalls.sh --scenarios S1-1k --all-syscalls # every syscall's tracepoint
# It is `scripts/bench.sh --quick --scenarios S1 --syscalls-only --peers
# sluice,nginx,haproxy` plus your flags (later flags win); see
# `scripts/bench.sh --help`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v python3 >/dev/null 2>&1 || { echo "syscalls: python3 not found in PATH" >&2; exit 1; }
BENCH_COMMAND="$0${*:+ $*}" exec python3 "$ROOT/scripts/bench.py" --quick --scenarios S1 --syscalls-only \
    --peers "sluice,nginx,haproxy" "$@"

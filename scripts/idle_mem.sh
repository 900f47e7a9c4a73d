#!/usr/bin/env bash
# RSS per idle client connection of sluice (ARCHITECTURE.md §4: idle connections
# hold no body buffers).
#
# Usage: scripts/idle_mem.sh [--conns 10000] [--threshold 300] [--quick]
#   Starts sluice (--max-connections 20000 --keepalive-timeout 120s
#   --request-head-timeout 120s) in front of a python keep-alive upstream,
#   opens N client connections from one python process and prints
#   (VmRSS after - VmRSS before) / N for connections that served one request
#   and idle in keep-alive, and for connections that sent nothing at all.
#   Raises `ulimit -n` to 65536 (or the hard limit, and then fewer
#   connections if needed, saying so). Under 60 s.
# Env: IDLE_CONNS, IDLE_THRESHOLD; SLUICE_BIN=path (skip the build),
#      SLUICE_NO_BUILD=1, RUST_LOG (warn).
# Exits 1 when a phase is above the threshold or a connection fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 16 "${1:-}"
if ! ulimit -n 65536 2>/dev/null; then
    hard="$(ulimit -Hn)"
    echo "idle_mem: cannot raise ulimit -n to 65536; using the hard limit $hard"
    ulimit -n "$hard" || die "cannot raise ulimit -n to $hard"
fi
lib_drive idle_mem.py "$@"

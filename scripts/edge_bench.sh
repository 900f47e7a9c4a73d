#!/usr/bin/env bash
# The edge rules' cost (issue 25's benchmark row; docs/edge.md "What the
# edge rules cost"): S1 (1 KiB, wrk -c64) through a sluice without rules
# and one whose route has two header rules and a rate limit that is never
# tripped, alternating in one run; prints CPU µs per request of each and
# their ratio. The logic is scripts/edge_bench.py.
# Usage: scripts/edge_bench.sh [--reps N] [--secs S]   (installs wrk and
#        nginx with apt-get when missing)
# Env:   SLUICE_BIN=path   use this binary instead of building the release one
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lib_help 2 9 "${1:-}"
for tool in wrk nginx; do
    command -v "$tool" >/dev/null 2>&1 || lib_apt "$tool" || die "cannot install $tool"
done
lib_drive edge_bench.py "$@"

#!/usr/bin/env bash
# The descriptor budget (docs/operations.md, "Descriptor budget"): sluice under
# a low open-file limit with more clients than descriptors.
#
# Usage: scripts/fd_budget.sh [--quick] [--nofile 256] [--clients 1000]
#   Starts sluice under `prlimit --nofile=N:N` in front of an upstream that
#   answers after 100 ms; CLIENTS clients connect at once and send one GET
#   each (15 s to answer). Then, with --max-connections 1, one idle
#   keep-alive client and a new one. --quick: 300 clients.
# Prints statuses (200, 502, 503, none within 15 s), sluice's warnings,
# its descriptors before, during and after, and whether the new client got
# its answer; exits 1 on any 502, any client left without an answer, a
# descriptor leak, or a new client kept waiting by an idle one.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 15 "${1:-}"
need prlimit
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
lib_drive fd_budget.py "$@"

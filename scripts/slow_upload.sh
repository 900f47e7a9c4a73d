#!/usr/bin/env bash
# Slow uploads through sluice (docs/configuration.md, "Timeouts"): a body sent at a
# slow steady rate for longer than the upstream read timeout must get 200,
# and a client that stalls mid-body must get 408, not 504.
#
# Usage: scripts/slow_upload.sh [--quick]
#   full (about 3 min): default flags, 80,000 bytes at 1,000 B/s (80 s), and
#     a 3-minute upload (180 s at 500 B/s); plus the quick cases.
#   --quick (about 12 s): --upstream-read-timeout 2s and 10 bytes every
#     0.5 s for 10 s; a client stalling mid-body with
#     --client-body-timeout 2s --upstream-read-timeout 1s (408 expected).
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Prints one row per case (bytes, seconds, status, expected); exits 1 when a
# status differs from the expected one.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 14 "${1:-}"
lib_drive slow_upload.py "$@"

#!/usr/bin/env bash
# Slow-reader / slow-upload torture run for sluice (ARCHITECTURE.md §4): memory must
# stay flat while a slow client sets the pace for a fast upstream.
#
# Usage: scripts/torture.sh [--scenario one|many|upload|all] [--size 100M]
#            [--rate 100k] [--seconds 20] [--readers 200] [--threshold 4M]
#            [--many-size 20M] [--many-seconds 15] [--many-threshold BYTES]
#            [--upload-size 50M] [--upload-rate 100k] [--upload-seconds 15]
#            [--client curl|python|both] [--high BYTES] [--verbose] [--quick]
#   one     1 reader, `curl --limit-rate RATE --max-time SECONDS`, 100 MiB file
#   many    READERS concurrent slow readers, a 20 MiB file each, 15 s
#   upload  a python client PUTs 50 MiB as fast as it can; the upstream
#           reads it at 100 KiB/s
#   all     the three, in that order (default; about 2 minutes)
# Readers: curl --limit-rate and/or an exactly paced python reader (--client,
# default both: one and many run once with each).
# Env: the same knobs as TORTURE_SCENARIO, TORTURE_SIZE, TORTURE_RATE,
#      TORTURE_SECONDS, TORTURE_READERS, TORTURE_THRESHOLD, ... ;
#      SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1, RUST_LOG (info: one line per request, and
#      sluice's exit counters).
# Prints per scenario idle/peak RSS, bytes sent vs received and the gap, and
# a summary table; exits 1 if a threshold is broken or a transfer fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 25 "${1:-}"
need curl head
lib_drive torture.py "$@"

#!/usr/bin/env bash
# User-space instructions per small keep-alive request (S1: GET /small,
# 256-byte body, through one upstream keep-alive pool) of sluice under
# callgrind, for one or more binaries side by side (issue 11: profile with
# callgrind; perf counters do not work here).
#
# Usage: scripts/callgrind.sh [--bin PATH]... [--conns 64] [--warm 2] [--secs 6]
#            [--access-log] [--profiles DIR]
#   Without --bin: the release build of this tree. Each binary runs under
#   valgrind on CPU 1 behind an nginx upstream and wrk on CPU 0; prints a
#   markdown table of requests, instructions and instructions per request
#   (startup included). About 15 s per binary. --profiles DIR keeps the raw
#   profiles (callgrind-N.out) for callgrind_annotate.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Installs valgrind, nginx and wrk with apt-get (root) when missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 14 "${1:-}"
for tool in valgrind nginx wrk; do
    command -v "$tool" >/dev/null 2>&1 || lib_apt "$tool"
done
need valgrind nginx wrk callgrind_annotate
given_bin=0
for arg in "$@"; do
    [[ "$arg" == --bin || "$arg" == --bin=* ]] && given_bin=1
done
if [[ "$given_bin" == 0 ]]; then
    lib_tmp
    lib_sluice_bin
    set -- --bin "$SLUICE" "$@"
fi
[[ -n "${LIB_TMP:-}" ]] || lib_tmp
lib_run_python "$LIB_DIR/callgrind.py" --tmp "$LIB_TMP" "$@"

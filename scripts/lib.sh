# shellcheck shell=bash
# Shared helpers for scripts/torture.sh, scripts/idle_mem.sh and
# scripts/watermark_bench.sh. Source it right after `set -euo pipefail`.
#
# It sets ROOT (the repo root, found from this file's location), installs an
# EXIT trap that stops every PID in LIB_PIDS (by PID: TERM, then KILL after
# 5 s) and removes LIB_TMP, and defines:
#   die MSG...            print "NAME: MSG" to stderr, exit 1
#   need TOOL...          die unless every TOOL is in PATH
#   lib_tmp               create LIB_TMP, a private temporary directory
#   lib_sluice_bin        build the release binary, copy it to $LIB_TMP/sluice
#                         and set SLUICE to that copy (a concurrent rebuild by
#                         someone else cannot swap the binary under a run)
#   lib_run_python ARGS   run python3 ARGS in the background, wait for it and
#                         return its exit status (signals reach our traps)
# Env: SLUICE_BIN=path    use this binary instead of building
#      SLUICE_NO_BUILD=1  use target/release/sluice as it is (no cargo build)
#      CARGO_TARGET_DIR   honoured when looking for the built binary

LIB_NAME="$(basename "${BASH_SOURCE[1]:-sluice-script}" .sh)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIB_PIDS=()
LIB_TMP=""
SLUICE=""

die() {
    printf '%s: %s\n' "$LIB_NAME" "$*" >&2
    exit 1
}

need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
    done
}

stop_pid() { # TERM, up to 5 s, then KILL; never by name
    local pid=$1 i
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null || true
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

lib_cleanup() {
    local pid
    for pid in "${LIB_PIDS[@]}"; do stop_pid "$pid"; done
    if [[ -n "$LIB_TMP" && -d "$LIB_TMP" ]]; then rm -rf -- "$LIB_TMP"; fi
}
trap lib_cleanup EXIT
trap 'echo "$LIB_NAME: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM HUP

lib_tmp() {
    LIB_TMP="$(mktemp -d "${TMPDIR:-/tmp}/sluice-$LIB_NAME.XXXXXX")"
}

lib_sluice_bin() {
    local src
    [[ -n "$LIB_TMP" ]] || lib_tmp
    if [[ -n "${SLUICE_BIN:-}" ]]; then
        src="$SLUICE_BIN"
    else
        src="${CARGO_TARGET_DIR:-$ROOT/target}/release/sluice"
        if [[ "${SLUICE_NO_BUILD:-0}" != 1 ]]; then
            need cargo
            echo "$LIB_NAME: cargo build --release" >&2
            (cd "$ROOT" && cargo build --release --quiet) ||
                die "cargo build --release failed (SLUICE_NO_BUILD=1 runs the binary already built)"
        fi
    fi
    [[ -x "$src" ]] || die "sluice binary not found or not executable: $src"
    cp -- "$src" "$LIB_TMP/sluice"
    SLUICE="$LIB_TMP/sluice"
}

lib_run_python() {
    local pid rc=0
    python3 "$@" </dev/null &
    pid=$!
    LIB_PIDS+=("$pid")
    wait "$pid" || rc=$?
    return "$rc"
}

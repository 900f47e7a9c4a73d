#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ (libFuzzer, nightly toolchain) for
# SECONDS each, one after the other, and prints each target's exec count.
# The checked-in seeds (fuzz/corpus/TARGET) are read, never written: new
# inputs go to a scratch corpus that is removed at exit. A crash leaves its
# input in fuzz/artifacts/TARGET/ and makes the script exit 1.
#
# Usage: scripts/fuzz.sh [SECONDS]      (default 60 per target)
# Env:   TARGETS="chunked target"   run only these targets
# Not part of CI's default run (scripts/test.sh); see docs/testing.md, "Fuzzing".
# Installs cargo-fuzz (cargo install) if missing; needs `rustup` with a
# nightly toolchain (installed with `rustup toolchain install nightly` if
# missing).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lib_help 2 14 "${1:-}"

SECS="${1:-60}"
[[ "$SECS" =~ ^[0-9]+$ && "$SECS" -gt 0 ]] || die "SECONDS must be a whole number > 0, not '$SECS'"
need cargo rustup
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    log "installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install cargo-fuzz
fi

cd "$ROOT/fuzz"
ALL="$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^sluice-fuzz$')"
TARGETS="${TARGETS:-$ALL}"
lib_tmp
log "building the fuzz targets (cargo +nightly fuzz build)"
cargo +nightly fuzz build >/dev/null

failed=0
for t in $TARGETS; do
    mkdir -p "$LIB_TMP/corpus/$t"
    out="$LIB_TMP/$t.log"
    rc=0
    # Scratch corpus first: libFuzzer writes new inputs to the first dir.
    lib_bg cargo +nightly fuzz run "$t" "$LIB_TMP/corpus/$t" "corpus/$t" -- \
        -max_total_time="$SECS" -print_final_stats=1 \
        >"$out" 2>&1 </dev/null
    wait "$BG_PID" || rc=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n 1)"
    if [[ "$rc" -ne 0 ]]; then
        failed=1
        tail -n 40 "$out" >&2
        log "$t: FAILED (exit $rc) after ${execs:-?} execs; input in fuzz/artifacts/$t/"
    else
        log "$t: ok, ${execs:-?} execs in ${SECS} s"
    fi
done
exit "$failed"

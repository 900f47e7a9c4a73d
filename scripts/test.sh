#!/usr/bin/env bash
# The one test command (README, CI): formatting, the docs' drift checks,
# lints, unit + integration tests, the end-to-end check of the release
# binary, then the Debian package built from that binary and checked in a
# scratch root (docs/testing.md). Stops at the first failing step and names it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# No incremental build state: a full run gains little from it, and beside
# the 50-odd test binaries it cost 1.3 GB of disk (a CI machine ran out).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step() { # step NAME COMMAND...
    local name=$1
    shift
    printf '\n==> test.sh: %s: %s\n' "$name" "$*"
    if ! "$@"; then
        printf '\ntest.sh: FAILED at step "%s" (%s)\n' "$name" "$*" >&2
        exit 1
    fi
}

step fmt cargo fmt --all -- --check
step docs scripts/check-docs.sh
step clippy cargo clippy --all-targets -- -D warnings
step test cargo test --all-targets
step e2e scripts/e2e.sh
# The release binary e2e.sh just built: no second build.
step package env SLUICE_NO_BUILD=1 scripts/check_deb.sh

printf '\ntest.sh: all steps passed (fmt, docs, clippy, test, e2e, package)\n'

#!/usr/bin/env bash
# The one test command (README, CI): formatting, lints, unit + integration
# tests, then the end-to-end check of the release binary. Stops at the first
# failing step and names it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

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
step clippy cargo clippy --all-targets -- -D warnings
step test cargo test --all-targets
step e2e scripts/e2e.sh

printf '\ntest.sh: all steps passed (fmt, clippy, test, e2e)\n'

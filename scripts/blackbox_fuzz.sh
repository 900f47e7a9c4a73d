#!/usr/bin/env bash
# Black-box socket fuzzer (issue 10): mutated requests through sluice to an
# upstream that sends mutated responses, all on 127.0.0.1. Prints deaths,
# hangs, leaked fds and smuggled paths; exits 1 if any is not 0 (or fewer
# inputs ran than asked).
#
# Usage: scripts/blackbox_fuzz.sh [--inputs N] [--threads N] [--seed N]
#        (defaults: 100000 inputs, 16 client threads, seed 10)
# Env:   SLUICE_BIN=path    use this binary instead of building the release one
# See scripts/blackbox_fuzz.py for what is mutated and how each count is made.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 11 "${1:-}"
lib_drive blackbox_fuzz.py "$@"

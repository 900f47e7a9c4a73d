#!/usr/bin/env bash
# Upstream-pool churn run for sluice (ARCHITECTURE.md §7, §8): many clients x many
# GETs through sluice to an upstream that closes connections at random after
# a response (30% with `Connection: close`, 10% silently: the nasty case).
#
# Usage: scripts/pool_churn.sh [--threads 50] [--requests 200] [--seconds 60]
#            [--close-pct 30] [--silent-pct 10] [--per-peer 16] [--total 32]
#            [--seed 1] [--keep-log] [--quick]
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Prints requests, non-200s, 502s, retries, upstream connections opened,
# pool takes/puts, evictions by reason (from sluice's RUST_LOG=sluice=debug
# log), the upstream sockets left after the run settles (/proc/net/tcp) and
# sluice's fd count before and after. Exits 1 on any non-200, on more idle
# upstream sockets than the cap, on CLOSE_WAIT sockets, or on an fd leak.
# Loopback only; about 30 s plus the build.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 16 "${1:-}"
[[ -r /proc/net/tcp ]] || die "/proc/net/tcp not readable (Linux only)"
lib_drive pool_churn.py "$@"

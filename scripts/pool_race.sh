#!/usr/bin/env bash
# Keep-alive races on pooled upstream connections (issue 14): GET and POST
# loads at once (wrk, 25 connections each, 700 ms bursts separated by
# synchronized pauses of 0.3-3 s) through sluice and through nginx, against
# nginx with `keepalive_timeout 1s` and against an erratic upstream that
# closes idle connections after 0.5-3 s and 3 % right after a response.
#
# Usage: scripts/pool_race.sh [--quick] [--seconds 90] [--sluice-old PATH]
#            [--pause-min 300] [--pause-max 3000] [--upstreams nginx,erratic]
#            [--close-delay MS]
#   --quick: 12 s per proxy and upstream (a smoke run, about 1 minute).
#   --sluice-old PATH: also run this older sluice; the reuse threshold
#   (requests per upstream connection within 10 % of it) is checked then.
#   --pause-min 950 --pause-max 1050 --upstreams nginx: every pause near
#   nginx's 1 s idle limit (the adversarial case).
#   --close-delay 20: the erratic upstream's closes after a response come
#   0-20 ms late, reading nothing (the issue's minimal case: a request sent
#   on that connection meanwhile is lost; GETs are retried, POSTs cannot be).
# Prints per proxy and upstream: requests, proxy-made 5xx (502/503/504),
# their rate, retries and evictions (sluice's counters), the pool's choice
# paths, and requests per upstream connection (counted at the upstream).
# Exits 1 when sluice makes any 5xx against nginx, a higher 5xx rate than
# nginx (as a proxy) against the erratic upstream, reuses 10 % less than
# --sluice-old, or (full run) the run saw fewer than 1,000,000 requests.
# Installs nginx and wrk with apt-get (root) when missing.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 27 "${1:-}"
if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    [[ $EUID -eq 0 ]] || die "needs nginx and wrk (apt-get install -y nginx wrk)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx wrk >/dev/null
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
lib_drive pool_race.py "$@"

#!/usr/bin/env bash
# Memory per half-sent head and after a peak (issue 14), sluice beside nginx
# and HAProxy.
#
# Usage: scripts/head_mem.sh [--quick] [--conns 2000] [--readers 5000]
#   A  N connections that sent nothing, then 37 bytes of a head each: RSS per
#      connection (sluice threshold: 4 KiB with a partial head)
#   B  5,000 slow readers (GET of 1 MiB, never read), then all close: peak
#      RSS, and the seconds until RSS is back within 2x base + the free
#      list's bound (threshold: 60 s)
#   C  slowhttptest slowloris, 4,000 connections at 400/s for 30 s: RSS
#      growth of sluice, nginx and HAProxy (threshold: sluice <= the best of
#      nginx and HAProxy)
#   Peers: nginx (worker_connections 16000) and HAProxy (scripts/bench/
#   haproxy.cfg.in: maxconn 16000, one thread, no log), both with 10 s for a
#   request head and the access log off.
#   --quick: 500 connections, 1,000 readers, slowhttptest 1,000 at 200/s
#   for 10 s (about 2 minutes in all; the full run about 4 minutes).
# Installs nginx, slowhttptest and haproxy with apt-get (root) when missing;
# without haproxy (not installable) it compares with nginx alone and says so.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Exits 1 past a threshold.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 22 "${1:-}"
if ! command -v nginx >/dev/null || ! command -v slowhttptest >/dev/null; then
    [[ $EUID -eq 0 ]] || die "needs nginx and slowhttptest (apt-get install -y nginx slowhttptest)"
    lib_apt nginx slowhttptest || die "apt-get install nginx slowhttptest failed"
fi
if ! command -v haproxy >/dev/null && [[ ! -x /usr/sbin/haproxy ]]; then
    if [[ $EUID -ne 0 ]] || ! lib_apt haproxy; then
        log "haproxy missing and not installed: comparing with nginx alone"
    fi
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[[ "$(ulimit -n)" -ge 12000 ]] || die "ulimit -n $(ulimit -n): need 12000 for 5,000 readers"
lib_drive head_mem.py "$@"

#!/usr/bin/env bash
# One of three upstreams killed and restarted under load (ARCHITECTURE.md
# §13): 3 python http.server upstreams on loopback, sluice in front with one
# group of the three (max_fails, fail_timeout, an active health_check,
# max_retries = 2), wrk GETs for 60 s while the second upstream is killed
# (SIGKILL, by its PID) at 1/3 and started again at 2/3; then the same job
# with nginx (`upstream` block with max_fails/fail_timeout) if installed.
#
# Usage: scripts/groups_kill.sh [--quick] [--seconds 60] [--threads 2]
#            [--connections 32] [--no-nginx] [--hang [--old-bin PATH]]
#   --quick   10 s per proxy instead of 60
#   --hang    instead: every server hangs on connect; time 10 answers per
#             proxy (sluice, --old-bin sluices, nginx) once they are down
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Installs wrk and nginx with apt-get when root and missing.
# Prints per proxy: requests, non-2xx, socket errors, retries, ejections
# (sluice: its `stopped:` log line; nginx: its error log), health checks,
# and whether the restarted upstream got requests again. Exits 1 if sluice
# answered any GET with a non-2xx, wrk saw a socket error against sluice, or
# the restarted upstream got no request from sluice. Loopback only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 20 "${1:-}"
need python3
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
if ((${#missing[@]})); then
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "installing ${missing[*]} with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >/dev/null || log "apt-get update failed"
        apt-get install -y -q "${missing[@]}" >/dev/null || log "apt-get install ${missing[*]} failed"
    else
        log "missing ${missing[*]} (not root or no apt-get: not installing)"
    fi
fi
need wrk
lib_drive groups_kill.py "$@"

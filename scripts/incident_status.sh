#!/usr/bin/env bash
# An incident on loopback as an operator sees it (issue 27): sluice
# (--workers 2) in front of one group of four servers (python, this
# machine): one ejected by traffic (passes its checks, closes every
# request), one held down by its health checks (/health answers 500), one
# put in maintenance with `sluice status --maintenance`, one healthy.
#
# Usage: scripts/incident_status.sh [--workers N] [--pretty]
# Prints GET /status (JSON: a line per server; --pretty: as sluice writes
# it) and the `sluice status` table; exits 1 if the three states did not
# come in every worker within their bounds.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 12 "${1:-}"
lib_drive incident_status.py "$@"

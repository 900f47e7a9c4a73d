#!/usr/bin/env bash
# The HTTP/2 attacks (issue 24 item 6) against sluice, 1,000 connections at
# once, and sluice's memory before, during and after (docs/http2.md, "Limits
# and attacks"; docs/performance.md, "HTTP/2").
#
# Usage: scripts/h2_attacks.sh [--conns 1000] [--streams 10] [--hold 5] [--kinds K,K]
#   Starts sluice --http2-cleartext (defaults otherwise) in front of
#   scripts/bench/upstream.py and opens CONNS prior-knowledge h2c
#   connections, an eighth for each attack: rapid reset, a CONTINUATION
#   flood left half-way, an HPACK bomb, a PING/SETTINGS flood, an empty-frame
#   flood, zero-window holds and half-open streams (STREAMS each), the last
#   stream id. Holds them all; prints sluice's RSS growth per connection of
#   each kind, what sluice answered, its HTTP/2 counters, whether a normal
#   request (HTTP/1.1 and h2c) still gets its answer, and RSS before, during
#   and after (until it came back, at most 60 s: sluice trims every 25 s).
#   Raises `ulimit -n` to 65536 (or the hard limit). About 90 s.
# Env: SLUICE_BIN=path (skip the build), SLUICE_NO_BUILD=1.
# Exits 1 when a normal request fails meanwhile or sluice exits.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 18 "${1:-}"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
lib_drive h2_attacks.py "$@"

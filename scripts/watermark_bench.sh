#!/usr/bin/env bash
# Large-body throughput and CPU per MiB of sluice at several watermark
# settings (ARCHITECTURE.md §9: confirm the 64 KiB / 16 KiB default by benchmark).
#
# Usage: scripts/watermark_bench.sh [--settings 16K/4K,32K/8K,64K/16K,256K/64K]
#            [--size 256M] [--transfers 4] [--reps 3] [--no-upload] [--min-mibs 50]
#            [--verbose] [--quick]
#   Each repetition runs every setting once (rotating the order): a fresh
#   sluice pinned to CPU 0 (taskset -c 0, if taskset exists), a python
#   upstream serving SIZE bytes from memory and curl pinned to CPU 1; a
#   download (curl -o /dev/null) and an upload (curl -T) through the proxy,
#   TRANSFERS of each per measurement.
#   Prints medians in a markdown table: MiB/s and sluice's CPU ms per MiB
#   (utime+stime), plus a direct run without the proxy. Under 4 minutes.
# Env: WM_SETTINGS, WM_SIZE, WM_TRANSFERS, WM_REPS, WM_MIN_MIBS; SLUICE_BIN=path (skip the
#      build), SLUICE_NO_BUILD=1, RUST_LOG (warn).
# Exits 1 when a transfer fails or a median is below --min-mibs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lib_help 2 17 "${1:-}"
need curl
command -v taskset >/dev/null 2>&1 || echo "watermark_bench: taskset not found: processes will not be pinned"
lib_drive watermark_bench.py "$@"

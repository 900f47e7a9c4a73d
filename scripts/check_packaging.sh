#!/usr/bin/env bash
# Checks what can be checked of the packaging files without systemd running,
# a container engine or a cluster:
#   - packaging/sluice.service with `systemd-analyze verify` (ExecStart pointed
#     at the built binary; installs the systemd package with apt when missing);
#   - deploy/kubernetes/*.yaml parse as YAML (python3; PyYAML when present);
#   - the ConfigMap's TOML passes `sluice --check-config`.
# The binary's side of the contract (READY=1, RELOADING=1, STOPPING=1, drain
# within TimeoutStopSec) is tested by tests/operations.rs.
#
# Usage: scripts/check_packaging.sh     Env: SLUICE_BIN=path (skip the build)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
lib_help 2 11 "${1:-}"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    need apt-get
    apt-get update -qq && apt-get install -y -qq systemd >/dev/null
fi
lib_tmp
lib_sluice_bin

sed "s#/usr/sbin/sluice#$SLUICE#g" packaging/sluice.service >"$LIB_TMP/sluice.service"
out="$(systemd-analyze verify --man=no "$LIB_TMP/sluice.service" 2>&1)" || die "systemd-analyze verify failed: $out"
[[ -z "$out" ]] || die "systemd-analyze verify warns: $out"
log "packaging/sluice.service: systemd-analyze verify OK"

for f in deploy/kubernetes/*.yaml; do
    lib_py - "$f" <<'PY' || die "$f does not parse"
import sys
try:
    import yaml
except ImportError:
    sys.exit(0)  # no parser here: the structure is checked by tests/operations.rs
with open(sys.argv[1]) as fh:
    docs = [d for d in yaml.safe_load_all(fh) if d]
assert docs and all("kind" in d and "apiVersion" in d for d in docs), "kind/apiVersion"
PY
done
log "deploy/kubernetes/*.yaml: parse OK"

sed -n '/sluice.toml: |/,$p' deploy/kubernetes/configmap.yaml | tail -n +2 | sed 's/^    //' >"$LIB_TMP/cm.toml"
"$SLUICE" --check-config "$LIB_TMP/cm.toml" >/dev/null || die "the ConfigMap's TOML is invalid"
log "deploy/kubernetes/configmap.yaml: sluice --check-config OK"
log "OK"

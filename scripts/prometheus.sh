#!/usr/bin/env bash
# A real Prometheus server scrapes the admin endpoint of a multi-worker sluice
# under load, and the request rate is read back through Prometheus's HTTP query
# API — the way users will consume the metrics (issue 13, deliverable 2).
#
# Everything on 127.0.0.1: an HTTP/1.1 upstream (sluicebench.upstream), sluice
# --workers 2 --admin, Prometheus (Debian's package, installed with apt-get if
# missing) scraping every second, and a bounded load of keep-alive GETs. It
# prints the rate the load generator measured, the rate Prometheus computed
# (sum over the workers of rate(sluice_requests_total)), and the per-worker
# series it saw; it fails if Prometheus saw no scrape, not both workers, or a
# rate more than 25 % off.
#
# Usage: scripts/prometheus.sh [SECONDS]   (load duration, default 20)
# Env:   SLUICE_BIN=path  skip the build and use this binary
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lib_help 2 15 "${1:-}"
cd "$ROOT"
SECS="${1:-20}"
[[ "$SECS" =~ ^[0-9]+$ && "$SECS" -ge 10 && "$SECS" -le 300 ]] || die "SECONDS must be 10..300"

need python3 curl
if ! command -v prometheus >/dev/null 2>&1; then
    log "installing Debian's prometheus package"
    lib_apt prometheus || die "apt-get install prometheus failed"
fi
lib_tmp
lib_sluice_bin
TMP="$LIB_TMP"

UP_PORT="$(free_port)"
lib_bg env PYTHONPATH="$LIB_DIR" python3 -m sluicebench.upstream sized "$UP_PORT" \
    </dev/null >"$TMP/upstream.log" 2>&1
UP_PID=$BG_PID
wait_port "$UP_PID" "$UP_PORT" "upstream"

PORT="$(free_port)"
ADMIN="127.0.0.1:$(free_port)"
lib_bg "$SLUICE" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" --workers 2 \
    --admin "$ADMIN" --access-log off </dev/null >"$TMP/sluice.log" 2>&1
SPID=$BG_PID
wait_http "$SPID" "http://$ADMIN/readyz" "sluice admin" "$TMP/sluice.log"
wait_http "$SPID" "http://127.0.0.1:$PORT/100" "sluice" "$TMP/sluice.log"

PROM="127.0.0.1:$(free_port)"
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: ["$ADMIN"]
EOF
lib_bg prometheus --config.file="$TMP/prometheus.yml" --web.listen-address="$PROM" \
    --storage.tsdb.path="$TMP/tsdb" </dev/null >"$TMP/prometheus.log" 2>&1
PROM_PID=$BG_PID
wait_http "$PROM_PID" "http://$PROM/-/ready" "prometheus" "$TMP/prometheus.log"
log "upstream :$UP_PORT, sluice :$PORT (2 workers, admin $ADMIN), prometheus $PROM"

# Load: 8 keep-alive connections doing GETs for SECS seconds (bounded).
LOAD="$(PYTHONPATH="$LIB_DIR" python3 - "$PORT" "$SECS" <<'PY'
import socket, sys, threading, time
from sluicebench.net import read_response
port, secs = int(sys.argv[1]), float(sys.argv[2])
done = [0] * 8
end = time.monotonic() + secs
def run(i):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    buf = b""
    while time.monotonic() < end:
        s.sendall(b"GET /100 HTTP/1.1\r\nHost: load\r\n\r\n")
        _, _, _, buf = read_response(s, buf)
        done[i] += 1
    s.close()
t0 = time.monotonic()
ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print(f"{sum(done)} {sum(done) / (time.monotonic() - t0):.1f}")
PY
)"
read -r SENT LOAD_RATE <<<"$LOAD"
sleep 3 # two more scrapes after the load ended

query() { # PROMQL -> JSON result
    curl -sS --max-time 10 -G "http://$PROM/api/v1/query" --data-urlencode "query=$1"
}
# The peak of the 5 s rate over the load window: steady-state requests/s.
WINDOW="$((SECS - 2))s"
RATE_JSON="$(query "max_over_time(sum(rate(sluice_requests_total[5s]))[$WINDOW:1s])")"
TOTAL_JSON="$(query 'sum(sluice_requests_total)')"
WORKERS_JSON="$(query 'count by (worker) (sluice_request_heads_total)')"
UP_JSON="$(query 'up{job="sluice"}')"
python3 - "$RATE_JSON" "$TOTAL_JSON" "$WORKERS_JSON" "$UP_JSON" "$SENT" "$LOAD_RATE" <<'PY'
import json, sys
rate_j, total_j, workers_j, up_j = (json.loads(a) for a in sys.argv[1:5])
sent, load_rate = int(sys.argv[5]), float(sys.argv[6])
val = lambda j: float(j["data"]["result"][0]["value"][1]) if j["data"]["result"] else float("nan")
rate, total, up = val(rate_j), val(total_j), val(up_j)
workers = sorted(r["metric"].get("worker", "?") for r in workers_j["data"]["result"])
print(f"prometheus: load generator sent {sent} requests, {load_rate:.0f} req/s")
print(f"prometheus: Prometheus: up={up:.0f}, peak sum(rate(sluice_requests_total[5s])) = {rate:.0f} req/s, "
      f"sum(sluice_requests_total) = {total:.0f}, workers seen: {','.join(workers)}")
ok = up == 1 and workers == ["0", "1"] and abs(rate - load_rate) <= 0.25 * load_rate and total >= sent
print("prometheus: OK" if ok else "prometheus: FAILED")
sys.exit(0 if ok else 1)
PY

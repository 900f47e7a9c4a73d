#!/usr/bin/env bash
# Reload under load, measured: wrk runs against sluice (in front of nginx) for DURATION seconds
# while the config file switches between two upstreams and sluice gets a
# SIGHUP every INTERVAL seconds. Counts every request wrk saw fail (socket
# errors: connect, read, write, timeout; and non-2xx answers) and shows each
# reload taking effect (a probe waits until the new upstream answers).
#
# Usage: scripts/reload.sh            (from any directory)
# Env:   DURATION=60     seconds of load        INTERVAL=5   seconds between SIGHUPs
#        WORKERS=2       --workers of sluice (1: the single-process reload)
#        CONNS=64        wrk connections        MIGRATE=on|off|keep (see lib.sh)
#        SLUICE_BIN=path use this binary instead of building the release one
# Prints wrk's totals and a summary line; exits 1 on any failed request, a
# reload that did not take effect, or a sluice that did not exit 0.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
lib_help 2 14 "${1:-}"
LIB_STOP_GRACE=15

DURATION="${DURATION:-60}"
INTERVAL="${INTERVAL:-5}"
WORKERS="${WORKERS:-2}"
CONNS="${CONNS:-64}"
MIGRATE="${MIGRATE:-on}"

if ! command -v wrk >/dev/null 2>&1 || ! command -v nginx >/dev/null 2>&1; then
    need apt-get
    apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi
need python3 curl wrk nginx

lib_tmp
TMP="$LIB_TMP"
lib_sluice_bin
lib_tcp_migrate "$MIGRATE"

# --- two upstreams: GET /who answers "A" or "B" (one nginx, two ports, keep-alive)
declare -A UP
UP[A]="$(free_port)"
UP[B]="$(free_port)"
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<NGINX
worker_processes 1;
error_log $TMP/nginx/error.log warn;
pid $TMP/nginx/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:${UP[A]}; location / { return 200 "A"; } }
    server { listen 127.0.0.1:${UP[B]}; location / { return 200 "B"; } }
}
NGINX
lib_bg nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' </dev/null \
    >"$TMP/nginx/out.log" 2>&1
wait_port "$BG_PID" "${UP[A]}" "nginx" "$TMP/nginx/error.log"
wait_port "$BG_PID" "${UP[B]}" "nginx" "$TMP/nginx/error.log"

PORT="$(free_port)"
CONF="$TMP/sluice.toml"
write_config() { # NAME: point the config file at upstream NAME
    printf 'listen = "127.0.0.1:%s"\nupstream = "127.0.0.1:%s"\nworkers = %s\ndrain_timeout = "10s"\n' \
        "$PORT" "${UP[$1]}" "$WORKERS" >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
}
write_config A
SLOG="$TMP/sluice.log"
lib_bg env RUST_LOG=info "$SLUICE" --config "$CONF" </dev/null >"$SLOG" 2>&1
SPID=$BG_PID
wait_http "$SPID" "http://127.0.0.1:$PORT/who" "sluice" "$SLOG"
log "sluice pid $SPID on 127.0.0.1:$PORT (--workers $WORKERS), upstreams A=${UP[A]} B=${UP[B]}"

# who: the body of one GET /who on a new connection
who() { curl -s --max-time 2 "http://127.0.0.1:$PORT/who" || true; }

lib_bg wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/who" \
    </dev/null >"$TMP/wrk.out" 2>&1
WRK_PID=$BG_PID
T0=$(date +%s)
current=A
reloads=0
not_effective=0
while (($(date +%s) - T0 + INTERVAL < DURATION)); do
    sleep "$INTERVAL"
    if [[ "$current" == A ]]; then current=B; else current=A; fi
    write_config "$current"
    t_hup=$(date +%s%N)
    kill -HUP "$SPID"
    reloads=$((reloads + 1))
    seen=""
    for ((i = 0; i < 100; i++)); do # up to 10 s
        seen="$(who)"
        [[ "$seen" == "$current" ]] && break
        sleep 0.1
    done
    ms=$((($(date +%s%N) - t_hup) / 1000000))
    if [[ "$seen" == "$current" ]]; then
        log "reload $reloads at t=$(($(date +%s) - T0)) s: upstream $current answers ${ms} ms after SIGHUP"
    else
        log "reload $reloads: upstream $current still not answering after ${ms} ms (got '$seen')"
        not_effective=$((not_effective + 1))
    fi
done
wait "$WRK_PID" || die "wrk failed: $(cat "$TMP/wrk.out")"
sed 's/^/reload:   /' "$TMP/wrk.out"

requests="$(awk '/requests in/ {print $1}' "$TMP/wrk.out")"
socket_errors="$(awk -F'[ ,]+' '/Socket errors/ {print $4 + $6 + $8 + $10}' "$TMP/wrk.out")"
non2xx="$(awk '/Non-2xx/ {print $NF}' "$TMP/wrk.out")"
failed=$((${socket_errors:-0} + ${non2xx:-0}))
ok_reloads="$(grep -c 'SIGHUP: reloaded' "$SLOG" || true)"

kill -TERM "$SPID"
wait_gone "$SPID" 15 || die "sluice did not exit after SIGTERM"
set +e
wait "$SPID"
rc=$?
set -e
if grep -q 'panicked' "$SLOG"; then
    grep -h -m3 -A2 'panicked' "$SLOG" >&2
    die "sluice panicked"
fi
log "requests=$requests failed=$failed (socket errors ${socket_errors:-0}, non-2xx ${non2xx:-0}) reloads=$reloads logged_reloaded=$ok_reloads not_effective=$not_effective sluice_exit=$rc"
if ((failed > 0 || not_effective > 0 || rc != 0 || ok_reloads != reloads)); then
    log "FAILED"
    exit 1
fi
log "OK: $reloads reloads under load, no failed request"

#!/usr/bin/env bash
# Scale-out behind an L4 balancer, measured (issue 25; docs/edge.md
# "Scale-out behind an L4 balancer"): three sluice "hosts", each a network
# namespace with its own sluice (2 workers, accept_proxy_protocol from the
# balancer) in front of its own upstream (nginx), and HAProxy in mode tcp
# in front of them with send-proxy-v2 and health checks on each sluice's
# /readyz. wrk, in a fourth namespace (the "client", 10.203.9.2), loads the
# balancer for DURATION seconds while the three hosts restart one after
# the other:
#   host 1: SIGHUP (a reload: a new generation of workers, then the old drains);
#   host 2: a --takeover binary swap (a second sluice on the same address,
#           then SIGTERM to the old one; the new one's admin listener is on
#           9091, checked by the balancer's second server line for the host);
#   host 3: SIGTERM, wait for the exit, start again.
# Prints wrk's requests and failed requests (goal 0), the client addresses
# in the three hosts' access logs (goal: only the client's 10.203.9.2, never
# the balancer's 10.203.N.1) and how traffic moved (requests per host per
# 5 s, from the access logs).
#
# Everything it makes it removes: the namespaces (sl<pid>h1..3, sl<pid>c),
# the veth pairs (their root ends s<pid>v1..3, s<pid>vc; 10.203.0.0/16), the
# processes (each stopped by its PID), the temporary directory. Needs root;
# installs haproxy, wrk and nginx with apt-get when missing.
#
# Usage: scripts/scaleout.sh
# Env:   DURATION=60   seconds of load (the restarts are at 20 %, 45 %, 70 %)
#        CONNS=32      wrk connections; THREADS=2 wrk threads
#        SLUICE_BIN=path   use this binary instead of building the release one
# Exit status 1 if any request failed or a balancer address reached a log.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lib_help 2 28 "${1:-}"
cd "$ROOT"
LIB_STOP_GRACE=15

DURATION="${DURATION:-60}"
CONNS="${CONNS:-32}"
THREADS="${THREADS:-2}"

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
need ip python3 curl
for tool in haproxy wrk nginx; do
    command -v "$tool" >/dev/null 2>&1 || lib_apt "$tool" || die "cannot install $tool"
done

lib_tmp
TMP="$LIB_TMP"
lib_sluice_bin
BIN="$SLUICE"

ID=$$
NS=()
LINKS=()
lib_exit_hook() { # after lib.sh stopped every PID: the namespaces and links
    local n l
    for n in ${NS[@]+"${NS[@]}"}; do ip netns del "$n" 2>/dev/null || true; done
    for l in ${LINKS[@]+"${LINKS[@]}"}; do ip link del "$l" 2>/dev/null || true; done
}

# net NAME ROOT_IF SUBNET: namespace NAME joined to the root one by a veth
# pair; the root end is 10.203.SUBNET.1, the namespace's 10.203.SUBNET.2.
net() {
    local name=$1 rif=$2 sub=$3
    ip netns add "$name"
    NS+=("$name")
    ip link add "$rif" type veth peer name "${rif}p"
    LINKS+=("$rif")
    ip link set "${rif}p" netns "$name"
    ip addr add "10.203.$sub.1/24" dev "$rif"
    ip link set "$rif" up
    ip -n "$name" addr add "10.203.$sub.2/24" dev "${rif}p"
    ip -n "$name" link set "${rif}p" up
    ip -n "$name" link set lo up
}

for i in 1 2 3; do net "sl${ID}h$i" "s${ID}v$i" "$i"; done
net "sl${ID}c" "s${ID}vc" 9
# No routes between the namespaces: the client reaches only the balancer
# (10.203.9.1), each host only the balancer's end of its own link.

# --- upstreams: nginx in each host, 127.0.0.1:8001 -----------------------------------
for i in 1 2 3; do
    mkdir -p "$TMP/nginx$i/logs"
    cat >"$TMP/nginx$i/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx$i/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx$i;
    proxy_temp_path $TMP/nginx$i;
    fastcgi_temp_path $TMP/nginx$i;
    uwsgi_temp_path $TMP/nginx$i;
    scgi_temp_path $TMP/nginx$i;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:8001;
        location / { return 200 "host $i\n"; }
    }
}
EOF
    lib_bg ip netns exec "sl${ID}h$i" nginx -e stderr -p "$TMP/nginx$i" -c "$TMP/nginx$i/nginx.conf" \
        </dev/null >"$TMP/nginx$i.log" 2>&1
done

# --- sluice in each host ------------------------------------------------------------
SERIAL=0
# start_sluice HOST ADMIN_PORT [--takeover]: sets SPID and SLOG (its access log)
start_sluice() {
    local i=$1 admin=$2
    SERIAL=$((SERIAL + 1))
    SLOG="$TMP/access-h$i-$SERIAL.log"
    cat >"$TMP/sluice-h$i-$SERIAL.toml" <<EOF
listen = "10.203.$i.2:8080"
upstream = "127.0.0.1:8001"
workers = 2
drain_timeout = "10s"
admin = "0.0.0.0:$admin"
admin_public = true
accept_proxy_protocol = ["10.203.$i.1/32"]
access_log = "$SLOG"
access_log_format = "json"
EOF
    lib_bg ip netns exec "sl${ID}h$i" env RUST_LOG=warn "$BIN" --config "$TMP/sluice-h$i-$SERIAL.toml" \
        ${3:-} </dev/null >"$TMP/sluice-h$i-$SERIAL.err" 2>&1
    SPID=$BG_PID
}
# ready HOST ADMIN_PORT: up to 10 s until that sluice's /readyz says 200
ready() {
    local k
    for ((k = 0; k < 200; k++)); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "http://10.203.$1.2:$2/readyz") == 200 ]] && return 0
        sleep 0.05
    done
    die "host $1: /readyz on $2 not 200 within 10 s"
}
declare -A PID_OF
for i in 1 2 3; do
    start_sluice "$i" 9090
    PID_OF[$i]=$SPID
done
for i in 1 2 3; do ready "$i" 9090; done

# --- the balancer ---------------------------------------------------------------------
cat >"$TMP/haproxy.cfg" <<EOF
global
    maxconn 4096
    stats socket $TMP/haproxy.sock mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch
frontend fe
    bind 10.203.9.1:8000
    default_backend hosts
backend hosts
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2 send-proxy-v2
    server h1 10.203.1.2:8080 check port 9090
    server h2 10.203.2.2:8080 check port 9090
    server h2-swap 10.203.2.2:8080 check port 9091
    server h3 10.203.3.2:8080 check port 9090
EOF
lib_bg haproxy -db -f "$TMP/haproxy.cfg" </dev/null >"$TMP/haproxy.log" 2>&1
HAPROXY=$BG_PID
for ((k = 0; k < 100; k++)); do
    ip netns exec "sl${ID}c" curl -s -o /dev/null "http://10.203.9.1:8000/" && break
    sleep 0.05
done
# The check of h2-swap fails until the swap: that server line is down.
sleep 1

# --- load and the rolling restart -------------------------------------------------------
log "wrk -t$THREADS -c$CONNS -d${DURATION}s through HAProxy (mode tcp, send-proxy-v2) to 3 hosts"
lib_bg ip netns exec "sl${ID}c" wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "http://10.203.9.1:8000/" \
    </dev/null >"$TMP/wrk.out" 2>&1
WRK=$BG_PID
START=$(date +%s.%N)
at() { # SECONDS since the load began: sleep until then
    local left
    left=$(python3 -c "import sys,time; print(max(0.0, $START + $1 - time.time()))")
    sleep "$left"
}
stamp() { python3 -c "import time; print('%5.1f s' % (time.time() - $START))"; }

at "$(python3 -c "print($DURATION * 0.2)")"
log "$(stamp): host 1: SIGHUP (reload)"
kill -HUP "${PID_OF[1]}"

at "$(python3 -c "print($DURATION * 0.45)")"
log "$(stamp): host 2: --takeover swap"
OLD2=${PID_OF[2]}
start_sluice 2 9091 --takeover
PID_OF[2]=$SPID
ready 2 9091
kill -TERM "$OLD2"
wait_gone "$OLD2" 15 || die "host 2: the old sluice did not exit after its drain"
wait "$OLD2" 2>/dev/null || true
log "$(stamp): host 2: old sluice (pid $OLD2) drained and exited"

at "$(python3 -c "print($DURATION * 0.7)")"
log "$(stamp): host 3: SIGTERM, then start"
kill -TERM "${PID_OF[3]}"
wait_gone "${PID_OF[3]}" 15 || die "host 3: sluice did not exit after its drain"
wait "${PID_OF[3]}" 2>/dev/null || true
start_sluice 3 9090
PID_OF[3]=$SPID
ready 3 9090
log "$(stamp): host 3: started again"

wait_gone "$WRK" $((DURATION + 30)) || die "wrk did not end"
wait "$WRK" 2>/dev/null || true
sleep 1.5 # the access logs' last flush (at most a second)
stop_pid "$HAPROXY"
for i in 1 2 3; do stop_pid "${PID_OF[$i]}"; done

# --- what happened ------------------------------------------------------------------------
cat "$TMP/wrk.out"
python3 - "$TMP" "$TMP/wrk.out" <<'EOF'
import collections, datetime, glob, json, os, re, sys
tmp, wrk = sys.argv[1], open(sys.argv[2]).read()
m = re.search(r"(\d+) requests in", wrk)
requests = int(m.group(1)) if m else 0
errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", wrk)
socket_errors = sum(map(int, errs.groups())) if errs else 0
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", wrk)
failed = socket_errors + (int(non2xx.group(1)) if non2xx else 0)
print("requests: %d" % requests)
print("failed requests: %d (socket errors %d, non-2xx %s)" % (
    failed, socket_errors, non2xx.group(1) if non2xx else 0))
clients = {}
per_bucket = collections.defaultdict(collections.Counter)
t0 = None
for host in (1, 2, 3):
    c = collections.Counter()
    for path in sorted(glob.glob(os.path.join(tmp, "access-h%d-*.log" % host))):
        for line in open(path):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            ip = rec["client"].rsplit(":", 1)[0]
            c[ip] += 1
            t = datetime.datetime.fromisoformat(rec["time"].replace("Z", "+00:00")).timestamp()
            t0 = t if t0 is None else min(t0, t)
            per_bucket[host][t] += 1
    clients[host] = c
balancer = 0
for host in (1, 2, 3):
    print("host %d access log clients: %s" % (host, ", ".join(
        "%s=%d" % kv for kv in clients[host].most_common()) or "none"))
    balancer += sum(n for ip, n in clients[host].items() if ip.startswith("10.203.%d." % host))
print("records naming the balancer's address: %d" % balancer)
print("traffic by host (records per 5 s from the first):")
print("   t(s)   host1   host2   host3")
buckets = collections.defaultdict(collections.Counter)
for host, times in per_bucket.items():
    for t, n in times.items():
        buckets[int((t - t0) // 5)][host] += n
for b in sorted(buckets):
    print("  %5d  %6d  %6d  %6d" % (b * 5, buckets[b][1], buckets[b][2], buckets[b][3]))
logged = sum(sum(c.values()) for c in clients.values())
print("access records: %d (wrk counted %d)" % (logged, requests))
sys.exit(1 if failed or balancer or not requests else 0)
EOF

#!/usr/bin/env bash
# End-to-end check of the release binary against real upstreams on 127.0.0.1:
# python3's http.server (HTTP/1.0, closes every connection) and a small
# HTTP/1.1 keep-alive server (to see the upstream pool reuse a connection).
#
# Usage: scripts/e2e.sh        (from any directory; exits non-zero on failure)
# Env:   SLUICE_BIN=path       skip the build and test this binary instead
#        SLUICE_NO_BUILD=1     test target/release/sluice as it is
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

need python3 curl sha256sum timeout

# --- build -------------------------------------------------------------------
lib_tmp
lib_sluice_bin
BIN="$SLUICE"
TMP="$LIB_TMP"
mkdir -p "$TMP/www"
head -c 10485760 /dev/urandom >"$TMP/www/big.bin"
printf 'hello from the upstream\n' >"$TMP/www/small.txt"
BIG_SUM="$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)"

# --- checks bookkeeping ------------------------------------------------------
PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); printf 'e2e: ok   %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'e2e: FAIL %s\n' "$1" >&2; shift; [[ $# -eq 0 ]] || printf '       %s\n' "$@" >&2; }

# start_sluice LOGFILE UPSTREAM_PORT [ARGS...] -> sets SLUICE_PID, SLUICE_PORT (not waited for);
# diagnostics go to LOGFILE, access records (text) to LOGFILE.access
start_sluice() {
    local logfile=$1 up=$2
    shift 2
    SLUICE_PORT="$(free_port)"
    lib_bg env RUST_LOG=info "$BIN" --listen "127.0.0.1:$SLUICE_PORT" --upstream "127.0.0.1:$up" \
        --access-log "$logfile.access" "$@" </dev/null >/dev/null 2>"$logfile"
    SLUICE_PID=$BG_PID
}

# wait_access LOGFILE N: up to 30 x 0.1 s for N access records in LOGFILE.access (written
# at most 1 s after the response)
wait_access() {
    local logfile=$1 n=$2 i
    for ((i = 0; i < 30; i++)); do
        [[ "$(grep -c 'client=' "$logfile.access" 2>/dev/null || true)" -ge "$n" ]] && return 0
        sleep 0.1
    done
    return 1
}

# --- 0. command line (each run bounded by timeout 5) ----------------------------
# run_cli ARGS...: sets CLI_RC and CLI_OUT (stdout+stderr)
run_cli() {
    set +e
    CLI_OUT="$(timeout 5 "$BIN" "$@" 2>&1 </dev/null)"
    CLI_RC=$?
    set -e
}
LP="127.0.0.1:$(free_port)"
run_cli --help
if [[ $CLI_RC -eq 0 && "$CLI_OUT" == *--upstream* ]]; then pass "--help exits 0 and lists --upstream"
else fail "--help" "exit $CLI_RC, output: ${CLI_OUT:0:300}"; fi
run_cli --version
if [[ $CLI_RC -eq 0 && "$CLI_OUT" == *sluice* ]]; then pass "--version exits 0: $CLI_OUT"
else fail "--version" "exit $CLI_RC, output: ${CLI_OUT:0:300}"; fi
run_cli --listen "$LP" --upstream 127.0.0.1:9 --no-such-flag
if [[ $CLI_RC -eq 2 && "$CLI_OUT" == *no-such-flag* ]]; then pass "unknown flag: exit 2, names the flag"
else fail "unknown flag" "expected exit 2 and a message naming --no-such-flag; got exit $CLI_RC (124 = still running after 5 s): ${CLI_OUT:0:300}"; fi
run_cli --listen "$LP" --upstream 127.0.0.1:9 --keepalive-timeout soon
if [[ $CLI_RC -eq 2 && "$CLI_OUT" == *keepalive-timeout* ]]; then pass "bad duration: exit 2, names the flag"
else fail "bad duration" "expected exit 2 and a message naming --keepalive-timeout; got exit $CLI_RC (124 = still running after 5 s): ${CLI_OUT:0:300}"; fi
run_cli --listen "$LP" --upstream 127.0.0.1:9 --high-watermark 1024 --low-watermark 4096
if [[ $CLI_RC -eq 2 && "$CLI_OUT" == *watermark* ]]; then pass "low >= high watermark: exit 2, names the flag"
else fail "watermarks" "expected exit 2 and a message naming the watermark; got exit $CLI_RC (124 = still running after 5 s): ${CLI_OUT:0:300}"; fi

# A busy address: sluice refuses it (exit 1, naming it); demo.sh says so too.
BUSY_PORT="$(free_port)"
lib_bg python3 -m http.server --bind 127.0.0.1 "$BUSY_PORT" </dev/null >/dev/null 2>&1
BUSY_PID=$BG_PID
wait_port "$BUSY_PID" "$BUSY_PORT" "python3 http.server (busy port)"
run_cli --listen "127.0.0.1:$BUSY_PORT" --upstream 127.0.0.1:9
if [[ $CLI_RC -eq 1 && "$CLI_OUT" == *"bind() to 127.0.0.1:$BUSY_PORT failed: Address already in use"* ]]; then
    pass "busy address: exit 1, names the address and the OS error"
else fail "busy address" "expected exit 1 and 'bind() to 127.0.0.1:$BUSY_PORT failed'; got exit $CLI_RC: ${CLI_OUT:0:300}"; fi
set +e
DEMO_OUT="$(SLUICE_PORT="$BUSY_PORT" SLUICE_BIN="$BIN" timeout 30 "$LIB_DIR/demo.sh" --once 2>&1 </dev/null)"
DEMO_RC=$?
set -e
if [[ $DEMO_RC -ne 0 && "$DEMO_OUT" == *"port $BUSY_PORT in use"* && "$DEMO_OUT" != *checksum* ]]; then
    pass "demo.sh with a busy SLUICE_PORT: 'port in use', no checksum check"
else fail "demo.sh busy port" "exit $DEMO_RC: ${DEMO_OUT:0:300}"; fi
stop_pid "$BUSY_PID"

# --- start upstream (python http.server, HTTP/1.0) and sluice ----------------
UP_PORT="$(free_port)"
lib_bg python3 -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$UP_PORT" \
    </dev/null >"$TMP/upstream.log" 2>&1
UP_PID=$BG_PID
wait_http "$UP_PID" "http://127.0.0.1:$UP_PORT/small.txt" "python3 http.server" "$TMP/upstream.log"

SLOG="$TMP/sluice.log"
ADMIN="127.0.0.1:$(free_port)"
start_sluice "$SLOG" "$UP_PORT" --admin "$ADMIN"
MAIN_PID=$SLUICE_PID
P=$SLUICE_PORT
BASE="http://127.0.0.1:$P"
wait_http "$MAIN_PID" "$BASE/small.txt" "sluice" "$SLOG"
log "upstream 127.0.0.1:$UP_PORT (pid $UP_PID), sluice 127.0.0.1:$P (pid $MAIN_PID)"
# wait_http's probes went through the proxy too: count access lines from here
wait_access "$SLOG" 1 || true
BASE_LINES="$(grep -c 'client=' "$SLOG.access" || true)"
EXPECTED=0

# --- 1. 10 MiB download, checksum ----------------------------------------------
set +e
out="$(curl -sS --max-time 60 -o "$TMP/big.out" -w '%{http_code} %{size_download}' "$BASE/big.bin" 2>&1)"; rc=$?
set -e
EXPECTED=$((EXPECTED + 1))
got_sum="$( [[ -f "$TMP/big.out" ]] && sha256sum <"$TMP/big.out" | cut -d' ' -f1 || echo none)"
if [[ $rc -eq 0 && "$out" == "200 10485760" && "$got_sum" == "$BIG_SUM" ]]; then
    pass "GET /big.bin (10 MiB) through the proxy: sha256 matches"
else
    fail "GET /big.bin" "curl exit $rc, status/size: $out" "sha256 expected $BIG_SUM" "sha256 got      $got_sum"
fi
rm -f "$TMP/big.out"

# --- 2. several requests on one downstream connection ---------------------------
set +e
out="$(curl -sS --max-time 30 -w '%{http_code} %{num_connects}\n' \
    -o /dev/null "$BASE/small.txt?ka=1" -o /dev/null "$BASE/small.txt?ka=2" \
    -o /dev/null "$BASE/small.txt?ka=3" -o /dev/null "$BASE/small.txt?ka=4" 2>&1)"; rc=$?
set -e
EXPECTED=$((EXPECTED + 4))
# curl's num_connects: 1 when the transfer opened a connection, 0 when it reused one
want=$'200 1\n200 0\n200 0\n200 0'
if [[ $rc -eq 0 && "$out" == "$want" ]]; then
    pass "4 GETs in one curl: all 200, connection reused (num_connects 1 0 0 0)"
else
    fail "keep-alive downstream" "curl exit $rc; expected lines '200 1','200 0','200 0','200 0'; got:" "$(printf '%s' "$out" | tr '\n' '|')"
fi

# --- 3. Content-Length + Transfer-Encoding -> 400, close, nothing upstream ----
set +e
out="$(python3 - "$P" <<'PY' 2>&1
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /smuggle-cl-te HTTP/1.1\r\nHost: e2e\r\nContent-Length: 5\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
data = b""
closed = False
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            closed = True
            break
        data += chunk
except socket.timeout:
    pass
status = data.split(b"\r\n", 1)[0].decode("latin-1")
print(status + (" closed" if closed else " open"))
PY
)"; rc=$?
set -e
EXPECTED=$((EXPECTED + 1))
re_400='^HTTP/1\.[01] 400( .*)? closed$'
sleep 0.2
if grep -q 'smuggle-cl-te' "$TMP/upstream.log"; then
    fail "CL+TE request" "the request reached the upstream:" "$(grep 'smuggle-cl-te' "$TMP/upstream.log")"
elif [[ $rc -eq 0 && "$out" =~ $re_400 ]]; then
    pass "Content-Length + Transfer-Encoding: 400, connection closed, upstream untouched"
else
    fail "CL+TE request" "expected 'HTTP/1.1 400 ... closed'; got (exit $rc): $out"
fi

# --- 4. HEAD, then GET on the same connection ---------------------------------
set +e
out="$(python3 - "$P" <<'PY' 2>&1
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("HEAD", "/big.bin?head=1")
r = c.getresponse()
body = r.read()
print(r.status, r.getheader("Content-Length"), len(body))
c.request("GET", "/small.txt?after-head=1")
r = c.getresponse()
print(r.status, r.read().decode().strip())
PY
)"; rc=$?
set -e
EXPECTED=$((EXPECTED + 2))
want=$'200 10485760 0\n200 hello from the upstream'
if [[ $rc -eq 0 && "$out" == "$want" ]]; then
    pass "HEAD /big.bin: 200, Content-Length 10485760, no body; next GET on that connection OK"
else
    fail "HEAD" "expected:" "$(printf '%s' "$want" | tr '\n' '|')" "got (exit $rc):" "$(printf '%s' "$out" | tr '\n' '|')"
fi

# --- 5. one access line per request -------------------------------------------
if wait_access "$SLOG" $((BASE_LINES + EXPECTED)); then :; fi
ALOG="$SLOG.access"
n="$(grep -c 'client=' "$ALOG" || true)"
if [[ "$n" -eq $((BASE_LINES + EXPECTED)) ]]; then
    pass "access log: $EXPECTED lines for $EXPECTED requests"
else
    fail "access log count" "expected $((BASE_LINES + EXPECTED)) access lines ($BASE_LINES from readiness probes), found $n"
fi

A="client=127\.0\.0\.1:[0-9]+"
H="host=\"[^\"]*\""
U="upstream=127\.0\.0\.1:$UP_PORT"
UPA="127\.0\.0\.1:$UP_PORT"
MS="[0-9]+\.[0-9]+"
RID="request_id=[0-9a-f]{32}" # request_id (on by default): a new id, 32 hex digits
check_line() { # check_line NAME REGEX
    if grep -Eq "$2" "$ALOG"; then pass "access line: $1"
    else fail "access line: $1" "no line matches: $2"; fi
}
check_line "GET /big.bin" "^[0-9T:.-]+Z $A \"GET /big\.bin HTTP/1\.1\" $H status=200 bytes_in=0 bytes_out=10485760 duration_ms=$MS $U upstream_connect_ms=$MS upstream_first_byte_ms=$MS upstream_conn=new retries=0 upstream_addr=\"$UPA\" upstream_status=\"200\" tls=- tls_cipher=- sni=- tls_resumed=- $RID termination=complete$"
check_line "POST CL+TE answered by the proxy" "$A \"POST /smuggle-cl-te HTTP/1\.1\" $H status=400 bytes_in=0 bytes_out=[0-9]+ duration_ms=$MS upstream=- upstream_connect_ms=- upstream_first_byte_ms=- upstream_conn=- retries=0 upstream_addr=- upstream_status=- tls=- tls_cipher=- sni=- tls_resumed=- $RID termination=proxy_error$"
check_line "HEAD /big.bin" "$A \"HEAD /big\.bin\?head=1 HTTP/1\.1\" $H status=200 bytes_in=0 bytes_out=0 duration_ms=$MS $U .* upstream_conn=(new|reused) retries=0 upstream_addr=\"$UPA\" upstream_status=\"200\" tls=- tls_cipher=- sni=- tls_resumed=- $RID termination=complete$"
# the four keep-alive requests share one client port
ports="$(grep -E "\"GET /small\.txt\?ka=[1-4] HTTP/1\.1\" $H status=200" "$ALOG" | grep -oE 'client=127\.0\.0\.1:[0-9]+' | sort -u)"
if [[ "$(grep -c . <<<"$ports" || true)" -eq 1 ]] && \
   [[ "$(grep -cE "\"GET /small\.txt\?ka=[1-4] HTTP/1\.1\" $H status=200" "$ALOG" || true)" -eq 4 ]]; then
    pass "access lines: 4 keep-alive GETs from one client port (${ports#client=})"
else
    fail "access lines for keep-alive GETs" "expected 4 lines with one client port; ports: $(tr '\n' ' ' <<<"$ports")"
fi
big_bytes="$(grep -E '"GET /big\.bin HTTP/1\.1"' "$ALOG" | grep -oE 'bytes_out=[0-9]+' | head -n1 | cut -d= -f2)"
if [[ "$big_bytes" == 10485760 ]]; then pass "access line: bytes_out=$big_bytes for the 10 MiB body"
else fail "access line bytes_out" "expected bytes_out=10485760 for /big.bin, got '${big_bytes:-none}'"; fi

# --- 5b. /metrics parsed by the Prometheus text parser; counters move ----------
if lib_py_module prometheus_client prometheus_client python3-prometheus-client; then
    # metric SERIES_FILTER: the sum of sluice_requests_total samples with code_class=2xx,
    # termination=complete, and the request-duration histogram's count, as parsed
    scrape() {
        curl -sS --max-time 5 "http://$ADMIN/metrics" | python3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
ok = dur = 0
names = set()
for fam in text_string_to_metric_families(sys.stdin.read()):
    names.add(fam.name)
    for s in fam.samples:
        if s.name == "sluice_requests_total" and s.labels.get("code_class") == "2xx" \
                and s.labels.get("termination") == "complete":
            ok += s.value
        if s.name == "sluice_request_duration_seconds_count":
            dur += s.value
need = {"sluice_requests", "sluice_request_duration_seconds", "sluice_upstream_first_byte_seconds",
        "sluice_client_connections", "sluice_upstream_connects", "sluice_pool_evictions",
        "sluice_bytes", "sluice_watermark_pauses", "sluice_buffered_bytes"}
missing = need - names
print(int(ok), int(dur), ",".join(sorted(missing)) or "-")'
    }
    set +e
    before="$(scrape 2>&1)"
    for i in 1 2 3 4 5; do curl -sS -o /dev/null --max-time 5 "$BASE/small.txt?metrics=$i"; done
    sleep 0.3
    after="$(scrape 2>&1)"
    set -e
    read -r ok0 dur0 _ <<<"$before"
    read -r ok1 dur1 missing <<<"$after"
    if [[ "$ok0" =~ ^[0-9]+$ && "$ok1" =~ ^[0-9]+$ && $((ok1 - ok0)) -eq 5 && $((dur1 - dur0)) -eq 5 \
          && "$missing" == "-" ]]; then
        pass "/metrics parsed by prometheus_client: 2xx complete +5, duration count +5 after 5 GETs"
    else
        fail "/metrics" "before: $before" "after: $after (want +5 and no missing families)"
    fi
    EXPECTED=$((EXPECTED + 5))
else
    fail "/metrics" "python prometheus_client could not be installed (pip or apt-get)"
fi
for ep in healthz readyz status; do
    code="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://$ADMIN/$ep" || true)"
    if [[ "$code" == 200 ]]; then pass "admin /$ep: 200"; else fail "admin /$ep" "got $code"; fi
done

# --- 6. upstream keep-alive pool with an HTTP/1.1 upstream --------------------
UP11_PORT="$(free_port)"
lib_bg env PYTHONPATH="$LIB_DIR" python3 -m sluicebench.upstream files "$UP11_PORT" "$TMP/www" \
    </dev/null >"$TMP/upstream11.log" 2>&1
UP11_PID=$BG_PID
wait_http "$UP11_PID" "http://127.0.0.1:$UP11_PORT/small.txt" "python3 HTTP/1.1 upstream"
SLOG11="$TMP/sluice11.log"
start_sluice "$SLOG11" "$UP11_PORT"
wait_http "$SLUICE_PID" "http://127.0.0.1:$SLUICE_PORT/small.txt" "sluice (HTTP/1.1 upstream)" "$SLOG11"
wait_access "$SLOG11" 1 || true
set +e
out="$(curl -sS --max-time 30 -w '%{http_code}\n' \
    -o /dev/null "http://127.0.0.1:$SLUICE_PORT/small.txt?pool=1" \
    -o /dev/null "http://127.0.0.1:$SLUICE_PORT/small.txt?pool=2" 2>&1)"; rc=$?
set -e
wait_access "$SLOG11" 3 || true
if [[ $rc -eq 0 && "$out" == $'200\n200' ]] && \
   grep -Eq "\"GET /small\.txt\?pool=2 HTTP/1\.1\" $H status=200 .* upstream=127\.0\.0\.1:$UP11_PORT .* upstream_conn=reused " "$SLOG11.access"; then
    pass "HTTP/1.1 upstream: second request reused a pooled upstream connection"
else
    fail "upstream pool reuse" "curl exit $rc, statuses: $(tr '\n' ' ' <<<"$out")" "access lines:" \
        "$(cat "$SLOG11.access" || echo '(none)')"
fi

# --- 7. upstream down -> 502 ---------------------------------------------------
DEAD_PORT="$(free_port)"
SLOGD="$TMP/sluice-dead.log"
start_sluice "$SLOGD" "$DEAD_PORT"
wait_http "$SLUICE_PID" "http://127.0.0.1:$SLUICE_PORT/" "sluice (dead upstream)" "$SLOGD"
set +e
out="$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SLUICE_PORT/down" 2>&1)"; rc=$?
set -e
if [[ $rc -eq 0 && "$out" == 502 ]]; then pass "upstream refusing connections: 502"
else fail "dead upstream" "expected 502, got (curl exit $rc): $out"; fi

# --- 7b. HTTPS: curl --cacert against --listen-tls, byte for byte --------------
SLOGT="$TMP/sluice-tls.log"
: >"$SLOGT"
if ! command -v openssl >/dev/null 2>&1 && [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y openssl >/dev/null 2>&1 \
        || { apt-get update >/dev/null 2>&1 && apt-get install -y openssl >/dev/null 2>&1; } || true
fi
if command -v openssl >/dev/null 2>&1 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -nodes -days 2 -keyout "$TMP/tls-key.pem" -out "$TMP/tls-cert.pem" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost >/dev/null 2>&1; then
    TLS_PORT="$(free_port)"
    start_sluice "$SLOGT" "$UP11_PORT" --listen-tls "127.0.0.1:$TLS_PORT" \
        --tls-cert "$TMP/tls-cert.pem" --tls-key "$TMP/tls-key.pem"
    wait_http "$SLUICE_PID" "http://127.0.0.1:$SLUICE_PORT/small.txt" "sluice (TLS listener)" "$SLOGT"
    set +e
    sum="$(curl -sS --max-time 30 --cacert "$TMP/tls-cert.pem" --resolve "localhost:$TLS_PORT:127.0.0.1" \
        "https://localhost:$TLS_PORT/big.bin" | sha256sum | cut -d' ' -f1)"
    plain="$(curl -sS --max-time 5 "http://127.0.0.1:$TLS_PORT/small.txt" 2>&1)"
    set -e
    if [[ "$sum" == "$BIG_SUM" ]]; then pass "HTTPS: curl --cacert downloads 10 MiB byte for byte"
    else fail "HTTPS download" "sha256 $sum, want $BIG_SUM" "$(tail -n 5 "$SLOGT")"; fi
    if [[ "$plain" == *"speaks HTTPS"* ]]; then pass "plain HTTP on the TLS port: 400 naming HTTPS"
    else fail "plain HTTP on the TLS port" "got: $plain"; fi
    # HTTP/2 by ALPN (docs/http2.md): curl offers h2 and gets it.
    set +e
    h2="$(curl -sS --max-time 30 --http2 --cacert "$TMP/tls-cert.pem" --resolve "localhost:$TLS_PORT:127.0.0.1" \
        -o "$TMP/h2-big.bin" -w '%{http_version}' "https://localhost:$TLS_PORT/big.bin" 2>&1)"
    set -e
    sum="$(sha256sum "$TMP/h2-big.bin" 2>/dev/null | cut -d' ' -f1)"
    if [[ "$h2" == 2 && "$sum" == "$BIG_SUM" ]]; then pass "HTTP/2 over TLS (ALPN h2): 10 MiB byte for byte"
    else fail "HTTP/2 over TLS" "http_version $h2, sha256 $sum, want 2 and $BIG_SUM" "$(tail -n 5 "$SLOGT")"; fi
else
    fail "HTTPS" "no openssl to make a test certificate (apt-get install openssl)"
fi

# --- 7b'. HTTPS at size: 100 MiB down and up byte for byte, slow TLS readers --
# (issue 23's test list; here rather than in cargo test: the release binary
# moves 100 MiB in a second, a debug build in tens). The upstream streams a
# file for GET and answers a POST with its body's length and sha256.
SLOGB="$TMP/sluice-tls-big.log"
: >"$SLOGB"
if [[ -f "$TMP/tls-cert.pem" ]]; then
    head -c 104857600 /dev/urandom >"$TMP/www/big100.bin"
    BIG100_SUM="$(sha256sum <"$TMP/www/big100.bin" | cut -d' ' -f1)"
    cat >"$TMP/sink.py" <<'PY'
import hashlib, http.server, shutil, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        path = sys.argv[2] + "/" + self.path.lstrip("/").split("?")[0]
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404)
            return
        with f:
            f.seek(0, 2)
            self.send_response(200)
            self.send_header("Content-Length", str(f.tell()))
            self.end_headers()
            f.seek(0)
            try:
                shutil.copyfileobj(f, self.wfile, 65536)
            except OSError:
                pass
    def do_POST(self):
        left = int(self.headers["Content-Length"])
        h, n = hashlib.sha256(), 0
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
            left -= len(chunk)
        body = f"{n} {h.hexdigest()}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
    SINK_PORT="$(free_port)"
    lib_bg python3 "$TMP/sink.py" "$SINK_PORT" "$TMP/www" </dev/null >"$TMP/sink.log" 2>&1
    SINK_PID=$BG_PID
    wait_http "$SINK_PID" "http://127.0.0.1:$SINK_PORT/small.txt" "python3 sink upstream" "$TMP/sink.log"
    TLSB_PORT="$(free_port)"
    start_sluice "$SLOGB" "$SINK_PORT" --listen-tls "127.0.0.1:$TLSB_PORT" \
        --tls-cert "$TMP/tls-cert.pem" --tls-key "$TMP/tls-key.pem"
    TLSB_PID=$SLUICE_PID
    wait_http "$TLSB_PID" "http://127.0.0.1:$SLUICE_PORT/small.txt" "sluice (TLS, big)" "$SLOGB"
    HTTPS=(--cacert "$TMP/tls-cert.pem" --resolve "localhost:$TLSB_PORT:127.0.0.1")
    set +e
    sum="$(curl -sS --max-time 60 "${HTTPS[@]}" "https://localhost:$TLSB_PORT/big100.bin" \
        | sha256sum | cut -d' ' -f1)"
    up="$(curl -sS --max-time 60 "${HTTPS[@]}" --data-binary "@$TMP/www/big100.bin" \
        -H 'Content-Type: application/octet-stream' "https://localhost:$TLSB_PORT/upload" 2>&1)"
    set -e
    if [[ "$sum" == "$BIG100_SUM" ]]; then pass "HTTPS: 100 MiB download byte for byte"
    else fail "HTTPS 100 MiB download" "sha256 $sum, want $BIG100_SUM" "$(tail -n 5 "$SLOGB")"; fi
    if [[ "$up" == "104857600 $BIG100_SUM" ]]; then pass "HTTPS: 100 MiB upload byte for byte"
    else fail "HTTPS 100 MiB upload" "upstream saw: $up" "want: 104857600 $BIG100_SUM" "$(tail -n 5 "$SLOGB")"; fi
    # Four readers at 10 kB/s of a 100 MiB body: the proxy reads the
    # upstream only as they drain (watermarks; rustls holds at most one
    # write's worth), so its RSS does not grow while they read.
    rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$TLSB_PID/status"; }
    SLOW_PIDS=()
    for _ in 1 2 3 4; do
        lib_bg curl -sS --max-time 7 --limit-rate 10k "${HTTPS[@]}" -o /dev/null \
            "https://localhost:$TLSB_PORT/big100.bin"
        SLOW_PIDS+=("$BG_PID")
    done
    sleep 1.5
    rss1="$(rss_kb)"
    sleep 4
    rss2="$(rss_kb)"
    for pid in "${SLOW_PIDS[@]}"; do stop_pid "$pid" 2 2>/dev/null || true; done
    if [[ -n "$rss1" && -n "$rss2" && $((rss2 - rss1)) -lt 1024 ]]; then
        pass "4 slow TLS readers (curl --limit-rate 10k): RSS flat (${rss1} kB -> ${rss2} kB over 4 s)"
    else
        fail "slow TLS readers' RSS" "RSS ${rss1:-?} kB after 1.5 s, ${rss2:-?} kB 4 s later (want < 1024 kB growth)"
    fi
    stop_pid "$TLSB_PID" 5 || true
    stop_pid "$SINK_PID" 5 || true
    rm -f "$TMP/www/big100.bin"
else
    fail "HTTPS at size" "no test certificate (see the HTTPS check above)"
fi

# --- 7b2. HTTP/2 in cleartext (--http2-cleartext): h2c and HTTP/1.1 on one port -----
SLOGC="$TMP/sluice-h2c.log"
start_sluice "$SLOGC" "$UP11_PORT" --http2-cleartext
wait_http "$SLUICE_PID" "http://127.0.0.1:$SLUICE_PORT/small.txt" "sluice (h2c)" "$SLOGC"
set +e
h2="$(curl -sS --max-time 30 --http2-prior-knowledge -o "$TMP/h2c-big.bin" -w '%{http_version}' \
    "http://127.0.0.1:$SLUICE_PORT/big.bin" 2>&1)"
h1="$(curl -sS --max-time 10 -o /dev/null -w '%{http_version} %{http_code}' "http://127.0.0.1:$SLUICE_PORT/small.txt" 2>&1)"
set -e
sum="$(sha256sum "$TMP/h2c-big.bin" 2>/dev/null | cut -d' ' -f1)"
if [[ "$h2" == 2 && "$sum" == "$BIG_SUM" && "$h1" == "1.1 200" ]]; then
    pass "h2c by prior knowledge: 10 MiB byte for byte; HTTP/1.1 on the same port"
else
    fail "h2c" "h2: version $h2, sha256 $sum; h1: $h1" "$(tail -n 5 "$SLOGC")"
fi
if wait_access "$SLOGC" 2 && grep -q '"GET /big.bin HTTP/2.0"' "$SLOGC.access"; then
    pass "access line: HTTP/2.0 for the h2c request"
else
    fail "h2c access line" "no HTTP/2.0 record" "$(cat "$SLOGC.access" 2>/dev/null || echo '(none)')"
fi

# --- 7c. PROXY protocol with a real HAProxy on both sides (when installed) ------
# curl from 127.0.0.2 -> HAProxy (mode tcp, send-proxy-v2) -> sluice
# (accept_proxy_protocol 127.0.0.1; its group send_proxy_protocol = "v2")
# -> HAProxy (accept-proxy, answers with the source it was given). Both
# hops must carry the client's 127.0.0.2, not the proxy's 127.0.0.1.
SLOGP="$TMP/sluice-pp.log"
: >"$SLOGP"
if ! command -v haproxy >/dev/null 2>&1 && [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    lib_apt haproxy || true
fi
if command -v haproxy >/dev/null 2>&1; then
    HA_IN="$(free_port)"
    HA_OUT="$(free_port)"
    PP_PORT="$(free_port)"
    HA_TLS="$(free_port)"
    PP_TLS="$(free_port)"
    cat >"$TMP/haproxy-pp.cfg" <<EOF
defaults
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend balancer
    mode tcp
    bind 127.0.0.1:$HA_IN
    default_backend to_sluice
backend to_sluice
    mode tcp
    server s 127.0.0.1:$PP_PORT send-proxy-v2
frontend balancer_tls
    mode tcp
    bind 127.0.0.1:$HA_TLS
    default_backend to_sluice_tls
backend to_sluice_tls
    mode tcp
    server s 127.0.0.1:$PP_TLS send-proxy-v2
frontend origin
    mode http
    bind 127.0.0.1:$HA_OUT accept-proxy
    http-request return status 200 content-type text/plain lf-string "src=%[src]"
EOF
    # The TLS listener (when the HTTPS check made a certificate): HAProxy
    # passes TLS through, its header before the ClientHello.
    PP_TLS_TOML=""
    if [[ -f "$TMP/tls-cert.pem" ]]; then
        PP_TLS_TOML="listen_tls = \"127.0.0.1:$PP_TLS\""
    fi
    cat >"$TMP/sluice-pp.toml" <<EOF
listen = "127.0.0.1:$PP_PORT"
$PP_TLS_TOML
accept_proxy_protocol = ["127.0.0.1/32"]
access_log = "$SLOGP.access"
[[upstream]]
name = "origin"
servers = ["127.0.0.1:$HA_OUT"]
send_proxy_protocol = "v2"
EOF
    if [[ -n "$PP_TLS_TOML" ]]; then
        printf '[[certificate]]\ncert = "%s"\nkey = "%s"\n' "$TMP/tls-cert.pem" "$TMP/tls-key.pem" \
            >>"$TMP/sluice-pp.toml"
    fi
    lib_bg haproxy -db -f "$TMP/haproxy-pp.cfg" </dev/null >"$TMP/haproxy-pp.log" 2>&1
    HA_PID=$BG_PID
    lib_bg env RUST_LOG=info "$BIN" --config "$TMP/sluice-pp.toml" </dev/null >/dev/null 2>"$SLOGP"
    PP_PID=$BG_PID
    wait_port "$PP_PID" "$PP_PORT" "sluice (PROXY protocol)" "$SLOGP"
    wait_port "$HA_PID" "$HA_IN" "haproxy" "$TMP/haproxy-pp.log"
    set +e
    out="$(curl -sS --max-time 5 --interface 127.0.0.2 "http://127.0.0.1:$HA_IN/who" 2>&1)"
    set -e
    if [[ "$out" == "src=127.0.0.2" ]] && wait_access "$SLOGP" 1 \
        && grep -q 'client=127\.0\.0\.2:' "$SLOGP.access"; then
        pass "PROXY v2 in from HAProxy and out to HAProxy: both see the client 127.0.0.2"
    else
        fail "PROXY protocol through HAProxy" "origin answered: $out" \
            "access: $(cat "$SLOGP.access" 2>/dev/null || echo '(none)')" "$(tail -n 5 "$SLOGP")"
    fi
    if [[ -n "$PP_TLS_TOML" ]]; then
        set +e
        out1="$(curl -sS --max-time 5 --interface 127.0.0.2 --http1.1 --cacert "$TMP/tls-cert.pem" \
            --resolve "localhost:$HA_TLS:127.0.0.1" "https://localhost:$HA_TLS/who-tls" 2>&1)"
        out2="$(curl -sS --max-time 5 --interface 127.0.0.2 --http2 --cacert "$TMP/tls-cert.pem" \
            --resolve "localhost:$HA_TLS:127.0.0.1" -w ' %{http_version}' "https://localhost:$HA_TLS/who-h2" 2>&1)"
        set -e
        if [[ "$out1" == "src=127.0.0.2" && "$out2" == "src=127.0.0.2 2" ]] && wait_access "$SLOGP" 3 \
            && [[ "$(grep -c 'client=127\.0\.0\.2:.*tls=TLSv1\.3' "$SLOGP.access")" == 2 ]]; then
            pass "PROXY v2 before the ClientHello from HAProxy (mode tcp): HTTPS and HTTP/2 see the client 127.0.0.2"
        else
            fail "PROXY protocol before TLS through HAProxy" "origin answered: $out1 / $out2" \
                "access: $(cat "$SLOGP.access" 2>/dev/null || echo '(none)')" "$(tail -n 5 "$SLOGP")"
        fi
    fi
else
    fail "PROXY protocol through HAProxy" "haproxy is not installed (apt-get install haproxy)"
fi

# --- 8. the proxies are still up and did not panic -----------------------------
for f in "$SLOG" "$SLOG11" "$SLOGD" "$SLOGT" "$SLOGB" "$SLOGP"; do
    if grep -q 'panicked' "$f"; then fail "no panic in $(basename "$f")" "$(grep -m3 -A2 'panicked' "$f")"; fi
done
if kill -0 "$MAIN_PID" 2>/dev/null; then pass "sluice still running after all checks"
else fail "sluice still running" "it exited; last log lines:" "$(tail -n 5 "$SLOG")"; fi

if [[ $FAILED -ne 0 ]]; then
    printf '\ne2e: sluice log (%s):\n' "$SLOG" >&2
    tail -n 40 "$SLOG" >&2 || true
fi
printf 'e2e: %d passed, %d failed\n' "$PASSED" "$FAILED"
[[ $FAILED -eq 0 ]]

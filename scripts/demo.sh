#!/usr/bin/env bash
# Runs sluice in front of a real upstream (python3's http.server) on 127.0.0.1
# and shows what to try with curl.
#
# Usage: scripts/demo.sh          run until Ctrl-C
#        scripts/demo.sh --once   run the curl commands, print results, exit
# Env:   SLUICE_PORT=8080         port for sluice (default: a free port)
#        RUST_LOG=debug           sluice's log level (default: info)
#        SLUICE_BIN=path          skip the build and run this binary
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ONCE=0
case "${1:-}" in
    "") ;;
    --once) ONCE=1 ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument '$1' (try --once or --help)" >&2; exit 2 ;;
esac

die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
TOOLS=(python3 curl sha256sum)
[[ -n "${SLUICE_BIN:-}" ]] || TOOLS+=(cargo)
for tool in "${TOOLS[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done

PIDS=()
TMP=""
stop_pid() { # TERM, up to 5 s, then KILL
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local pid
    for pid in ${PIDS[@]+"${PIDS[@]}"}; do stop_pid "$pid"; done
    if [[ -n "$TMP" && -d "$TMP" ]]; then rm -rf -- "$TMP"; fi
}
trap cleanup EXIT
trap 'echo; echo "demo: stopping"; exit 0' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}
wait_http() { # PID URL NAME [LOGFILE]: up to 50 x 0.1 s
    local pid=$1 url=$2 name=$3 logfile=${4:-} i
    for ((i = 0; i < 50; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            [[ -z "$logfile" ]] || tail -n 20 "$logfile" >&2 || true
            die "$name (pid $pid) exited during startup"
        fi
        if curl -s -o /dev/null --max-time 1 "$url"; then return 0; fi
        sleep 0.1
    done
    die "$name did not answer $url within 5 s"
}

if [[ -n "${SLUICE_BIN:-}" ]]; then
    BIN="$SLUICE_BIN"
else
    echo "demo: cargo build --release"
    cargo build --release || die "cargo build --release failed"
    BIN="${CARGO_TARGET_DIR:-target}/release/sluice"
fi
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")"
mkdir -p "$TMP/www"
cat >"$TMP/www/index.html" <<'HTML'
<!doctype html>
<html><head><title>sluice demo</title></head>
<body><h1>Hello through sluice</h1><p>Served by python3 http.server, proxied by sluice.</p></body></html>
HTML
head -c 1048576 /dev/urandom >"$TMP/www/1mib.bin"
SUM="$(sha256sum <"$TMP/www/1mib.bin" | cut -d' ' -f1)"

UP_PORT="$(free_port)"
if [[ -n "${SLUICE_PORT:-}" ]]; then
    [[ "$SLUICE_PORT" =~ ^[0-9]+$ ]] || die "SLUICE_PORT must be a port number, got '$SLUICE_PORT'"
    PORT="$SLUICE_PORT"
else
    PORT="$(free_port)"
fi
URL="http://127.0.0.1:$PORT"

python3 -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$UP_PORT" \
    </dev/null >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_http "$UP_PID" "http://127.0.0.1:$UP_PORT/" "python3 http.server"

export RUST_LOG="${RUST_LOG:-info}"
SLOG="$TMP/sluice.log"
if [[ $ONCE -eq 1 ]]; then # logs go to a file, shown at the end
    "$BIN" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" </dev/null 2>"$SLOG" &
else # access lines appear live in this terminal
    "$BIN" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" </dev/null &
fi
SLUICE_PID=$!
PIDS+=("$SLUICE_PID")
if [[ $ONCE -eq 1 ]]; then wait_http "$SLUICE_PID" "$URL/" "sluice" "$SLOG"
else wait_http "$SLUICE_PID" "$URL/" "sluice"; fi

cat <<EOF

sluice  http://127.0.0.1:$PORT  (pid $SLUICE_PID)  ->  upstream python3 http.server 127.0.0.1:$UP_PORT (pid $UP_PID)
serving $TMP/www: index.html, 1mib.bin (sha256 $SUM)

Try:
  curl -i $URL/
  curl -v $URL/ $URL/      # 2nd request: "Re-using existing connection"
  curl -s $URL/1mib.bin | sha256sum    # expect $SUM

EOF

if [[ $ONCE -eq 0 ]]; then
    echo "sluice's access log follows; Ctrl-C stops both servers."
    # Runs until Ctrl-C; leaves early if either server dies.
    while kill -0 "$SLUICE_PID" 2>/dev/null && kill -0 "$UP_PID" 2>/dev/null; do
        sleep 1
    done
    die "a server exited on its own (sluice pid $SLUICE_PID, upstream pid $UP_PID)"
fi

# --once: run the commands above and check what they return
FAILED=0
echo "\$ curl -i $URL/"
curl -sS -i --max-time 10 "$URL/" || FAILED=1
echo
echo "\$ curl -v $URL/ $URL/   (connection lines only)"
curl -sS -v --max-time 10 -o /dev/null -o /dev/null "$URL/" "$URL/" 2>&1 |
    grep -Ei 'connected to|re-?using|left intact|^< HTTP' || FAILED=1
conns="$(curl -sS --max-time 10 -w '%{num_connects} ' -o /dev/null -o /dev/null "$URL/" "$URL/" || true)"
if [[ "$conns" == "1 0 " ]]; then
    echo "=> keep-alive: the second request reused the first connection"
else
    echo "=> keep-alive: NOT reused (new connects per request: $conns)"; FAILED=1
fi
echo
echo "\$ curl -s $URL/1mib.bin | sha256sum"
got="$(curl -sS --max-time 30 "$URL/1mib.bin" | sha256sum | cut -d' ' -f1 || true)"
echo "$got"
if [[ "$got" == "$SUM" ]]; then
    echo "=> checksum matches the original"
else
    echo "=> checksum MISMATCH (expected $SUM)"; FAILED=1
fi
sleep 0.2 # the access line is written just after the response
echo
echo "sluice access log:"
grep 'access ' "$SLOG" || { echo "(no access lines)"; FAILED=1; }
echo
if [[ $FAILED -eq 0 ]]; then echo "demo --once: OK"; else echo "demo --once: FAILED" >&2; fi
exit "$FAILED"

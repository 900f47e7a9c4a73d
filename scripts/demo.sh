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

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

ONCE=0
case "${1:-}" in
    "") ;;
    --once) ONCE=1 ;;
    -h | --help) lib_help 2 9 "$1" ;;
    *) echo "demo: unknown argument '$1' (try --once or --help)" >&2; exit 2 ;;
esac

need python3 curl sha256sum
# Ctrl-C reaches sluice too (the terminal signals the whole group) and it
# begins its own stop: let it finish before the EXIT trap's TERM, which
# would be a second stop signal ("stopping now").
trap 'echo; echo "demo: stopping"; [[ -n "${SLUICE_PID:-}" ]] && wait_gone "$SLUICE_PID" 3; exit 0' INT

lib_tmp
lib_sluice_bin
BIN="$SLUICE"
TMP="$LIB_TMP"
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
    # Another server there would answer the probes below in sluice's place.
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port $PORT in use: something already listens on 127.0.0.1:$PORT (choose another SLUICE_PORT)"
    fi
else
    PORT="$(free_port)"
fi
URL="http://127.0.0.1:$PORT"

lib_bg python3 -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$UP_PORT" \
    </dev/null >"$TMP/upstream.log" 2>&1
UP_PID=$BG_PID
wait_http "$UP_PID" "http://127.0.0.1:$UP_PORT/" "python3 http.server"

export RUST_LOG="${RUST_LOG:-info}"
SLOG="$TMP/sluice.log"
if [[ $ONCE -eq 1 ]]; then # logs go to a file, shown at the end
    lib_bg "$BIN" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" </dev/null >"$SLOG" 2>&1
else # access lines appear live in this terminal
    lib_bg "$BIN" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" </dev/null
fi
SLUICE_PID=$BG_PID
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
sleep 1.2 # access records are written at most 1 s after the response
echo
echo "sluice access log:"
grep 'termination=' "$SLOG" || { echo "(no access lines)"; FAILED=1; }
echo
if [[ $FAILED -eq 0 ]]; then echo "demo --once: OK"; else echo "demo --once: FAILED" >&2; fi
exit "$FAILED"

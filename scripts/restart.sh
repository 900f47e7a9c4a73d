#!/usr/bin/env bash
# Zero-downtime restart, measured: replace the running sluice by a new one on
# the same port, several times, while a client load runs, and count what the
# clients saw go wrong.
#
# The recipe (what each swap does, and what an operator does by hand):
#   1. start the new sluice on the same address with --takeover (SO_REUSEPORT:
#      both listen; without --takeover sluice refuses a busy address);
#   2. wait until it serves (here: until its log shows an access record);
#   3. SIGTERM the old one: it accepts what is already queued on its
#      listener, closes the listener, closes idle keep-alive clients, lets
#      in-flight exchanges finish (with Connection: close), exits 0;
#   4. wait for it to exit (bounded by --drain-timeout).
# A connection that reaches the old listener's accept queue in the instant
# between its last accept and its close would be reset by the kernel; Linux's
# net.ipv4.tcp_migrate_req=1 moves such connections to another listener of
# the port instead. This script sets it when it can (root) and says whether
# it is on.
#
# Usage: scripts/restart.sh             (from any directory)
# Env:   SWAPS=6            number of swaps (at least 5 is the point)
#        MIGRATE=on|off|keep set net.ipv4.tcp_migrate_req to 1 / 0 (root), or
#                           leave it as it is (default on); restored at exit
#        WORKERS=N          run each sluice with --workers N (default 1)
#        LOAD_THREADS=4     client threads of each kind (keep-alive, new conn)
#        SLUICE_BIN=path    use this binary instead of building the release one
# Prints requests and failures; exits 1 on any failure (or any sluice that
# did not exit 0 after SIGTERM), 0 otherwise.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
LIB_STOP_GRACE=15 # a draining sluice may take --drain-timeout (10 s)

SWAPS="${SWAPS:-6}"
MIGRATE="${MIGRATE:-on}"
WORKERS="${WORKERS:-1}"
LOAD_THREADS="${LOAD_THREADS:-4}"

need python3 timeout

# --- processes and cleanup (lib.sh stops LIB_PIDS and removes LIB_TMP) -------------
lib_tmp
TMP="$LIB_TMP"
# --- binary ---------------------------------------------------------------------
lib_sluice_bin
BIN="$SLUICE"

lib_tcp_migrate "$MIGRATE"

# --- load: keep-alive and new-connection clients ----------------------------------
cat >"$TMP/load.py" <<'EOF'
# load.py PORT STOPFILE MAX_SECONDS THREADS: THREADS keep-alive clients and
# THREADS new-connection clients until STOPFILE exists. Failures: connect
# refused/reset, a reset or EOF before a response on a new connection,
# non-200, a short or wrong body. A request whose *reused* keep-alive
# connection was closed by the server before any byte of the response came
# is sent again on a new connection, as HTTP clients do (RFC 9112 §9.3.1):
# counted as ka_resent, not as a failure (it is not one for the user).
import collections, http.client, os, sys, threading, time

port, stopfile, max_s, nthreads = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
start = time.time()
lock = threading.Lock()
counts = collections.Counter()
examples = []
SIZES = [100, 4000, 40000]

def stopped():
    return os.path.exists(stopfile) or time.time() - start > max_s

def body_for(n):
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]

def fail(kind, detail):
    with lock:
        counts["failures"] += 1
        counts["fail_" + kind] += 1
        if len(examples) < 15:
            examples.append("%.3f %s: %s" % (time.time() - start, kind, detail))

def check(status, body, size):
    if status != 200:
        fail("status", status)
        return False
    if body != body_for(size):
        fail("body", "%d of %d bytes" % (len(body), size))
        return False
    return True

def new_conn_request(size, kind):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        c.request("GET", "/%d" % size, headers={"Connection": "close"})
        r = c.getresponse()
        body = r.read()
    except ConnectionRefusedError as e:
        fail("refused", "new connection: %s" % e); return
    except http.client.IncompleteRead as e:
        fail("short_body", repr(e)[:80]); return
    except (ConnectionResetError, BrokenPipeError) as e:
        fail("reset", "new connection: %r" % e); return
    except Exception as e:
        fail(type(e).__name__, "new connection: %r" % e); return
    finally:
        c.close()
    if check(r.status, body, size):
        with lock:
            counts["requests"] += 1
            counts[kind] += 1

def new_worker(i):
    n = i
    while not stopped():
        new_conn_request(SIZES[n % len(SIZES)], "new_conn")
        n += 1

def ka_worker(i):
    conn = None
    n = i
    while not stopped():
        size = SIZES[n % len(SIZES)]
        n += 1
        fresh = conn is None
        if fresh:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        try:  # phase 1: request sent, status line read
            conn.request("GET", "/%d" % size)
            r = conn.getresponse()
        except ConnectionRefusedError as e:
            conn.close(); conn = None
            fail("refused", e); continue
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
            conn.close(); conn = None
            if fresh:
                fail("reset", "new keep-alive connection: %r" % e); continue
            with lock:
                counts["ka_resent"] += 1
            new_conn_request(size, "keepalive")
            continue
        except Exception as e:
            conn.close(); conn = None
            fail(type(e).__name__, e); continue
        try:  # phase 2: the body
            body = r.read()
        except Exception as e:
            conn.close(); conn = None
            fail("short_body", repr(e)[:80]); continue
        if check(r.status, body, size):
            with lock:
                counts["requests"] += 1
                counts["keepalive"] += 1
        if r.will_close:
            conn.close(); conn = None
    if conn is not None:
        conn.close()

threads = [threading.Thread(target=ka_worker, args=(i,)) for i in range(nthreads)]
threads += [threading.Thread(target=new_worker, args=(i,)) for i in range(nthreads)]
for t in threads: t.start()
for t in threads: t.join()
secs = time.time() - start
print("requests=%d failures=%d keepalive=%d new_conn=%d ka_resent=%d seconds=%.1f" % (
    counts["requests"], counts["failures"], counts["keepalive"], counts["new_conn"],
    counts["ka_resent"], secs))
kinds = sorted(k for k in counts if k.startswith("fail_"))
if kinds:
    print("failure kinds: " + " ".join("%s=%d" % (k[5:], counts[k]) for k in kinds))
for e in examples:
    print("  " + e)
sys.exit(1 if counts["failures"] else 0)
EOF

# --- upstream: HTTP/1.1 keep-alive, GET /N answers N bytes (scripts/sluicebench/upstream.py)
UP_PORT="$(free_port)"
lib_bg env PYTHONPATH="$LIB_DIR" python3 -m sluicebench.upstream sized "$UP_PORT" \
    </dev/null >"$TMP/upstream.log" 2>&1
wait_port "$BG_PID" "$UP_PORT" "upstream" "$TMP/upstream.log"

PORT="$(free_port)"
SERIAL=0
# start_sluice: a new sluice on $PORT; sets SPID and SLOG
start_sluice() {
    SERIAL=$((SERIAL + 1))
    SLOG="$TMP/sluice-$SERIAL.log"
    lib_bg env RUST_LOG=info "$BIN" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$UP_PORT" \
        --workers "$WORKERS" --drain-timeout 10s ${TAKEOVER:+--takeover} </dev/null >"$SLOG" 2>&1
    SPID=$BG_PID
}
# wait_log PID LOG PATTERN SECONDS: until LOG has a line matching PATTERN
wait_log() {
    local pid=$1 logfile=$2 pattern=$3 secs=$4 i
    for ((i = 0; i < secs * 20; i++)); do
        grep -q -- "$pattern" "$logfile" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$logfile" >&2; die "sluice pid $pid exited"; }
        sleep 0.05
    done
    tail -n 20 "$logfile" >&2
    die "sluice pid $pid: no '$pattern' in its log within ${secs}s"
}
# wait_exit PID SECONDS: sets EXIT_RC (124 if still running, then killed)
wait_exit() {
    local pid=$1 secs=$2
    if ! wait_gone "$pid" "$secs"; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        EXIT_RC=124
        return
    fi
    set +e
    wait "$pid"
    EXIT_RC=$?
    set -e
}

TAKEOVER=""
start_sluice
TAKEOVER=1
OLD_PID=$SPID
OLD_LOG=$SLOG
wait_log "$OLD_PID" "$OLD_LOG" "listening on" 10
log "upstream 127.0.0.1:$UP_PORT, sluice 127.0.0.1:$PORT (pid $OLD_PID, --workers $WORKERS)"

STOP="$TMP/stop"
LOAD_T0=$(date +%s%N)
lib_bg python3 "$TMP/load.py" "$PORT" "$STOP" 120 "$LOAD_THREADS" </dev/null >"$TMP/load.out" 2>&1
LOAD_PID=$BG_PID
wait_log "$OLD_PID" "$OLD_LOG" "termination=" 10
sleep 0.5

BAD_EXITS=0
for ((swap = 1; swap <= SWAPS; swap++)); do
    start_sluice
    wait_log "$SPID" "$SLOG" "termination=" 10 # the new one serves
    sleep 0.3
    t0=$(date +%s%N)
    kill -TERM "$OLD_PID"
    wait_exit "$OLD_PID" 15
    ms=$((($(date +%s%N) - t0) / 1000000))
    old_requests="$(grep -c 'termination=' "$OLD_LOG" || true)"
    log "swap $swap at t=$(((t0 - LOAD_T0) / 1000000)) ms: pid $OLD_PID → $SPID; old one exited with $EXIT_RC after ${ms} ms ($old_requests requests served)"
    [[ "$EXIT_RC" -eq 0 ]] || BAD_EXITS=$((BAD_EXITS + 1))
    OLD_PID=$SPID
    OLD_LOG=$SLOG
    sleep 0.5
done

sleep 0.5
touch "$STOP"
set +e
timeout 30 tail --pid="$LOAD_PID" -f /dev/null
wait "$LOAD_PID"
LOAD_RC=$?
set -e
kill -TERM "$OLD_PID"
wait_exit "$OLD_PID" 15
[[ "$EXIT_RC" -eq 0 ]] || BAD_EXITS=$((BAD_EXITS + 1))

log "load: $(head -n 1 "$TMP/load.out")"
tail -n +2 "$TMP/load.out" | sed 's/^/restart:   /'
if grep -q 'panicked' "$TMP"/sluice-*.log; then
    grep -h -m3 -A2 'panicked' "$TMP"/sluice-*.log >&2
    die "a sluice process panicked"
fi
if [[ "$LOAD_RC" -ne 0 || "$BAD_EXITS" -ne 0 ]]; then
    log "FAILED: load exit $LOAD_RC, $BAD_EXITS sluice processes did not exit 0 after SIGTERM"
    exit 1
fi
log "OK: $SWAPS swaps, no failed request"

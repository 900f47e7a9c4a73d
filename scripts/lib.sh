# shellcheck shell=bash
# Shared helpers for every shell script in scripts/ (the Python side is the
# package scripts/sluicebench/). Source it right after `set -euo pipefail`.
#
# It sets ROOT (the repo root, found from this file's location) and LIB_DIR
# (scripts/), installs an EXIT trap that stops every PID in LIB_PIDS (by PID:
# TERM, then KILL after LIB_STOP_GRACE s, default 5), runs lib_exit_hook if
# the script defines one, and removes LIB_TMP; and defines:
#   die MSG...            print "NAME: MSG" to stderr, exit 1
#   log MSG...            print "NAME: MSG" to stdout
#   need TOOL...          die unless every TOOL is in PATH
#   lib_help FIRST LAST ARG   for -h/--help as ARG: print the script's comment
#                         lines FIRST..LAST and exit 0
#   lib_tmp               create LIB_TMP, a private temporary directory
#   lib_sluice_bin        build the release binary, copy it to $LIB_TMP/sluice
#                         and set SLUICE to that copy (a concurrent rebuild by
#                         someone else cannot swap the binary under a run)
#   lib_bg CMD...         run CMD in the background (redirections on the call
#                         apply to it), remember its PID in LIB_PIDS and BG_PID
#   stop_pid PID [SECS]   TERM, wait up to SECS (LIB_STOP_GRACE), then KILL
#   wait_gone PID SECS    up to SECS for PID to exit (status 1 if it still runs)
#   lib_py ARGS           python3 ARGS with scripts/ on PYTHONPATH
#   lib_run_python ARGS   lib_py ARGS in the background, wait for it and
#                         return its exit status (signals reach our traps)
#   lib_drive SCRIPT.py ARGS   lib_tmp, lib_sluice_bin, then
#                         lib_run_python SCRIPT.py --bin SLUICE --tmp LIB_TMP ARGS
#   free_port             print a TCP port on 127.0.0.1 that was free just now
#   wait_http PID URL NAME [LOG]  up to 5 s until curl gets URL; dies if PID exits
#   wait_port PID PORT NAME [LOG] up to 5 s until 127.0.0.1:PORT accepts
#   lib_tcp_migrate on|off|keep   set net.ipv4.tcp_migrate_req to 1 / 0 (root;
#                         restored at exit) or leave it; logs whether it is on
# Env: SLUICE_BIN=path    use this binary instead of building
#      SLUICE_NO_BUILD=1  use target/release/sluice as it is (no cargo build)
#      CARGO_TARGET_DIR   honoured when looking for the built binary

LIB_NAME="$(basename "${BASH_SOURCE[1]:-sluice-script}" .sh)"
LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$LIB_DIR/.." && pwd)"
LIB_PIDS=()
LIB_TMP=""
LIB_STOP_GRACE=5
SLUICE=""
BG_PID=""

die() {
    printf '%s: %s\n' "$LIB_NAME" "$*" >&2
    exit 1
}

log() { printf '%s: %s\n' "$LIB_NAME" "$*"; }

need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
    done
}

lib_apt() { # PKG...: apt-get install -y, after one apt-get update per run
    if [[ -z "${LIB_APT_UPDATED:-}" ]]; then
        apt-get update -qq >/dev/null || return 1
        LIB_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

lib_py_module() { # MODULE PIP_NAME DEB_PKG: make `python3 -c 'import MODULE'` work (pip, else apt)
    python3 -c "import $1" 2>/dev/null && return 0
    python3 -m pip install --quiet "$2" >/dev/null 2>&1 && python3 -c "import $1" 2>/dev/null && return 0
    lib_apt "$3" && python3 -c "import $1" 2>/dev/null
}

lib_help() { # FIRST LAST ARG
    case "${3:-}" in
        -h | --help) sed -n "$1,$2p" "${BASH_SOURCE[1]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    esac
}

wait_gone() { # PID SECS: up to SECS (20 looks a second) for PID to exit; status 1 if it still runs
    local pid=$1 secs=$2 i
    for ((i = 0; i < secs * 20; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    ! kill -0 "$pid" 2>/dev/null
}

stop_pid() { # TERM, up to SECS, then KILL; never by name
    local pid=$1 secs=${2:-$LIB_STOP_GRACE}
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" "$secs" || kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

LIB_MIGRATE_OLD=""
LIB_MIGRATE_SYSCTL=/proc/sys/net/ipv4/tcp_migrate_req

lib_cleanup() {
    local pid
    for pid in ${LIB_PIDS[@]+"${LIB_PIDS[@]}"}; do stop_pid "$pid"; done
    if [[ -n "$LIB_MIGRATE_OLD" ]]; then
        printf '%s\n' "$LIB_MIGRATE_OLD" >"$LIB_MIGRATE_SYSCTL" 2>/dev/null || true
    fi
    if declare -F lib_exit_hook >/dev/null; then lib_exit_hook || true; fi
    if [[ -n "$LIB_TMP" && -d "$LIB_TMP" ]]; then rm -rf -- "$LIB_TMP"; fi
}
trap lib_cleanup EXIT
trap 'echo "$LIB_NAME: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM HUP

lib_tmp() {
    LIB_TMP="$(mktemp -d "${TMPDIR:-/tmp}/sluice-$LIB_NAME.XXXXXX")"
}

lib_sluice_bin() {
    local src
    [[ -n "$LIB_TMP" ]] || lib_tmp
    if [[ -n "${SLUICE_BIN:-}" ]]; then
        src="$SLUICE_BIN"
    else
        src="${CARGO_TARGET_DIR:-$ROOT/target}/release/sluice"
        [[ "$src" == /* ]] || src="$ROOT/$src"
        if [[ "${SLUICE_NO_BUILD:-0}" != 1 ]]; then
            need cargo
            # --quiet hides cargo's progress: say that a first build is long.
            if [[ -x "$src" ]]; then
                echo "$LIB_NAME: cargo build --release" >&2
            else
                echo "$LIB_NAME: cargo build --release (a first build takes a few minutes)" >&2
            fi
            (cd "$ROOT" && cargo build --release --quiet) ||
                die "cargo build --release failed (SLUICE_NO_BUILD=1 runs the binary already built)"
        fi
    fi
    [[ -x "$src" ]] || die "sluice binary not found or not executable: $src"
    cp -- "$src" "$LIB_TMP/sluice"
    SLUICE="$LIB_TMP/sluice"
}

lib_bg() { # CMD must be a program, not a shell function (its PID is the program's)
    "$@" &
    BG_PID=$!
    LIB_PIDS+=("$BG_PID")
}

lib_py() {
    PYTHONPATH="$LIB_DIR${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"
}

lib_run_python() {
    local rc=0
    lib_bg env PYTHONPATH="$LIB_DIR${PYTHONPATH:+:$PYTHONPATH}" python3 "$@" </dev/null
    wait "$BG_PID" || rc=$?
    return "$rc"
}

lib_drive() { # SCRIPT.py ARGS...: build, then run scripts/SCRIPT.py --bin --tmp ARGS
    local script=$1
    shift
    need python3
    [[ -n "$LIB_TMP" ]] || lib_tmp
    lib_sluice_bin
    lib_run_python "$LIB_DIR/$script" --bin "$SLUICE" --tmp "$LIB_TMP" "$@"
}

free_port() {
    lib_py -m sluicebench.net free-port
}

# wait_http PID URL NAME [LOGFILE]: poll up to 50 x 0.1 s until URL answers
wait_http() {
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

# wait_port PID PORT NAME [LOGFILE]: poll up to 50 x 0.1 s until 127.0.0.1:PORT accepts
wait_port() {
    local pid=$1 port=$2 name=$3 logfile=${4:-} i
    for ((i = 0; i < 50; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            [[ -z "$logfile" ]] || tail -n 20 "$logfile" >&2 || true
            die "$name (pid $pid) exited during startup"
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "$name did not accept on 127.0.0.1:$port within 5 s"
}

# lib_tcp_migrate on|off|keep: net.ipv4.tcp_migrate_req=1 moves connections
# queued on a closing SO_REUSEPORT listener to another listener of the port
# (Linux >= 5.14) instead of resetting them; sets it when root, restores it
# at exit, and logs whether it is on.
lib_tcp_migrate() {
    local mode=$1 current want="" now
    if [[ ! -r "$LIB_MIGRATE_SYSCTL" ]]; then
        log "net.ipv4.tcp_migrate_req: not available on this kernel (OFF)"
        return
    fi
    current="$(cat "$LIB_MIGRATE_SYSCTL")"
    case "$mode" in
        on) want=1 ;;
        off) want=0 ;;
        keep) ;;
        *) die "MIGRATE must be on, off or keep" ;;
    esac
    if [[ -n "$want" && "$current" != "$want" ]]; then
        if [[ "$(id -u)" -eq 0 ]] &&
            { sysctl -q -w "net.ipv4.tcp_migrate_req=$want" >/dev/null 2>&1 ||
                printf '%s\n' "$want" >"$LIB_MIGRATE_SYSCTL" 2>/dev/null; }; then
            LIB_MIGRATE_OLD="$current"
        else
            log "could not set net.ipv4.tcp_migrate_req=$want (needs root and a writable /proc/sys)"
        fi
    fi
    now="$(cat "$LIB_MIGRATE_SYSCTL")"
    if [[ "$now" == 1 ]]; then
        log "net.ipv4.tcp_migrate_req=1: ON (queued connections of a closing listener migrate)"
    else
        log "net.ipv4.tcp_migrate_req=$now: OFF (a connection racing a listener's close may be reset)"
    fi
}

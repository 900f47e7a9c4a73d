#!/usr/bin/env python3
"""One of three upstreams killed and restarted under load (ARCHITECTURE.md
§13): sluice with a group of the three, then nginx doing the same job.

Driven by scripts/groups_kill.sh, which builds the release binary, installs
wrk and nginx when it can, and passes --bin and --tmp. Everything runs on
127.0.0.1; every process started here is stopped here by its own PID; every
wait is bounded.

The upstreams: this file run as `groups_kill.py serve PORT` (its own
process): sluicebench.upstream's `sized` handler (HTTP/1.1 keep-alive,
GET /N answers N bytes), which also counts the requests it answered;
`GET /__count` (asked directly, not through the proxy) returns
"REQUESTS HEALTH_CHECKS" (/healthz requests counted apart).

One job (sluice, then nginx on the same three upstreams):
  - the proxy in front of one group of the three: sluice with `[[upstream]]`
    (max_fails, fail_timeout, an active health_check, max_retries = 2, so a
    request may try every server once) or nginx with an `upstream` block
    (max_fails, fail_timeout; open-source nginx has no active checks);
  - wrk GETs /100 for SECONDS; at SECONDS/3 the second upstream is killed
    (SIGKILL, by its PID), at 2*SECONDS/3 it is started again on its port;
  - printed: requests, non-2xx (wrk counts "non-2xx or 3xx"; the upstreams
    only send 200), socket errors, retries and ejections (sluice: its
    `stopped:` log line; nginx: error-log lines), and the requests the
    restarted upstream answered after it came back.
Exit status 1 when sluice answered any GET with a non-2xx, wrk saw a socket
error against sluice, or sluice sent the restarted upstream no request.

`--hang` (issue 27) runs another job instead: every server hangs (three
listening sockets on 127.0.0.1 whose accept queues are full, so a connect
never completes), the proxies have `upstream_connect_timeout` /
`proxy_connect_timeout` 1 s, and once sluice's checks (interval 1 s,
fall 2) have marked them down — and nginx's passive accounting has seen
them fail — ten sequential GETs on new connections are timed. Printed per
proxy (and per `--old-bin`, a sluice built from another commit): each
answer's status and time, and the median. Exit status 1 if sluice took
1 s or more for any answer.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

from sluicebench import net, upstream
from sluicebench.origins import nginx_user_line
from sluicebench.procs import Proc, run_cmd, wait_for
from sluicebench.ready import wait_ready
from sluicebench.tools import find_tool, tool_path
from sluicebench.wrk import parse_wrk

HERE = os.path.abspath(__file__)
KILLED = 1  # index of the upstream that is killed and restarted


def say(msg):
    print("groups_kill: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# The upstream process
# ---------------------------------------------------------------------------


def serve_main(port):
    lock = threading.Lock()
    counts = {"requests": 0, "health": 0}

    class Counting(upstream.Sized):
        def do_GET(self):
            if self.path == "/__count":
                with lock:
                    body = b"%d %d" % (counts["requests"], counts["health"])
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            with lock:
                counts["health" if self.path == "/healthz" else "requests"] += 1
            super().do_GET()

    upstream.exit_on_term()
    upstream.Server(("127.0.0.1", port), Counting).serve_forever()


def start_upstream(tmp, i, port):
    p = Proc("upstream%d" % i, [sys.executable, HERE, "serve", str(port)],
             os.path.join(tmp, "upstream%d.log" % i))
    if not wait_for(lambda: not p.alive() or net.listening(port), 5) or not p.alive():
        raise RuntimeError("upstream %d did not listen on %d:\n%s" % (i, port, p.log_tail()))
    return p


def count(port):
    """(requests, health checks) an upstream answered so far."""
    status, body = net.http_get(port, "/__count")
    if status != 200:
        raise RuntimeError("upstream on %d: /__count status %d" % (port, status))
    a, b = body.split()
    return int(a), int(b)


# ---------------------------------------------------------------------------
# The proxies
# ---------------------------------------------------------------------------


def sluice_config(port, ups):
    servers = ", ".join('"127.0.0.1:%d"' % p for p in ups)
    return f"""listen = "127.0.0.1:{port}"
max_retries = 2
upstream_connect_timeout = "1s"

[[upstream]]
name = "app"
servers = [{servers}]
balance = "round_robin"
max_fails = 3
fail_timeout = "5s"
[upstream.health_check]
path = "/healthz"
interval = "1s"
timeout = "500ms"
rise = 2
fall = 2
expect_status = "200-399"
"""


def nginx_config(port, ups, d):
    servers = "".join("        server 127.0.0.1:%d max_fails=3 fail_timeout=5s;\n" % p for p in ups)
    temps = "".join("    %s_temp_path %s/%s_temp;\n" % (t, d, t)
                    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""{nginx_user_line()}
worker_processes 1;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
{temps}    access_log off;
    keepalive_requests 1000000;
    upstream app {{
{servers}        keepalive 64;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 1s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""


def start_proxy(kind, args, ups):
    """Starts sluice or nginx in front of UPS; returns (Proc, port, log path)."""
    port = net.free_port()
    d = os.path.join(args.tmp, "job-" + kind)
    os.makedirs(d, exist_ok=True)
    log = os.path.join(d, "log")
    if kind == "sluice":
        conf = os.path.join(d, "sluice.toml")
        with open(conf, "w") as f:
            f.write(sluice_config(port, ups))
        env = dict(os.environ, RUST_LOG="warn,sluice::event_loop=info,sluice::upstreams=info")
        p = Proc("sluice", [args.bin, "--config", conf], log, env=env)
    else:
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_config(port, ups, d))
        p = Proc("nginx", [tool_path("nginx"), "-p", d, "-c", conf, "-g", "daemon off;"], log)
        log = os.path.join(d, "error.log")
    wait_ready(p, port, "/100")
    return p, port, log


def proxy_counts(kind, text):
    """{name: number} read from the proxy's log after it stopped."""
    if kind == "sluice":
        m = re.search(r"stopped: (.*)", text)
        line = m.group(1) if m else ""
        out = {k: int(v) for k, v in re.findall(r"\b(retries|ejections|checks|checks_failed|marked_down)=(\d+)",
                                                 line)}
        connects = re.search(r"upstream_connects=(\d+)", line)
        out["upstream_connects"] = int(connects.group(1)) if connects else -1
        out["stop line"] = bool(m)
        return out
    return {
        # every failed try is passed to the next server (proxy_next_upstream)
        "failed tries": len(re.findall(r"\[error\].*(?:connect\(\) failed|prematurely closed|reset by peer)",
                                       text)),
        "ejections": text.count("upstream server temporarily disabled"),
    }


# ---------------------------------------------------------------------------
# One job
# ---------------------------------------------------------------------------


def job(kind, args, ups, ports):
    secs = args.seconds
    proxy, port, log = start_proxy(kind, args, ports)
    before = [count(p) for p in ports]
    wrk = [tool_path("wrk"), "-t%d" % args.threads, "-c%d" % args.connections, "-d%ds" % secs,
           "http://127.0.0.1:%d/100" % port]
    say("%s: %s; kill upstream %d at %d s, restart at %d s" % (kind, " ".join(wrk), KILLED, secs // 3,
                                                                 2 * secs // 3))
    out = {}
    t = threading.Thread(target=lambda: out.update(zip(("rc", "text"), run_cmd(wrk, secs + 30))))
    start = time.monotonic()
    t.start()
    time.sleep(secs / 3)
    victim = ups[KILLED]
    os.kill(victim.pid, signal.SIGKILL)
    killed_at = time.monotonic() - start
    victim.stop()
    time.sleep(max(0.0, start + 2 * secs / 3 - time.monotonic()))
    ups[KILLED] = start_upstream(args.tmp, KILLED, ports[KILLED])
    back_at = time.monotonic() - start
    t.join(secs + 60)
    after = [count(p) for p in ports]
    rc = proxy.stop(say=say)
    with open(log, errors="replace") as f:
        text = f.read()
    w = parse_wrk(out.get("text", ""))
    r = {
        "kind": kind,
        "wrk_rc": out.get("rc"),
        "requests": w["requests"],
        "rps": w["rps"],
        "non2xx": w["non2xx"],
        "socket_errors": w["socket_errors"],
        "killed_at": killed_at,
        "back_at": back_at,
        # the restarted upstream is a new process: its counts start at 0
        "after_restart": after[KILLED][0],
        "spread": [a[0] - (b[0] if i != KILLED else 0) for i, (a, b) in enumerate(zip(after, before))],
        "proxy_rc": rc,
        "counts": proxy_counts(kind, text),
        "wrk_text": out.get("text", ""),
    }
    if w["requests"] == 0:
        say("%s: wrk made no request:\n%s" % (kind, r["wrk_text"]))
    return r


# ---------------------------------------------------------------------------
# Every server hangs (--hang)
# ---------------------------------------------------------------------------


def blackhole():
    """A listening socket on 127.0.0.1 whose accept queue is full: a new
    connect to it hangs. Returns (listener, fillers, port)."""
    import socket

    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    port = lst.getsockname()[1]
    fillers = []
    for _ in range(64):  # bounded: backlog 0 queues one or two
        c = socket.socket()
        c.settimeout(0.2)
        try:
            c.connect(("127.0.0.1", port))
        except OSError:
            c.close()
            return lst, fillers, port
        fillers.append(c)
    raise RuntimeError("could not fill the accept queue of port %d" % port)


def timed_get(port, timeout=15.0):
    """One GET / on a new connection: (status, seconds); status 0 if none."""
    import socket

    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
            c.sendall(b"GET / HTTP/1.1\r\nHost: hang\r\nConnection: close\r\n\r\n")
            data = c.recv(64)
    except OSError:
        data = b""
    took = time.monotonic() - start
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return (int(m.group(1)) if m else 0), took


def hang_job(kind, binary, args, ports):
    """Starts `kind` in front of the hanging PORTS, waits for them to be
    known down, and times ten GETs."""
    port = net.free_port()
    d = os.path.join(args.tmp, "hang-%s-%d" % (kind, port))
    os.makedirs(d, exist_ok=True)
    log = os.path.join(d, "log")
    if kind == "nginx":
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_config(port, ports, d))
        p = Proc("nginx", [tool_path("nginx"), "-p", d, "-c", conf, "-g", "daemon off;"], log)
    else:
        conf = os.path.join(d, "sluice.toml")
        with open(conf, "w") as f:
            f.write(sluice_config(port, ports))
        p = Proc(kind, [binary, "--config", conf], log, env=dict(os.environ, RUST_LOG="warn"))
    wait_for(lambda: net.listening(port), 10.0)
    # sluice: 2 failed checks at 1 s (+ jitter); nginx: 3 failed tries per server.
    time.sleep(3.5)
    for _ in range(len(ports) * 3):
        timed_get(port)
    answers = [timed_get(port) for _ in range(10)]
    p.stop(say=say)
    return kind, answers


def took(t):
    """A time as ms under a second (0.1 ms precision), else in seconds."""
    return "%.1f ms" % (t * 1000) if t < 1.0 else "%.3f s" % t


def hang_main(args):
    holes = [blackhole() for _ in range(3)]
    ports = [h[2] for h in holes]
    runs = [("sluice", args.bin)]
    runs += [("sluice-old", b) for b in args.old_bin]
    if not args.no_nginx and find_tool("nginx"):
        runs.append(("nginx", None))
    results = []
    try:
        for kind, binary in runs:
            results.append(hang_job(kind, binary, args, ports))
    finally:
        Proc.stop_all(say=say)
        for lst, fillers, _ in holes:
            for c in fillers:
                c.close()
            lst.close()
    print("groups_kill --hang: 3 servers whose connects hang (ports %s), connect timeout 1 s,"
          " 10 sequential GETs each on a new connection" % ports)
    bad = []
    for kind, answers in results:
        times = sorted(t for _, t in answers)
        statuses = sorted(set(s for s, _ in answers))
        print("  %-11s statuses %s  median %s  max %s" % (kind, statuses, took(times[len(times) // 2]),
                                                      took(times[-1])))
        if kind == "sluice" and times[-1] >= 1.0:
            bad.append("sluice took %.3f s for an answer" % times[-1])
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


def report(r):
    c = r["counts"]
    se = r["socket_errors"]
    print("\n== %s ==" % r["kind"])
    print("  requests            %d  (%.0f/s)" % (r["requests"], r["rps"]))
    print("  non-2xx             %d" % r["non2xx"])
    print("  socket errors       connect %d, read %d, write %d, timeout %d" % se)
    print("  upstream %d killed   at %.1f s, restarted at %.1f s" % (KILLED, r["killed_at"], r["back_at"]))
    if r["kind"] == "sluice":
        print("  retries             %d" % c.get("retries", -1))
        print("  ejections           %d" % c.get("ejections", -1))
        print("  checks / failed     %d / %d" % (c.get("checks", -1), c.get("checks_failed", -1)))
        print("  marked down         %d" % c.get("marked_down", -1))
        print("  upstream connects   %d" % c.get("upstream_connects", -1))
        if not c.get("stop line"):
            print("  (no `stopped:` line in sluice's log; exit status %s)" % r["proxy_rc"])
    else:
        print("  failed tries        %d  (error log; each passed to the next server)" % c["failed tries"])
        print("  ejections           %d  (\"temporarily disabled\" in the error log)" % c["ejections"])
        print("  active checks       none (open-source nginx)")
    print("  requests per upstream  %s  (upstream %d: after its restart)" % (r["spread"], KILLED))
    print("  restarted upstream used again: %s (%d requests)"
          % ("yes" if r["after_restart"] > 0 else "NO", r["after_restart"]))


def main():
    if sys.argv[1:2] == ["serve"]:
        serve_main(int(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the sluice binary")
    ap.add_argument("--tmp", required=True, help="a private temporary directory")
    ap.add_argument("--seconds", type=int, default=60, help="wrk run per proxy (default 60)")
    ap.add_argument("--quick", action="store_true", help="10 s per proxy")
    ap.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    ap.add_argument("--no-nginx", action="store_true", help="skip the nginx comparison")
    ap.add_argument("--hang", action="store_true", help="every server hangs: time the answers (issue 27)")
    ap.add_argument("--old-bin", action="append", default=[], help="with --hang: another sluice to time too")
    args = ap.parse_args()
    if args.hang:
        return hang_main(args)
    if args.quick:
        args.seconds = 10
    if args.seconds < 6:
        ap.error("--seconds must be at least 6")
    if not find_tool("wrk"):
        say("wrk not found (scripts/groups_kill.sh installs it when run as root)")
        return 1
    kinds = ["sluice"]
    if args.no_nginx:
        pass
    elif find_tool("nginx"):
        kinds.append("nginx")
    else:
        say("nginx not installed: no comparison")
    ports = [net.free_port() for _ in range(3)]
    results = []
    try:
        ups = [start_upstream(args.tmp, i, p) for i, p in enumerate(ports)]
        for kind in kinds:
            results.append(job(kind, args, ups, ports))
    finally:
        Proc.stop_all(say=say)
    print("groups_kill: 3 upstreams (python http.server, ports %s), wrk -t%d -c%d, %d s per proxy"
          % (ports, args.threads, args.connections, args.seconds))
    for r in results:
        report(r)
    s = results[0]
    bad = []
    if s["requests"] == 0 or s["wrk_rc"] != 0:
        bad.append("wrk did not run against sluice (status %s)" % s["wrk_rc"])
    if s["non2xx"]:
        bad.append("sluice answered %d GETs with a non-2xx" % s["non2xx"])
    if any(s["socket_errors"]):
        bad.append("wrk saw socket errors against sluice")
    if s["after_restart"] == 0:
        bad.append("sluice sent the restarted upstream no request")
    if not s["counts"].get("stop line"):
        bad.append("sluice did not log its `stopped:` line")
    for b in bad:
        print("FAIL: " + b)
    if not bad:
        print("\nOK: sluice answered every GET with a 2xx and used the restarted upstream again")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

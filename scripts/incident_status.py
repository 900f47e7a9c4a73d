#!/usr/bin/env python3
"""An incident on loopback, shown the way an operator sees it (issue 27):
one group of four servers behind sluice (`--workers 2` by default), with
one server ejected by traffic, one held down by its health checks, one
put in maintenance through `sluice status --maintenance`, and one
healthy; then `/status` as JSON and `sluice status` as the table.

Driven by scripts/incident_status.sh, which builds the binary and passes
--bin and --tmp. Everything runs on 127.0.0.1; every process started here
is stopped here by its own PID; every wait is bounded.

The servers are this file run as `incident_status.py serve PORT KIND`:
  good       answers every request 200
  traffic    answers /health 200 and closes every other request unanswered
             (passes its checks, fails every try: ejected, max_fails 1)
  check      answers /health 500 and every other request 200 (checked down)
  spare      answers every request 200 (put in maintenance)

Exit status 1 if the states did not come as wanted within their bounds.
"""

import argparse
import http.server
import json
import os
import socketserver
import subprocess
import sys
import time

from sluicebench import net
from sluicebench.procs import Proc, wait_for


def say(msg):
    print("incident_status: " + msg, file=sys.stderr, flush=True)


def serve_main(port, kind):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            health = self.path == "/health"
            if kind == "traffic" and not health:
                self.close_connection = True
                return
            status = 500 if kind == "check" and health else 200
            body = b"%s\n" % kind.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    Server(("127.0.0.1", port), H).serve_forever()


def status(admin):
    """/status as JSON, or None."""
    import urllib.request

    try:
        with urllib.request.urlopen("http://%s/status" % admin, timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


def server(s, addr):
    for g in (s or {}).get("groups", []):
        for v in g.get("servers", []):
            if v.get("addr") == addr:
                return v
    return {}


def agreed(admin, addr, state):
    v = server(status(admin), addr)
    return v.get("state") == state and v.get("agreed") is True


def compact(v):
    """/status as JSON, each top-level key and each server on a line of
    its own (still one JSON value)."""
    one = lambda x: json.dumps(x, separators=(",", ":"))
    lines = []
    for k, val in v.items():
        if k == "groups":
            gs = []
            for g in val:
                head = {key: g[key] for key in g if key != "servers"}
                servers = ",\n    ".join(one(x) for x in g.get("servers", []))
                gs.append(one(head)[:-1] + ',"servers":[\n    ' + servers + "]}")
            lines.append('"groups":[' + ",\n  ".join(gs) + "]")
        else:
            lines.append("%s:%s" % (one(k), one(val)))
    return "{" + ",\n ".join(lines) + "}"


def main():
    if sys.argv[1:2] == ["serve"]:
        serve_main(int(sys.argv[2]), sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the sluice binary")
    ap.add_argument("--tmp", required=True, help="a private temporary directory")
    ap.add_argument("--workers", type=int, default=2, help="sluice workers (default 2)")
    ap.add_argument("--pretty", action="store_true", help="/status as sluice prints it (else a line per server)")
    args = ap.parse_args()
    kinds = ["traffic", "good", "check", "spare"]
    ports = {k: net.free_port() for k in kinds}
    addr = {k: "127.0.0.1:%d" % p for k, p in ports.items()}
    port, admin_port = net.free_port(), net.free_port()
    admin = "127.0.0.1:%d" % admin_port
    here = os.path.abspath(__file__)
    ok = True
    try:
        for k in kinds:
            Proc("server-" + k, [sys.executable, here, "serve", str(ports[k]), k],
                 os.path.join(args.tmp, "server-%s.log" % k))
        for k in kinds:
            if not wait_for(lambda: net.listening(ports[k]), 5.0):
                say("server %s did not listen" % k)
                return 1
        # The ejected server first: each worker's first pick (round-robin
        # starts at the first server) tries it once.
        servers = ", ".join('"%s"' % addr[k] for k in kinds)
        conf = os.path.join(args.tmp, "sluice.toml")
        with open(conf, "w") as f:
            f.write(
                'listen = "127.0.0.1:%d"\nadmin = "%s"\nadmin_write = true\nworkers = %d\n'
                'access_log = "off"\n\n[[upstream]]\nname = "app"\nmax_fails = 1\n'
                'fail_timeout = "30s"\nservers = [%s]\n\n[upstream.health_check]\n'
                'path = "/health"\ninterval = "1s"\ntimeout = "500ms"\nfall = 2\nrise = 2\n'
                % (port, admin, args.workers, servers))
        log = os.path.join(args.tmp, "sluice.log")
        sl = Proc("sluice", [args.bin, "--config", conf], log, env=dict(os.environ, RUST_LOG="info"))
        if not wait_for(lambda: net.listening(port) and status(admin), 10.0):
            say("sluice did not serve:\n" + sl.log_tail())
            return 1
        # Maintenance through the command line.
        subprocess.run([args.bin, "status", "--admin", admin, "--maintenance", "app", addr["spare"]],
                       check=True, timeout=10)
        if not wait_for(lambda: agreed(admin, addr["check"], "checked_down"), 10.0):
            say("the checked server was not checked down in every worker")
            ok = False
        # Requests on new connections until every worker tried the
        # traffic-failing server (at most 40).
        for _ in range(40):
            if agreed(admin, addr["traffic"], "ejected"):
                break
            net.http_get(port, "/")
            time.sleep(0.05)
        if not agreed(admin, addr["traffic"], "ejected"):
            say("the traffic-failing server was not ejected in every worker")
            ok = False
        if not agreed(admin, addr["spare"], "maintenance"):
            say("the spare server is not in maintenance in every worker")
            ok = False
        raw = subprocess.run([args.bin, "status", "--admin", admin, "--json"], capture_output=True,
                             text=True, timeout=10).stdout
        table = subprocess.run([args.bin, "status", "--admin", admin], capture_output=True, text=True,
                               timeout=10).stdout
        print("== GET /status (sluice --workers %d; servers: %s) ==" % (
            args.workers, ", ".join("%s %s" % (k, addr[k]) for k in kinds)))
        print(raw.rstrip() if args.pretty else compact(json.loads(raw)))
        print("\n== sluice status --admin %s ==" % admin)
        print(table.rstrip())
    finally:
        Proc.stop_all(say=say)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""bench.py's upstreams (the origin servers behind every peer): nginx
serving the static files, or scripts/bench/upstream.py (also the S4 sink);
each counts the requests and upstream connections it saw."""

import json
import os
import sys
import time

from .net import free_port, http_get
from .plan import LOAD_CPU, MAX_CONNS, SMALL_SIZE
from .procs import Proc
from .ready import wait_ready
from .runstate import pinned
from .templates import BENCH_DIR, fill
from .tools import tool_path


def nginx_user_line():
    """nginx's `user NAME;` line as root (the current user), else empty."""
    if os.geteuid() != 0:
        return ""
    import pwd

    return "user %s;" % pwd.getpwuid(os.geteuid()).pw_name


class NginxUpstream:
    """nginx serving /small and /files/*; counts upstream connections from
    an access log that holds $connection."""

    kind = "nginx"

    def __init__(self, tmp, www, nofile):
        self.dir = os.path.join(tmp, "upstream-nginx")
        os.makedirs(self.dir)
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        fill("nginx-upstream.conf.in", conf, {
            "USER": nginx_user_line(), "NOFILE": nofile, "WORKER_CONNECTIONS": MAX_CONNS + 1000,
            "DIR": self.dir, "PORT": self.port, "WWW": www,
            "SMALL_BODY": ("0123456789abcdef" * (SMALL_SIZE // 16 + 1))[:SMALL_SIZE],
        })
        self.log = os.path.join(self.dir, "access.log")
        self.proc = Proc("upstream nginx", pinned(LOAD_CPU, [
            tool_path("nginx"), "-p", self.dir, "-c", conf, "-g", "daemon off;"]),
            os.path.join(self.dir, "stderr.log"))
        wait_ready(self.proc, self.port)

    def mark(self):
        time.sleep(0.5)  # access log buffer flushes every 200 ms
        return os.path.getsize(self.log)

    def count_since(self, mark):
        """(requests, distinct upstream connections) logged since mark."""
        time.sleep(0.5)
        with open(self.log, "rb") as f:
            f.seek(mark)
            lines = f.read().split()
        return len(lines), len(set(lines))


class PyUpstream:
    """scripts/bench/upstream.py: the S4 sink, and the origin without nginx."""

    kind = "python"

    def __init__(self, tmp, www, name):
        self.port = free_port()
        self.proc = Proc(name, pinned(LOAD_CPU, [
            sys.executable, os.path.join(BENCH_DIR, "upstream.py"), "--port", str(self.port),
            "--root", www, "--small-size", str(SMALL_SIZE)]), os.path.join(tmp, name.replace(" ", "-") + ".log"))
        wait_ready(self.proc, self.port)

    def stats(self):
        _, body = http_get(self.port, "/__stats")
        d = json.loads(body)
        return d["requests"], d["connections"]

    def mark(self):
        return self.stats()

    def count_since(self, mark):
        r, c = self.stats()
        return r - mark[0], c - mark[1] - 1  # the /__stats GET opened one

"""HAProxy as a reverse-proxy peer for the measurement scripts: one config
(scripts/bench/haproxy.cfg.in: one thread, logging off, nginx-like timeouts)
filled here for bench.py and head_mem.py alike, run in the foreground
(`haproxy -db`) and stopped by its PID through procs.Proc."""

import os
import shutil

from . import net
from .procs import Proc, wait_for
from .templates import fill


def find():
    """The haproxy binary (PATH, else /usr/sbin, which a non-root PATH may
    lack), or None."""
    path = shutil.which("haproxy")
    if path:
        return path
    return "/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None


def write_config(path, port, upstream_port, maxconn, nofile, bind_opts=""):
    """Writes the peer's config to PATH: listen on 127.0.0.1:PORT (with
    BIND_OPTS after the address, e.g. " ssl crt FILE"), forward to
    127.0.0.1:UPSTREAM_PORT, MAXCONN connections (global and per frontend),
    `ulimit-n NOFILE`."""
    fill("haproxy.cfg.in", path, {"MAXCONN": maxconn, "NOFILE": nofile, "PORT": port,
                                  "UPSTREAM_PORT": upstream_port, "BIND_OPTS": bind_opts})


def start(name, tmp, upstream_port, maxconn, nofile):
    """Starts HAProxy NAME (its directory under TMP) on a free port in front
    of 127.0.0.1:UPSTREAM_PORT. Returns (Proc, port, dir); raises
    RuntimeError when haproxy is missing or does not listen within 10 s."""
    binary = find()
    if not binary:
        raise RuntimeError("haproxy not found")
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    port = net.free_port()
    cfg = os.path.join(d, "haproxy.cfg")
    write_config(cfg, port, upstream_port, maxconn, nofile)
    p = Proc(name, [binary, "-db", "-f", cfg], os.path.join(d, "stderr.log"))
    if not wait_for(lambda: net.listening(port), 10):
        raise RuntimeError(f"{name} did not start:\n{p.log_tail()}")
    return p, port, d

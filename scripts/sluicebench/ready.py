"""Waiting until a started server answers: a plain GET, or a TLS 1.3 GET
with the peer's probe (bench.py's peers and upstreams)."""

import shlex
import time

from . import tls as tlsbench
from .net import http_get


def wait_ready_tls(proc, port, path="/small", timeout=10.0):
    """wait_ready for a TLS peer: until a TLS 1.3 GET of PATH gets a 200;
    returns the peer's probe (version, cipher, resumes; sluicebench.tls)."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError("%s exited during startup (status %s): %s\n%s"
                               % (proc.name, proc.p.returncode, shlex.join(proc.argv), proc.log_tail()))
        try:
            facts = tlsbench.probe(port, path)
            if facts["status"] == 200:
                return facts
            last = "status %d" % facts["status"]
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.05)
    raise RuntimeError("%s did not answer a TLS GET %s on port %d within %.0f s (%s)" % (
        proc.name if proc else "?", path, port, timeout, last))


def wait_ready(proc, port, path="/small", timeout=10.0):
    """Polls GET PATH on 127.0.0.1:PORT every 50 ms until it gets a 200;
    raises RuntimeError when PROC exits first or after TIMEOUT s."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(
                "%s exited during startup (status %s): %s\n%s"
                % (proc.name, proc.p.returncode, shlex.join(proc.argv), proc.log_tail())
            )
        try:
            status, _ = http_get(port, path)
            if status == 200:
                return
            last = "status %d" % status
        except (OSError, ValueError, IndexError) as e:
            last = str(e)
        time.sleep(0.05)
    raise RuntimeError("%s did not answer GET %s on port %d within %.0f s (%s)" % (
        proc.name if proc else "?", path, port, timeout, last))

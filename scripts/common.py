"""Helpers shared by the measurement scripts (torture.py, idle_mem.py,
watermark_bench.py): loopback ports, readiness, stopping children by PID.
Python 3 stdlib only; imported from the scripts' own folder."""

import socket
import subprocess


class Fail(Exception):
    """A measurement that could not be made (printed, exit status 1)."""


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listening(port):
    """True once some socket listens on `port` (from /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        return any(int(l.split()[1].split(":")[1], 16) == port and l.split()[3] == "0A"
                   for l in list(f)[1:])


def stop(p, grace=3.0):
    """Stops child process `p` by its PID: TERM, then KILL after `grace` s."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

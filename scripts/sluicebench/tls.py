"""TLS for the measurement scripts (bench.py's T rows): one ECDSA P-256
certificate made with openssl for every peer, a probe that says what a
peer negotiates and whether it resumes, `openssl s_time`'s output read,
and the driver of the idle-connection client (tls_idle.py) in its own
process."""

import os
import re
import select
import socket
import ssl
import subprocess
import sys

from .net import read_response
from .procs import finish_piped


def make_cert(d, openssl="openssl"):
    """A self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 in
    directory D, made with openssl: (cert.pem, key.pem, combined.pem (both,
    for HAProxy's `crt`)). Raises RuntimeError when openssl fails."""
    os.makedirs(d, exist_ok=True)
    cert, key, both = (os.path.join(d, n) for n in ("cert.pem", "key.pem", "combined.pem"))
    argv = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "30", "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl req failed: %s" % (r.stdout + r.stderr).decode("utf-8", "replace")[-500:])
    with open(both, "w") as out:
        for p in (cert, key):
            with open(p) as f:
                out.write(f.read())
    return cert, key, both


def client_context(version=ssl.TLSVersion.TLSv1_3):
    """A client context for VERSION only that does not verify the
    certificate (the bench's own), offering ALPN http/1.1."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = version
    ctx.maximum_version = version
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def get(ctx, port, path, session=None, timeout=3.0):
    """One GET of PATH over a new TLS connection: (status, version, cipher,
    resumed, session). Raises OSError or ValueError."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path).encode())
        status, _, _, _ = read_response(s)
        return status, s.version(), s.cipher()[0], s.session_reused, s.session


def probe(port, path="/small"):
    """What a TLS peer on PORT negotiates with a TLS 1.3 client: {"status",
    "version", "cipher", "resumes"} (a second connection offered the
    first's session: resumed or not). Raises OSError or ValueError."""
    ctx = client_context()
    status, version, cipher, _, session = get(ctx, port, path)
    status2, _, _, resumed, _ = get(ctx, port, path, session=session)
    return {"status": status if status != 200 else status2, "version": version,
            "cipher": cipher, "resumes": bool(resumed)}


def parse_s_time(out):
    """`openssl s_time` output: {"conns", "new", "reused", "bytes_per_conn"}
    (the progress lines hold one '*' per new and one 'r' per resumed
    session); None without its summary line."""
    m = None
    for m in re.finditer(r"(\d+) connections in [\d.]+ real seconds, (\d+) bytes read per connection", out):
        pass
    if not m:
        return None
    marks = "".join(l.strip() for l in out.splitlines() if re.fullmatch(r"[*r]+", l.strip()))
    return {"conns": int(m.group(1)), "bytes_per_conn": int(m.group(2)), "new": marks.count("*"),
            "reused": marks.count("r")}


class IdleClient:
    """scripts/sluicebench/tls_idle.py in its own process (ARGV_PREFIX, e.g.
    taskset, in front): warm-up bursts, then COUNT idle TLS connections held
    until `close`. Each step waits for the next() call."""

    def __init__(self, port, count, path, argv_prefix=(), timeout=300.0):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.argv = list(argv_prefix) + [sys.executable, "-m", "sluicebench.tls_idle", "--port", str(port),
                                         "--count", str(count), "--path", path]
        self.timeout = timeout
        env = dict(os.environ, PYTHONPATH=here)
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)

    def line(self):
        """The client's next line (within the timeout), '' if it ended."""
        ready, _, _ = select.select([self.p.stdout], [], [], self.timeout)
        return self.p.stdout.readline().strip() if ready else ""

    def next(self):
        """Lets the client take its next step; returns its next line."""
        try:
            self.p.stdin.write("go\n")
            self.p.stdin.flush()
        except OSError:
            return ""
        return self.line()

    def stop(self):
        """Ends the client by its PID (closing what it holds)."""
        finish_piped(self.p)

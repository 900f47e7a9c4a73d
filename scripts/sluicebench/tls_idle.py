"""Idle TLS keep-alive connections, held by their own process (bench.py T5):
the load side needs a descriptor and a TLS session per connection, so it
runs apart from the script that reads the proxy's RSS, with its own
open-file limit.

    python3 -m sluicebench.tls_idle --port PORT --count N [--path /small]
        [--bursts 4] [--burst 250]

Steps, each announced by one line on stdout, each waiting for one line on
stdin before the next (so the parent reads the proxy's RSS in between):

  1. BURSTS bursts of BURST connections (all opened, each a TLS 1.3
     handshake and one GET, then every answer read, then all closed): what
     a burst of concurrent requests leaves behind is in the baseline.
     Prints "warm ERRORS".
  2. COUNT connections one after the other, each a TLS 1.3 handshake, one
     GET of PATH and its answer read, then kept open. Prints
     "held OPEN ERRORS ALIVE FIRST_ERROR": ALIVE of the first 200 still
     open after 1 s (no EOF, no reset, no stray bytes).
  3. Closes them all; prints "closed" and exits.

Certificates are not verified (the bench's own self-signed one); SNI
"localhost". Python 3 stdlib only.
"""

import argparse
import resource
import socket
import ssl
import sys
import time

from .net import read_response
from .tls import client_context


def open_one(ctx, port, req, errs):
    """One TLS connection that sent REQ and read a 200 for it, or None
    (the error appended to ERRS)."""
    s = None
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(req)
        status, _, _, _ = read_response(s)
        if status == 200:
            return s
        errs.append("status %d" % status)
    except (OSError, ValueError) as e:
        errs.append("%s: %s" % (type(e).__name__, e))
    if s is not None:
        s.close()
    return None


def burst(ctx, port, req, n, errs):
    """N connections opened (handshake and GET sent), then each answer read,
    then all closed."""
    held = []
    for _ in range(n):
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(req)
            held.append(s)
        except OSError as e:
            errs.append("%s: %s" % (type(e).__name__, e))
    for s in held:
        try:
            status, _, _, _ = read_response(s)
            if status != 200:
                errs.append("status %d" % status)
        except (OSError, ValueError) as e:
            errs.append("%s: %s" % (type(e).__name__, e))
        s.close()


def still_open(s):
    """True if TLS socket S has no EOF, no reset and no application data
    waiting (a NewSessionTicket is absorbed by the read)."""
    s.setblocking(False)
    try:
        s.recv(1)  # bytes or EOF: not an idle open connection
        return False
    except (ssl.SSLWantReadError, BlockingIOError):
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def step(line):
    print(line, flush=True)
    return sys.stdin.readline()


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m sluicebench.tls_idle")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--path", default="/small")
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--burst", type=int, default=250)
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds for opening COUNT connections")
    args = ap.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.count + 200
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    ctx = client_context()
    req = ("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % args.path).encode()
    errs = []
    for _ in range(args.bursts):
        burst(ctx, args.port, req, args.burst, errs)
    step("warm %d" % len(errs))
    errs = []
    socks = []
    deadline = time.monotonic() + args.time_limit
    for _ in range(args.count):
        if time.monotonic() > deadline:
            errs.append("time limit reached after %d connections" % len(socks))
            break
        s = open_one(ctx, args.port, req, errs)
        if s is not None:
            socks.append(s)
    time.sleep(1.0)
    alive = sum(1 for s in socks[:200] if still_open(s))
    first = (errs[0] if errs else "-").replace("\n", " ")
    step("held %d %d %d %s" % (len(socks), len(errs), alive, first))
    for s in socks:
        s.close()
    print("closed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

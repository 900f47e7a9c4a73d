"""Slow HTTP/2 streams, held by their own process (bench.py's H3): CONNS
connections, each with STREAMS concurrent GETs of PATH, each stream read
at RATE bytes/s by HTTP/2 flow control: the client announces a stream
window of WINDOW bytes (SETTINGS_INITIAL_WINDOW_SIZE) and then opens each
stream's window by RATE/10 bytes every 100 ms, whatever arrived, so the
server may send a stream at most WINDOW + RATE x seconds. The connection
window is opened wide (16 MiB) and credited back as DATA arrives, and the
sockets are read at once: the streams are slow, not the connections (the
server's per-stream flow control is what is measured, not TCP's).

    python3 -m sluicebench.h2slow --port PORT [--tls] [--conns 10]
        [--streams 10] [--rate 10000] [--window 16384] [--path /files/slow.bin]
        [--secs 60]

Prints "started OK ERRORS FIRST_ERROR" once every stream has its response
head and a first DATA byte (or 10 s passed), then runs until a line (or
EOF) on stdin or --secs, then prints "done OK BYTES RATE ERRORS
FIRST_ERROR" (OK: streams that got a 200 and were neither reset nor
ended; BYTES: DATA bytes in all; RATE: mean bytes/s per stream since the
start) and closes everything. Frames by hand (sluicebench.h2wire);
certificates are not verified (the bench's own). Python 3 stdlib only.
"""

import argparse
import os
import select
import socket
import ssl
import subprocess
import sys
import time

from . import h2wire as w
from .procs import finish_piped

CONN_WINDOW = 16 << 20  # connection window opened at the start (bytes)
TICK = 0.1  # seconds between two window openings of every stream


class Conn:
    """One HTTP/2 connection and its streams' progress."""

    def __init__(self, sock, sids):
        self.sock = sock
        self.reader = w.Reader()
        self.streams = {sid: {"status": None, "bytes": 0, "ended": False, "error": None} for sid in sids}
        self.credit = 0  # DATA bytes received, connection window not yet given back
        self.error = None

    def fileno(self):
        return self.sock.fileno()

    def open_streams(self):
        return [sid for sid, st in self.streams.items() if not st["ended"] and not st["error"]]


def connect(args, ctx):
    raw = socket.create_connection(("127.0.0.1", args.port), timeout=10)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if not ctx:
        return raw
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    if s.selected_alpn_protocol() != "h2":
        s.close()
        raise OSError("ALPN chose %r, not h2" % s.selected_alpn_protocol())
    return s


def start(args, ctx):
    """Opens every connection and sends its preface, settings and requests."""
    conns = []
    authority = "localhost:%d" % args.port
    scheme = "https" if ctx else "http"
    for _ in range(args.conns):
        sock = connect(args, ctx)
        sids = [1 + 2 * i for i in range(args.streams)]
        out = [w.PREFACE, w.settings([(w.ENABLE_PUSH, 0), (w.INITIAL_WINDOW_SIZE, args.window)]),
               w.window_update(0, CONN_WINDOW)]
        for sid in sids:
            out.append(w.headers(sid, w.request_block("GET", args.path, authority, scheme), end_stream=True))
        sock.sendall(b"".join(out))
        conns.append(Conn(sock, sids))
    return conns


def handle(c, frames):
    """Applies the frames read on connection C; returns the bytes to send back."""
    out = []
    for ftype, flags, sid, payload in frames:
        st = c.streams.get(sid)
        if ftype == w.SETTINGS and not flags & w.ACK:
            out.append(w.settings_ack())
        elif ftype == w.PING and not flags & w.ACK:
            out.append(w.ping(payload, ack=True))
        elif ftype == w.GOAWAY:
            code = int.from_bytes(payload[4:8], "big") if len(payload) >= 8 else -1
            c.error = c.error or "GOAWAY %s" % w.error_name(code)
        elif st is None:
            continue
        elif ftype == w.HEADERS:
            if st["status"] is None:
                st["status"] = w.status_of(w.header_block(flags, payload))
                if st["status"] != 200:
                    st["error"] = "status %s" % st["status"]
            if flags & w.END_STREAM:
                st["ended"] = True
        elif ftype == w.DATA:
            st["bytes"] += len(payload)
            c.credit += len(payload)
            if flags & w.END_STREAM:
                st["ended"] = True
        elif ftype == w.RST_STREAM:
            code = int.from_bytes(payload[:4], "big") if len(payload) >= 4 else -1
            st["error"] = "RST_STREAM %s" % w.error_name(code)
    if c.credit >= 16384:
        out.append(w.window_update(0, c.credit))
        c.credit = 0
    return b"".join(out)


def read(c):
    """Reads what connection C has (and what its TLS layer holds)."""
    chunks = []
    for _ in range(64):
        try:
            data = c.sock.recv(65536)
        except ssl.SSLWantReadError:
            break
        if not data:
            c.error = c.error or "connection closed"
            break
        chunks.append(data)
        if not isinstance(c.sock, ssl.SSLSocket) or not c.sock.pending():
            break
    if chunks:
        back = handle(c, c.reader.feed(b"".join(chunks)))
        if back:
            c.sock.sendall(back)


def tally(conns):
    """(ok streams, bytes, errors, first error)."""
    ok = total = errors = 0
    first = "-"
    for c in conns:
        for st in c.streams.values():
            total += st["bytes"]
            bad = st["error"] or c.error or (st["ended"] and "stream ended")
            if bad:
                errors += 1
                first = first if first != "-" else str(bad).replace(" ", "_")
            elif st["status"] == 200:
                ok += 1
    return ok, total, errors, first


def run(args):
    ctx = None
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
    t0 = time.monotonic()
    try:
        conns = start(args, ctx)
    except OSError as e:
        print("started 0 %d %s" % (args.conns * args.streams, str(e).replace(" ", "_")), flush=True)
        return 1
    started = False
    next_tick = time.monotonic() + TICK
    step = args.rate * TICK
    deadline = t0 + args.secs
    stdin_open = True
    for _ in range(int(args.secs / 0.01) + 1000):
        now = time.monotonic()
        if now >= deadline:
            break
        watch = [c for c in conns if not c.error] + ([sys.stdin] if stdin_open else [])
        ready, _, _ = select.select(watch, [], [], max(0.0, min(next_tick, deadline) - now))
        if sys.stdin in ready:
            stdin_open = False
            break
        for c in ready:
            try:
                read(c)
            except (OSError, ValueError) as e:
                c.error = c.error or "%s: %s" % (type(e).__name__, e)
        if time.monotonic() >= next_tick:
            next_tick += TICK
            for c in conns:
                if not c.error:
                    try:
                        c.sock.sendall(b"".join(w.window_update(sid, int(step)) for sid in c.open_streams()))
                    except OSError as e:
                        c.error = "%s: %s" % (type(e).__name__, e)
        if not started:
            every = all(st["status"] is not None and (st["bytes"] or st["error"])
                        for c in conns for st in c.streams.values())
            if every or time.monotonic() - t0 > 10 or all(c.error for c in conns):
                ok, _, errors, first = tally(conns)
                print("started %d %d %s" % (ok, errors, first), flush=True)
                started = True
    if not started:
        ok, _, errors, first = tally(conns)
        print("started %d %d %s" % (ok, errors, first), flush=True)
    ok, total, errors, first = tally(conns)
    secs = max(1e-3, time.monotonic() - t0)
    per_stream = total / max(1, args.conns * args.streams) / secs
    for c in conns:
        try:
            c.sock.close()
        except OSError:
            pass
    print("done %d %d %.0f %d %s" % (ok, total, per_stream, errors, first), flush=True)
    return 0


class Driver:
    """This client in its own process (ARGV_PREFIX, e.g. taskset, in
    front), driven by a measurement script: line() is its next line of
    output, stop() asks it to finish and returns its "done" line, kill()
    ends it by its PID if it still runs."""

    def __init__(self, port, tls, conns, streams, rate, window, secs, path="/files/slow.bin", argv_prefix=()):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.argv = list(argv_prefix) + [
            sys.executable, "-m", "sluicebench.h2slow", "--port", str(port), "--conns", str(conns),
            "--streams", str(streams), "--rate", str(rate), "--window", str(window), "--path", path,
            "--secs", str(secs)] + (["--tls"] if tls else [])
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONPATH=here))

    def line(self, timeout):
        """The client's next line within TIMEOUT s ('' if none, or it ended)."""
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        return self.p.stdout.readline().strip() if ready else ""

    def stop(self, timeout=30.0):
        """Asks the client to finish; its last line ("done ...")."""
        try:
            self.p.stdin.write("stop\n")
            self.p.stdin.flush()
        except OSError:
            pass
        return self.line(timeout)

    def kill(self):
        """Ends the client by its PID unless it already ended."""
        finish_piped(self.p)
        self.p.stdout.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", action="store_true", help="h2 over TLS (ALPN h2), else prior-knowledge h2c")
    ap.add_argument("--conns", type=int, default=10)
    ap.add_argument("--streams", type=int, default=10, help="streams per connection")
    ap.add_argument("--rate", type=int, default=10000, help="bytes/s per stream")
    ap.add_argument("--window", type=int, default=16384, help="SETTINGS_INITIAL_WINDOW_SIZE (bytes)")
    ap.add_argument("--path", default="/files/slow.bin")
    ap.add_argument("--secs", type=float, default=60.0, help="longest life (s)")
    args = ap.parse_args()
    if not (1 <= args.conns <= 1000 and 1 <= args.streams <= 100 and 10 <= args.rate and 0 <= args.window < 1 << 31
            and 0 < args.secs <= 3600):
        ap.error("--conns 1..1000, --streams 1..100, --rate >= 10, --window < 2^31, --secs 0..3600")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

"""The child processes of scripts/torture.py, each started as `torture.py SUB
ARGS` (torture.py's main hands SUB to them): the upstream (serve: a thread
per connection, its byte counters in a small shared file) and the two python
clients (paced_readers, uploader); and Shm, those counters' file, which
torture.py reads while they run. 127.0.0.1 only; every loop is bounded."""

import json
import mmap
import os
import socket
import struct
import threading
import time

from sluicebench import upstream
from sluicebench.net import read_head
from sluicebench.units import KiB

SEND_CHUNK = 64 * KiB


class Shm:
    """Little-endian int64 counters in a small mmap'd file, shared between processes."""

    def __init__(self, path, slots=4, create=False):
        if create:
            with open(path, "wb") as f:
                f.write(bytes(8 * slots))
        self.f = open(path, "r+b")
        self.mm = mmap.mmap(self.f.fileno(), 8 * slots)
        self.slots = slots

    def set(self, i, v):
        struct.pack_into("<q", self.mm, 8 * i, v)

    def get(self, i):
        return struct.unpack_from("<q", self.mm, 8 * i)[0]


# --------------------------------------------------------------------------
# upstream server (its own process)

SENT, RECEIVED, ACTIVE, REQUESTS = range(4)


class Counters:
    """The upstream's byte and connection counters (SENT, RECEIVED, ACTIVE,
    REQUESTS), kept under a lock and mirrored into Shm for torture.py."""

    def __init__(self, shm):
        self.lock = threading.Lock()
        self.v = [0, 0, 0, 0]
        self.shm = shm

    def add(self, i, n):
        with self.lock:
            self.v[i] += n
            self.shm.set(i, self.v[i])


def handle(conn, root, ctr):
    """One upstream connection: GET /f/NAME sends DIR/NAME in SEND_CHUNK
    sends, PUT /slow-upload?rate=BPS reads the body at BPS bytes/s; up to
    10,000 requests, counted in CTR."""
    ctr.add(ACTIVE, 1)
    buf = b""
    try:
        conn.settimeout(300)  # send() then returns partial counts: exact byte counters
        for _ in range(10000):  # requests per connection
            head, buf = read_head(conn, buf, chunk=4096)
            if head is None:
                return
            ctr.add(REQUESTS, 1)
            req = upstream.parse_request(head)
            if req is None:
                upstream.reply(conn, "400 Bad Request", b"bad request line\n", close=True)
                return
            method, target, _, fields = req
            close = fields.get("connection", "").lower() == "close"
            length = int(fields.get("content-length", "0") or 0)
            path, _, query = target.partition("?")
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)

            if method == "GET" and path.startswith("/f/"):
                try:
                    f = open(os.path.join(root, os.path.basename(path[3:])), "rb")
                except OSError:
                    upstream.reply(conn, "404 Not Found", b"no such file\n", close=True)
                    return
                with f:
                    size = os.fstat(f.fileno()).st_size
                    conn.sendall((f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                  f"Content-Length: {size}\r\n\r\n").encode())
                    chunk = bytearray(SEND_CHUNK)
                    view = memoryview(chunk)
                    while True:
                        n = f.readinto(chunk)
                        if not n:
                            break
                        off = 0
                        while off < n:
                            k = conn.send(view[off:n])
                            off += k
                            ctr.add(SENT, k)
            elif path == "/slow-upload":
                rate = max(1, int(params.get("rate", "102400")))
                got = min(len(buf), length)
                buf = buf[got:]
                ctr.add(RECEIVED, got)
                t0 = time.monotonic()
                while got < length:
                    ahead = got - rate * (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(min(0.1, ahead / rate))
                        continue
                    data = conn.recv(min(4096, length - got))
                    if not data:
                        return
                    got += len(data)
                    ctr.add(RECEIVED, len(data))
                upstream.reply(conn, "200 OK", f"received {got}\n".encode(), close=close)
            else:
                upstream.reply(conn, "404 Not Found", b"not found\n", close=True)
                return
            if close:
                return
    except OSError:
        return
    finally:
        ctr.add(ACTIVE, -1)
        conn.close()


def serve(root, counters_path):
    """`torture.py upstream DIR COUNTERS`: serves DIR until SIGTERM, a thread
    per connection, its counters in the file COUNTERS."""
    upstream.exit_on_term()
    ctr = Counters(Shm(counters_path))
    upstream.serve_threads(upstream.listen(1024), handle, root, ctr)


# --------------------------------------------------------------------------
# clients (their own processes)

def paced_readers(port, path, count, rate, seconds, counters_path):
    """Opens COUNT connections, GETs PATH on each and reads each at RATE bytes/s
    (non-blocking recv every 50 ms) for SECONDS. Body bytes received so far in
    slot 0 of COUNTERS; prints JSON results at the end."""
    port, count, rate, seconds = int(port), int(count), int(rate), float(seconds)
    shm = Shm(counters_path)
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: torture-paced\r\n\r\n".encode()
    conns = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(req)
        s.setblocking(False)
        conns.append({"s": s, "raw": 0, "head": 0, "buf": b"", "err": None, "t0": time.monotonic()})
    total_raw = total_head = 0
    t_end = time.monotonic() + seconds
    for _ in range(int(seconds / 0.05) + 100):
        now = time.monotonic()
        if now >= t_end:
            break
        for c in conns:
            if c["err"]:
                continue
            allowed = int(rate * (now - c["t0"])) - c["raw"]
            if allowed <= 0:
                continue
            try:
                data = c["s"].recv(min(allowed, 256 * KiB))
            except BlockingIOError:
                continue
            except OSError as e:
                c["err"] = f"recv error {e.strerror}"
                continue
            if not data:
                c["err"] = "EOF before the end of the body"
                continue
            c["raw"] += len(data)
            total_raw += len(data)
            if not c["head"]:
                c["buf"] += data
                if b"\r\n\r\n" in c["buf"]:
                    head = c["buf"].split(b"\r\n\r\n", 1)[0]
                    c["head"] = len(head) + 4
                    total_head += c["head"]
                    c["buf"] = b""
                    if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                        c["err"] = "status " + head.split(b"\r\n", 1)[0].decode("latin-1")
            shm.set(0, total_raw - total_head)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - now)))
    errors = {}
    for c in conns:
        if c["err"]:
            errors[c["err"]] = errors.get(c["err"], 0) + 1
        c["s"].close()
    print(json.dumps({"got": [c["raw"] - c["head"] for c in conns], "errors": errors}))


def uploader(port, path, size, seconds, counters_path):
    """PUTs SIZE bytes to PATH as fast as the socket takes them, for at most
    SECONDS; body bytes sent so far in slot 0 of COUNTERS; prints JSON."""
    port, size, seconds = int(port), int(size), float(seconds)
    shm = Shm(counters_path)
    t_end = time.monotonic() + seconds
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall((f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: torture-upload\r\n"
               f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\n\r\n").encode())
    block = memoryview(os.urandom(256 * KiB))
    sent, status, error = 0, None, None
    try:
        for _ in range(10 ** 7):
            left = t_end - time.monotonic()
            if sent >= size or left <= 0:
                break
            s.settimeout(min(0.2, left))
            try:
                n = s.send(block[: min(len(block), size - sent)])
            except socket.timeout:
                continue
            sent += n
            shm.set(0, sent)
        if sent >= size:
            s.settimeout(max(0.1, t_end - time.monotonic()))
            status = s.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
    except OSError as e:
        error = e.strerror or str(e)
    s.close()
    print(json.dumps({"sent": sent, "status": status, "error": error}))

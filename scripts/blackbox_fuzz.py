#!/usr/bin/env python3
"""Black-box socket fuzzer for sluice (issue 10): mutated requests through
sluice to an upstream that sends mutated responses, on 127.0.0.1 only.

Driven by scripts/blackbox_fuzz.sh, which builds the release binary and
passes --bin and --tmp. Every process started here is stopped here by its
own PID; every loop is bounded in count and time.

Each input is one client connection: one or two requests built from a
template (GET; POST with Content-Length; POST chunked; both framing
fields), each carrying a unique id, then 0-4 mutations (CR / LF / NUL /
SP / HTAB inserted, a byte dropped or flipped, a digit changed, a region
repeated, a chunk size padded with zeros or followed by SP, the input
truncated). The client then half-closes and reads until EOF, or closes at
once (a random disconnect), or closes after part of the input.

A request body always carries a request line `GET /SMUGGLED-<id>`. The
upstream (threads of this process) parses what it receives strictly
(Content-Length or chunked bodies) and notes every SMUGGLED id it sees as a
request line. A smuggled path is an id the upstream saw as a request that
sluice never logged as a request of its own (its access log): the two
disagreed on where a body ended. The upstream answers each request with a
mutated response from templates (Content-Length, chunked, until close,
1xx then final, 204 / 304 with framing fields, duplicated Content-Length,
101) and closes after any mutated one.

Checks, printed as numbers; exit 1 if any is not 0:
  deaths       sluice exited
  hangs        a client got no EOF within --hang-after s of its half-close,
               or a health GET (every 2,000 inputs) got no 200 within 5 s
  leaked fds   sluice's open descriptors above the baseline 15 s after
               the last input (pooled upstream connections expire in 1 s)
  smuggled     as above
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from sluicebench import procfs
from sluicebench.net import http_get
from sluicebench.procs import Fail, Procs, log_tail, main_guard, start_listening

SMUGGLE = b"GET /SMUGGLED-%d HTTP/1.1\r\nHost: h\r\n\r\n"
ID_RE = re.compile(rb"/SMUGGLED-(\d+)")


# --------------------------------------------------------------------------
# inputs

def request(rid, kind):
    """One request of template KIND whose body (if any) smuggles RID."""
    smuggled = SMUGGLE % rid
    if kind == 0:
        return b"GET /p-%d HTTP/1.1\r\nHost: h\r\n\r\n" % rid
    if kind == 1:
        return b"POST /p-%d HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s" % (
            rid, len(smuggled), smuggled)
    if kind == 2:
        return (b"POST /p-%d HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"%x\r\n%s\r\n0\r\n\r\n" % (rid, len(smuggled), smuggled))
    return (b"POST /p-%d HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (rid, len(smuggled), smuggled))


def mutate(rng, data):
    """DATA with one random mutation."""
    if not data:
        return data
    i = rng.randrange(len(data))
    op = rng.randrange(9)
    if op == 0:
        return data[:i] + rng.choice([b"\r", b"\n", b"\0", b" ", b"\t", b"\r\n"]) + data[i:]
    if op == 1:
        return data[:i] + data[i + 1:]
    if op == 2:
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if op == 3:
        digits = [m.start() for m in re.finditer(rb"\d", data)]
        if digits:
            j = rng.choice(digits)
            return data[:j] + rng.choice(b"0123456789abcdef").to_bytes(1, "big") + data[j + 1:]
    if op == 4:
        j = min(len(data), i + rng.randrange(1, 40))
        return data[:j] + data[i:j] + data[j:]
    if op == 5:
        m = re.search(rb"\r\n\r\n([0-9a-f]+)\r\n", data)
        if m:
            pad = rng.choice([b"0" * rng.randrange(1, 40), b" ", b"\t", b";x", b" ;x=1"])
            at = m.start(1) if pad.startswith(b"0") else m.end(1)
            return data[:at] + pad + data[at:]
    if op == 6:
        return data.replace(b"chunked", rng.choice([b"Chunked", b"chunked ", b"gzip, chunked",
                                                     b"chunked, chunked", b"identity"]), 1)
    if op == 7:
        return data[:i]
    return data.replace(b"Content-Length: ", rng.choice([b"Content-Length: 0", b"Content-Length:  ",
                                                         b"Content-Length: +", b"Content-Length: 1,"]), 1)


def make_input(rng, rid):
    data = request(rid, rng.randrange(4))
    if rng.random() < 0.3:
        data += request(rid + 500_000_000, rng.randrange(4))
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
        data = mutate(rng, data)
    return data


RESPONSES = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\r\nuntil close",
    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\r\n",
]


# --------------------------------------------------------------------------
# the upstream

class Upstream:
    """Threads on 127.0.0.1:0; strict parsing; notes SMUGGLED ids seen as
    request lines; answers with (mutated) responses."""

    def __init__(self, seed):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.seen = set()
        self.lock = threading.Lock()
        self.rng = random.Random(seed)
        self.stop = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            for _ in range(100):
                head, buf = self.read_until(c, buf, b"\r\n\r\n")
                if head is None:
                    return
                line = head.split(b"\r\n", 1)[0]
                m = ID_RE.search(line)
                if m:
                    with self.lock:
                        self.seen.add(int(m.group(1)))
                body_ok, buf = self.skip_body(c, head, buf)
                if not body_ok:
                    return
                with self.lock:
                    resp = self.rng.choice(RESPONSES)
                    mutated = self.rng.random() < 0.5
                    for _ in range(self.rng.randrange(1, 3) if mutated else 0):
                        resp = mutate(self.rng, resp)
                c.sendall(resp)
                if mutated or b"Content-Length" not in resp and b"chunked" not in resp:
                    return
        except (OSError, ValueError):
            return
        finally:
            c.close()

    @staticmethod
    def read_until(c, buf, sep, limit=1 << 20):
        while sep not in buf:
            if len(buf) > limit:
                return None, buf
            d = c.recv(65536)
            if not d:
                return None, buf
            buf += d
        a, b = buf.split(sep, 1)
        return a, b

    def skip_body(self, c, head, buf):
        fields = head.lower()
        if b"\r\ntransfer-encoding:" in fields:
            while True:
                line, buf = self.read_until(c, buf, b"\r\n")
                if line is None or not re.fullmatch(rb"[0-9a-fA-F]{1,16}(;.*)?", line):
                    return False, buf
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while True:
                        t, buf = self.read_until(c, buf, b"\r\n")
                        if t is None:
                            return False, buf
                        if t == b"":
                            return True, buf
                while len(buf) < size + 2:
                    d = c.recv(65536)
                    if not d:
                        return False, buf
                    buf += d
                if buf[size:size + 2] != b"\r\n":
                    return False, buf
                buf = buf[size + 2:]
        m = re.search(rb"\r\ncontent-length: *(\d+)", fields)
        need = int(m.group(1)) if m else 0
        while len(buf) < need:
            d = c.recv(65536)
            if not d:
                return False, buf
            buf += d
        return True, buf[need:]


# --------------------------------------------------------------------------
# the run

def client(port, data, mode, hang_after):
    """Sends DATA; MODE 0: half-close and read to EOF; 1: close at once;
    2: send part, close. Returns True if it hung."""
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        if mode == 2:
            data = data[: len(data) // 2]
        try:
            s.sendall(data)
        except OSError:
            return False
        if mode != 0:
            return False
        s.shutdown(socket.SHUT_WR)
        s.settimeout(hang_after)
        end = time.monotonic() + hang_after
        while time.monotonic() < end:
            try:
                if not s.recv(65536):
                    return False
            except socket.timeout:
                return True
            except OSError:
                return False
        return True
    finally:
        s.close()


def run(args):
    procs = Procs()
    up = Upstream(args.seed + 1)
    log = os.path.join(args.tmp, "sluice.log")
    access = os.path.join(args.tmp, "access.log")
    env = dict(os.environ, RUST_LOG="info")
    try:
        p, port, _ = start_listening(
            lambda port: [args.bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                          f"127.0.0.1:{up.port}", "--upstream-read-timeout", "2s",
                          "--request-head-timeout", "2s", "--client-body-timeout", "2s",
                          "--pool-idle-timeout", "1s", "--max-retries", "0",
                          "--access-log", access],
            log, procs, env=env)
        status, _ = http_get(port, "/health")
        time.sleep(1.5)
        baseline = procfs.fd_count(p.pid)
        rng = random.Random(args.seed)
        deaths = hangs = 0
        lock = threading.Lock()
        counter = iter(range(args.inputs))
        started = time.monotonic()

        def worker(wseed):
            nonlocal hangs
            wrng = random.Random(wseed)
            for n in counter:
                if p.poll() is not None or time.monotonic() - started > args.max_seconds:
                    return
                data = make_input(wrng, n + 1)
                if client(port, data, wrng.choice([0, 0, 0, 1, 2]), args.hang_after):
                    with lock:
                        hangs += 1
                if n % 2000 == 1999:
                    try:
                        st, _ = http_get(port, "/health", timeout=5.0)
                        ok = st != 0
                    except OSError:
                        ok = False
                    if not ok and p.poll() is None:
                        with lock:
                            hangs += 1

        threads = [threading.Thread(target=worker, args=(rng.random(),)) for _ in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        if p.poll() is not None:
            deaths = 1
            print(log_tail(log), file=sys.stderr)
        done = next(counter, args.inputs)
        fds = baseline
        end = time.monotonic() + 15
        while p.poll() is None and time.monotonic() < end:
            fds = procfs.fd_count(p.pid)
            if fds <= baseline:
                break
            time.sleep(0.2)
        leaked = max(0, fds - baseline) if p.poll() is None else 0
        up.stop = True
        # The access log is buffered: a drain writes out what it holds.
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                pass
        logged = set()
        with open(access, "rb") as f:
            for line in f:
                logged.update(int(m) for m in ID_RE.findall(line))
        smuggled = sorted(up.seen - logged)
        print(f"blackbox_fuzz: inputs={done} in {elapsed:.1f} s ({done / max(elapsed, 1e-9):.0f}/s), "
              f"threads={args.threads}, seed={args.seed}")
        print(f"blackbox_fuzz: deaths={deaths} hangs={hangs} leaked_fds={leaked} "
              f"(baseline {baseline}, end {fds}) smuggled={len(smuggled)} "
              f"(upstream saw {len(up.seen)} SMUGGLED request lines, all logged by sluice)"
              if not smuggled else
              f"blackbox_fuzz: deaths={deaths} hangs={hangs} leaked_fds={leaked} smuggled={len(smuggled)} "
              f"ids {smuggled[:10]}")
        bad = deaths or hangs or leaked or smuggled or done < args.inputs
        return 1 if bad else 0
    finally:
        procs.stop_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--hang-after", type=float, default=10.0)
    ap.add_argument("--max-seconds", type=float, default=1800.0)
    args = ap.parse_args()
    return main_guard(run, args, "blackbox_fuzz")


if __name__ == "__main__":
    sys.exit(main())

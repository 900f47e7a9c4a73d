#!/usr/bin/env python3
"""Slow-reader and slow-upload torture runs for sluice (DESIGN.md §4).

Driven by scripts/torture.sh, which builds the release binary and passes
--bin and --tmp. Everything runs on 127.0.0.1; every process started here is
stopped here by its own PID; every loop is bounded in count and time.

Scenarios:
  one     one slow reader of a big file (default 100 MiB)
  many    READERS concurrent slow readers of a smaller file each
  upload  curl sends a file as fast as it can, the upstream reads it slowly
Slow readers (--client): `curl --limit-rate RATE --max-time SECONDS`, and/or
`torture.py readers`, one python process that reads each socket at exactly
RATE bytes/s (curl 7.x reads a burst of several MiB before its limiter
engages, then pauses; the paced reader keeps sluice cycling between its
watermarks for the whole run).

For each: sluice's idle RSS, peak RSS and growth (VmRSS sampled every 0.5 s,
and VmHWM), the bytes the upstream sent vs the bytes the client received (or
client sent vs upstream received for the upload), the bytes in kernel socket
queues on the path (/proc/net/tcp tx_queue + rx_queue), and what is left for
sluice itself to hold: gap - kernel queues (DESIGN §4: <= high watermark + one
read per direction). PASS/FAIL per threshold; exit status 1 on any FAIL.

The upstream is this file run as `torture.py upstream DIR`: a thread per
connection, HTTP/1.1 with Content-Length, and counters it reports on
GET /__stats (asked directly, never through the proxy):
  GET /f/NAME                 the file DIR/NAME, written in 64 KiB sends
  PUT /slow-upload?rate=BPS   reads the body at BPS bytes/s (4 KiB recvs)
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

KiB = 1024
MiB = 1024 * KiB
SEND_CHUNK = 64 * KiB
STATE_PER_EXCHANGE = 16 * KiB  # heads, session state, upstream connection


def parse_size(text):
    """'100M', '100MiB', '20m', '100k', '4MiB', '65536' -> bytes (k/m/g = 1024^n)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 100M, 100k, 65536)")
    mult = {"": 1, "k": KiB, "m": MiB, "g": 1024 * MiB}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def human(n):
    n = float(n)
    if abs(n) >= MiB:
        return f"{n / MiB:.2f} MiB"
    if abs(n) >= KiB:
        return f"{n / KiB:.1f} KiB"
    return f"{int(n)} B"


# --------------------------------------------------------------------------
# upstream server (its own process)

class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.received = 0
        self.active = 0
        self.requests = 0

    def add(self, field, n):
        with self.lock:
            setattr(self, field, getattr(self, field) + n)

    def snapshot(self):
        with self.lock:
            return {"sent": self.sent, "received": self.received,
                    "active": self.active, "requests": self.requests}


def read_head(conn, buf):
    """Returns (head_bytes, rest) or (None, buf) on EOF; bounded to 64 KiB."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > 64 * KiB:
            return None, buf
        data = conn.recv(4096)
        if not data:
            return None, buf
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def reply(conn, status, body, close=False, ctype="text/plain"):
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n")
    if close:
        head += "Connection: close\r\n"
    conn.sendall(head.encode() + b"\r\n" + body)


def handle(conn, root, ctr):
    ctr.add("active", 1)
    buf = b""
    try:
        conn.settimeout(300)  # makes send() return partial counts (exact stats)
        for _ in range(10000):  # requests per connection
            head, buf = read_head(conn, buf)
            if head is None:
                return
            ctr.add("requests", 1)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                reply(conn, "400 Bad Request", b"bad request line\n", close=True)
                return
            method, target, _ = parts
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            close = fields.get("connection", "").lower() == "close"
            length = int(fields.get("content-length", "0") or 0)
            path, _, query = target.partition("?")
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)

            if path == "/__stats":
                reply(conn, "200 OK", json.dumps(ctr.snapshot()).encode(),
                      close=True, ctype="application/json")
                return
            if method == "GET" and path.startswith("/f/"):
                name = os.path.basename(path[3:])
                try:
                    f = open(os.path.join(root, name), "rb")
                except OSError:
                    reply(conn, "404 Not Found", b"no such file\n", close=close)
                    if close:
                        return
                    continue
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
                            ctr.add("sent", k)
                if close:
                    return
                continue
            if path == "/slow-upload":
                rate = max(1, int(params.get("rate", "102400")))
                got = min(len(buf), length)
                buf = buf[got:]
                ctr.add("received", got)
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
                    ctr.add("received", len(data))
                reply(conn, "200 OK", f"received {got}\n".encode(), close=close)
                if close:
                    return
                continue
            # anything else: drain a small body, answer 404
            if length:
                return
            reply(conn, "404 Not Found", b"not found\n", close=close)
            if close:
                return
    except OSError:
        return
    finally:
        ctr.add("active", -1)
        conn.close()


def serve(root):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ctr = Counters()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1024)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn, root, ctr), daemon=True).start()


# --------------------------------------------------------------------------
# measurement helpers

class Procs:
    """Every child started here, stopped by its own PID."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p

    def stop(self, plist, grace=3.0):
        alive = [p for p in plist if p.poll() is None]
        for p in alive:
            try:
                p.terminate()
            except OSError:
                pass
        deadline = time.monotonic() + grace
        for p in alive:
            try:
                p.wait(max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        self.stop(list(reversed(self.procs)))
        for p in self.procs:
            for stream in (p.stdout, p.stderr):
                if stream:
                    stream.close()
        self.procs = []


class Fail(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tcp_rows():
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            lport = int(p[1].split(":")[1], 16)
            rport = int(p[2].split(":")[1], 16)
            tx, rx = (int(x, 16) for x in p[4].split(":"))
            yield lport, rport, p[3], tx, rx


def listening(port):
    return any(lp == port and st == "0A" for lp, _, st, _, _ in tcp_rows())


def kernel_queued(ports):
    """Bytes in send + receive queues of every non-listening socket on ports."""
    return sum(tx + rx for lp, rp, st, tx, rx in tcp_rows()
               if st != "0A" and (lp in ports or rp in ports))


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * KiB
    return out["VmRSS"], out["VmHWM"]


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def io_counter(pid, field):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def up_stats(port):
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"GET /__stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        for _ in range(100):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def log_tail(path, n=15):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join("    " + l for l in lines[-n:])
    except OSError:
        return "    (no log)"


class Bench:
    def __init__(self, args):
        self.args = args
        self.procs = Procs()
        self.up = None
        self.up_port = None

    def start_upstream(self):
        p = self.procs.start([sys.executable, os.path.abspath(__file__), "upstream", self.args.tmp],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = p.stdout.readline().strip()
        if not line.isdigit():
            raise Fail(f"upstream did not start (got {line!r})")
        self.up, self.up_port = p, int(line)

    def start_sluice(self, name, extra=()):
        logpath = os.path.join(self.args.tmp, f"sluice-{name}.log")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        for _ in range(3):  # a free port can be taken between bind(0) and sluice's bind
            port = free_port()
            argv = [self.args.bin, "--listen", f"127.0.0.1:{port}",
                    "--upstream", f"127.0.0.1:{self.up_port}", *self.args.sluice_extra, *extra]
            with open(logpath, "ab") as log:
                p = self.procs.start(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log, env=env)
            for _ in range(100):  # 5 s
                if p.poll() is not None or listening(port):
                    break
                time.sleep(0.05)
            if p.poll() is None and listening(port):
                time.sleep(0.3)
                return p, port, logpath, argv
            self.procs.stop([p])
        raise Fail(f"sluice did not start; log:\n{log_tail(logpath)}")

    def check_sluice_alive(self, p, logpath, res):
        if p.poll() is not None:
            res["fails"].append(f"sluice exited with status {p.returncode} during the run")
            res["log"] = log_tail(logpath)
            return False
        return True

    def wait_upstream_idle(self, res, what):
        """After the clients left, sluice must close (or pool) its upstream connections."""
        st = up_stats(self.up_port)
        for _ in range(30):  # 3 s
            if st["active"] <= 1:  # the /__stats connection itself
                return st
            time.sleep(0.1)
            st = up_stats(self.up_port)
        res["fails"].append(f"{st['active'] - 1} upstream connection(s) still open 3 s after the {what} ended")
        return st


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    with open(path, "wb") as out:
        subprocess.run(["head", "-c", str(size), "/dev/urandom"], stdout=out, check=True)


# --------------------------------------------------------------------------
# scenarios

class CurlReaders:
    """READERS `curl --limit-rate` processes, each writing to its own file."""

    def __init__(self, b, url, count, rate_text, seconds, tag):
        self.b = b
        self.outs = [os.path.join(b.args.tmp, f"{tag}-out-{i}") for i in range(count)]
        self.procs = [b.procs.start(
            ["curl", "-sS", "--http1.1", "--limit-rate", rate_text, "--max-time", str(seconds),
             "-o", out, "-w", "%{size_download} %{http_code}", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            for out in self.outs]

    def received(self):
        return sum(os.path.getsize(o) if os.path.exists(o) else 0 for o in self.outs)

    def running(self):
        return sum(p.poll() is None for p in self.procs)

    def finish(self):
        """Returns (bytes received per reader, list of failures)."""
        self.b.procs.stop(self.procs)
        got, bad = [], []
        for p in self.procs:
            out, err = p.communicate()
            fields = out.decode().split()
            got.append(int(fields[0]) if fields else 0)
            code = fields[1] if len(fields) > 1 else "?"
            if p.returncode not in (0, 28) or code != "200":
                bad.append(f"curl exit {p.returncode}, HTTP {code}: {err.decode().strip()[:200]}")
        for o in self.outs:
            if os.path.exists(o):
                os.unlink(o)
        return got, bad


class PacedReaders:
    """One python process (`torture.py readers`) pacing READERS sockets exactly."""

    def __init__(self, b, port, path, count, rate, seconds, tag):
        self.b = b
        self.status = os.path.join(b.args.tmp, f"{tag}-readers.status")
        self.proc = b.procs.start(
            [sys.executable, os.path.abspath(__file__), "readers", str(port), path, str(count),
             str(rate), str(seconds), self.status],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    def received(self):
        try:
            with open(self.status) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def running(self):
        return 1 if self.proc.poll() is None else 0

    def finish(self):
        self.b.procs.stop([self.proc])
        out, err = self.proc.communicate()
        try:
            r = json.loads(out.decode())
        except ValueError:
            return [], [f"paced reader failed (exit {self.proc.returncode}): {err.decode()[-300:]}"]
        bad = [f"{n} reader(s): {what}" for what, n in r["errors"].items()]
        return r["got"], bad


def paced_readers(port, path, count, rate, seconds, status):
    """Opens COUNT connections, GETs PATH on each, reads each at RATE bytes/s
    (non-blocking recv every 50 ms) for SECONDS; prints JSON results."""
    port, count, rate, seconds = int(port), int(count), int(rate), float(seconds)
    req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: torture-paced\r\n\r\n").encode()
    conns = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(req)
        s.setblocking(False)
        conns.append({"s": s, "raw": 0, "head": None, "buf": b"", "err": None, "t0": time.monotonic()})
    t_end = time.monotonic() + seconds
    last_status = 0.0
    for _ in range(int(seconds / 0.05) + 100):
        now = time.monotonic()
        if now >= t_end:
            break
        for c in conns:
            if c["err"] or c["s"] is None:
                continue
            allowed = int(rate * (now - c["t0"])) - c["raw"]
            if allowed <= 0:
                continue
            try:
                data = c["s"].recv(min(allowed, 256 * KiB))
            except BlockingIOError:
                continue
            except OSError as e:
                c["err"] = f"recv error {e.errno}"
                continue
            if not data:
                c["err"] = "EOF before the end of the body"
                continue
            c["raw"] += len(data)
            if c["head"] is None:
                c["buf"] += data
                if b"\r\n\r\n" in c["buf"]:
                    head = c["buf"].split(b"\r\n\r\n", 1)[0]
                    c["head"] = len(head) + 4
                    c["buf"] = b""
                    if b" 200 " not in head.split(b"\r\n", 1)[0]:
                        c["err"] = "status " + head.split(b"\r\n", 1)[0].decode("latin-1")
        if now - last_status >= 0.1:
            total = sum(c["raw"] - (c["head"] or c["raw"]) for c in conns)
            with open(status + ".tmp", "w") as f:
                f.write(str(total))
            os.replace(status + ".tmp", status)
            last_status = now
        time.sleep(max(0.0, 0.05 - (time.monotonic() - now)))
    got = [c["raw"] - (c["head"] or c["raw"]) for c in conns]
    errors = {}
    for c in conns:
        if c["err"]:
            errors[c["err"]] = errors.get(c["err"], 0) + 1
        c["s"].close()
    print(json.dumps({"got": got, "errors": errors}))


def run_download(b, name, readers, size, rate_text, seconds, threshold, thr_note, client):
    a = b.args
    rate = parse_size(rate_text)
    fname = f"{name}-{size}.bin"
    make_file(os.path.join(a.tmp, fname), size)
    tag = f"{name}-{client}"
    res = {"name": f"{name} ({client})", "fails": [], "threshold": threshold}
    sl, port, logpath, argv = b.start_sluice(tag)
    res["cmd"] = " ".join(argv)
    idle_rss, _ = proc_status(sl.pid)
    idle_fds = fd_count(sl.pid)
    base = up_stats(b.up_port)
    t0 = time.monotonic()
    if client == "curl":
        cl = CurlReaders(b, f"http://127.0.0.1:{port}/f/{fname}", readers, rate_text, seconds, tag)
    else:
        cl = PacedReaders(b, port, f"/f/{fname}", readers, rate, seconds, tag)
    samples = []
    peak_fds = idle_fds
    for _ in range(int((seconds + 10) / 0.5) + 1):
        if time.monotonic() > t0 + seconds + 10 or not b.check_sluice_alive(sl, logpath, res):
            break
        t_sample = time.monotonic() - t0
        n_before = cl.running()
        sent = up_stats(b.up_port)["sent"] - base["sent"]
        kq = kernel_queued({port, b.up_port})
        recv = cl.received()
        rss, _ = proc_status(sl.pid)
        peak_fds = max(peak_fds, fd_count(sl.pid))
        n_after = cl.running()
        if n_after == 0:
            break
        if n_before == n_after == (readers if client == "curl" else 1):  # nobody left mid-sample
            samples.append({"t": t_sample, "rss": rss, "sent": sent, "recv": recv, "kq": kq})
        time.sleep(0.5)
    if cl.running():
        res["fails"].append(f"client(s) still running {seconds + 10} s after start (stalled?)")
    got, bad = cl.finish()
    received = sum(got)
    expected = rate * seconds
    short = sum(1 for g in got if g < expected * 0.5 and g < size)
    if bad:
        res["fails"].append(f"{len(bad)} reader failure kind(s), first: {bad[0]}")
    if short:
        res["fails"].append(f"{short} reader(s) got < 50% of rate x time ({human(expected)}): stall?")
    if client == "curl" and received > 2 * expected * readers:
        res["notes"] = [f"curl got {received / (expected * readers):.1f} x rate x time: its --limit-rate "
                        f"lets a burst of several MiB through at the start (also without sluice), "
                        f"then it reads nothing for a while"]
    if b.check_sluice_alive(sl, logpath, res):
        _, hwm = proc_status(sl.pid)
        st = b.wait_upstream_idle(res, "downloads")
        sent_total = st["sent"] - base["sent"]
        time.sleep(0.2)
        res["fds"] = (idle_fds, peak_fds, fd_count(sl.pid))
    else:
        hwm = 0
        sent_total = max((s["sent"] for s in samples), default=0)
    b.procs.stop([sl])
    what = "curl --limit-rate" if client == "curl" else "python paced reader(s), rate"
    return finish(res, a, samples, idle_rss, hwm, readers, sent_total, received,
                  label=(f"{readers} slow reader(s) ({what} {rate_text}), {human(size)} file each, "
                         f"{seconds} s"),
                  frm="upstream sent", to="client received", thr_note=thr_note,
                  expected=expected * readers)


def run_upload(b):
    a = b.args
    size, seconds = a.upload_size, a.upload_seconds
    up_rate = parse_size(a.upload_rate)
    fname = f"upload-{size}.bin"
    path = os.path.join(a.tmp, fname)
    make_file(path, size)
    res = {"name": "upload", "fails": [], "threshold": a.threshold}
    sl, port, logpath, argv = b.start_sluice("upload")
    res["cmd"] = " ".join(argv)
    idle_rss, _ = proc_status(sl.pid)
    idle_fds = fd_count(sl.pid)
    base = up_stats(b.up_port)
    url = f"http://127.0.0.1:{port}/slow-upload?rate={up_rate}"
    t0 = time.monotonic()
    c = b.procs.start(["curl", "-sS", "--http1.1", "-H", "Expect:", "-T", path, "--max-time", str(seconds),
                       "-o", os.devnull, "-w", "%{size_upload} %{http_code}", url],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wchar0 = None
    samples = []
    peak_fds = idle_fds
    for _ in range(int((seconds + 10) / 0.5) + 1):
        if time.monotonic() > t0 + seconds + 10 or not b.check_sluice_alive(sl, logpath, res):
            break
        wchar = io_counter(c.pid, "wchar")
        if wchar0 is None:
            wchar0 = wchar or 0
        recv = up_stats(b.up_port)["received"] - base["received"]
        kq = kernel_queued({port, b.up_port})
        rss, _ = proc_status(sl.pid)
        peak_fds = max(peak_fds, fd_count(sl.pid))
        if c.poll() is not None:
            break
        if wchar is not None:  # curl's socket writes (minus a few startup writes)
            samples.append({"t": time.monotonic() - t0, "rss": rss, "sent": wchar - wchar0,
                            "recv": recv, "kq": kq})
        time.sleep(0.5)
    if c.poll() is None:
        res["fails"].append(f"curl still running {seconds + 10} s after start (stalled?)")
        b.procs.stop([c])
    out, err = c.communicate()
    fields = out.decode().split()
    client_sent = int(float(fields[0])) if fields else 0
    code = fields[1] if len(fields) > 1 else "?"
    if c.returncode not in (0, 28):
        res["fails"].append(f"curl exit {c.returncode}, HTTP {code}: {err.decode().strip()[:200]}")
    expected = up_rate * seconds
    if b.check_sluice_alive(sl, logpath, res):
        _, hwm = proc_status(sl.pid)
        st = b.wait_upstream_idle(res, "upload")
        up_recv = st["received"] - base["received"]
        time.sleep(0.2)
        res["fds"] = (idle_fds, peak_fds, fd_count(sl.pid))
    else:
        hwm = 0
        up_recv = max((s["recv"] for s in samples), default=0)
    if up_recv < 0.5 * min(expected, size):
        res["fails"].append(f"upstream received {human(up_recv)} < 50% of its read rate x time "
                            f"({human(expected)}): stall?")
    b.procs.stop([sl])
    return finish(res, a, samples, idle_rss, hwm, 1, client_sent, up_recv,
                  label=(f"1 fast upload of {human(size)} (curl -T), upstream reads "
                         f"{a.upload_rate}/s, --max-time {seconds}"),
                  frm="client sent", to="upstream received", thr_note="same as one reader",
                  expected=expected)


def finish(res, a, samples, idle_rss, hwm, conns, frm_total, to_total, label, frm, to,
           thr_note, expected):
    peak = max([s["rss"] for s in samples] + [hwm, idle_rss])
    growth = peak - idle_rss
    gap = frm_total - to_total
    # steady state: skip the first 2 s (TCP windows opening)
    steady = [s for s in samples if s["t"] >= 2.0] or samples
    held = [s["sent"] - s["recv"] - s["kq"] for s in steady]
    held_med = statistics.median(held) if held else 0
    held_max = max(held) if held else 0
    kq_med = statistics.median([s["kq"] for s in steady]) if steady else 0
    bound = conns * (a.high + SEND_CHUNK) + 256 * KiB
    if growth > res["threshold"]:
        res["fails"].append(f"RSS growth {human(growth)} > threshold {human(res['threshold'])}")
    if held and held_med > bound:
        res["fails"].append(f"sluice holds ~{human(held_med)} (gap - kernel queues) > "
                            f"{conns} x (high {human(a.high)} + 64 KiB) + 256 KiB = {human(bound)}")
    res.update(idle=idle_rss, peak=peak, growth=growth, frm_total=frm_total, to_total=to_total,
               gap=gap, kq=kq_med, held=held_med, held_max=held_max, bound=bound)
    ok = not res["fails"]
    print(f"\n== {res['name']}: {label} ==")
    print(f"  sluice: {res['cmd']}")
    print(f"  sluice idle RSS           {human(idle_rss)}")
    print(f"  sluice peak RSS           {human(peak)}  (growth {human(growth)}; "
          f"threshold {human(res['threshold'])}: {thr_note})")
    print(f"  {frm + ' ' * (26 - len(frm))}{human(frm_total)}")
    print(f"  {to + ' ' * (26 - len(to))}{human(to_total)}  (rate x time ~ {human(expected)})")
    print(f"  gap (after the run)       {human(gap)}")
    if held:
        print(f"  during the run (median of {len(steady)} samples after 2 s):")
        print(f"    gap in kernel queues    {human(kq_med)}  (/proc/net/tcp tx+rx on both hops)")
        print(f"    gap held by sluice      {human(held_med)}  (max {human(held_max)}; "
              f"bound {human(bound)})")
    if "fds" in res:
        i, p, after = res["fds"]
        print(f"  sluice open fds           idle {i}, peak {p}, after {after}")
    if a.verbose and samples:
        print("    t(s)   RSS        from        to          gap         kernel")
        for s in samples[::4]:
            print(f"    {s['t']:5.1f}  {human(s['rss']):10} {human(s['sent']):11} {human(s['recv']):11} "
                  f"{human(s['sent'] - s['recv']):11} {human(s['kq'])}")
    for n in res.get("notes", []):
        print(f"  note: {n}")
    for f in res["fails"]:
        print(f"  FAIL: {f}")
    if "log" in res:
        print("  sluice log tail:\n" + res["log"])
    print(f"  => {'PASS' if ok else 'FAIL'}")
    res["ok"] = ok
    return res


def run(args):
    for tool in ("curl", "head"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], stdout=subprocess.DEVNULL).returncode:
            raise Fail(f"'{tool}' not found")
    b = Bench(args)
    results = []
    t_start = time.monotonic()
    try:
        b.start_upstream()
        print(f"torture: sluice {args.bin} (high {human(args.high)}), upstream pid {b.up.pid} "
              f"port {b.up_port}, kernel tcp_wmem/tcp_rmem max "
              f"{open('/proc/sys/net/ipv4/tcp_wmem').read().split()[2]}/"
              f"{open('/proc/sys/net/ipv4/tcp_rmem').read().split()[2]}")
        scen = ["one", "many", "upload"] if args.scenario == "all" else [args.scenario]
        clients = ["curl", "python"] if args.client == "both" else [args.client]
        for s in scen:
            for client in (clients if s != "upload" else ["curl"]):
                if s == "one":
                    results.append(run_download(b, "one", 1, args.size, args.rate, args.seconds,
                                                args.threshold, "--threshold", client))
                elif s == "many":
                    per = args.high + STATE_PER_EXCHANGE
                    thr = args.many_threshold or args.readers * per + args.threshold
                    note = (f"{args.readers} x (high {human(args.high)} + {human(STATE_PER_EXCHANGE)} "
                            f"state) + {human(args.threshold)}"
                            if not args.many_threshold else "--many-threshold")
                    results.append(run_download(b, "many", args.readers, args.many_size, args.rate,
                                                args.many_seconds, thr, note, client))
                else:
                    results.append(run_upload(b))
    finally:
        b.procs.stop_all()
    print("\n| scenario | idle RSS | peak RSS | growth | threshold | from | to | gap | held by sluice | result |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['name']} | {human(r['idle'])} | {human(r['peak'])} | {human(r['growth'])} | "
              f"{human(r['threshold'])} | {human(r['frm_total'])} | {human(r['to_total'])} | "
              f"{human(r['gap'])} | {human(r['held'])} | {'PASS' if r['ok'] else 'FAIL'} |")
    print(f"(from/to: upstream sent/client received for downloads, client sent/upstream received "
          f"for the upload; total {time.monotonic() - t_start:.0f} s)")
    return 0 if all(r["ok"] for r in results) else 1


def main():
    env = os.environ.get
    if len(sys.argv) >= 2 and sys.argv[1] == "upstream":
        serve(sys.argv[2])
        return 0
    if len(sys.argv) == 8 and sys.argv[1] == "readers":
        signal.signal(signal.SIGTERM, lambda *_: os._exit(1))
        paced_readers(*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(prog="torture.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--scenario", choices=["one", "many", "upload", "all"],
                    default=env("TORTURE_SCENARIO", "all"))
    ap.add_argument("--size", type=parse_size, default=env("TORTURE_SIZE", "100M"),
                    help="file for the one slow reader (100M)")
    ap.add_argument("--rate", default=env("TORTURE_RATE", "100k"),
                    help="curl --limit-rate per reader (100k = 102400 B/s)")
    ap.add_argument("--seconds", type=int, default=int(env("TORTURE_SECONDS", "20")),
                    help="curl --max-time for the one reader (20)")
    ap.add_argument("--threshold", type=parse_size, default=env("TORTURE_THRESHOLD", "4M"),
                    help="max RSS growth for one reader and the upload (4M)")
    ap.add_argument("--readers", type=int, default=int(env("TORTURE_READERS", "200")),
                    help="concurrent slow readers in 'many' (200)")
    ap.add_argument("--many-size", type=parse_size, default=env("TORTURE_MANY_SIZE", "20M"),
                    help="file per reader in 'many' (20M)")
    ap.add_argument("--many-seconds", type=int, default=int(env("TORTURE_MANY_SECONDS", "15")))
    ap.add_argument("--many-threshold", type=parse_size, default=env("TORTURE_MANY_THRESHOLD"),
                    help="default: readers x (high + 16 KiB) + --threshold")
    ap.add_argument("--upload-size", type=parse_size, default=env("TORTURE_UPLOAD_SIZE", "50M"))
    ap.add_argument("--upload-rate", default=env("TORTURE_UPLOAD_RATE", "100k"),
                    help="bytes/s the upstream reads the upload at (100k)")
    ap.add_argument("--upload-seconds", type=int, default=int(env("TORTURE_UPLOAD_SECONDS", "15")))
    ap.add_argument("--high", type=parse_size, default=env("TORTURE_HIGH"),
                    help="run sluice with --high-watermark HIGH --low-watermark HIGH/4 "
                         "(default: sluice's own, 64k)")
    ap.add_argument("--client", choices=["curl", "python", "both"],
                    default=env("TORTURE_CLIENT", "both"),
                    help="slow readers: curl --limit-rate, an exactly paced python reader, or "
                         "both, one after the other (default both)")
    ap.add_argument("--verbose", action="store_true", help="print the samples")
    args = ap.parse_args()
    if not 1 <= args.readers <= 2000:
        ap.error("--readers must be 1..2000")
    for name in ("seconds", "many_seconds", "upload_seconds"):
        if not 1 <= getattr(args, name) <= 600:
            ap.error(f"--{name.replace('_', '-')} must be 1..600")
    args.sluice_extra = []
    if args.high:
        args.sluice_extra = ["--high-watermark", str(args.high),
                             "--low-watermark", str(args.high // 4)]
    else:
        args.high = 64 * KiB
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run(args)
    except Fail as e:
        print(f"torture: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

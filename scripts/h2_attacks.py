#!/usr/bin/env python3
"""The HTTP/2 attacks of issue 24 item 6 against sluice, CONNS (1,000)
connections at once, and the memory they hold. Driven by
scripts/h2_attacks.sh (which builds the binary, raises `ulimit -n` and
passes --bin and --tmp).

Starts a release sluice (`--http2-cleartext --workers 1
--max-connections 20000 --access-log off --admin ADDR`, every limit and
timeout at its default) in front of scripts/bench/upstream.py (Python
stdlib: /small 256 bytes, /files/big.bin 1 MiB, the body sink /sink), all
on 127.0.0.1. Then, kind after kind, CONNS / 8 prior-knowledge h2c
connections each carrying one attack, every one kept open by this client
until the end:

  rapid_reset   HEADERS + RST_STREAM (CANCEL), 300 pairs in one write
                (CVE-2023-44487)
  continuation  HEADERS without END_HEADERS, then CONTINUATION frames up to
                half of max_head_size (32 KiB of 64), never finished: the
                2024 CONTINUATION flood left half-way, held under the bound
  hpack_bomb    a 4,000-byte field added to the HPACK dynamic table (full
                at 4,096), then named 40 times: 160 KB decoded from a 4 KB
                block; the table stays full
  ping_flood    1,500 PINGs and 500 SETTINGS in one write, the replies never
                read (SO_RCVBUF 4 KiB) until the end
  empty_flood   2,000 empty frames of an unknown type (CVE-2019-9518)
  zero_window   SETTINGS_INITIAL_WINDOW_SIZE 0, then STREAMS (10) GETs of
                the 1 MiB file; the window never opened
  half_open     STREAMS (10) POSTs to /sink with content-length 1,000,000
                and 1 KiB of body each, then nothing
  stream_ids    one GET on the last stream id there is (2^31-1): served;
                no stream id is left to the client

After each kind, once sluice's RSS settled (two reads 0.5 s apart equal):
its RSS growth per connection of the kind, what sluice sent them (GOAWAY
and RST_STREAM codes, statuses, connections it closed), its /metrics
HTTP/2 counters' growth, and whether a normal request still gets its
answer meanwhile (an HTTP/1.1 GET and an h2c GET, each on a new
connection). Then all are held HOLD s more (RSS "during"), closed (RSS
"after", settled within 10 s).

Every process it starts is stopped by its PID; loopback only; every loop
bounded. Python 3 stdlib only (frames by hand: sluicebench.h2wire).
"""

import argparse
import json
import os
import resource
import socket
import sys
import time

from sluicebench import h2wire as w
from sluicebench import net, procfs
from sluicebench.procs import Fail, Proc, main_guard, wait_for
from sluicebench.templates import BENCH_DIR

KiB = 1024
MiB = 1024 * KiB
KINDS = ["rapid_reset", "continuation", "hpack_bomb", "ping_flood", "empty_flood", "zero_window", "half_open",
         "stream_ids"]
MAX_HEAD_SIZE = 64 * KiB  # sluice's default max_head_size (SETTINGS_MAX_HEADER_LIST_SIZE)
READ_LIMIT = 8 * MiB  # bytes read from one connection at most, per drain


class Conn:
    """One client connection and a tally of what sluice sent on it."""

    def __init__(self, port, rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.reader = w.Reader()
        self.goaway = None  # the last GOAWAY's error code
        self.resets = {}  # RST_STREAM error code -> count
        self.statuses = {}  # response status -> count
        self.pings = 0  # PING acknowledgements
        self.closed = False  # sluice closed (EOF or reset)
        self.error = None  # our own send failed

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.error = self.error or type(e).__name__

    def drain(self, ack_settings=True):
        """Reads what sluice sent so far (non-blocking, at most READ_LIMIT)."""
        self.sock.setblocking(False)
        got = 0
        try:
            for _ in range(READ_LIMIT // 65536 + 1):
                try:
                    data = self.sock.recv(65536)
                except BlockingIOError:
                    break
                except OSError:
                    self.closed = True
                    break
                if not data:
                    self.closed = True
                    break
                got += len(data)
                self.tally(self.reader.feed(data), ack_settings)
                if got >= READ_LIMIT:
                    break
        except ValueError:
            self.closed = True
        finally:
            self.sock.settimeout(10)

    def tally(self, frames, ack_settings):
        for ftype, flags, sid, payload in frames:
            if ftype == w.GOAWAY and len(payload) >= 8:
                self.goaway = int.from_bytes(payload[4:8], "big")
            elif ftype == w.RST_STREAM and len(payload) >= 4:
                code = w.error_name(int.from_bytes(payload[:4], "big"))
                self.resets[code] = self.resets.get(code, 0) + 1
            elif ftype == w.HEADERS:
                status = w.status_of(w.header_block(flags, payload))
                if status is not None:
                    self.statuses[status] = self.statuses.get(status, 0) + 1
            elif ftype == w.PING and flags & w.ACK:
                self.pings += 1
            elif ftype == w.SETTINGS and not flags & w.ACK and ack_settings and not self.error:
                self.send(w.settings_ack())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def get_block(path, port, method="GET", extra=()):
    return w.request_block(method, path, "127.0.0.1:%d" % port, "http", extra)


def attack(kind, port, streams):
    """(connection, bytes to send after the preface) for one connection of KIND."""
    hello = [w.PREFACE, w.settings([(w.ENABLE_PUSH, 0)])]
    if kind == "rapid_reset":
        out = []
        for i in range(300):
            sid = 1 + 2 * i
            out += [w.headers(sid, get_block("/small", port), end_stream=True), w.rst_stream(sid, w.CANCEL)]
        return Conn(port), hello + out
    if kind == "continuation":
        first = get_block("/small", port)
        out = [w.headers(1, first, end_stream=True, end_headers=False)]
        chunk = b"\x00" * 4096  # junk: the block is never finished, so never decoded
        for _ in range((MAX_HEAD_SIZE // 2 - len(first)) // len(chunk)):
            out.append(w.continuation(1, chunk))
        return Conn(port), hello + out
    if kind == "hpack_bomb":
        # 4,000 + 4 + 32 bytes of table entry: the table (4,096) holds it alone
        block = get_block("/bomb", port) + w.literal_indexed("x-aa", "v" * 4000) + w.indexed(62) * 40
        return Conn(port), hello + [w.headers(1, block, end_stream=True)]
    if kind == "ping_flood":
        out = [w.ping(i.to_bytes(8, "big")) for i in range(1500)] + [w.settings() for _ in range(500)]
        return Conn(port, rcvbuf=4096), hello + out
    if kind == "empty_flood":
        return Conn(port), hello + [w.frame(0x20, 0, 0) for _ in range(2000)]
    if kind == "zero_window":
        hello = [w.PREFACE, w.settings([(w.ENABLE_PUSH, 0), (w.INITIAL_WINDOW_SIZE, 0)])]
        return Conn(port), hello + [w.headers(1 + 2 * i, get_block("/files/big.bin", port), end_stream=True)
                                    for i in range(streams)]
    if kind == "half_open":
        out = []
        for i in range(streams):
            sid = 1 + 2 * i
            out += [w.headers(sid, get_block("/sink", port, "POST", [("content-length", "1000000")])),
                    w.data(sid, b"b" * 1024)]
        return Conn(port), hello + out
    if kind == "stream_ids":
        return Conn(port), hello + [w.headers(w.MAX_WINDOW, get_block("/small", port), end_stream=True)]
    raise ValueError(kind)


def normal_h1(port):
    """An HTTP/1.1 GET /small on a new connection: (status, ms); status
    None if it failed."""
    t0 = time.monotonic()
    try:
        status, _ = net.http_get(port, "/small", timeout=10)
    except OSError:
        status = None
    return status, (time.monotonic() - t0) * 1000


def normal_h2(port):
    """An h2c GET /small on a new connection: (status, ms); status None if
    no complete answer came within 10 s."""
    t0 = time.monotonic()
    try:
        c = Conn(port)
    except OSError:
        return None, (time.monotonic() - t0) * 1000
    status = None
    try:
        c.send(w.PREFACE + w.settings() + w.headers(1, get_block("/small", port), end_stream=True))
        deadline = time.monotonic() + 10
        for _ in range(10000):
            if time.monotonic() > deadline or c.closed:
                break
            try:
                data = c.sock.recv(65536)
            except OSError:
                break
            if not data:
                break
            for ftype, flags, sid, payload in c.reader.feed(data):
                if ftype == w.SETTINGS and not flags & w.ACK:
                    c.send(w.settings_ack())
                if sid == 1 and ftype == w.HEADERS and status is None:
                    status = w.status_of(w.header_block(flags, payload))
                if sid == 1 and ftype in (w.HEADERS, w.DATA) and flags & w.END_STREAM:
                    return status, (time.monotonic() - t0) * 1000
        return None, (time.monotonic() - t0) * 1000
    finally:
        c.close()


def upstream_stats(port):
    """(requests, connections) scripts/bench/upstream.py has served and
    accepted so far (this request's connection included)."""
    try:
        _, body = net.http_get(port, "/__stats", timeout=5)
        d = json.loads(body)
        return d["requests"], d["connections"]
    except (OSError, ValueError, KeyError):
        return None


def metrics(admin_port):
    """sluice's HTTP/2 counters from /metrics: {series: value}."""
    try:
        status, body = net.http_get(admin_port, "/metrics", timeout=5)
    except OSError:
        return {}
    out = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("sluice_http2_") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name.replace("sluice_http2_", "")] = float(value)
            except ValueError:
                pass
    return out if status == 200 else {}


def settled_rss(p):
    return procfs.settled(lambda: procfs.rss_kib(p.pids()) * KiB)


def outcome(conns):
    """What sluice sent a kind's connections, in a few words."""
    goaways, resets, statuses = {}, {}, {}
    closed = errors = pings = 0
    for c in conns:
        if c.goaway is not None:
            name = w.error_name(c.goaway)
            goaways[name] = goaways.get(name, 0) + 1
        for k, v in c.resets.items():
            resets[k] = resets.get(k, 0) + v
        for k, v in c.statuses.items():
            statuses[k] = statuses.get(k, 0) + v
        closed += c.closed
        errors += bool(c.error)
        pings += c.pings
    parts = ["GOAWAY %s x%d" % kv for kv in sorted(goaways.items())]
    parts += ["RST_STREAM %s x%d" % kv for kv in sorted(resets.items())]
    parts += ["%d x%d" % kv for kv in sorted(statuses.items())]
    if pings:
        parts.append("%d PING acks" % pings)
    parts.append("%d closed by sluice" % closed)
    if errors:
        parts.append("%d send errors" % errors)
    return "; ".join(parts)


def counters_delta(before, after):
    d = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
    return ", ".join("%s +%d" % (k, v) for k, v in sorted(d.items())) or "-"


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run(args):
    nofile = raise_nofile(65536)
    kinds = args.kinds
    need = args.conns * 2 + 2 * (args.conns // len(kinds)) * args.streams * 2 + 200
    if nofile < need:
        raise Fail("RLIMIT_NOFILE %d is below the %d descriptors the run needs" % (nofile, need))
    www = os.path.join(args.tmp, "www")
    os.makedirs(os.path.join(www, "files"), exist_ok=True)
    with open(os.path.join(www, "files", "big.bin"), "wb") as f:
        f.write(b"0123456789abcdef" * (MiB // 16))
    up_port = net.free_port()
    up = Proc("upstream", [sys.executable, os.path.join(BENCH_DIR, "upstream.py"), "--port", str(up_port),
                           "--root", www], os.path.join(args.tmp, "upstream.log"))
    conns = {}
    try:
        if not wait_for(lambda: net.listening(up_port), 10):
            raise Fail("the upstream did not start:\n" + up.log_tail())
        port, admin = net.free_port(), net.free_port()
        sl = Proc("sluice", [args.bin, "--listen", "127.0.0.1:%d" % port, "--upstream", "127.0.0.1:%d" % up_port,
                             "--http2-cleartext", "--workers", "1", "--max-connections", "20000",
                             "--access-log", "off", "--admin", "127.0.0.1:%d" % admin],
                  os.path.join(args.tmp, "sluice.log"), env=dict(os.environ, RUST_LOG="warn"))
        if not wait_for(lambda: net.listening(port) and net.listening(admin), 10):
            raise Fail("sluice did not start:\n" + sl.log_tail())
        for _ in range(3):  # warm-up: buffers and the pool at their working size
            normal_h1(port)
            normal_h2(port)
        base = settled_rss(sl)
        per = args.conns // len(kinds)
        print("h2_attacks: sluice pid %d on 127.0.0.1:%d, upstream.py on %d; %d connections, %d per kind "
              "(%s), %d streams each for zero_window and half_open; RSS before: %.1f MiB"
              % (sl.pid, port, up_port, per * len(kinds), per, ", ".join(kinds), args.streams, base / MiB),
              flush=True)
        rows = []
        last = base
        ok = True
        for kind in kinds:
            t0 = time.monotonic()
            m0, u0 = metrics(admin), upstream_stats(up_port)
            conns[kind] = []
            for i in range(per):
                try:
                    c, out = attack(kind, port, args.streams)
                except OSError as e:
                    raise Fail("%s: connection %d of %d could not connect: %s" % (kind, i + 1, per, e)) from e
                conns[kind].append(c)
                c.send(b"".join(out))
            time.sleep(0.5)
            if kind != "ping_flood":  # its replies are left unread until the end
                for c in conns[kind]:
                    # no SETTINGS acknowledgement inside a header block (RFC 9113 §6.10)
                    c.drain(ack_settings=kind != "continuation")
            rss = settled_rss(sl)
            u1 = upstream_stats(up_port)
            h1, h1_ms = normal_h1(port)
            h2, h2_ms = normal_h2(port)
            ok &= h1 == 200 and h2 == 200 and sl.alive()
            rows.append({"kind": kind, "conns": per, "growth": rss - last, "rss": rss,
                         "answer": outcome(conns[kind]), "metrics": counters_delta(m0, metrics(admin)),
                         "upstream": "%d / %d" % (u1[0] - u0[0], u1[1] - u0[1] - 1) if u0 and u1 else "?",
                         "normal": "h1 %s %.0f ms, h2 %s %.0f ms" % (h1, h1_ms, h2, h2_ms),
                         "secs": time.monotonic() - t0})
            print("h2_attacks: %-12s +%.0f KiB (%.1f KiB/conn) in %.1f s; %s; normal request: %s"
                  % (kind, (rss - last) / KiB, (rss - last) / KiB / per, rows[-1]["secs"], rows[-1]["answer"],
                     rows[-1]["normal"]), flush=True)
            last = rss
        time.sleep(args.hold)
        during = settled_rss(sl)
        h1, h1_ms = normal_h1(port)
        h2, h2_ms = normal_h2(port)
        ok &= h1 == 200 and h2 == 200 and sl.alive()
        for kind in kinds:  # what came late (timeouts, the floods' GOAWAY)
            for c in conns[kind]:
                c.drain(ack_settings=False)
            for r in rows:
                if r["kind"] == kind:
                    r["final"] = outcome(conns[kind])
        m_end = metrics(admin)
        for cs in conns.values():
            for c in cs:
                c.close()
        conns = {}
        closed_at = time.monotonic()
        after_1s = procfs.settled(lambda: procfs.rss_kib(sl.pids()) * KiB, within=5.0, step=1.0)
        # sluice trims its free lists every 25 s (then malloc_trim): wait
        # for RSS to come back within 10% of what the attacks added
        target = base + (during - base) / 10
        after, back = after_1s, None
        for _ in range(int(args.after_secs / 2) + 1):
            after = procfs.rss_kib(sl.pids()) * KiB
            if after <= target:
                back = time.monotonic() - closed_at
                break
            if time.monotonic() - closed_at >= args.after_secs:
                break
            time.sleep(2.0)
        alive = sl.alive()
        ok &= alive
    finally:
        for cs in conns.values():
            for c in cs:
                c.close()
        Proc.stop_all()
    n = per * len(kinds)
    print()
    print("| attack kind | connections | RSS growth | per connection | what sluice answered (after the hold) | "
          "upstream requests / connections | /metrics growth | normal request meanwhile |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.0f KiB | %.1f KiB | %s | %s | %s | %s |" % (
            r["kind"], r["conns"], r["growth"] / KiB, r["growth"] / KiB / r["conns"], r.get("final", r["answer"]),
            r["upstream"], r["metrics"].replace('worker="0",', "").replace('{worker="0"}', ""), r["normal"]))
    print()
    print("| sluice RSS | MiB | per connection |")
    print("|---|---|---|")
    print("| before (idle, after a warm-up) | %.1f | - |" % (base / MiB))
    print("| during (all %d held, %.0f s after the last kind) | %.1f | %.1f KiB |"
          % (n, args.hold, during / MiB, (during - base) / KiB / n))
    print("| after (all closed, settled within 5 s) | %.1f | %.2f KiB left |" % (after_1s / MiB,
                                                                              (after_1s - base) / KiB / n))
    print("| after, once back within 10%% of the growth (sluice's trim runs every 25 s) | %.1f | %.2f KiB left; %s |"
          % (after / MiB, (after - base) / KiB / n,
             "after %.0f s" % back if back is not None else "NOT back after %.0f s" % args.after_secs))
    print()
    print("normal requests at the end of the hold: h1 %s %.0f ms, h2 %s %.0f ms; sluice %s; HTTP/2 counters at "
          "the end: %s" % (h1, h1_ms, h2, h2_ms, "alive" if alive else "EXITED",
                           ", ".join("%s %d" % kv for kv in sorted(m_end.items()) if kv[1]) or "-"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(prog="h2_attacks.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--conns", type=int, default=1000, help="connections in all, split evenly over the kinds")
    ap.add_argument("--streams", type=int, default=10, help="streams per zero_window and half_open connection")
    ap.add_argument("--hold", type=float, default=5.0, help="seconds all are held after the last kind")
    ap.add_argument("--after-secs", type=float, default=60.0,
                    help="longest wait after the close for RSS to come back (s)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the attack kinds to run, in this order (default: all)")
    args = ap.parse_args()
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not args.kinds or any(k not in KINDS for k in args.kinds):
        ap.error("--kinds: a comma-separated list of %s" % ",".join(KINDS))
    if not (len(args.kinds) <= args.conns <= 4000 and 1 <= args.streams <= 100 and 0 <= args.hold <= 40
            and 0 <= args.after_secs <= 120):
        ap.error("--conns %d..4000, --streams 1..100, --hold 0..40, --after-secs 0..120" % len(args.kinds))
    return main_guard(run, args, "h2_attacks")


if __name__ == "__main__":
    sys.exit(main())

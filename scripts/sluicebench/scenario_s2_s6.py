"""Scenarios S2-S6 (S3 and S5 also over TLS, as T4 and T6): a new
connection per request, the 100 MiB download and upload, slow readers, and
idle keep-alive connections. Each returns {metric: value} for one (peer,
repetition)."""

import os
import shlex
import socket
import subprocess
import time

from .net import read_response, still_open
from .peers import scheme_of
from .plan import BIG_SIZE, LOAD_CPU, MIB
from .procfs import settled
from .procs import run_cmd
from .runstate import pinned, problem
from .stats import median
from .wrk import run_wrk, warm_up


def s2(ctx, peer, where):
    """S2: a new connection per request (wrk -c64 -H 'Connection: close',
    /small): req/s, proxy CPU µs/request."""
    warm_up(ctx, peer, where, 64, ["-H", "Connection: close"])
    c0 = peer.cpu()
    r = run_wrk(where, peer.port, 64, ctx.dur, ["-H", "Connection: close"])
    cpu = peer.cpu() - c0
    res = {"rps": r["rps"]}
    if peer.proc:
        res["cpu_us_req"] = cpu * 1e6 / r["requests"] if r["requests"] else None
    return res


def curl_transfer(ctx, where, peer, cmd, expect_bytes, body_file=None):
    """ctx.transfers sequential transfers on one proxy: the median MiB/s, and
    the proxy's CPU over all of them per MiB."""
    speeds = []
    c0 = peer.cpu()
    for _ in range(ctx.transfers):
        if body_file is not None and os.path.exists(body_file):
            os.unlink(body_file)
        rc, out = run_cmd(cmd, 300)
        try:
            code, size, total = out.strip().splitlines()[-1].split()
            code, size, total = int(code), int(float(size)), float(total)
        except (ValueError, IndexError):
            code, size, total = 0, 0, 0.0
        got = size
        if body_file is not None:  # the sink answers with the byte count it read
            try:
                with open(body_file) as f:
                    got = int(f.read().strip() or 0)
            except (OSError, ValueError):
                got = -1
        if rc != 0 or code != 200 or size != expect_bytes or got != expect_bytes or total <= 0:
            problem(where, shlex.join(cmd), "exit %s, status %s, %s bytes (expected %d, upstream got %s)\n%s"
                    % (rc, code, size, expect_bytes, got, out))
            return {}
        speeds.append(expect_bytes / MIB / total)
    cpu = peer.cpu() - c0
    res = {"mibs": median(speeds)}
    if peer.proc:
        res["cpu_ms_mib"] = cpu * 1e3 / (ctx.transfers * expect_bytes / MIB)
    return res


def curl_tls(peer):
    """curl's flags for PEER: TLS 1.3 without verifying the bench's own
    certificate, for a TLS peer; none for a plain one. HTTP/1.1 by ALPN:
    sluice offers h2 on TLS listeners by default, and curl would take it
    where the T rows' nginx and HAProxy offer only http/1.1."""
    return ["-k", "--tlsv1.3", "--tls-max", "1.3", "--http1.1"] if peer.tls else []


def s3(ctx, peer, where):
    """S3 (and T4 over TLS): ctx.transfers downloads of the 100 MiB file."""
    cmd = pinned(LOAD_CPU, ["curl", "-sS", "-o", "/dev/null", "--max-time", "120"] + curl_tls(peer) + [
        "-w", "%{http_code} %{size_download} %{time_total}\n",
        "%s://127.0.0.1:%d/files/big.bin" % (scheme_of(peer), peer.port)])
    return curl_transfer(ctx, where, peer, cmd, BIG_SIZE)


def s4(ctx, peer, where):
    """S4: ctx.transfers uploads of the 100 MiB file (curl -T) to the sink,
    which answers with the byte count it read."""
    resp = os.path.join(ctx.tmp, "sink-response")
    cmd = pinned(LOAD_CPU, ["curl", "-sS", "-o", resp, "--max-time", "120", "-H", "Expect:", "-T", ctx.big,
                            "-w", "%{http_code} %{size_upload} %{time_total}\n",
                            "http://127.0.0.1:%d/sink" % peer.port])
    return curl_transfer(ctx, where, peer, cmd, BIG_SIZE, body_file=resp)


def s5(ctx, peer, where, n=None, rate="100k"):
    """S5 (and T6 over TLS, N readers at RATE): N slow readers of the
    16 MiB file for ctx.slow_secs; peak RSS growth of the proxy."""
    if not peer.proc:
        return {}
    n = n or ctx.slow_n
    base = peer.rss()
    argv = ["curl", "-sS", "-o", "/dev/null", "--limit-rate", rate, "--max-time", str(ctx.slow_secs)] + curl_tls(
        peer) + ["-w", "%{http_code} %{size_download}\n",
                 "%s://127.0.0.1:%d/files/slow.bin" % (scheme_of(peer), peer.port)]
    cmd = pinned(LOAD_CPU, argv)
    procs = []
    peak = base
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        deadline = time.time() + ctx.slow_secs + 15
        while time.time() < deadline and any(p.poll() is None for p in procs):
            peak = max(peak, peer.rss())
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    bad, total = [], 0
    for p in procs:
        out = p.communicate()[0].decode("utf-8", "replace").strip()
        last = out.splitlines()[-1] if out else ""
        parts = last.split()
        ok = p.returncode == 28 and len(parts) == 2 and parts[0] == "200"  # 28: --max-time reached
        if ok:
            total += int(float(parts[1]))
        else:
            bad.append("exit %s: %s" % (p.returncode, out[-300:]))
    expected_each = int(rate.rstrip("k")) * 1000 * ctx.slow_secs
    if bad or total < 0.5 * n * expected_each:
        problem(where, shlex.join(cmd) + "   (x%d at once)" % n,
                "%d of %d readers failed; %d bytes read in all (about %d expected)\n%s"
                % (len(bad), n, total, n * expected_each, "\n".join(bad[:10])))
    return {"rss_peak_mib": (peak - base) / 1024.0, "rss_kib_conn": (peak - base) / n}


S6_BATCH = 1  # connections opened (each sending its GET) before their answers are read
S6_WARMUP = 4  # bursts opened, answered and closed before the baseline
S6_WARMUP_BATCH = 250  # connections per warm-up burst


def s6_batch(port, count, req, errs):
    """COUNT connections to PORT, each sending REQ, then each response
    read: the sockets that got a 200 (the others closed, counted in ERRS)."""
    group, good = [], []
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(req)
            group.append(s)
        except OSError as e:
            errs.append(str(e))
    for s in group:
        try:
            status, head, _, _ = read_response(s)
            if status == 200 and head.startswith(b"HTTP/1.1 "):
                good.append(s)
                continue
            errs.append("bad response")
        except (OSError, ValueError) as e:
            errs.append(str(e))
        s.close()
    return good


def s6(ctx, peer, where):
    """S6: ctx.idle_n idle keep-alive connections, each after one GET, after
    S6_WARMUP bursts of S6_WARMUP_BATCH: RSS KiB per connection (settled
    RSS after less before)."""
    if not peer.proc:
        return {}
    n = ctx.idle_n
    socks, errs = [], []
    req = ("GET /small HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % peer.port).encode()
    deadline = time.time() + 120
    try:
        for _ in range(S6_WARMUP):
            for s in s6_batch(peer.port, S6_WARMUP_BATCH, req, errs):
                s.close()
        base = settled(peer.rss)
        for start in range(0, n, S6_BATCH):
            if time.time() > deadline:
                errs.append("time limit reached after %d connections" % len(socks))
                break
            socks += s6_batch(peer.port, min(S6_BATCH, n - start), req, errs)
        time.sleep(1.0)
        rss = settled(peer.rss)
        alive = sum(1 for s in socks[:200] if still_open(s))
    finally:
        for s in socks:
            s.close()
    if errs or alive < min(200, len(socks)):
        problem(where, "python: %d connections, one GET each, kept open (after %d x %d warm-up)"
                % (n, S6_WARMUP, S6_WARMUP_BATCH),
                "%d failed, %d of the first %d still open after 1 s; first errors: %s"
                % (len(errs), alive, min(200, len(socks)), "; ".join(errs[:5])))
    if not socks:
        return {}
    return {"rss_kib_conn": (rss - base) / len(socks)}

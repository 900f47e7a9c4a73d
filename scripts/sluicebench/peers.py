"""The proxies under test (and the direct connection): each started fresh
for one measured run, on its own port and pinned to the proxy CPU, checked
afterwards and stopped by its PID (Peer, measure)."""

import os
import re
import shlex
import time

from . import h2load, haproxy, runstate
from .net import free_port
from .origins import nginx_user_line
from .plan import MAX_CONNS, PROXY_CPU, SLUICES
from .procfs import cpu_seconds, rss_kib
from .procs import Proc, run_cmd
from .ready import wait_ready, wait_ready_tls
from .runstate import ACCESS_LOG_FLAG, TLS_FACTS, pinned, problem, say
from .templates import fill
from .tools import tool_path


def has_flag(binary, flag):
    """True when sluice BINARY's --help lists FLAG (an older build may lack
    --access-log: it logs access lines at RUST_LOG=info instead; or
    --listen-tls: it has no T rows; or --no-http2: no H rows)."""
    rc, out = run_cmd([binary, "--help"], 10)
    return rc == 0 and flag in out


def sluice_log_args(name, access_log, d):
    """(extra flags, RUST_LOG) for sluice peer NAME: access log off, or
    with ACCESS_LOG on into a file in D (text format) -- or, for a build
    without --access-log, its access lines at RUST_LOG=info on stderr (the
    peer's log file)."""
    if ACCESS_LOG_FLAG.get(name):
        if access_log:
            return ["--access-log", os.path.join(d, "access.log"), "--access-log-format", "text"], "warn"
        return ["--access-log", "off"], "warn"
    return [], "info" if access_log else "warn"


def nginx_http2(nginx_version):
    """(listen options, server directive) that turn HTTP/2 on in nginx
    NGINX_VERSION ("nginx/1.22.1"): `listen ... http2` before 1.25.1,
    `http2 on;` from it (the listen parameter is deprecated there)."""
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", nginx_version or "")
    if m and tuple(int(x) for x in m.groups()) >= (1, 25, 1):
        return "", "http2 on;"
    return " http2", ""


class Peer:
    """One proxy under test (or the direct connection), started fresh; with
    TLS ({"cert", "key", "combined"} paths) its listener speaks TLS only,
    and with H2 (and TLS) it offers h2 by ALPN too."""

    def __init__(self, name, tmp, bins, upstream_port, run_id, access_log=False, tls=None, h2=False):
        self.name = name
        self.proc = None
        self.tls = tls
        self.h2 = h2 and tls is not None
        self.facts = None  # the TLS probe's answer, once ready
        if name == "direct":
            self.port = upstream_port
            return
        self.port = free_port()
        d = os.path.join(tmp, "%s-%s" % (name, run_id))
        os.makedirs(d)
        log = os.path.join(d, "stderr.log")
        if name in SLUICES:
            log_args, level = sluice_log_args(name, access_log, d)
            listen = (["--listen-tls", "127.0.0.1:%d" % self.port, "--tls-cert", tls["cert"], "--tls-key", tls["key"]]
                      if tls else ["--listen", "127.0.0.1:%d" % self.port])
            argv = ([bins[name]] + listen + ["--upstream", "127.0.0.1:%d" % upstream_port,
                                             "--max-connections", str(MAX_CONNS)] + log_args
                    + runstate.SLUICE_ARGS)
            env = dict(os.environ, RUST_LOG=level)
            self.proc = Proc(name, pinned(PROXY_CPU, argv), log, env=env)
        elif name in ("nginx", "nginx-nobuf", "nginx-deferred"):
            conf = os.path.join(d, "nginx.conf")
            h2_listen, h2_on = nginx_http2(runstate.NGINX_VERSION) if self.h2 else ("", "")
            fill("nginx-proxy.conf.in", conf, {
                "USER": nginx_user_line(), "NOFILE": runstate.NOFILE, "WORKER_CONNECTIONS": MAX_CONNS + 1000,
                "DIR": d, "PORT": self.port, "UPSTREAM_PORT": upstream_port,
                "BUFFERING": "proxy_buffering off; proxy_request_buffering off;" if name == "nginx-nobuf" else "",
                "LISTEN_OPTS": (" ssl" if tls else "") + h2_listen + (" deferred" if name == "nginx-deferred" else ""),
                "SSL": ("ssl_certificate %s; ssl_certificate_key %s; ssl_protocols TLSv1.2 TLSv1.3; %s"
                        % (tls["cert"], tls["key"], h2_on)) if tls else "",
            })
            self.proc = Proc(name, pinned(PROXY_CPU, [tool_path("nginx"), "-p", d, "-c", conf, "-g", "daemon off;"]), log)
        elif name == "haproxy":
            cfg = os.path.join(d, "haproxy.cfg")
            alpn = "h2,http/1.1" if self.h2 else "http/1.1"
            haproxy.write_config(cfg, self.port, upstream_port, MAX_CONNS, runstate.NOFILE,
                                 bind_opts=(" ssl crt %s alpn %s" % (tls["combined"], alpn)) if tls else "")
            self.proc = Proc(name, pinned(PROXY_CPU, [tool_path("haproxy"), "-db", "-f", cfg]), log)
        else:
            raise ValueError(name)

    def ready(self, path):
        if self.proc and self.tls:
            self.facts = wait_ready_tls(self.proc, self.port, path)
        elif self.proc:
            wait_ready(self.proc, self.port, path)
        if self.proc and self.h2:
            try:
                chosen = h2load.alpn(self.port)
            except OSError as e:
                raise RuntimeError("%s: the ALPN probe failed: %s" % (self.name, e)) from e
            if chosen != "h2":
                raise RuntimeError("%s, offered h2 and http/1.1 by ALPN, chose %r" % (self.name, chosen))
        time.sleep(0.2)  # let nginx's worker settle before the baseline

    def pids(self):
        return self.proc.pids() if self.proc else []

    def cpu(self):
        return cpu_seconds(self.pids())

    def rss(self):
        return rss_kib(self.pids())

    def check(self, where):
        """After a run: the proxy must still be alive, its log free of panics."""
        if not self.proc:
            return
        if not self.proc.alive():
            problem(where, shlex.join(self.proc.argv),
                    "%s exited with status %s during the run:\n%s" % (self.name, self.proc.p.returncode, self.proc.log_tail()))
            return
        tail = self.proc.log_tail(200)
        bad = [l for l in tail.splitlines() if "FD limit (" not in l and re.search(r"panick|\bERROR\b|\[emerg\]|\[alert\]|\[crit\]|\[ALERT\]", l)]
        if bad:
            problem(where, shlex.join(self.proc.argv), "log lines:\n" + "\n".join(bad[-20:]))

    def stop(self):
        if self.proc:
            self.proc.stop()


def scheme_of(peer):
    """The URL scheme to reach PEER with: https for a TLS peer."""
    return "https" if peer.tls else "http"


def measure(ctx, where, make_peer, fn):
    """Starts a fresh proxy (make_peer()), waits until it answers, runs
    fn(ctx, peer, where), checks the proxy survived, stops it by its PID;
    the result dict ({} after a problem, which is recorded)."""
    peer = None
    try:
        peer = make_peer()
        peer.ready("/small")
        if peer.facts:
            TLS_FACTS[peer.name] = peer.facts
        t0 = time.time()
        res = fn(ctx, peer, where)
        peer.check(where)
        say("%-22s %s (%.1f s)" % (where, " ".join("%s=%.4g" % (k, v) for k, v in sorted(res.items())
                                                   if isinstance(v, (int, float)) and not (k.startswith("sc_") and v < 0.05)),
                                   time.time() - t0))
        return res
    except RuntimeError as e:
        problem(where, shlex.join(peer.proc.argv) if peer and peer.proc else where, str(e))
        return {}
    finally:
        if peer:
            peer.stop()

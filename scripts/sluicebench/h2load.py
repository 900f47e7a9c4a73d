"""HTTP/2 load for bench.py's H rows: h2load's (nghttp2-client) summary
read, the latency percentiles of its per-request log (--log-file), and a
probe of which protocol a TLS peer chooses by ALPN."""

import re
import socket
import ssl

from .stats import percentile

UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse(out):
    """h2load's summary: {"secs" (finished in), "started", "done",
    "succeeded", "failed", "errored", "timeout", "2xx", "non2xx",
    "data_bytes", "protocol" (ALPN, e.g. "h2")}; missing numbers are 0,
    a missing protocol None."""
    r = {}
    m = re.search(r"finished in ([\d.]+)(us|ms|s|m),", out)
    r["secs"] = float(m.group(1)) * UNIT_S[m.group(2)] if m else 0.0
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", out)
    for i, k in enumerate(("total", "started", "done", "succeeded", "failed", "errored", "timeout")):
        r[k] = int(m.group(i + 1)) if m else 0
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    r["2xx"] = int(m.group(1)) if m else 0
    r["non2xx"] = sum(int(m.group(i)) for i in (2, 3, 4)) if m else 0
    m = re.search(r"traffic: .*?, [\d.]+\w*B \((\d+)\) data", out)
    r["data_bytes"] = int(m.group(1)) if m else 0
    m = re.search(r"^Application protocol: (\S+)", out, re.M)
    r["protocol"] = m.group(1) if m else None
    return r


def latencies_ms(log_path):
    """The per-request times (ms, until the end of the response) of
    h2load's --log-file (tab-separated: start µs, status, µs), successful
    (2xx) requests only."""
    out = []
    with open(log_path) as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1].startswith("2"):
                out.append(int(parts[2]) / 1000.0)
    return out


def percentiles(log_path, pcts=(50, 99)):
    """{"pN": ms} of the successful requests in h2load's --log-file."""
    lat = latencies_ms(log_path)
    return {"p%d" % p: percentile(lat, p) for p in pcts}


def alpn(port, offer=("h2", "http/1.1"), timeout=3.0):
    """The protocol a TLS listener on 127.0.0.1:PORT chooses from OFFER
    (None: no ALPN answer). Raises OSError."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(list(offer))
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.selected_alpn_protocol()

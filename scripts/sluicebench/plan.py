"""What bench.py runs: the peers, the scenarios with their sizes, rates and
connection counts, the two CPUs, the proxies' connection limit; the run keys
(s1_key, T1_SYS) and the S1 files' paths."""

MIB = 1 << 20
PEERS = ["sluice", "sluice-old", "nginx", "nginx-nobuf", "nginx-deferred", "haproxy", "direct"]
# Run only when asked for with --peers (like sluice-old): nginx with `listen ... deferred`
# (TCP_DEFER_ACCEPT, which sluice sets by default), to compare like with like.
OPT_IN = ("sluice-old", "nginx-deferred")
SLUICES = ("sluice", "sluice-old")  # peers that are sluice binaries
SCENARIOS = ["S1", "S2", "S3", "S4", "S5", "S6", "T1", "T2", "T3", "T4", "T5", "T6", "H1", "H2", "H3"]
TLS_SCENARIOS = ("T1", "T2", "T3", "T4", "T5", "T6")  # issue 23: the peers terminate TLS
T_SIZE = "1k"  # T1-T3's body: /files/s1-1k.bin
T1_CONNS = 64
T_STIME_PROCS = 4  # parallel `openssl s_time` clients of T2/T3
T6_READERS, T6_RATE = 100, "10k"  # T6: slow TLS readers, curl --limit-rate
H2_SCENARIOS = ("H1", "H2", "H3")  # issue 24: the peers speak h2 over TLS
H1_CONNS, H1_STREAMS = 64, 10  # H1: h2load -c64 -m10
H3_CONNS, H3_STREAMS = 10, 10  # H3: slow streams, 10 on each of 10 connections
H3_RATE, H3_WINDOW = 10000, 16384  # H3: bytes/s per slow stream; their initial window
H3_SAMPLE_SECS = 2.0  # H3: RSS sampled this long, 1 s after the slow streams started
SMALL_SIZE = 256  # bytes of the S2 response body (/small)
# S1's body sizes: (tag, bytes); static files www/files/s1-TAG.bin that the
# upstream serves with its usual response head. Scenario S1 runs all of them,
# S1-TAG one (e.g. --scenarios S1-1k,S1-16k).
S1_SIZES = [("200", 200), ("1k", 1024), ("16k", 16384)]
S1_LABEL = {"200": "200 B", "1k": "1 KiB", "16k": "16 KiB"}
S1_BYTES = dict(S1_SIZES)
S1_CONNS = (64, 512)
S1_LOG_SIZE = "1k"  # the body size of the access-log-on row (the first size run if 1k is not)
BIG_SIZE = 100 * MIB  # S3 download and S4 upload
SLOW_SIZE = 16 * MIB  # S5 file (a reader gets ~1 MiB in 10 s at 100 KB/s)
PROXY_CPU = 1
LOAD_CPU = 0
MAX_CONNS = 20000  # connection limit given to every proxy (S6 needs > 10,000)
BEST_OF = ("nginx", "nginx-nobuf", "nginx-deferred", "haproxy")  # the peers "best peer" is chosen from


def s1_path(tag):
    """The URL path of S1's static file of body size TAG: /files/s1-TAG.bin."""
    return "/files/s1-%s.bin" % tag


def s1_key(tag, conns, kind=""):
    """Run key of S1 body size TAG at CONNS connections: "S1-1k/c64";
    KIND "log" (access log on), "sys" (syscalls), "logsys"."""
    return "S1-%s/c%d%s" % (tag, conns, kind)


T1_SYS = "T1/sys"  # the run key of T1's syscall run

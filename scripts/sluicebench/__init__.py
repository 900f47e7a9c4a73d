"""Helpers shared by the measurement scripts in scripts/ (Python 3 stdlib only).

  procs     start children and stop them by their own PID, wait for a port,
            kill the children a process left behind (by PID), bounded runs
  procfs    /proc readers: RSS/HWM, CPU time (ticks and schedstat), fd and
            socket counts, CPU busy ticks, kernel TCP counters
  net       free loopback ports, /proc/net/tcp and sock_diag socket tables,
            a small HTTP/1.1 client (one GET, reading one response)
  upstream  building blocks of the scripted upstreams (listen on 127.0.0.1:0
            and print the port, read a request head, reply) and two ready
            upstreams for the shell scripts (`python3 -m sluicebench.upstream`)
  stats     medians, percentiles, ratios, spreads
  tls       the T rows' certificate (openssl), a TLS probe, s_time output, the
            idle TLS client driver
  tls_idle  idle TLS keep-alive connections held by their own process
  h2wire    HTTP/2 frames and HPACK literals by hand (h2slow, h2_attacks.py)
  h2load    h2load's summary and per-request log read, an ALPN probe
  h2slow    slow HTTP/2 streams (flow control) held by their own process
  units     sizes: parse '100M', print '1.5 MiB'
  nginx     nginx as a static origin or a reverse-proxy peer
  haproxy   HAProxy as a reverse-proxy peer (scripts/bench/haproxy.cfg.in)
  templates fill the @NAME@ fields of the config templates in scripts/bench/

The scripts import it from their own folder (scripts/ is sys.path[0] when a
script there runs); scripts/lib.sh runs `python3 -m sluicebench...` with
PYTHONPATH set to scripts/.
"""

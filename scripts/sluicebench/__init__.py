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

bench.py's parts (scripts/bench.py is the entry point and --help text):
  runs      main: the command line, the preparations, the run loop, report
  cli       the flags and what they select (scenarios, S1 sizes, peers)
  prepare   tools (apt-get), CPU pinning, binaries, temp dir, files,
            upstreams, versions
  plan      peers, scenarios, sizes, CPUs, limits; run keys
  runstate  the run's shared state: progress, problems, pinning, NOFILE,
            what each sluice binary supports
  tools     find / install tools, their versions, build and copy sluice
  ready     wait until a started server answers (HTTP or TLS)
  origins   the upstreams: nginx static origin, scripts/bench/upstream.py
  peers     a proxy under test started fresh for a run (Peer, measure)
  wrk       wrk runs and their parsed summary, the warm-up run
  scenario_s1, scenario_s2_s6, scenario_tls, scenario_h2
            the scenarios S1 (+ syscalls), S2-S6, T2/T3/T5/T6, H1-H3
  tables    the report's markdown tables (main, syscalls by call, new/old)
  targets   paired per-repetition ratios, issues 22-24's targets
  report    the report on stdout and the --json file

The scripts import it from their own folder (scripts/ is sys.path[0] when a
script there runs); scripts/lib.sh runs `python3 -m sluicebench...` with
PYTHONPATH set to scripts/.
"""

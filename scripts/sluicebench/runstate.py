"""The state one bench.py run shares between its modules: progress lines
and the problems list, CPU pinning, the descriptor limit, the --sluice-args,
nginx's version, and what each sluice binary supports.

The names rebound during a run (PIN, NOFILE, NGINX_VERSION, SLUICE_ARGS) are
read as runstate.NAME, never imported by name."""

import resource
import sys

from .procs import Proc

PROBLEMS = []  # (where, command, output) of everything that went wrong


def say(msg):
    """A progress line on stderr: 'bench: MSG'."""
    print("bench: " + msg, file=sys.stderr, flush=True)


def problem(where, cmd, output):
    """Records a problem of run WHERE (the command and its output) for the
    report's end, and says it."""
    PROBLEMS.append((where, cmd, output.strip()))
    say("PROBLEM in %s: %s\n%s" % (where, cmd, output.strip()[-2000:]))


PIN = True  # False when the machine has fewer than 2 CPUs or no taskset


def pinned(cpu, argv):
    """ARGV run on CPU (taskset -c CPU), or as it is when PIN is off."""
    return (["taskset", "-c", str(cpu)] if PIN else []) + list(argv)


def stop_all():
    """Stops every child still running (procs.Proc), by its PID."""
    Proc.stop_all(say=say)


NOFILE = 20000
NGINX_VERSION = ""  # `nginx -v`'s answer, once asked (the H rows' http2 directive depends on it)
SLUICE_ARGS = []


def raise_nofile():
    """Raise RLIMIT_NOFILE (inherited by every child) as far as allowed."""
    global NOFILE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))  # works as root
        except (ValueError, OSError):
            want = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard) if hard != resource.RLIM_INFINITY else hard))
    NOFILE = want
    return NOFILE


ACCESS_LOG_FLAG = {}  # sluice peer name -> its binary takes --access-log
TLS_FLAG = {}  # sluice peer name -> its binary takes --listen-tls
TLS_FACTS = {}  # peer name -> what its TLS listener negotiated (sluicebench.tls.probe)
H2_FLAG = {}  # sluice peer name -> its binary speaks h2 (takes --no-http2)

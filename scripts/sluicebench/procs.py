"""Child processes: start them, wait until they listen, stop them by their
own PID (TERM, then KILL after a grace period), and stop the children a
process left behind (by PID, checking each is still the same process).
Never by name, never a process group we did not create."""

import os
import select
import shutil
import signal
import subprocess
import sys
import time

from . import net, procfs


class Fail(Exception):
    """A measurement that could not be made (printed, exit status 1)."""


def stop(p, grace=3.0):
    """Stops child Popen `p` by its PID: TERM, then KILL after `grace` s."""
    if p.poll() is None:
        try:
            p.terminate()
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        except ProcessLookupError:
            pass


def stop_many(plist, grace=3.0):
    """TERM all of PLIST at once, then wait (KILL those left after GRACE s)."""
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


def kill_leftovers(kids, within=3.0):
    """KILL each (pid, start_time) in KIDS that is still that same process
    after WITHIN s (e.g. nginx workers that outlived their master)."""
    deadline = time.monotonic() + within
    for pid, st in kids:
        while st is not None and procfs.start_time(pid) == st and time.monotonic() < deadline:
            time.sleep(0.05)
        if st is not None and procfs.start_time(pid) == st:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Procs:
    """Every child started through it, stopped by its own PID."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p

    def stop(self, plist, grace=3.0):
        stop_many(plist, grace)

    def stop_all(self, grace=3.0):
        stop_many(list(reversed(self.procs)), grace)
        for p in self.procs:
            for stream in (p.stdin, p.stdout, p.stderr):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self.procs = []


class Proc:
    """A long-running process with its output in a log file; stopped by its
    own PID, and its descendants (found in /proc) by theirs."""

    STARTED = []

    def __init__(self, name, argv, logpath, env=None):
        self.name = name
        self.argv = list(argv)
        self.logpath = logpath
        self.logf = open(logpath, "ab")
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.logf,
                                  stderr=subprocess.STDOUT, env=env)
        self.pid = self.p.pid
        Proc.STARTED.append(self)

    def alive(self):
        return self.p.poll() is None

    def pids(self):
        return [self.pid] + procfs.children_of(self.pid) if self.alive() else []

    def log_tail(self, n=30):
        return log_tail(self.logpath, n, indent="")

    def stop(self, timeout=5.0, say=None):
        if self in Proc.STARTED:
            Proc.STARTED.remove(self)
        kids = [(k, procfs.start_time(k)) for k in procfs.children_of(self.pid)] if self.alive() else []
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                if say:
                    say("%s (pid %d) ignored SIGTERM for %.0f s: SIGKILL" % (self.name, self.pid, timeout))
                os.kill(self.pid, signal.SIGKILL)
                self.p.wait(5)
        kill_leftovers(kids)
        self.logf.close()
        return self.p.returncode

    @classmethod
    def stop_all(cls, say=None):
        for p in list(reversed(cls.STARTED)):
            try:
                p.stop(say=say)
            except Exception as e:  # keep stopping the others
                if say:
                    say("stopping %s: %s" % (p.name, e))


def finish_piped(p, grace=10.0):
    """Ends child Popen P, one that stops when its stdin closes: closes its
    stdin, waits up to GRACE s, then KILLs it by its PID."""
    try:
        p.stdin.close()
    except OSError:
        pass
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def wait_for(pred, within, step=0.05):
    """Calls PRED every STEP s until it returns something true (returned) or
    WITHIN s have passed (None)."""
    deadline = time.monotonic() + within
    for _ in range(int(within / step) + 2):
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            break
        time.sleep(step)
    return None


def wait_listening(p, port, within=5.0):
    """True once PORT listens while child P still runs; False if P exits or
    WITHIN s pass."""
    wait_for(lambda: p.poll() is not None or net.listening(port), within)
    return p.poll() is None and net.listening(port)


def start_listening(argv_for, logpath, procs, env=None, tries=3, within=5.0):
    """Starts argv_for(port) on a free port, output to LOGPATH, until it
    listens (a free port can be taken between bind(0) and the child's bind:
    up to TRIES ports). Returns (Popen, port, argv); raises Fail."""
    for _ in range(tries):
        port = net.free_port()
        argv = argv_for(port)
        with open(logpath, "wb") as log:
            p = procs.start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
        if wait_listening(p, port, within):
            return p, port, argv
        procs.stop([p])
    raise Fail(f"{os.path.basename(argv[0])} did not start; log:\n{log_tail(logpath)}")


def start_port_child(procs, argv, within=10.0, **kw):
    """Starts ARGV (a child that prints its listening port as its first line
    on stdout); returns (Popen, port); raises Fail."""
    p = procs.start(argv, stdin=kw.pop("stdin", subprocess.DEVNULL), stdout=subprocess.PIPE, **kw)
    ready, _, _ = select.select([p.stdout], [], [], within)
    line = p.stdout.readline().strip() if ready else ""
    if isinstance(line, bytes):
        line = line.decode("latin-1")
    if not line.isdigit():
        raise Fail(f"upstream did not start ({line!r})")
    return p, int(line)


def self_child(script, *args):
    """argv to run SCRIPT (a file) again as a child with ARGS."""
    return [sys.executable, os.path.abspath(script), *map(str, args)]


def run_cmd(argv, timeout, env=None):
    """Runs a bounded command; returns (rc, output). A timeout kills it (by PID)
    and gives rc None."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
        return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = ((e.stdout or b"") + (e.stderr or b"")).decode("utf-8", "replace")
        return None, out + "\n[killed after %.0f s]" % timeout


def log_tail(path, n=15, indent="    "):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(indent + l for l in lines[-n:])
    except OSError:
        return indent + "(no log)"


def taskset(cpu):
    """argv prefix pinning to CPU (taskset -c), [] without taskset or 2 CPUs."""
    if cpu is None or not shutil.which("taskset") or (os.cpu_count() or 1) < 2:
        return []
    return ["taskset", "-c", str(cpu)]


def main_guard(run, args, prefix):
    """Runs run(args) with SIGTERM as exit 143; a Fail prints PREFIX: message, exit 1."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run(args)
    except Fail as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        return 1

"""Syscalls counted by kernel tracepoints (`perf stat -e raw_syscalls:sys_enter,
syscalls:sys_enter_NAME,... -p PID,...`): counting in the kernel, no ptrace,
so the traced process runs at its own speed (strace -c stops it at every
call). Used by bench.py for the syscalls-per-request rows.

    ok, why = available(perf, mount=True)  # tracefs mounted (as root) and events probed
    events = events_for(["sendto", "recvfrom", ...])
    c = Counter(perf, events, pids, out_file, limit_s=60)
    c.wait_attached()
    ... the load ...
    counts = c.stop()  # {"total": n, "sendto": n, ...}
"""

import os
import signal
import subprocess
import time

TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# per-call tracepoints counted by default (besides raw_syscalls:sys_enter, the
# total); a name this kernel has no tracepoint for is left out (and said)
CALLS = ("sendto", "recvfrom", "writev", "sendmsg", "recvmsg", "readv", "epoll_wait", "epoll_ctl",
         "getsockopt", "read", "write", "epoll_pwait", "epoll_pwait2", "setsockopt", "accept4",
         "close", "shutdown", "sendmmsg", "recvmmsg", "splice", "sendfile64", "ioctl", "clock_gettime",
         "futex", "pread64", "pwrite64")


def tracefs():
    """The mounted tracefs directory that has events/syscalls, or None."""
    for d in TRACEFS:
        if os.path.isdir(os.path.join(d, "events", "syscalls")):
            return d
    return None


def mount_tracefs():
    """As root: mount tracefs on /sys/kernel/tracing (nodev). Returns a note
    saying what was done, or why not."""
    if os.geteuid() != 0:
        return "not root, so tracefs was not mounted"
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS[0]], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    if r.returncode != 0:
        return "mount -t tracefs nodev %s failed: %s" % (TRACEFS[0], (r.stdout + r.stderr).decode(
            "utf-8", "replace").strip()[-300:])
    return "mounted tracefs: mount -t tracefs nodev %s" % TRACEFS[0]


def all_calls():
    """Every syscall this kernel has a sys_enter tracepoint for."""
    d = tracefs()
    if not d:
        return []
    names = os.listdir(os.path.join(d, "events", "syscalls"))
    return sorted(n[len("sys_enter_"):] for n in names if n.startswith("sys_enter_"))


def events_for(calls):
    """(perf event list, calls left out because this kernel lacks them).
    CALLS None: every syscall's tracepoint (as the glob syscalls:sys_enter_*)."""
    if calls is None:
        return ["raw_syscalls:sys_enter", "syscalls:sys_enter_*"], []
    d = tracefs()
    have = set(all_calls()) if d else set()
    kept = [c for c in calls if c in have]
    missing = [c for c in calls if c not in have]
    return ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + c for c in kept], missing


def event_count(events):
    """How many events EVENTS stands for (a glob counts what it matches)."""
    return sum(len(all_calls()) if e.endswith("*") else 1 for e in events)


def parse(text):
    """{event: count} from `perf stat -x,` output; <not counted> (the task
    never ran while counting) is 0, <not supported> is left out."""
    counts = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split(",")
        if len(f) < 3:
            continue
        value, event = f[0].strip(), f[2].strip()
        if value.startswith("<not counted>"):
            counts[event] = 0
        else:
            try:
                counts[event] = int(float(value))
            except ValueError:
                continue
    return counts


def by_call(counts):
    """{"total": raw_syscalls:sys_enter, NAME: syscalls:sys_enter_NAME, ...}."""
    out = {}
    for ev, n in counts.items():
        if ev == "raw_syscalls:sys_enter":
            out["total"] = n
        elif ev.startswith("syscalls:sys_enter_"):
            out[ev[len("syscalls:sys_enter_"):]] = n
    return out


def available(perf, mount=True):
    """(True, note) when `perf stat` can count syscall tracepoints of a child
    here (mounting tracefs first as root when it is missing and MOUNT);
    (False, why) otherwise."""
    note = ""
    if not tracefs():
        if not mount:
            return False, "tracefs is not mounted (%s)" % " or ".join(TRACEFS)
        note = mount_tracefs()
        if not tracefs():
            return False, "tracefs is not mounted and could not be: " + note
    try:
        r = subprocess.run([perf, "stat", "-x,", "-e", "raw_syscalls:sys_enter,syscalls:sys_enter_getpid",
                            "--", "python3", "-c", "import os\nfor _ in range(100): os.getpid()"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "perf stat failed to run: %s" % e
    text = r.stderr.decode("utf-8", "replace")
    c = by_call(parse(text))
    if r.returncode != 0 or c.get("getpid", 0) < 100 or c.get("total", 0) < 100:
        return False, "perf stat cannot count syscall tracepoints here (exit %s): %s" % (
            r.returncode, text.strip()[-400:])
    return True, note


def perf_fds(pid):
    """How many perf_event descriptors process PID holds."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if "perf_event" in os.readlink("/proc/%d/fd/%s" % (pid, fd)):
                    n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n


def tids(pids):
    """The thread IDs of PIDS (perf -p counts the threads there are when it
    attaches, not ones started later)."""
    out = set()
    for p in pids:
        try:
            out.update(int(t) for t in os.listdir("/proc/%d/task" % p))
        except OSError:
            pass
    return out


def sleeps(pids):
    """Voluntary context switches of every thread of PIDS so far: each one
    is a time a thread blocked (for a poll loop, an `epoll_wait` that found
    nothing ready and slept). An `epoll_wait` that returns at once with
    events does not count here."""
    total = 0
    for p in pids:
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/status" % (p, t)) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            total += int(line.split()[1])
            except (OSError, ValueError):
                pass
    return total


def threads(pids):
    return len(tids(pids))


class Counter:
    """`perf stat -x, -e EVENTS -p PIDS --timeout LIMIT` started now, stopped
    by its PID with SIGINT (perf prints its counts on SIGINT) in stop();
    --timeout bounds it when stop() is never reached."""

    def __init__(self, perf, events, pids, out, limit_s=120, argv_prefix=()):
        self.events = list(events)
        self.pids = list(pids)
        self.out = out
        self.argv = list(argv_prefix) + [perf, "stat", "-x,", "--no-big-num", "-o", out, "-e",
                                         ",".join(self.events), "-p", ",".join(str(p) for p in self.pids),
                                         "--timeout", str(int(limit_s * 1000))]
        self.log = open(out + ".log", "wb")
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_attached(self, within=None):
        """True once perf holds one descriptor per event and thread (then
        it counts), False when it exited or WITHIN s passed (default: 10 s,
        plus 0.1 s an event)."""
        n = event_count(self.events)
        within = within or 10.0 + 0.1 * n
        want = n * max(1, threads(self.pids))
        deadline = time.monotonic() + within
        for _ in range(int(within / 0.02) + 2):
            if self.p.poll() is not None:
                return False
            if perf_fds(self.p.pid) >= want:
                time.sleep(0.05)
                return True
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return False

    def log_tail(self):
        try:
            with open(self.out + ".log", "rb") as f:
                return f.read().decode("utf-8", "replace")[-1500:]
        except OSError:
            return ""

    def stop(self):
        """SIGINT to perf (by its PID), wait for it; {call: count, "total": n},
        {} when perf wrote no counts."""
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGINT)
                self.p.wait(10.0 + 0.1 * event_count(self.events))  # perf 6.1 takes ~14 s to close ~360
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
            except ProcessLookupError:
                pass
        self.log.close()
        try:
            with open(self.out) as f:
                return by_call(parse(f.read()))
        except OSError:
            return {}

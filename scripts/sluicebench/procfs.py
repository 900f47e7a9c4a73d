"""Readers of /proc for one process (or several): memory, CPU time, file
descriptors, sockets, children; and a few host-wide counters. Linux only."""

import os
import re
import time

KiB = 1024
MiB = 1024 * KiB
TICK = os.sysconf("SC_CLK_TCK")
CPU_SOURCE = "schedstat" if os.path.exists("/proc/self/schedstat") else "stat"


def status(pid, names=("VmRSS", "VmHWM")):
    """{name: bytes} of the kB fields NAMES in /proc/PID/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name = line.split(":", 1)[0]
            if name in names:
                out[name] = int(line.split()[1]) * KiB
    return out


def tracer_pid(pid):
    """The PID tracing PID (ptrace, e.g. strace), 0 if none, None if PID is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return 0


def rss(pid):
    """VmRSS of PID in bytes (KeyError if the kernel shows none)."""
    return status(pid, ("VmRSS",))["VmRSS"]


def settled(read, within=5.0, step=0.5):
    """READ() (e.g. an RSS reader) once two reads STEP s apart agree, or
    the last read after WITHIN s: memory a process frees or touches late
    (allocator, lazily faulted pages) is then in the figure."""
    last = read()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        time.sleep(step)
        now = read()
        if now == last:
            break
        last = now
    return last


def hwm(pid):
    """VmHWM (peak RSS) of PID in bytes, 0 if not shown."""
    return status(pid, ("VmHWM",)).get("VmHWM", 0)


def rss_hwm(pid):
    """(VmRSS, VmHWM) of PID in bytes."""
    d = status(pid)
    return d["VmRSS"], d["VmHWM"]


def rss_kib(pids):
    """VmRSS summed over PIDS, in KiB; processes already gone count 0."""
    total = 0
    for pid in pids:
        try:
            total += rss(pid) // KiB
        except (OSError, KeyError):
            pass
    return total


def stat_fields(pid):
    """Fields of /proc/PID/stat after the command name (field 3 is index 0)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def start_time(pid):
    """Start time of PID in clock ticks since boot, None if gone: tells a
    process from a later one that got the same PID."""
    try:
        return stat_fields(pid)[19]
    except OSError:
        return None


def cpu_ticks(pid):
    """utime + stime of PID in clock ticks (/proc/PID/stat)."""
    f = stat_fields(pid)
    return int(f[11]) + int(f[12])


def cpu_user_sys(pids):
    """(user s, system s) summed over PIDS, each process's utime and stime
    from /proc/PID/stat (every thread of it, in clock ticks); processes
    already gone count 0."""
    user = sys_ = 0
    for pid in pids:
        try:
            f = stat_fields(pid)
            user += int(f[11])
            sys_ += int(f[12])
        except (OSError, ValueError, IndexError):
            pass
    return user / TICK, sys_ / TICK


def cpu_times(pid):
    """(utime+stime in s from /proc/PID/stat, on-CPU s of the main thread
    from /proc/PID/schedstat or None)."""
    ticks = cpu_ticks(pid)
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            ns = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ns = None
    return ticks / TICK, (ns / 1e9 if ns is not None else None)


def cpu_seconds(pids):
    """CPU time (user+system) of PIDS and all their threads, from schedstat
    (ns) where the kernel has it, else utime+stime (clock ticks)."""
    total = 0.0
    for pid in pids:
        try:
            ns = 0
            for t in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                    ns += int(f.read().split()[0])
            total += ns / 1e9
            continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            total += cpu_ticks(pid) / TICK
        except OSError:
            pass
    return total


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def socket_inodes(pid):
    """Inodes of the sockets PID has open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def children_of(pid):
    """All descendants of PID (via /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    for _ in range(100000):
        if not todo:
            break
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            out.extend(kids)
            todo.extend(kids)
    return out


def cpu_busy_ticks(cpu):
    """(busy, total) clock ticks of one CPU from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                return sum(v[:8]) - idle, sum(v[:8])
    return 0, 0


def busy_pct(before, after):
    """% busy between two cpu_busy_ticks() readings."""
    db, dt = after[0] - before[0], after[1] - before[1]
    return 100.0 * db / dt if dt else None


def tcp_ext():
    """Kernel TCP counters that explain stalls: memory pressure and receive-queue drops."""
    try:
        with open("/proc/net/netstat") as f:
            lines = [l.split() for l in f if l.startswith("TcpExt:")]
        d = dict(zip(lines[0][1:], map(int, lines[1][1:])))
        return {k: d.get(k, 0) for k in ("TCPMemoryPressures", "TCPRcvQDrop", "PruneCalled")}
    except (OSError, IndexError, ValueError):
        return {}


def tcp_mem():
    """'TCP memory in use / pressure threshold' from sockstat and tcp_mem (pages)."""
    try:
        with open("/proc/net/sockstat") as f:
            used = int(re.search(r"TCP:.* mem (\d+)", f.read()).group(1))
        with open("/proc/sys/net/ipv4/tcp_mem") as f:
            pressure = int(f.read().split()[1])
        page = os.sysconf("SC_PAGE_SIZE")
        return f"{used * page / MiB:.0f} MiB of {pressure * page / MiB:.0f} MiB"
    except (OSError, AttributeError, ValueError, IndexError):
        return "?"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"

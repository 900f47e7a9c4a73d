"""The tools bench.py needs: which ones the chosen peers and scenarios use,
installing the missing ones with apt-get (as root), their paths and
versions; and the sluice binary: built (or given) and copied."""

import os
import re
import shlex
import shutil
import subprocess
import sys

from .plan import H2_SCENARIOS, TLS_SCENARIOS
from .procs import run_cmd
from .runstate import say

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def have(tool):
    """True when TOOL is in PATH."""
    return shutil.which(tool) is not None


APT_UPDATED = []


def apt_install(packages):
    """apt-get install as root on Debian; apt-get update first if it fails."""
    if os.geteuid() != 0:
        return False, "not root, so not installing with apt-get"
    if not have("apt-get"):
        return False, "no apt-get on this machine"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y"] + packages
    say("running: " + shlex.join(cmd))
    rc, out = run_cmd(cmd, 900, env=env)
    if rc != 0 and not APT_UPDATED:
        APT_UPDATED.append(True)
        say("install failed; running apt-get update, then installing again")
        run_cmd(["apt-get", "update"], 900, env=env)
        rc, out = run_cmd(cmd, 900, env=env)
    lines = [l for l in out.strip().splitlines() if l.strip()]
    return rc == 0, ("apt-get install failed: " + lines[-1]) if rc != 0 and lines else ""


def find_tool(tool):
    """TOOL's path in PATH or /usr/sbin, or None."""
    return shutil.which(tool) or (os.access("/usr/sbin/" + tool, os.X_OK) and "/usr/sbin/" + tool) or None


def needed_tools(args, peers, scenarios):
    """The tools the chosen peers and scenarios use."""
    tools = ["taskset"]
    if {"S1", "S2", "T1"} & set(scenarios):
        tools.append("wrk")
    if {"S1", "T1"} & set(scenarios) and not args.no_s1_extras and args.syscalls != "off":
        tools.append("perf" if args.syscalls == "perf" else "strace")
    if {"S3", "S4", "S5", "T4", "T6"} & set(scenarios):
        tools.append("curl")
    if (set(TLS_SCENARIOS) | set(H2_SCENARIOS)) & set(scenarios):
        tools.append("openssl")
    if set(H2_SCENARIOS) & set(scenarios):
        tools.append("h2load")
    if {"nginx", "nginx-nobuf", "nginx-deferred"} & set(peers) or args.upstream == "nginx":
        tools.append("nginx")
    if "haproxy" in peers:
        tools.append("haproxy")
    return tools


def ensure_tools(args, tools):
    """Installs what of TOOLS is missing where it can; returns {tool: reason}
    for what is still missing (its peer or scenario is then skipped)."""
    packages = {"wrk": ["wrk"], "curl": ["curl"], "nginx": ["nginx-light"], "haproxy": ["haproxy"],
                "taskset": ["util-linux"], "strace": ["strace"], "perf": ["linux-perf"], "openssl": ["openssl"],
                "h2load": ["nghttp2-client"]}
    missing = [t for t in packages if t in tools and not find_tool(t)]
    if not missing:
        return {}
    if args.no_install:
        return {t: "%s not found, and --no-install given" % t for t in missing}
    ok, msg = apt_install(sum((packages[t] for t in missing), []))
    why = {t: msg for t in missing}
    can = "not root" not in msg and "no apt-get" not in msg
    if not ok and len(missing) > 1 and can:
        for t in missing:  # one at a time, so one unavailable package does not block the rest
            if not find_tool(t):
                ok, why[t] = apt_install(packages[t])
    if "nginx" in missing and not find_tool("nginx") and can:
        ok, why["nginx"] = apt_install(["nginx"])  # Debian 13 has no nginx-light
    return {t: "%s not found and not installed (%s)" % (t, why[t] or "?") for t in missing if not find_tool(t)}


def tool_path(tool):
    """find_tool(TOOL), or TOOL itself when it is not found."""
    return find_tool(tool) or tool


def version_of(argv):
    """The first line of what ARGV (a --version command) prints, shortened
    (nginx's prefix, Copyright and URL tails; curl's name and version)."""
    rc, out = run_cmd(argv, 10)
    line = out.strip().splitlines()[0].strip() if out.strip() else "?"
    line = re.sub(r"^nginx version: ", "", line)
    line = re.sub(r" (Copyright|- https?:).*$", "", line)
    if line.startswith("curl "):
        line = " ".join(line.split()[:2])
    return line


def build_sluice(args):
    """The sluice binary to run: $SLUICE_BIN, or target/release/sluice
    with --no-build, else built with cargo build --release; its absolute
    path (exits when it is missing or the build fails)."""
    if args.no_build or os.environ.get("SLUICE_BIN"):
        path = os.environ.get("SLUICE_BIN") or os.path.join(ROOT, "target", "release", "sluice")
        say("not building; using " + path)
    else:
        if not have("cargo"):
            sys.exit("bench: cargo not found in PATH (or use --no-build / SLUICE_BIN=path)")
        say("cargo build --release")
        r = subprocess.run(["cargo", "build", "--release", "--bin", "sluice"], cwd=ROOT)
        if r.returncode != 0:
            sys.exit("bench: cargo build --release failed (status %d)" % r.returncode)
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
        path = os.path.join(target, "release", "sluice")
    if not os.access(path, os.X_OK):
        sys.exit("bench: sluice binary not found or not executable: " + path)
    return os.path.abspath(path)


def copy_bin(path, tmp, name):
    """A private copy of binary PATH in TMP: a rebuild during the run cannot swap it."""
    dst = os.path.join(tmp, "bin-" + name)
    shutil.copy2(path, dst)
    return dst

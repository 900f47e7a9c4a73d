"""Loopback networking: free ports, the kernel's TCP socket tables, and a
minimal HTTP/1.1 client side (read one head, one response). 127.0.0.1 only.

Run as `python3 -m sluicebench.net free-port` it prints one free port (for
scripts/lib.sh)."""

import re
import socket
import struct
import sys

KiB = 1024
MAX_HEAD = 64 * KiB

TCP_STATES = ["?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT",
              "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"]
ESTABLISHED, TIME_WAIT, CLOSE_WAIT, LISTEN = 1, 6, 8, 10
NO_TW_LISTEN = 0x1FFF & ~(1 << TIME_WAIT) & ~(1 << LISTEN)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --------------------------------------------------------------------------
# socket tables: rows (local port, remote port, state, sendq, recvq, inode)


def tcp_table():
    """Every IPv4 TCP socket from /proc/net/tcp (state as an int, see TCP_STATES)."""
    rows = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            tx, rx = (int(x, 16) for x in p[4].split(":"))
            rows.append((int(p[1].split(":")[1], 16), int(p[2].split(":")[1], 16), int(p[3], 16),
                         tx, rx, int(p[9])))
    return rows


def tcp_diag(states):
    """IPv4 TCP sockets in STATES (bit mask of 1 << state), from the sock_diag
    netlink socket (fast with many TIME_WAITs)."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4)  # NETLINK_SOCK_DIAG
    try:
        s.settimeout(2)
        req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, states) + bytes(48)
        s.sendall(struct.pack("=IHHII", 16 + len(req), 20, 0x301, 1, 0) + req)  # REQUEST|DUMP
        out = []
        for _ in range(100000):
            data = s.recv(1 << 20)
            off = 0
            while off + 16 <= len(data):
                length, typ = struct.unpack_from("=IH", data, off)
                if typ == 3:  # NLMSG_DONE
                    return out
                if typ == 2 or length < 16:
                    raise OSError("sock_diag error")
                m = off + 16
                sport, dport = struct.unpack_from(">HH", data, m + 4)
                rq, wq, _, ino = struct.unpack_from("=IIII", data, m + 56)
                out.append((sport, dport, data[m + 1], wq, rq, ino))
                off += (length + 3) & ~3
        raise OSError("sock_diag: no end")
    finally:
        s.close()


def tcp_live():
    """IPv4 TCP sockets neither listening nor in TIME_WAIT (sock_diag, else /proc/net/tcp)."""
    try:
        return tcp_diag(NO_TW_LISTEN)
    except OSError:
        return [r for r in tcp_table() if r[2] not in (TIME_WAIT, LISTEN)]


def listening(port):
    """True once some socket listens on 127.0.0.1-reachable `port`."""
    try:
        return any(r[0] == port and r[2] == LISTEN for r in tcp_table())
    except OSError:
        return False


# --------------------------------------------------------------------------
# HTTP/1.1, client and server side


def read_head(sock, buf=b"", limit=MAX_HEAD, chunk=65536):
    """Reads (CHUNK bytes per recv) until the end of a message head: (head,
    rest) without the blank line, or (None, buf) on EOF, a socket error or a
    head over LIMIT bytes."""
    for _ in range(100000):
        if b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            return head, rest
        if len(buf) > limit:
            break
        try:
            data = sock.recv(chunk)
        except OSError:
            break
        if not data:
            break
        buf += data
    return None, buf


def content_length(head):
    """The Content-Length of a message head (bytes), 0 if absent."""
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return int(m.group(1)) if m else 0


def read_body(sock, head, buf):
    """Reads the Content-Length body of `head`, of which `buf` holds the
    first bytes: (body, rest after it), or None if the peer closed first."""
    need = content_length(head)
    for _ in range(1000000):
        if len(buf) >= need:
            return buf[:need], buf[need:]
        data = sock.recv(65536)
        if not data:
            return None
        buf += data
    return None


def read_response(sock, buf=b""):
    """Reads one Content-Length response: (status, head, body, rest). Raises
    ValueError when the connection ends early."""
    head, buf = read_head(sock, buf)
    if head is None:
        raise ValueError("connection closed before a response head")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else 0
    got = read_body(sock, head, buf)
    if got is None:
        raise ValueError("connection closed inside a response body")
    return (status, head) + got


def http_get(port, path, timeout=2.0):
    """One GET on a new connection (Connection: close): (status, body); raises OSError."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        for _ in range(1000000):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else 0
    return status, body


def still_open(s, idle=False):
    """True if socket S is open: no EOF, no reset (with IDLE, also nothing
    to read: unexpected bytes count as not idle)."""
    s.setblocking(False)
    try:
        data = s.recv(1)
        return data != b"" and not idle
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


if __name__ == "__main__":
    if sys.argv[1:] == ["free-port"]:
        print(free_port())
        sys.exit(0)
    sys.exit("usage: python3 -m sluicebench.net free-port")

"""The scripted upstreams: building blocks for the upstream processes the
measurement scripts run (each script supplies what its upstream answers),
and two ready-made upstreams for the shell scripts:

  python3 -m sluicebench.upstream sized PORT       HTTP/1.1 keep-alive; GET /N
        answers N bytes of '0123456789abcdef...' (default 100); thread per
        connection (scripts/restart.sh)
  python3 -m sluicebench.upstream files PORT DIR   HTTP/1.1 keep-alive static
        files from DIR (http.server; scripts/e2e.sh's pool check)

Every upstream listens on 127.0.0.1 only and exits on SIGTERM.
"""

import functools
import os
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

from .net import content_length, read_body, read_head  # noqa: F401  (re-exported for the upstreams)

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 431: "Too Large", 501: "Not Implemented"}


def exit_on_term(status=0):
    """SIGTERM ends this process at once with STATUS (an upstream child)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(status))


def listen(backlog=1024, announce=True):
    """A socket listening on 127.0.0.1 and a free port; with ANNOUNCE its port
    is printed as the first stdout line (procs.start_port_child reads it)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    if announce:
        print(srv.getsockname()[1], flush=True)
    return srv


def serve_threads(srv, handler, *args, on_accept=None, pass_index=False):
    """Accepts on SRV for ever: handler(conn, *args) on its own daemon thread
    per connection (handler(conn, index, *args) with PASS_INDEX: the accept
    count); on_accept() first, if given. Returns when SRV closes."""
    index = 0
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        if on_accept:
            on_accept()
        extra = (index,) if pass_index else ()
        threading.Thread(target=handler, args=(conn, *extra, *args), daemon=True).start()
        index += 1


def parse_request(head):
    """(method, target, version, {lower-case field: value}) of a request head
    (bytes, without the blank line); None for a bad request line."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return parts[0], parts[1], parts[2], fields


def reply(conn, status, body, close=False, ctype="text/plain"):
    """Sends a Content-Length response: STATUS (int, or '200 OK' text) and BODY."""
    line = status if isinstance(status, str) else f"{status} {REASONS.get(status, 'X')}"
    head = f"HTTP/1.1 {line}\r\n" + (f"Content-Type: {ctype}\r\n" if ctype else "")
    head += f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "")
    conn.sendall(head.encode() + b"\r\n" + body)


def pattern(n):
    """N bytes of '0123456789abcdef' repeated."""
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]


# --------------------------------------------------------------------------
# ready-made upstreams


class Sized(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        try:
            n = int(self.path.strip("/").split("?")[0] or "100")
        except ValueError:
            n = 100
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self.wfile.write(pattern(n))

    def log_message(self, *args):
        pass


class Files(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main(argv):
    exit_on_term()
    if len(argv) == 2 and argv[0] == "sized":
        handler = Sized
    elif len(argv) == 3 and argv[0] == "files":
        handler = functools.partial(Files, directory=argv[2])
    else:
        sys.exit("usage: python3 -m sluicebench.upstream sized PORT | files PORT DIR")
    Server(("127.0.0.1", int(argv[1])), handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Small HTTP/1.1 keep-alive upstream for scripts/bench.py (Python 3 stdlib only).

Always used as the body sink of the upload scenario (S4); also used as the
origin for every scenario when nginx is not installed.

  GET  /small          200, a fixed small body (--small-size bytes)
  GET  /files/NAME     200, the file --root/files/NAME, sent with sendfile()
  PUT|POST /sink       reads the whole body into a reused 1 MiB buffer,
                       discards it, then answers 200 with the byte count
  GET  /__stats        200, JSON {"connections": accepted, "requests": served}
                       (this request itself is not counted)

One asyncio loop on one thread. Request bodies must carry Content-Length
(a chunked body is answered 501 and the connection closed).

Usage: upstream.py --port PORT --root DIR [--small-size N]
"""

import argparse
import asyncio
import json
import os
import signal
import sys

BUF_SIZE = 1 << 20
MAX_HEAD = 64 * 1024


class Stats:
    connections = 0
    requests = 0


class Conn(asyncio.BufferedProtocol):
    def __init__(self, app):
        self.app = app
        self.buf = bytearray(BUF_SIZE)
        self.view = memoryview(self.buf)
        self.filled = 0
        self.body_left = 0  # request body bytes still to discard
        self.body_seen = 0
        self.pending = None  # (status, headers, body, close) once the body is read
        self.busy = False  # a sendfile is in progress
        self.transport = None

    # -- asyncio callbacks --------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        Stats.connections += 1

    def get_buffer(self, sizehint):
        return self.view[self.filled:]

    def buffer_updated(self, nbytes):
        self.filled += nbytes
        self.process()

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.transport = None

    # -- request handling ---------------------------------------------------
    def process(self):
        while self.transport is not None and not self.busy:
            if self.body_left:
                take = min(self.body_left, self.filled)
                if take == 0:
                    return
                self.body_left -= take
                self.body_seen += take
                self.consume(take)
                if self.body_left == 0 and self.pending:
                    status, body, close = self.pending
                    self.pending = None
                    if body is None:
                        body = b"%d\n" % self.body_seen
                    self.respond(status, body, close)
                continue
            data = self.view[: self.filled]
            end = bytes(data).find(b"\r\n\r\n") if self.filled else -1
            if end < 0:
                if self.filled >= MAX_HEAD:
                    self.respond(431, b"head too large\n", True)
                return
            head = bytes(data[:end]).decode("latin-1")
            self.consume(end + 4)
            self.handle(head)

    def consume(self, n):
        rest = self.filled - n
        if rest:
            self.buf[:rest] = self.buf[n : self.filled]
        self.filled = rest

    def handle(self, head):
        lines = head.split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self.respond(400, b"bad request line\n", True)
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        conn_hdr = headers.get("connection", "").lower()
        close = "close" in conn_hdr or (version == "HTTP/1.0" and "keep-alive" not in conn_hdr)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.respond(501, b"chunked request bodies are not supported\n", True)
            return
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            self.respond(400, b"bad content-length\n", True)
            return
        path = target.split("?", 1)[0]
        if path == "/__stats":
            body = json.dumps({"connections": Stats.connections, "requests": Stats.requests}).encode()
            self.discard_then(length, 200, body + b"\n", close)
            return
        Stats.requests += 1
        if path == "/sink" and method in ("PUT", "POST"):
            self.body_seen = 0
            self.discard_then(length, 200, None, close)
        elif method in ("GET", "HEAD") and path == "/small":
            self.discard_then(length, 200, self.app.small, close, head_only=method == "HEAD")
        elif method in ("GET", "HEAD") and path.startswith("/files/"):
            name = os.path.basename(path)
            fpath = os.path.join(self.app.root, "files", name)
            if not name or not os.path.isfile(fpath):
                self.discard_then(length, 404, b"not found\n", close)
            elif method == "HEAD":
                self.respond(200, b"", close, length=os.path.getsize(fpath))
            else:
                self.send_file(fpath, close)
        else:
            self.discard_then(length, 404, b"not found\n", close)

    def discard_then(self, length, status, body, close, head_only=False):
        if length:
            self.body_left = length
            self.pending = (status, body, close)
            return
        if head_only:
            self.respond(status, b"", close, length=len(body))
        else:
            self.respond(status, body if body is not None else b"0\n", close)

    def respond(self, status, body, close, length=None):
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 431: "Too Large", 501: "Not Implemented"}
        head = "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n" % (
            status,
            reason.get(status, "X"),
            len(body) if length is None else length,
            "Connection: close\r\n" if close else "",
        )
        self.transport.write(head.encode() + body)
        if close:
            self.transport.close()
            self.transport = None

    def send_file(self, fpath, close):
        size = os.path.getsize(fpath)
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n%s\r\n" % (
            size,
            "Connection: close\r\n" if close else "",
        )
        self.busy = True
        self.transport.pause_reading()
        self.transport.write(head.encode())
        asyncio.ensure_future(self._sendfile(fpath, close))

    async def _sendfile(self, fpath, close):
        transport = self.transport
        try:
            with open(fpath, "rb") as f:
                await asyncio.get_running_loop().sendfile(transport, f)
        except (ConnectionError, OSError, RuntimeError):
            close = True
        self.busy = False
        if close or self.transport is None:
            if self.transport is not None:
                self.transport.close()
            self.transport = None
            return
        self.transport.resume_reading()
        self.process()


class App:
    def __init__(self, root, small_size):
        self.root = root
        self.small = (b"0123456789abcdef" * (small_size // 16 + 1))[:small_size]


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--small-size", type=int, default=256)
    args = ap.parse_args()
    app = App(args.root, args.small_size)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    server = await loop.create_server(lambda: Conn(app), "127.0.0.1", args.port, backlog=4096, reuse_address=True)
    print("upstream.py listening on 127.0.0.1:%d" % args.port, file=sys.stderr, flush=True)
    await stop
    server.close()


if __name__ == "__main__":
    asyncio.run(main())

"""HTTP/2 on the wire, by hand, for the measurement scripts (bench.py's H3
slow streams, h2_attacks.py): frames (RFC 9113 §4, §6) built and read,
HPACK fields written as literals without Huffman coding (RFC 7541 §6.2),
which any decoder takes and which need no table, and the `:status` of a
response read from its first field when the server sent it as an indexed
static entry (what sluice, nginx and HAProxy do for the common codes).
Python 3 stdlib only.

A client speaks with: PREFACE + settings(...), then request_block() in a
headers() frame per stream, then reads with Reader.feed()."""

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types (RFC 9113 §6)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
TYPE_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
              "WINDOW_UPDATE", "CONTINUATION"]

# flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# settings (RFC 9113 §6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)

# error codes (RFC 9113 §7)
ERRORS = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
          "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
          "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"]
NO_ERROR, CANCEL, ENHANCE_YOUR_CALM = 0, 8, 11

MAX_WINDOW = 0x7FFF_FFFF
# the static table's indexed :status entries (RFC 7541 Appendix A, 8-14)
STATUS_INDEXED = {0x88: 200, 0x89: 204, 0x8A: 206, 0x8B: 304, 0x8C: 400, 0x8D: 404, 0x8E: 500}


def error_name(code):
    return ERRORS[code] if 0 <= code < len(ERRORS) else "0x%x" % code


# --------------------------------------------------------------------------
# frames


def frame(ftype, flags, sid, payload=b""):
    """One frame: the 9-byte header (length, type, flags, stream id) and PAYLOAD."""
    return struct.pack(">I", len(payload))[1:] + bytes((ftype, flags)) + struct.pack(">I", sid & MAX_WINDOW) + payload


def settings(pairs=()):
    """A SETTINGS frame of (id, value) PAIRS."""
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def settings_ack():
    return frame(SETTINGS, ACK, 0)


def window_update(sid, increment):
    """WINDOW_UPDATE of INCREMENT bytes (1 to 2^31-1) on stream SID (0: the connection)."""
    return frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment & MAX_WINDOW))


def ping(opaque=b"\0" * 8, ack=False):
    return frame(PING, ACK if ack else 0, 0, opaque)


def rst_stream(sid, code=CANCEL):
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def goaway(last_sid=0, code=NO_ERROR):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_sid, code))


def data(sid, payload, end_stream=False):
    return frame(DATA, END_STREAM if end_stream else 0, sid, payload)


def headers(sid, block, end_stream=False, end_headers=True):
    return frame(HEADERS, (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0), sid, block)


def continuation(sid, block, end_headers=False):
    return frame(CONTINUATION, END_HEADERS if end_headers else 0, sid, block)


# --------------------------------------------------------------------------
# HPACK (RFC 7541): what a client needs to send, without tables


def hpack_int(value, prefix_bits, first=0):
    """VALUE as an HPACK integer with a PREFIX_BITS-bit prefix, FIRST's high
    bits in the first byte (RFC 7541 §5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_string(s):
    """A string literal without Huffman coding (RFC 7541 §5.2)."""
    b = s.encode("latin-1") if isinstance(s, str) else bytes(s)
    return hpack_int(len(b), 7) + b


def literal(name, value):
    """A field as a literal without indexing, new name (RFC 7541 §6.2.2)."""
    return b"\x00" + hpack_string(name) + hpack_string(value)


def literal_indexed(name, value):
    """A field as a literal with incremental indexing, new name (RFC 7541
    §6.2.1): the decoder adds it to its dynamic table, at index 62."""
    return b"\x40" + hpack_string(name) + hpack_string(value)


def indexed(index):
    """An indexed field (RFC 7541 §6.1); 62 is the newest dynamic entry."""
    return hpack_int(index, 7, 0x80)


def request_block(method, path, authority, scheme="https", extra=()):
    """A request's header block: the four pseudo-header fields, then EXTRA
    (name, value) pairs (names lower-case), all as literals."""
    fields = [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)] + list(extra)
    return b"".join(literal(n, v) for n, v in fields)


def status_of(block):
    """The `:status` of a response header block when its first field is an
    indexed static :status entry (or a literal with the :status name and a
    plain value); None otherwise."""
    block = skip_size_updates(block)
    if not block:
        return None
    if block[0] in STATUS_INDEXED:
        return STATUS_INDEXED[block[0]]
    # literal with an indexed name 8..14 (:status): incremental (0x40),
    # without (0x00) or never indexed (0x10), 4- or 6-bit index prefix
    name = block[0] & 0x3F if block[0] & 0xC0 == 0x40 else block[0] & 0x0F
    if 8 <= name <= 14 and len(block) >= 5 and not block[1] & 0x80 and block[1] == 3:
        try:
            return int(block[2:5])
        except ValueError:
            return None
    return None


def read_int(block, prefix_bits):
    """(value, bytes used) of an HPACK integer at the start of BLOCK; (None, 0)
    when it is cut short."""
    limit = (1 << prefix_bits) - 1
    if not block:
        return None, 0
    value = block[0] & limit
    if value < limit:
        return value, 1
    shift = 0
    for i in range(1, min(len(block), 6)):
        value += (block[i] & 0x7F) << shift
        shift += 7
        if not block[i] & 0x80:
            return value, i + 1
    return None, 0


def skip_size_updates(block):
    """BLOCK without the dynamic table size updates it may start with (RFC
    7541 §6.3, 001xxxxx)."""
    for _ in range(4):
        if not block or block[0] & 0xE0 != 0x20:
            break
        _, used = read_int(block, 5)
        if not used:
            return b""
        block = block[used:]
    return block


def header_block(flags, payload):
    """The header block fragment of a HEADERS frame's PAYLOAD: padding and
    priority fields removed (RFC 9113 §6.2)."""
    pad = 0
    if flags & PADDED and payload:
        pad = payload[0]
        payload = payload[1:]
    if flags & PRIORITY_FLAG:
        payload = payload[5:]
    return payload[:len(payload) - pad] if pad else payload


class Reader:
    """Frames out of a byte stream: feed(bytes) returns the complete
    frames in it as (type, flags, stream id, payload); partial ones wait
    for the next feed. A frame longer than MAX_LEN raises ValueError."""

    def __init__(self, max_len=1 << 24):
        self.buf = bytearray()
        self.max_len = max_len

    def feed(self, chunk):
        self.buf += chunk
        out = []
        off = 0
        while len(self.buf) - off >= 9:
            length = int.from_bytes(self.buf[off:off + 3], "big")
            if length > self.max_len:
                raise ValueError("frame of %d bytes" % length)
            if len(self.buf) - off < 9 + length:
                break
            ftype, flags = self.buf[off + 3], self.buf[off + 4]
            sid = int.from_bytes(self.buf[off + 5:off + 9], "big") & MAX_WINDOW
            out.append((ftype, flags, sid, bytes(self.buf[off + 9:off + 9 + length])))
            off += 9 + length
        del self.buf[:off]
        return out

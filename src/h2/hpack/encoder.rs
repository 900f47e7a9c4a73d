//! The HPACK encoder for responses (RFC 7541 §6): fields to a header
//! block, using the static table and Huffman coding when shorter.
//!
//! Why it exists: every response head and trailer section goes to the
//! client as an HPACK block.
//!
//! Choice: the encoder never adds entries to the dynamic table (literals
//! go "without indexing", or "never indexed" for credentials and cookies,
//! RFC 7541 §7.1.3), as nginx's and HAProxy's encoders do. The responses
//! of a reverse proxy come from many upstreams; the table would cost up
//! to the peer's 4 KiB per connection and a lookup per field, for a gain
//! on repeated fields only. Its size still follows the client's
//! SETTINGS_HEADER_TABLE_SIZE: when that shrinks below the size last
//! declared, the next block opens with a size update (RFC 9113 §4.3.1).
//!
//! What it must not know: frames (the caller splits a block into
//! HEADERS and CONTINUATION), which fields a response may carry (`map`).

use super::DEFAULT_TABLE_SIZE;
use super::primitive::{encode_integer, encode_string};
use super::table::STATIC;

/// Field names whose values are never to be indexed by any hop (RFC 7541
/// §7.1.3: short secrets such as credentials and cookies).
const NEVER_INDEXED: [&[u8]; 4] = [
    b"authorization",
    b"proxy-authorization",
    b"cookie",
    b"set-cookie",
];

/// A connection's HPACK encoding context for what the server sends.
#[derive(Debug)]
pub struct Encoder {
    /// The dynamic table maximum size the client's decoder assumes, in
    /// bytes: 4,096 at first, then what our last size update declared.
    declared: usize,
    /// A size update to open the next block with.
    pending_update: Option<usize>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

impl Encoder {
    /// An encoder at the start of a connection (table size 4,096, RFC
    /// 9113 §4.3.1).
    pub fn new() -> Encoder {
        Encoder {
            declared: DEFAULT_TABLE_SIZE,
            pending_update: None,
        }
    }

    /// The client's SETTINGS_HEADER_TABLE_SIZE is now `size` bytes (call
    /// it when acknowledging the SETTINGS frame): below the size last
    /// declared, the next block starts with a size update to it (RFC 9113
    /// §4.3.1; the smallest of several changes, RFC 7541 §4.2).
    pub fn set_peer_table_size(&mut self, size: usize) {
        if size < self.declared {
            self.declared = size;
            self.pending_update = Some(size);
        }
    }

    /// Starts a header block: writes the size update that is due, if any.
    /// Call it once per block, before the fields.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some(size) = self.pending_update.take() {
            encode_integer(out, 5, 0x20, size);
        }
    }

    /// Appends `:status` (RFC 9113 §8.3.2): one byte for the seven codes
    /// of the static table, else a literal with the static name.
    pub fn status(&mut self, out: &mut Vec<u8>, status: u16) {
        let mut digits = [b'0'; 3];
        let mut n = status.min(999);
        for d in digits.iter_mut().rev() {
            *d = b'0' + (n % 10) as u8;
            n /= 10;
        }
        self.field(out, b":status", &digits);
    }

    /// Appends one field. `name` must already be lower case (RFC 9113
    /// §8.2); the value goes as it is. A static entry equal to the field
    /// is one index; otherwise a literal whose name is a static index when
    /// there is one, Huffman-coded strings when shorter.
    pub fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let mut name_index = 0;
        for (i, (n, v)) in STATIC.iter().enumerate() {
            if n.as_bytes() == name {
                if v.as_bytes() == value {
                    encode_integer(out, 7, 0x80, i + 1);
                    return;
                }
                if name_index == 0 {
                    name_index = i + 1;
                }
            }
        }
        // Literal never indexed (0001) or without indexing (0000), RFC
        // 7541 §6.2.2, §6.2.3.
        let high = if NEVER_INDEXED.contains(&name) {
            0x10
        } else {
            0x00
        };
        encode_integer(out, 4, high, name_index);
        if name_index == 0 {
            encode_string(out, name);
        }
        encode_string(out, value);
    }
}

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
    /// A buffer the response mapping lower-cases names into (reused).
    scratch: Vec<u8>,
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
            scratch: Vec::new(),
        }
    }

    /// The reusable scratch buffer, emptied (give it back with
    /// [`Encoder::put_scratch`]).
    pub fn take_scratch(&mut self) -> Vec<u8> {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s
    }

    /// Gives the scratch buffer back (kept if small: at most 256 bytes).
    pub fn put_scratch(&mut self, scratch: Vec<u8>) {
        if scratch.capacity() <= 256 {
            self.scratch = scratch;
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
        if let Some((first, last)) = static_names(name) {
            name_index = first;
            for i in first..=last {
                if STATIC
                    .get(i - 1)
                    .is_some_and(|(_, v)| v.as_bytes() == value)
                {
                    encode_integer(out, 7, 0x80, i);
                    return;
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

/// The static-table entries (1-based, first and last) whose name is
/// `name` (lower case): one comparison by length and bytes instead of a
/// scan of the 61 entries.
fn static_names(name: &[u8]) -> Option<(usize, usize)> {
    Some(match name {
        b":authority" => (1, 1),
        b":method" => (2, 3),
        b":path" => (4, 5),
        b":scheme" => (6, 7),
        b":status" => (8, 14),
        b"accept-charset" => (15, 15),
        b"accept-encoding" => (16, 16),
        b"accept-language" => (17, 17),
        b"accept-ranges" => (18, 18),
        b"accept" => (19, 19),
        b"access-control-allow-origin" => (20, 20),
        b"age" => (21, 21),
        b"allow" => (22, 22),
        b"authorization" => (23, 23),
        b"cache-control" => (24, 24),
        b"content-disposition" => (25, 25),
        b"content-encoding" => (26, 26),
        b"content-language" => (27, 27),
        b"content-length" => (28, 28),
        b"content-location" => (29, 29),
        b"content-range" => (30, 30),
        b"content-type" => (31, 31),
        b"cookie" => (32, 32),
        b"date" => (33, 33),
        b"etag" => (34, 34),
        b"expect" => (35, 35),
        b"expires" => (36, 36),
        b"from" => (37, 37),
        b"host" => (38, 38),
        b"if-match" => (39, 39),
        b"if-modified-since" => (40, 40),
        b"if-none-match" => (41, 41),
        b"if-range" => (42, 42),
        b"if-unmodified-since" => (43, 43),
        b"last-modified" => (44, 44),
        b"link" => (45, 45),
        b"location" => (46, 46),
        b"max-forwards" => (47, 47),
        b"proxy-authenticate" => (48, 48),
        b"proxy-authorization" => (49, 49),
        b"range" => (50, 50),
        b"referer" => (51, 51),
        b"refresh" => (52, 52),
        b"retry-after" => (53, 53),
        b"server" => (54, 54),
        b"set-cookie" => (55, 55),
        b"strict-transport-security" => (56, 56),
        b"transfer-encoding" => (57, 57),
        b"user-agent" => (58, 58),
        b"vary" => (59, 59),
        b"via" => (60, 60),
        b"www-authenticate" => (61, 61),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::{STATIC, static_names};

    #[test]
    fn static_names_give_each_name_its_first_and_last_entry() {
        for (i, (name, _)) in STATIC.iter().enumerate() {
            let index = i + 1;
            let (first, last) = static_names(name.as_bytes()).expect("a static name");
            assert!(first <= index && index <= last, "{name}");
            let scanned: Vec<usize> = (1..=STATIC.len())
                .filter(|&j| STATIC[j - 1].0 == *name)
                .collect();
            assert_eq!(
                (first, last),
                (scanned[0], *scanned.last().unwrap()),
                "{name}"
            );
        }
        assert_eq!(static_names(b"x-custom"), None);
        assert_eq!(static_names(b"Date"), None, "names are lower case");
    }
}

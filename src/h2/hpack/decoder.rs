//! The HPACK decoder (RFC 7541 §3, §6): one complete header block in,
//! (name, value) pairs out, the dynamic table kept for the connection.
//!
//! Why it exists: every HEADERS block a client sends updates the one
//! decoding context of its connection, and the request's fields come out
//! of it. It is the place where a small block can turn into a large list
//! (an HPACK bomb: many references to one large entry), so the list is
//! bounded here, as it is decoded.
//!
//! What it must not know: frames, streams, HTTP semantics of the fields
//! (pseudo-fields, validity: `map`'s job), the configuration.
//!
//! Invariants:
//! - the dynamic table never exceeds the size our
//!   SETTINGS_HEADER_TABLE_SIZE allows; a size update above it is refused;
//! - a block whose list goes over the caller's limit is still decoded to
//!   its end (the table changes it asks for are made), only the fields
//!   past the limit are not emitted: the connection can go on;
//! - memory: the table's size, plus one scratch buffer for Huffman
//!   strings of the block being decoded.

use super::primitive::Reader;
use super::table::{DynamicTable, Entry, STATIC, STATIC_LEN, entry_size};
use super::{DEFAULT_TABLE_SIZE, HpackError};

/// A connection's HPACK decoding context.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The most the table may be set to: our SETTINGS_HEADER_TABLE_SIZE
    /// (bytes), as the client acknowledged it.
    limit: usize,
    /// Our setting was lowered below the table's maximum: the next block
    /// must start with a size update within the new limit (RFC 9113
    /// §4.3.1).
    update_required: bool,
    /// Huffman-decoded strings of the block being decoded.
    scratch: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_TABLE_SIZE)
    }
}

impl Decoder {
    /// A decoder whose dynamic table starts at 4,096 bytes (RFC 9113
    /// §4.3.1) and may be set up to `limit` bytes, our
    /// SETTINGS_HEADER_TABLE_SIZE. A `limit` below 4,096 takes effect
    /// like [`Decoder::set_limit`] (the client must then shrink the table
    /// in its first block).
    pub fn new(limit: usize) -> Decoder {
        let mut d = Decoder {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            limit: DEFAULT_TABLE_SIZE,
            update_required: false,
            scratch: Vec::new(),
        };
        d.set_limit(limit);
        d
    }

    /// Our SETTINGS_HEADER_TABLE_SIZE changed and the client acknowledged
    /// it (RFC 9113 §4.3.1): size updates may go up to `limit` bytes; one
    /// below the table's current maximum must be followed, at the start
    /// of the next block, by a size update within it.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        if limit < self.table.max_size() {
            self.update_required = true;
        }
    }

    /// The dynamic table's size in bytes (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table's maximum size in bytes.
    pub fn table_max_size(&self) -> usize {
        self.table.max_size()
    }

    /// The number of entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The dynamic entry at `index` (0 = newest), as (name, value).
    pub fn table_entry(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.table.get(index).map(|e| (e.name(), e.value()))
    }

    /// Decodes one complete header block, calling `emit(name, value)` for
    /// each field in order, while the list's size — name + value + 32 per
    /// field, RFC 9113 §6.5.2 — stays within `max_list_size` bytes.
    ///
    /// Errors: [`HpackError::Compression`] for any decoding error (a
    /// connection error COMPRESSION_ERROR, RFC 9113 §4.3): an index 0 or
    /// past the tables, a truncated representation, a bad integer or
    /// Huffman string, a size update above our limit, after a field, or
    /// missing when required. [`HpackError::ListTooLarge`] when the list
    /// went over `max_list_size`: the block was decoded to its end and the
    /// table updated, so the connection goes on; the fields emitted before
    /// are a prefix of the list.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        mut emit: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let result = self.decode_into(block, max_list_size, &mut emit, &mut scratch);
        scratch.clear();
        // Keep a small scratch for the next block, not a large one.
        if scratch.capacity() <= 4096 {
            self.scratch = scratch;
        }
        result
    }

    fn decode_into(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        emit: &mut dyn FnMut(&[u8], &[u8]),
        scratch: &mut Vec<u8>,
    ) -> Result<(), HpackError> {
        let mut r = Reader::new(block);
        let mut list_size: usize = 0;
        let mut too_large = false;
        let mut fields_seen = false;
        let mut emit_field = |name: &[u8], value: &[u8]| {
            list_size = list_size.saturating_add(entry_size(name, value));
            if list_size > max_list_size {
                too_large = true;
            }
            if !too_large {
                emit(name, value);
            }
        };
        while let Some(first) = r.peek() {
            scratch.clear();
            if first & 0x80 != 0 {
                // Indexed field (RFC 7541 §6.1).
                let index = r.integer(7).map_err(HpackError::Compression)?;
                self.check_no_update_due()?;
                let (name, value) = self.lookup(index)?;
                emit_field(name, value);
            } else if first & 0xe0 == 0x20 {
                // Dynamic table size update (RFC 7541 §6.3): only at the
                // start of a block (§4.2).
                if fields_seen {
                    return Err(HpackError::Compression(
                        "dynamic table size update after a field (RFC 7541 §4.2)",
                    ));
                }
                let size = r.integer(5).map_err(HpackError::Compression)?;
                if size > self.limit {
                    return Err(HpackError::Compression(
                        "dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE (RFC 7541 §6.3)",
                    ));
                }
                self.table.set_max_size(size);
                self.update_required = false;
                continue;
            } else {
                // A literal (RFC 7541 §6.2): with incremental indexing
                // (01), never indexed (0001) or without indexing (0000).
                let (prefix, index_it) = if first & 0xc0 == 0x40 {
                    (6, true)
                } else {
                    (4, false)
                };
                self.check_no_update_due()?;
                let name_index = r.integer(prefix).map_err(HpackError::Compression)?;
                let name = if name_index == 0 {
                    Some(r.string(scratch).map_err(HpackError::Compression)?)
                } else {
                    None
                };
                let value = r.string(scratch).map_err(HpackError::Compression)?;
                let name_bytes = match name {
                    Some(s) => s.bytes(scratch),
                    None => self.lookup(name_index)?.0,
                };
                let value_bytes = value.bytes(scratch);
                if index_it {
                    let entry = Entry::new(name_bytes, value_bytes);
                    emit_field(entry.name(), entry.value());
                    self.table.insert(entry);
                } else {
                    emit_field(name_bytes, value_bytes);
                }
            }
            fields_seen = true;
        }
        self.check_no_update_due()?;
        if too_large {
            return Err(HpackError::ListTooLarge);
        }
        Ok(())
    }

    /// A required size update (RFC 9113 §4.3.1) did not open the block.
    fn check_no_update_due(&self) -> Result<(), HpackError> {
        if self.update_required {
            return Err(HpackError::Compression(
                "block without the dynamic table size update our lowered SETTINGS_HEADER_TABLE_SIZE requires (RFC 9113 §4.3.1)",
            ));
        }
        Ok(())
    }

    /// The (name, value) at `index` of the joined index space (RFC 7541
    /// §2.3.3).
    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if index == 0 {
            return Err(HpackError::Compression("index 0 (RFC 7541 §6.1)"));
        }
        if let Some((name, value)) = STATIC.get(index - 1) {
            return Ok((name.as_bytes(), value.as_bytes()));
        }
        self.table
            .get(index - 1 - STATIC_LEN)
            .map(|e| (e.name(), e.value()))
            .ok_or(HpackError::Compression(
                "index past the dynamic table (RFC 7541 §2.3.3)",
            ))
    }
}

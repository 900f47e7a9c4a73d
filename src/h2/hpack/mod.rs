//! HPACK, the field compression of HTTP/2 (RFC 7541), written here.
//!
//! Why our own: the maintained crates do not fit. hyper's `h2` keeps its
//! HPACK private; the `hpack` crate is unmaintained since 2015 and has no
//! Huffman encoder; `loona-hpack` (its fork) comes with `tracing`, does
//! not refuse a size update after a field, and bounds no decoded list;
//! sozu wrote its own for the same reasons. What sluice needs — a size
//! update only at a block's start and within our setting, a decoded list
//! bounded as it is decoded while the table stays consistent (an HPACK
//! bomb is refused, the connection goes on), no panic on any input — is
//! a few hundred lines, tested with RFC 7541 Appendix C.
//!
//! What it must not know: frames, streams, the meaning of fields, the
//! configuration (the caller passes the limits).
//!
//! Parts: `primitive` (integers, strings), `huffman` (Appendix B),
//! `table` (static table, dynamic table), [`Decoder`], [`Encoder`].

mod decoder;
mod encoder;
pub(crate) mod huffman;
pub(crate) mod primitive;
pub(crate) mod table;

pub use decoder::Decoder;
pub use encoder::Encoder;

use super::{ErrorCode, H2Error};

/// The initial dynamic table size and SETTINGS_HEADER_TABLE_SIZE, in
/// bytes (RFC 9113 §4.3.1, §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Why a header block was not turned into a field list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// The block cannot be decoded: a connection error COMPRESSION_ERROR
    /// (RFC 9113 §4.3).
    Compression(&'static str),
    /// The decoded list is larger than the caller's limit
    /// (SETTINGS_MAX_HEADER_LIST_SIZE, RFC 9113 §6.5.2). The block was
    /// decoded to its end and the connection's context stays usable: the
    /// machine answers the request with 431 (RFC 6585 §5) or resets the
    /// stream.
    ListTooLarge,
}

impl HpackError {
    /// The HTTP/2 error for this failure on `stream_id`: a connection
    /// COMPRESSION_ERROR, or a stream error PROTOCOL_ERROR for a list
    /// over the limit when no 431 can be sent (a trailer section).
    pub fn to_h2(self, stream_id: u32) -> H2Error {
        match self {
            HpackError::Compression(why) => H2Error::Connection(ErrorCode::CompressionError, why),
            HpackError::ListTooLarge => H2Error::Stream(
                stream_id,
                ErrorCode::ProtocolError,
                "header list over SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2)",
            ),
        }
    }
}

/// A decoded field list in one reused storage: what
/// [`Decoder::decode`] emits, kept for the request mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldList {
    bytes: Vec<u8>,
    /// (name end, value end) offsets in `bytes`, per field; each field's
    /// name starts where the previous value ended.
    ends: Vec<(usize, usize)>,
}

impl FieldList {
    /// An empty list.
    pub fn new() -> FieldList {
        FieldList::default()
    }

    /// Removes every field, keeping the storage.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Adds a field at the end.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(name);
        let name_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((name_end, self.bytes.len()));
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True if there is no field.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The fields in order, as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(name_end, value_end)| {
            let name = self.bytes.get(start..name_end).unwrap_or_default();
            let value = self.bytes.get(name_end..value_end).unwrap_or_default();
            start = value_end;
            (name, value)
        })
    }
}

/// Lower-case hex of `bytes`, for tests that compare with RFC 7541's
/// printed blocks.
#[cfg(test)]
pub(crate) fn tests_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

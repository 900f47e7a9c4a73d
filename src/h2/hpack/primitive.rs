//! HPACK's primitive types (RFC 7541 §5): prefixed integers and string
//! literals, read from a block and written to one.
//!
//! Why it exists: every representation is built from these two; their
//! limits (an integer that fits 32 bits in at most 5 continuation bytes,
//! a string no longer than what is left of the block) are checked once
//! here.
//!
//! What it must not know: tables, fields, frames.

use super::huffman;

/// Why a block is refused: always a COMPRESSION_ERROR (RFC 9113 §4.3).
pub(crate) type Invalid = &'static str;

/// The most continuation bytes an integer may take: 5 × 7 bits cover 32
/// bits past any prefix (RFC 7541 §5.1 lets a decoder limit integers).
const MAX_CONTINUATION_BYTES: usize = 5;

/// A reader over one header block.
pub(crate) struct Reader<'b> {
    block: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    /// A reader at the start of `block`.
    pub(crate) fn new(block: &'b [u8]) -> Reader<'b> {
        Reader { block, at: 0 }
    }

    /// The next byte, not consumed; `None` at the end.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.block.get(self.at).copied()
    }

    /// An integer with an `n`-bit prefix (1..=8) in the current byte
    /// (RFC 7541 §5.1); the bits above the prefix are the caller's.
    ///
    /// Errors: a truncated integer, or one over 2^32-1 or longer than
    /// 5 continuation bytes.
    pub(crate) fn integer(&mut self, n: u8) -> Result<usize, Invalid> {
        let first = self.peek().ok_or("truncated integer (RFC 7541 §5.1)")?;
        self.at += 1;
        let max_prefix = (1u16 << n) - 1;
        let mut value = u64::from(u16::from(first) & max_prefix);
        if value < u64::from(max_prefix) {
            return Ok(value as usize);
        }
        for i in 0..MAX_CONTINUATION_BYTES {
            let b = self.peek().ok_or("truncated integer (RFC 7541 §5.1)")?;
            self.at += 1;
            value += u64::from(b & 0x7f) << (7 * i);
            if value > u64::from(u32::MAX) {
                return Err("integer over 2^32-1 (RFC 7541 §5.1)");
            }
            if b & 0x80 == 0 {
                return usize::try_from(value).map_err(|_| "integer too large");
            }
        }
        Err("integer longer than 5 continuation bytes (RFC 7541 §5.1)")
    }

    /// A string literal (RFC 7541 §5.2): the raw bytes borrowed from the
    /// block, or, Huffman-coded, decoded and appended to `scratch`.
    ///
    /// Errors: a truncated length or string, a Huffman decoding error.
    pub(crate) fn string(&mut self, scratch: &mut Vec<u8>) -> Result<Str<'b>, Invalid> {
        let huffman_coded = self.peek().is_some_and(|b| b & 0x80 != 0);
        let len = self.integer(7)?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.block.len())
            .ok_or("string literal longer than the block (RFC 7541 §5.2)")?;
        let raw = self.block.get(self.at..end).unwrap_or_default();
        self.at = end;
        if !huffman_coded {
            return Ok(Str::Block(raw));
        }
        let start = scratch.len();
        huffman::decode(raw, scratch)?;
        Ok(Str::Scratch(start, scratch.len()))
    }
}

/// Where a string read from a block is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Str<'b> {
    /// Borrowed from the block.
    Block(&'b [u8]),
    /// Decoded into the scratch buffer, `start..end`.
    Scratch(usize, usize),
}

impl<'b> Str<'b> {
    /// The bytes, given the scratch buffer the reader wrote to.
    pub(crate) fn bytes<'s>(self, scratch: &'s [u8]) -> &'s [u8]
    where
        'b: 's,
    {
        match self {
            Str::Block(b) => b,
            Str::Scratch(start, end) => scratch.get(start..end).unwrap_or_default(),
        }
    }
}

/// Appends `value` as an integer with an `n`-bit prefix (1..=8), the bits
/// above the prefix taken from `high` (RFC 7541 §5.1).
pub(crate) fn encode_integer(out: &mut Vec<u8>, n: u8, high: u8, value: usize) {
    let max_prefix = (1usize << n) - 1;
    if value < max_prefix {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal (RFC 7541 §5.2), Huffman-coded when that is
/// shorter.
pub(crate) fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        encode_integer(out, 7, 0x80, coded);
        huffman::encode(s, out);
    } else {
        encode_integer(out, 7, 0, s.len());
        out.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7541_c1_integers() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit
        // prefix; C.1.3: 42 at an octet boundary.
        let table: &[(u8, usize, &[u8])] = &[
            (5, 10, &[0b01010]),
            (5, 1337, &[0b11111, 0b1001_1010, 0b0000_1010]),
            (8, 42, &[0b0010_1010]),
        ];
        for &(n, value, wire) in table {
            let mut out = Vec::new();
            encode_integer(&mut out, n, 0, value);
            assert_eq!(out, wire, "{value}");
            assert_eq!(Reader::new(wire).integer(n), Ok(value));
        }
    }

    #[test]
    fn integers_round_trip_at_every_prefix() {
        for n in 1..=8u8 {
            for value in [
                0,
                1,
                30,
                31,
                126,
                127,
                128,
                255,
                256,
                16_383,
                1 << 20,
                u32::MAX as usize,
            ] {
                let mut out = Vec::new();
                encode_integer(&mut out, n, 0, value);
                let mut r = Reader::new(&out);
                assert_eq!(r.integer(n), Ok(value), "n={n} value={value}");
                assert_eq!(r.at, out.len());
            }
        }
    }

    #[test]
    fn oversized_and_truncated_integers_are_refused() {
        // 2^32 with a 5-bit prefix.
        let mut out = Vec::new();
        encode_integer(&mut out, 5, 0, 1usize << 32);
        assert!(Reader::new(&out).integer(5).is_err());
        // A zero value padded with continuation bytes past the limit.
        assert!(
            Reader::new(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00])
                .integer(5)
                .is_err()
        );
        assert!(Reader::new(&[0x1f, 0x80]).integer(5).is_err());
        assert!(Reader::new(&[]).integer(5).is_err());
    }
}

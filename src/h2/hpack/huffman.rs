//! The Huffman code of HPACK (RFC 7541 §5.2, Appendix B): encoding, and
//! decoding with the checks the RFC requires.
//!
//! Why it exists: HPACK string literals may be Huffman-coded; a decoder
//! must read them, and the encoder uses the code when it is shorter.
//!
//! What it must not know: fields, tables, frames.
//!
//! How decoding works: the code is canonical (codes of one length are
//! consecutive numbers, ordered by symbol, and each length's first code
//! follows from the previous length's last; the tests check it). So the
//! next 30 bits of input, read as a number, fall below the end of the
//! codes of exactly one shortest length, and the symbol is that length's
//! first symbol plus the distance from its first code. The tables for
//! that are computed at compile time from [`CODES`]; a symbol costs a
//! few comparisons (most are 5 to 8 bits long), not one step per bit.

/// The code of every symbol (0..=255, and 256 = EOS) as (code, length
/// in bits), from RFC 7541 Appendix B.
pub(crate) const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The end-of-string symbol (RFC 7541 §5.2): never valid in a string.
const EOS: u16 = 256;

/// The longest code, in bits.
const MAX_LEN: usize = 30;

/// The decoding tables derived from [`CODES`] (see the module doc).
struct Canonical {
    /// Symbols ordered by (code length, symbol).
    symbols: [u16; 257],
    /// Per length: its first code, left-justified in 30 bits.
    first: [u32; MAX_LEN + 1],
    /// Per length: the end of its codes (the first code of the next
    /// length, left-justified), so a window below it has this length or
    /// a shorter one.
    limit: [u32; MAX_LEN + 1],
    /// Per length: where its symbols start in `symbols`.
    offset: [u16; MAX_LEN + 1],
}

/// [`Canonical`] for [`CODES`], built at compile time.
static CANONICAL: Canonical = {
    let mut t = Canonical {
        symbols: [0; 257],
        first: [0; MAX_LEN + 1],
        limit: [0; MAX_LEN + 1],
        offset: [0; MAX_LEN + 1],
    };
    let mut next = 0;
    let mut code: u32 = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        t.offset[len] = next as u16;
        t.first[len] = code << (MAX_LEN - len);
        let mut sym = 0;
        while sym < 257 {
            if CODES[sym].1 as usize == len {
                t.symbols[next] = sym as u16;
                next += 1;
                code += 1;
            }
            sym += 1;
        }
        t.limit[len] = code << (MAX_LEN - len);
        code <<= 1;
        len += 1;
    }
    t
};

/// Why a Huffman string is refused (RFC 7541 §5.2).
pub(crate) type HuffmanError = &'static str;

/// Decodes the Huffman-coded `input`, appending the octets to `out`.
///
/// Errors: the EOS symbol inside the string, padding longer than 7 bits,
/// or padding that is not the most significant bits of EOS (all ones),
/// all decoding errors per RFC 7541 §5.2.
pub(crate) fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let t = &CANONICAL;
    // Input bits not decoded yet, in the low `bits` bits of `acc`.
    let mut acc: u64 = 0;
    let mut bits: usize = 0;
    let mut rest = input.iter();
    loop {
        while bits <= 56 {
            let Some(&b) = rest.next() else { break };
            acc = (acc << 8) | u64::from(b);
            bits += 8;
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 30 bits, zeros past the end of the input.
        let window = if bits >= MAX_LEN {
            (acc >> (bits - MAX_LEN)) as u32
        } else {
            (acc << (MAX_LEN - bits)) as u32
        } & ((1u32 << MAX_LEN) - 1);
        let mut len = 1;
        while len < MAX_LEN && window >= t.limit.get(len).copied().unwrap_or(u32::MAX) {
            len += 1;
        }
        if len > bits {
            // What is left cannot be a symbol: it must be padding, the
            // most significant bits of EOS (ones), shorter than a byte.
            if bits > 7 {
                return Err("Huffman padding longer than 7 bits (RFC 7541 §5.2)");
            }
            if acc & ((1u64 << bits) - 1) != (1u64 << bits) - 1 {
                return Err("Huffman padding is not a prefix of EOS (RFC 7541 §5.2)");
            }
            return Ok(());
        }
        let first = t.first.get(len).copied().unwrap_or(0);
        let index = usize::from(t.offset.get(len).copied().unwrap_or(0))
            + (window.saturating_sub(first) >> (MAX_LEN - len)) as usize;
        let sym = t.symbols.get(index).copied().unwrap_or(EOS);
        if sym == EOS {
            return Err("EOS symbol inside a Huffman string (RFC 7541 §5.2)");
        }
        out.push(sym as u8);
        bits -= len;
        acc &= (1u64 << bits) - 1;
    }
}

/// The length in bytes of `input` once Huffman-coded.
pub(crate) fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input.iter().map(|&b| usize::from(code_of(b).1)).sum();
    bits.div_ceil(8)
}

/// Appends `input` Huffman-coded, padded with the most significant bits
/// of EOS (ones) to a whole byte (RFC 7541 §5.2).
pub(crate) fn encode(input: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in input {
        let (code, len) = code_of(b);
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

/// The code of octet `b`.
fn code_of(b: u8) -> (u32, u8) {
    CODES.get(usize::from(b)).copied().unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_canonical_and_complete() {
        // Kraft's sum is exactly 1 (a complete prefix code), and each
        // code is the canonical one for its (length, symbol) order.
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (CODES[s].1, s));
        let mut code: u64 = 0;
        let mut prev_len = CODES[order[0]].1;
        for (i, &s) in order.iter().enumerate() {
            let (c, len) = CODES[s];
            if i > 0 {
                code = (code + 1) << (len - prev_len);
            }
            assert_eq!(u64::from(c), code, "symbol {s}");
            prev_len = len;
        }
        let kraft: f64 = CODES.iter().map(|&(_, l)| 0.5f64.powi(i32::from(l))).sum();
        assert!((kraft - 1.0).abs() < 1e-12);
        assert_eq!(CODES[256], (0x3fff_ffff, 30), "EOS is thirty ones");
    }

    #[test]
    fn every_octet_round_trips_alone_and_together() {
        let all: Vec<u8> = (0..=255).collect();
        for b in 0..=255u8 {
            let mut enc = Vec::new();
            encode(&[b], &mut enc);
            assert_eq!(enc.len(), encoded_len(&[b]));
            let mut dec = Vec::new();
            decode(&enc, &mut dec).unwrap();
            assert_eq!(dec, [b]);
        }
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, all);
    }

    #[test]
    fn rfc7541_c4_strings_encode_as_printed() {
        // RFC 7541 Appendix C.4.1–C.4.3 and C.6.1.
        let table: &[(&[u8], &str)] = &[
            (b"www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"),
            (b"no-cache", "a8eb10649cbf"),
            (b"custom-key", "25a849e95ba97d7f"),
            (b"custom-value", "25a849e95bb8e8b4bf"),
            (b"302", "6402"),
            (b"private", "aec3771a4b"),
            (
                b"https://www.example.com",
                "9d29ad171863c78f0b97c8e9ae82ae43d3",
            ),
        ];
        for (text, hex) in table {
            let mut enc = Vec::new();
            encode(text, &mut enc);
            assert_eq!(super::super::tests_hex(&enc), *hex);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        // "a" is 00011 (5 bits): padded with 111 it is 0x1f.
        let mut out = Vec::new();
        assert!(decode(&[0x1f], &mut out).is_ok());
        assert_eq!(out, b"a");
        // Padding with a zero bit.
        assert!(decode(&[0x1e], &mut Vec::new()).is_err());
        // A whole byte of padding (8 ones) after a complete symbol.
        assert!(decode(&[0x1f, 0xff], &mut Vec::new()).is_err());
        // EOS itself (30 ones, then 2 of padding).
        assert!(decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new()).is_err());
        // Empty input is the empty string.
        assert!(decode(&[], &mut Vec::new()).is_ok());
    }
}

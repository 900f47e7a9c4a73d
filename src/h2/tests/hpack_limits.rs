//! The HPACK decoder under attack and at its limits: an HPACK bomb hits
//! the list limit with the context kept consistent, size updates follow
//! RFC 7541 §4.2 / §6.3 and RFC 9113 §4.3.1, the encoder follows the
//! client's table size, and random or truncated input never panics.

use crate::h2::hpack::primitive::{encode_integer, encode_string};
use crate::h2::hpack::{Decoder, Encoder, FieldList, HpackError};
use crate::tests::Lcg;

/// A literal with incremental indexing and a new name.
fn indexed_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x40);
    encode_string(out, name);
    encode_string(out, value);
}

#[test]
fn an_hpack_bomb_hits_the_list_limit_and_the_connection_goes_on() {
    let mut dec = Decoder::new(4096);
    // Block 1: one entry of about 4 KiB...
    let mut block = Vec::new();
    indexed_literal(&mut block, b"x-bomb", &[b'a'; 4000]);
    dec.decode(&block, usize::MAX, |_, _| {}).unwrap();
    assert_eq!(dec.table_len(), 1);
    // Block 2: ...referenced 1,000 times in 1,000 bytes: 4 MB decoded.
    let bomb = vec![0xbe; 1000];
    let mut emitted = 0usize;
    let limit = 64 * 1024;
    let r = dec.decode(&bomb, limit, |n, v| emitted += n.len() + v.len() + 32);
    assert_eq!(r, Err(HpackError::ListTooLarge));
    assert!(emitted <= limit, "{emitted} bytes emitted");
    // The context is intact: the next block decodes.
    let mut list = FieldList::new();
    dec.decode(&[0x82, 0xbe], limit, |n, v| list.push(n, v))
        .unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list.iter().nth(1).unwrap().0, b"x-bomb");
}

#[test]
fn a_list_over_the_limit_still_updates_the_table() {
    let mut dec = Decoder::new(4096);
    let mut block = Vec::new();
    indexed_literal(&mut block, b"a", &[b'1'; 100]);
    indexed_literal(&mut block, b"b", &[b'2'; 100]);
    assert_eq!(
        dec.decode(&block, 150, |_, _| {}),
        Err(HpackError::ListTooLarge)
    );
    // Both entries are in the table, as the client's encoder assumes.
    assert_eq!(dec.table_len(), 2);
    assert_eq!(dec.table_entry(0).unwrap().0, b"b");
}

#[test]
fn the_list_size_counts_32_bytes_per_field() {
    // ":method: GET" is 7 + 3 + 32 = 42 bytes (RFC 9113 §6.5.2).
    let mut dec = Decoder::new(4096);
    assert_eq!(dec.decode(&[0x82], 42, |_, _| {}), Ok(()));
    assert_eq!(
        dec.decode(&[0x82], 41, |_, _| {}),
        Err(HpackError::ListTooLarge)
    );
}

#[test]
fn rfc7541_4_2_a_size_update_after_a_field_is_a_compression_error() {
    let mut dec = Decoder::new(4096);
    assert!(matches!(
        dec.decode(&[0x82, 0x20], usize::MAX, |_, _| {}),
        Err(HpackError::Compression(_))
    ));
}

#[test]
fn rfc7541_6_3_a_size_update_above_our_setting_is_a_compression_error() {
    let mut dec = Decoder::new(4096);
    let mut block = Vec::new();
    encode_integer(&mut block, 5, 0x20, 4097);
    assert!(matches!(
        dec.decode(&block, usize::MAX, |_, _| {}),
        Err(HpackError::Compression(_))
    ));
    // Within the setting, and two in a row at the start, are fine.
    let mut block = Vec::new();
    encode_integer(&mut block, 5, 0x20, 0);
    encode_integer(&mut block, 5, 0x20, 4096);
    block.push(0x82);
    let mut dec = Decoder::new(4096);
    assert_eq!(dec.decode(&block, usize::MAX, |_, _| {}), Ok(()));
    assert_eq!(dec.table_max_size(), 4096);
}

#[test]
fn rfc9113_4_3_1_a_lowered_setting_requires_a_size_update_first() {
    let mut dec = Decoder::new(4096);
    let mut block = Vec::new();
    indexed_literal(&mut block, b"k", b"v");
    dec.decode(&block, usize::MAX, |_, _| {}).unwrap();
    dec.set_limit(0);
    // A block without the update is refused...
    assert!(matches!(
        dec.decode(&[0x82], usize::MAX, |_, _| {}),
        Err(HpackError::Compression(_))
    ));
    // ...one that opens with it is fine and empties the table.
    let mut dec2 = Decoder::new(4096);
    dec2.decode(&block, usize::MAX, |_, _| {}).unwrap();
    dec2.set_limit(0);
    assert_eq!(dec2.decode(&[0x20, 0x82], usize::MAX, |_, _| {}), Ok(()));
    assert_eq!(dec2.table_len(), 0);
}

#[test]
fn indices_past_the_tables_and_index_0_are_compression_errors() {
    let mut dec = Decoder::new(4096);
    for block in [&[0x80][..], &[0xbe], &[0x40 | 0x3f, 0x00, 0x01, b'v']] {
        assert!(
            matches!(
                dec.decode(block, usize::MAX, |_, _| {}),
                Err(HpackError::Compression(_))
            ),
            "{block:?}"
        );
    }
}

#[test]
fn an_entry_larger_than_the_table_empties_it() {
    let mut dec = Decoder::new(4096);
    let mut block = Vec::new();
    indexed_literal(&mut block, b"small", b"1");
    indexed_literal(&mut block, b"huge", &[b'x'; 5000]);
    let mut list = FieldList::new();
    dec.decode(&block, usize::MAX, |n, v| list.push(n, v))
        .unwrap();
    assert_eq!(list.len(), 2, "the field is still emitted");
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
}

#[test]
fn a_literal_naming_the_entry_it_evicts_keeps_the_name() {
    // Table of 64 bytes: one entry "n: v" (34 bytes); a literal with
    // indexing whose name is that entry (index 62) and a value that
    // forces its eviction.
    let mut dec = Decoder::new(64);
    dec.decode(&[0x3f, 0x21], usize::MAX, |_, _| {}).unwrap(); // size 64
    let mut block = Vec::new();
    indexed_literal(&mut block, b"n", b"v");
    dec.decode(&block, usize::MAX, |_, _| {}).unwrap();
    let mut block = vec![0x40 | 62];
    encode_string(&mut block, &[b'w'; 20]);
    let mut list = FieldList::new();
    dec.decode(&block, usize::MAX, |n, v| list.push(n, v))
        .unwrap();
    assert_eq!(list.iter().next().unwrap().0, b"n");
    assert_eq!(dec.table_len(), 1);
    assert_eq!(dec.table_entry(0).unwrap().0, b"n");
}

#[test]
fn the_encoder_declares_a_smaller_client_table_once() {
    let mut enc = Encoder::new();
    let mut block = Vec::new();
    enc.begin_block(&mut block);
    assert!(block.is_empty(), "no update while the size is 4,096");
    enc.set_peer_table_size(8192);
    enc.begin_block(&mut block);
    assert!(block.is_empty(), "a larger table needs no update");
    enc.set_peer_table_size(1024);
    enc.set_peer_table_size(100);
    enc.set_peer_table_size(2048);
    enc.begin_block(&mut block);
    // The smallest size of the interval (RFC 7541 §4.2): 100.
    let mut want = Vec::new();
    encode_integer(&mut want, 5, 0x20, 100);
    assert_eq!(block, want);
    // A client decoder with a lowered setting accepts the block.
    let mut dec = Decoder::new(4096);
    dec.set_limit(100);
    block.push(0x88);
    assert_eq!(dec.decode(&block, usize::MAX, |_, _| {}), Ok(()));
    // Only once.
    let mut again = Vec::new();
    enc.begin_block(&mut again);
    assert!(again.is_empty());
}

#[test]
fn random_and_truncated_blocks_never_panic() {
    let mut rng = Lcg(7);
    let mut valid = Vec::new();
    indexed_literal(&mut valid, b"custom-key", b"custom-value");
    valid.extend_from_slice(&[0x82, 0x86, 0x84, 0xbe]);
    for cut in 0..=valid.len() {
        let mut dec = Decoder::new(4096);
        let _ = dec.decode(&valid[..cut], 1 << 16, |_, _| {});
    }
    let mut dec = Decoder::new(4096);
    for _ in 0..20_000 {
        let len = rng.below(64) as usize;
        let block: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        let mut total = 0usize;
        let r = dec.decode(&block, 4096, |n, v| total += n.len() + v.len() + 32);
        assert!(total <= 4096);
        if matches!(r, Err(HpackError::Compression(_))) {
            // A real connection ends here; start a fresh context.
            dec = Decoder::new(4096);
        }
        assert!(dec.table_size() <= 4096);
    }
}

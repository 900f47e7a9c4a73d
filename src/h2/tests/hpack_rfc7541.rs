//! RFC 7541 Appendix C, C.2–C.6: every example block decoded in
//! sequence on one decoder, with the fields and the dynamic table the RFC
//! prints after each; and the same lists encoded by our encoder decode
//! back to themselves.

use super::unhex;
use crate::h2::hpack::{Decoder, Encoder, FieldList};

/// One example: the block, the fields it decodes to, and the dynamic
/// table after it (newest first) with its size.
struct Step {
    hex: &'static str,
    fields: &'static [(&'static str, &'static str)],
    table: &'static [(&'static str, &'static str)],
    size: usize,
}

/// Decodes `steps` in order on one decoder whose table limit is
/// `table_size`, checking each.
#[track_caller]
fn run(table_size: usize, steps: &[Step]) {
    let mut dec = Decoder::new(table_size);
    if table_size < 4096 {
        // The examples of C.5/C.6 assume a decoder already at 256: as if
        // the encoder had sent the size update (RFC 7541 §4.2).
        dec.decode(&[0x3f, 0xe1, 0x01], usize::MAX, |_, _| {})
            .unwrap();
    }
    for (i, step) in steps.iter().enumerate() {
        let mut list = FieldList::new();
        dec.decode(&unhex(step.hex), usize::MAX, |n, v| list.push(n, v))
            .unwrap_or_else(|e| panic!("step {i}: {e:?}"));
        let got: Vec<(String, String)> = list
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = step
            .fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want, "step {i} fields");
        assert_eq!(dec.table_len(), step.table.len(), "step {i} table length");
        for (j, (n, v)) in step.table.iter().enumerate() {
            assert_eq!(
                dec.table_entry(j),
                Some((n.as_bytes(), v.as_bytes())),
                "step {i} entry {j}"
            );
        }
        assert_eq!(dec.table_size(), step.size, "step {i} table size");
    }
}

#[test]
fn rfc7541_c2_1_literal_with_indexing() {
    run(
        4096,
        &[Step {
            hex: "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            fields: &[("custom-key", "custom-header")],
            table: &[("custom-key", "custom-header")],
            size: 55,
        }],
    );
}

#[test]
fn rfc7541_c2_2_literal_without_indexing() {
    run(
        4096,
        &[Step {
            hex: "040c 2f73 616d 706c 652f 7061 7468",
            fields: &[(":path", "/sample/path")],
            table: &[],
            size: 0,
        }],
    );
}

#[test]
fn rfc7541_c2_3_literal_never_indexed() {
    run(
        4096,
        &[Step {
            hex: "1008 7061 7373 776f 7264 0673 6563 7265 74",
            fields: &[("password", "secret")],
            table: &[],
            size: 0,
        }],
    );
}

#[test]
fn rfc7541_c2_4_indexed_field() {
    run(
        4096,
        &[Step {
            hex: "82",
            fields: &[(":method", "GET")],
            table: &[],
            size: 0,
        }],
    );
}

const C3_FIELDS_1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const C3_FIELDS_2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const C3_FIELDS_3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const C3_TABLE_1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const C3_TABLE_2: &[(&str, &str)] = &[
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const C3_TABLE_3: &[(&str, &str)] = &[
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

#[test]
fn rfc7541_c3_requests_without_huffman() {
    run(
        4096,
        &[
            Step {
                hex: "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                fields: C3_FIELDS_1,
                table: C3_TABLE_1,
                size: 57,
            },
            Step {
                hex: "8286 84be 5808 6e6f 2d63 6163 6865",
                fields: C3_FIELDS_2,
                table: C3_TABLE_2,
                size: 110,
            },
            Step {
                hex: "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                fields: C3_FIELDS_3,
                table: C3_TABLE_3,
                size: 164,
            },
        ],
    );
}

#[test]
fn rfc7541_c4_requests_with_huffman() {
    run(
        4096,
        &[
            Step {
                hex: "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                fields: C3_FIELDS_1,
                table: C3_TABLE_1,
                size: 57,
            },
            Step {
                hex: "8286 84be 5886 a8eb 1064 9cbf",
                fields: C3_FIELDS_2,
                table: C3_TABLE_2,
                size: 110,
            },
            Step {
                hex: "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
                fields: C3_FIELDS_3,
                table: C3_TABLE_3,
                size: 164,
            },
        ],
    );
}

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

const C5_FIELDS_1: &[(&str, &str)] = &[
    (":status", "302"),
    ("cache-control", "private"),
    ("date", DATE_1),
    ("location", LOCATION),
];
const C5_FIELDS_2: &[(&str, &str)] = &[
    (":status", "307"),
    ("cache-control", "private"),
    ("date", DATE_1),
    ("location", LOCATION),
];
const C5_FIELDS_3: &[(&str, &str)] = &[
    (":status", "200"),
    ("cache-control", "private"),
    ("date", DATE_2),
    ("location", LOCATION),
    ("content-encoding", "gzip"),
    ("set-cookie", COOKIE),
];
const C5_TABLE_1: &[(&str, &str)] = &[
    ("location", LOCATION),
    ("date", DATE_1),
    ("cache-control", "private"),
    (":status", "302"),
];
const C5_TABLE_2: &[(&str, &str)] = &[
    (":status", "307"),
    ("location", LOCATION),
    ("date", DATE_1),
    ("cache-control", "private"),
];
const C5_TABLE_3: &[(&str, &str)] = &[
    ("set-cookie", COOKIE),
    ("content-encoding", "gzip"),
    ("date", DATE_2),
];

#[test]
fn rfc7541_c5_responses_without_huffman_evict_at_256_bytes() {
    run(
        256,
        &[
            Step {
                hex: "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 \
                      3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 \
                      7861 6d70 6c65 2e63 6f6d",
                fields: C5_FIELDS_1,
                table: C5_TABLE_1,
                size: 222,
            },
            Step {
                hex: "4803 3330 37c1 c0bf",
                fields: C5_FIELDS_2,
                table: C5_TABLE_2,
                size: 222,
            },
            Step {
                hex: "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 \
                      474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 \
                      454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 \
                      6572 7369 6f6e 3d31",
                fields: C5_FIELDS_3,
                table: C5_TABLE_3,
                size: 215,
            },
        ],
    );
}

#[test]
fn rfc7541_c6_responses_with_huffman_evict_at_256_bytes() {
    run(
        256,
        &[
            Step {
                hex: "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 \
                      82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                fields: C5_FIELDS_1,
                table: C5_TABLE_1,
                size: 222,
            },
            Step {
                hex: "4883 640e ffc1 c0bf",
                fields: C5_FIELDS_2,
                table: C5_TABLE_2,
                size: 222,
            },
            Step {
                hex: "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b \
                      d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 \
                      0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                fields: C5_FIELDS_3,
                table: C5_TABLE_3,
                size: 215,
            },
        ],
    );
}

#[test]
fn rfc7541_c_lists_encoded_by_us_decode_back() {
    for list in [C3_FIELDS_3, C5_FIELDS_1, C5_FIELDS_3] {
        let mut enc = Encoder::new();
        let mut block = Vec::new();
        enc.begin_block(&mut block);
        for (n, v) in list {
            enc.field(&mut block, n.as_bytes(), v.as_bytes());
        }
        let mut dec = Decoder::new(4096);
        let mut got = Vec::new();
        dec.decode(&block, usize::MAX, |n, v| {
            got.push((n.to_vec(), v.to_vec()))
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = list
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        // Nothing was indexed.
        assert_eq!(dec.table_len(), 0);
    }
}

#[test]
fn rfc7541_c_the_encoder_uses_static_entries_and_huffman() {
    let mut enc = Encoder::new();
    let mut block = Vec::new();
    enc.status(&mut block, 200);
    enc.status(&mut block, 302);
    // :status 200 is static index 8; 302 is a literal with name index 8
    // without indexing and the Huffman "302" of C.6.1.
    assert_eq!(
        crate::h2::hpack::tests_hex(&block),
        "88".to_owned() + "08826402"
    );
    let mut block = Vec::new();
    enc.field(&mut block, b"set-cookie", b"a=b");
    // Never indexed (0001), static name 55 (15 + 40 on 4 bits).
    assert_eq!(&block[..2], &[0x1f, 0x28]);
}

//! Response mapping: a response head or a trailer section to an HPACK
//! block (RFC 9113 §8.1, §8.2, §8.3.2).

use crate::h2::hpack::{Decoder, Encoder};
use crate::h2::map::{encode_response_head, encode_trailer_section, has_content};
use crate::http::ResponseHead;

/// Decodes `block` into (name, value) strings.
fn decode(block: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    Decoder::new(4096)
        .decode(block, usize::MAX, |n, v| {
            out.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
    out
}

fn head(status: u16, fields: &[(&str, &str)]) -> ResponseHead {
    let mut h = ResponseHead::new(status);
    for (n, v) in fields {
        h.headers.append(n, v.as_bytes());
    }
    h
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_response_head_loses_its_connection_specific_fields_and_lower_cases_names() {
    let h = head(
        200,
        &[
            ("Content-Type", "text/plain"),
            ("Connection", "keep-alive, X-Hop"),
            ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"),
            ("Transfer-Encoding", "chunked"),
            ("Upgrade", "h2c"),
            ("Proxy-Connection", "close"),
            ("TE", "trailers"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
            ("Content-Length", "12"),
        ],
    );
    let mut out = Vec::new();
    encode_response_head(&h, &mut Encoder::new(), &mut out);
    assert_eq!(
        decode(&out),
        pairs(&[
            (":status", "200"),
            ("content-type", "text/plain"),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
            ("content-length", "12"),
        ])
    );
}

#[test]
fn an_invalid_content_length_is_dropped_and_interim_heads_carry_none() {
    let mut out = Vec::new();
    encode_response_head(
        &head(200, &[("Content-Length", "1, 2")]),
        &mut Encoder::new(),
        &mut out,
    );
    assert_eq!(decode(&out), pairs(&[(":status", "200")]));
    let mut out = Vec::new();
    encode_response_head(
        &head(
            103,
            &[("Link", "</a.css>; rel=preload"), ("Content-Length", "0")],
        ),
        &mut Encoder::new(),
        &mut out,
    );
    assert_eq!(
        decode(&out),
        pairs(&[(":status", "103"), ("link", "</a.css>; rel=preload")])
    );
}

#[test]
fn responses_without_content() {
    assert!(has_content("GET", 200));
    assert!(!has_content("HEAD", 200));
    assert!(!has_content("GET", 204));
    assert!(!has_content("GET", 304));
    assert!(!has_content("GET", 100));
    assert!(has_content("POST", 404));
}

#[test]
fn an_http11_trailer_section_becomes_a_trailer_block() {
    let raw = b"Grpc-Status: 0\r\nX-Sum:  abc \r\nbad line\r\nTransfer-Encoding: x\r\n\r\n";
    let mut out = Vec::new();
    let n = encode_trailer_section(raw, &mut Encoder::new(), &mut out);
    assert_eq!(n, 2);
    assert_eq!(
        decode(&out),
        pairs(&[("grpc-status", "0"), ("x-sum", "abc")])
    );
    let mut out = Vec::new();
    assert_eq!(
        encode_trailer_section(b"\r\n", &mut Encoder::new(), &mut out),
        0
    );
}

#[test]
fn a_shrunk_client_table_is_declared_at_the_start_of_the_next_head() {
    let mut enc = Encoder::new();
    enc.set_peer_table_size(0);
    let mut out = Vec::new();
    encode_response_head(&head(404, &[]), &mut enc, &mut out);
    assert_eq!(out, [0x20, 0x8d]);
    let mut dec = Decoder::new(4096);
    dec.set_limit(0);
    assert!(dec.decode(&out, usize::MAX, |_, _| {}).is_ok());
}

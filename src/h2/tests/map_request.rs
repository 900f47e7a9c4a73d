//! Request mapping (RFC 9113 §8.1–§8.3, §8.5): the head that goes to
//! `plan_request`, and one named test per malformation.

use crate::h2::map::{BodyLength, Refusal, map_request, map_trailers};
use crate::http::{Forwarding, RequestHead, plan_request};

/// The pseudo-header fields of an ordinary GET.
const GET: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/a?b=c"),
];

fn fields<'a>(list: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    list.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()))
}

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = GET.to_vec();
    v.extend_from_slice(extra);
    v
}

/// The HTTP/1.1 bytes the head encodes to.
fn wire(head: &RequestHead) -> String {
    let mut out = Vec::new();
    head.encode_upstream(&mut out);
    String::from_utf8(out).unwrap()
}

#[track_caller]
fn malformed(list: &[(&str, &str)], end_stream: bool) -> &'static str {
    match map_request(fields(list), end_stream) {
        Err(Refusal::Malformed(why)) => why,
        other => panic!("expected malformed, got {other:?}"),
    }
}

#[track_caller]
fn status(list: &[(&str, &str)]) -> u16 {
    match map_request(fields(list), true) {
        Err(Refusal::Status(s, _)) => s,
        other => panic!("expected a status, got {other:?}"),
    }
}

#[test]
fn a_get_becomes_an_http11_request_with_host_first() {
    let list = with(&[("accept", "*/*"), ("user-agent", "t")]);
    let m = map_request(fields(&list), true).unwrap();
    assert_eq!(
        wire(&m.head),
        "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\nuser-agent: t\r\n\r\n"
    );
    assert_eq!(m.content_length, None);
    assert!(!m.chunked);
    // It passes the HTTP/1.1 plan like any request.
    let mut head = m.head;
    let plan = plan_request(
        &mut head,
        "127.0.0.1".parse().unwrap(),
        Forwarding::default(),
    );
    assert!(plan.is_ok(), "{plan:?}");
}

#[test]
fn rfc9113_8_2_3_cookie_crumbs_are_joined() {
    let list = with(&[
        ("cookie", "a=b"),
        ("x", "1"),
        ("cookie", "c=d"),
        ("cookie", "e=f"),
    ]);
    let m = map_request(fields(&list), true).unwrap();
    assert_eq!(m.head.headers.get("cookie"), Some(&b"a=b; c=d; e=f"[..]));
    assert_eq!(m.head.headers.get_all("cookie").count(), 1);
}

#[test]
fn a_body_without_content_length_goes_chunked() {
    let list = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "h"),
        (":path", "/"),
    ];
    let m = map_request(fields(&list), false).unwrap();
    assert!(m.chunked);
    assert_eq!(
        m.head.headers.get("transfer-encoding"),
        Some(&b"chunked"[..])
    );
    let mut head = m.head;
    let plan = plan_request(
        &mut head,
        "127.0.0.1".parse().unwrap(),
        Forwarding::default(),
    )
    .unwrap();
    assert_eq!(plan.framing, crate::http::BodyKind::Chunked);
}

#[test]
fn a_body_with_content_length_goes_with_it() {
    let list = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "h"),
        (":path", "/"),
        ("content-length", "5"),
    ];
    let m = map_request(fields(&list), false).unwrap();
    assert!(!m.chunked);
    assert_eq!(m.content_length, Some(5));
    assert!(!m.head.headers.contains("transfer-encoding"));
    let mut head = m.head;
    let plan = plan_request(
        &mut head,
        "127.0.0.1".parse().unwrap(),
        Forwarding::default(),
    )
    .unwrap();
    assert_eq!(plan.framing, crate::http::BodyKind::Length(5));
}

#[test]
fn options_star_and_a_request_without_authority() {
    let list = [
        (":method", "OPTIONS"),
        (":scheme", "http"),
        (":authority", "h"),
        (":path", "*"),
    ];
    let m = map_request(fields(&list), true).unwrap();
    assert_eq!(wire(&m.head), "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    // The host field stands in for a missing :authority.
    let list = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        ("host", "h:8080"),
    ];
    let m = map_request(fields(&list), true).unwrap();
    assert_eq!(wire(&m.head), "GET / HTTP/1.1\r\nHost: h:8080\r\n\r\n");
}

#[test]
fn rfc9113_8_3_1_no_authority_and_no_host_or_an_empty_one_is_malformed() {
    // http and https have a mandatory authority (found by a break-it
    // pass: such a request went upstream with an empty Host).
    let no_authority = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
    malformed(&no_authority, true);
    let star = [(":method", "OPTIONS"), (":scheme", "http"), (":path", "*")];
    malformed(&star, true);
    let empty = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", ""),
        (":path", "/"),
    ];
    malformed(&empty, true);
    let empty_host = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        ("host", ""),
    ];
    malformed(&empty_host, true);
}

#[test]
fn rfc9113_8_3_1_authority_wins_and_an_equal_host_is_accepted() {
    let list = with(&[("host", "EXAMPLE.com:443")]);
    let m = map_request(fields(&list), true).unwrap();
    assert_eq!(m.head.headers.get_all("host").count(), 1);
    assert_eq!(m.head.headers.get("host"), Some(&b"example.com"[..]));
    // One trailing dot names the same host (RFC 1034 §3.1), as for an
    // HTTP/1 absolute-form target and its Host.
    let list = with(&[("host", "example.com.")]);
    assert!(map_request(fields(&list), true).is_ok());
}

#[test]
fn rfc9113_8_3_1_host_differing_from_authority_is_a_400() {
    assert_eq!(status(&with(&[("host", "other.example")])), 400);
    assert_eq!(status(&with(&[("host", "example.com:8443")])), 400);
    assert_eq!(status(&with(&[("host", "other.example.")])), 400);
}

#[test]
fn rfc9113_8_3_1_userinfo_in_authority_is_malformed() {
    let list = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "u@h"),
        (":path", "/"),
    ];
    malformed(&list, true);
}

#[test]
fn rfc9113_8_3_a_pseudo_field_after_a_regular_field_is_malformed() {
    let list = [
        (":method", "GET"),
        (":scheme", "https"),
        ("accept", "*/*"),
        (":path", "/"),
    ];
    malformed(&list, true);
}

#[test]
fn rfc9113_8_3_an_unknown_pseudo_field_is_malformed() {
    malformed(
        &with(&[])[..]
            .iter()
            .copied()
            .chain([(":foo", "x")])
            .collect::<Vec<_>>(),
        true,
    );
    let mut list = vec![(":foo", "x")];
    list.extend_from_slice(GET);
    malformed(&list, true);
}

#[test]
fn rfc9113_8_3_a_response_pseudo_field_in_a_request_is_malformed() {
    let mut list = GET.to_vec();
    list.insert(1, (":status", "200"));
    malformed(&list, true);
}

#[test]
fn rfc9113_8_3_a_repeated_pseudo_field_is_malformed() {
    let mut list = GET.to_vec();
    list.insert(1, (":method", "GET"));
    malformed(&list, true);
}

#[test]
fn rfc9113_8_3_1_missing_method_scheme_or_path_is_malformed() {
    for skip in [":method", ":scheme", ":path"] {
        let list: Vec<_> = GET.iter().copied().filter(|(n, _)| *n != skip).collect();
        malformed(&list, true);
    }
}

#[test]
fn rfc9113_8_3_1_an_empty_path_is_malformed() {
    let list = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "h"),
        (":path", ""),
    ];
    malformed(&list, true);
    // Nor may it be anything but /... or * for OPTIONS.
    let list = [(":method", "GET"), (":scheme", "https"), (":path", "*")];
    malformed(&list, true);
    let list = [(":method", "GET"), (":scheme", "https"), (":path", "a/b")];
    malformed(&list, true);
}

#[test]
fn rfc9113_8_2_1_upper_case_field_names_are_malformed() {
    malformed(&with(&[("Accept", "*/*")]), true);
}

#[test]
fn rfc9113_8_2_1_invalid_names_and_values_are_malformed() {
    for bad in [
        ("a b", "x"),
        ("a:b", "x"),
        ("", "x"),
        ("x", "a\r\nb"),
        ("x", "a\0b"),
        ("x", " lead"),
        ("x", "trail\t"),
    ] {
        malformed(&with(&[bad]), true);
    }
}

#[test]
fn rfc9113_8_2_2_connection_specific_fields_are_malformed() {
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ] {
        let list = with(&[(name, "x")]);
        malformed(&list, true);
    }
}

#[test]
fn rfc9113_8_2_2_te_other_than_trailers_is_malformed() {
    malformed(&with(&[("te", "gzip")]), true);
    let m = map_request(fields(&with(&[("te", "trailers")])), true).unwrap();
    // Hop-by-hop on the HTTP/1.1 side: not forwarded.
    assert!(!m.head.headers.contains("te"));
}

#[test]
fn rfc9113_8_1_1_content_length_on_a_request_without_data_is_malformed() {
    malformed(&with(&[("content-length", "3")]), true);
    assert!(map_request(fields(&with(&[("content-length", "0")])), true).is_ok());
    malformed(&with(&[("content-length", "x")]), false);
    malformed(
        &with(&[("content-length", "1"), ("content-length", "2")]),
        false,
    );
}

#[test]
fn rfc9113_8_1_1_data_disagreeing_with_content_length_is_a_stream_error() {
    let mut b = BodyLength::new(Some(5));
    assert!(b.data(3, false, 1).is_ok());
    assert!(b.data(3, false, 1).is_err(), "more than declared");
    let mut b = BodyLength::new(Some(5));
    assert!(b.data(3, true, 1).is_err(), "fewer at END_STREAM");
    let mut b = BodyLength::new(Some(5));
    b.data(5, false, 1).unwrap();
    assert!(b.end(1).is_ok());
    let mut b = BodyLength::new(None);
    assert!(b.data(1 << 20, true, 1).is_ok());
}

#[test]
fn rfc9113_8_5_connect_is_a_501_and_extended_connect_a_405() {
    let connect = [(":method", "CONNECT"), (":authority", "h:443")];
    assert_eq!(status(&connect), 501);
    let extended = [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":authority", "h"),
        (":path", "/chat"),
    ];
    assert_eq!(status(&extended), 405);
    // CONNECT with :path, or without :authority, is malformed.
    malformed(
        &[
            (":method", "CONNECT"),
            (":authority", "h:443"),
            (":path", "/"),
        ],
        true,
    );
    malformed(&[(":method", "CONNECT")], true);
    // :protocol on another method is malformed.
    malformed(
        &with(&[])[..]
            .iter()
            .copied()
            .take(0)
            .chain([
                (":method", "GET"),
                (":protocol", "x"),
                (":scheme", "http"),
                (":path", "/"),
            ])
            .collect::<Vec<_>>(),
        true,
    );
}

#[test]
fn rfc9113_8_1_trailers_with_pseudo_fields_are_malformed() {
    let ok = [("grpc-status", "0"), ("x-checksum", "abc")];
    let h = map_trailers(fields(&ok)).unwrap();
    assert_eq!(h.len(), 2);
    assert!(matches!(
        map_trailers(fields(&[(":path", "/")])),
        Err(Refusal::Malformed(_))
    ));
    assert!(matches!(
        map_trailers(fields(&[("Upper", "x")])),
        Err(Refusal::Malformed(_))
    ));
    assert!(matches!(
        map_trailers(fields(&[("transfer-encoding", "chunked")])),
        Err(Refusal::Malformed(_))
    ));
}

#[test]
fn rfc9110_6_5_1_framing_and_routing_fields_do_not_go_into_the_trailer_section() {
    let list = [("content-length", "5"), ("x-sum", "1"), ("host", "evil")];
    let h = map_trailers(fields(&list)).unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h.get("x-sum"), Some(&b"1"[..]));
}

#[test]
fn refusals_turn_into_stream_errors() {
    let e = Refusal::Malformed("x").to_h2(5);
    assert_eq!(e.stream_id(), Some(5));
    assert_eq!(e.code(), crate::h2::ErrorCode::ProtocolError);
    assert_eq!(Refusal::Status(501, "x").status(), Some(501));
}

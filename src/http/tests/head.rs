//! Heads: `Headers`, request and response parse/encode, `HeadScanner`.

use crate::http::ParseHead;
use crate::http::{HeadScanner, Headers, ParseError, RequestHead, ResponseHead, reason_phrase};

const MAX_FIELDS: usize = 100;

#[track_caller]
fn parse_req(buf: &[u8]) -> (RequestHead, usize) {
    match RequestHead::parse(buf, MAX_FIELDS) {
        Ok(Some(done)) => done,
        other => panic!("expected a complete request head, got {other:?}"),
    }
}

#[track_caller]
fn parse_resp(buf: &[u8]) -> (ResponseHead, usize) {
    match ResponseHead::parse(buf, MAX_FIELDS) {
        Ok(Some(done)) => done,
        other => panic!("expected a complete response head, got {other:?}"),
    }
}

fn fields(h: &Headers) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| (n.to_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

fn encode_req(head: &RequestHead) -> String {
    let mut out = Vec::new();
    head.encode_upstream(&mut out);
    String::from_utf8(out).unwrap()
}

// ---- Headers -------------------------------------------------------------

#[test]
fn headers_keep_arrival_order_and_spelling() {
    let mut h = Headers::new();
    h.append("X-b", b"1");
    h.append("x-A", b"2");
    h.append("X-B", b"3");
    assert_eq!(h.len(), 3);
    assert_eq!(
        fields(&h),
        [("X-b", "1"), ("x-A", "2"), ("X-B", "3")].map(|(n, v)| (n.to_owned(), v.to_owned()))
    );
    let mut out = Vec::new();
    h.encode(&mut out);
    assert_eq!(out, b"X-b: 1\r\nx-A: 2\r\nX-B: 3\r\n");
}

#[test]
fn headers_lookups_ignore_ascii_case() {
    let mut h = Headers::new();
    h.append("Accept", b"a");
    h.append("ACCEPT", b"b");
    assert_eq!(h.get("accept"), Some(&b"a"[..]));
    assert_eq!(h.get_all("aCCept").collect::<Vec<_>>(), [&b"a"[..], b"b"]);
    assert!(h.contains("ACCEPT"));
    assert!(!h.contains("accept-encoding"));
    assert_eq!(h.get("missing"), None);
}

#[test]
fn headers_remove_all_keeps_the_others_in_order() {
    let mut h = Headers::new();
    for (n, v) in [("A", "1"), ("x", "2"), ("B", "3"), ("X", "4"), ("C", "5")] {
        h.append(n, v.as_bytes());
    }
    assert_eq!(h.remove_all("X"), 2);
    assert_eq!(h.remove_all("X"), 0);
    let names: Vec<_> = h.iter().map(|(n, _)| n.to_owned()).collect();
    assert_eq!(names, ["A", "B", "C"]);
}

#[test]
fn headers_retain_sees_names_and_values() {
    let mut h = Headers::new();
    h.append("A", b"keep");
    h.append("B", b"drop");
    h.append("C", b"keep");
    h.retain(|_, v| v == b"keep");
    let names: Vec<_> = h.iter().map(|(n, _)| n.to_owned()).collect();
    assert_eq!(names, ["A", "C"]);
}

#[test]
fn headers_append_to_last_grows_in_place() {
    let mut h = Headers::new();
    h.append("XFF", b"1");
    h.append("Other", b"o");
    h.append("xff", b"2");
    h.append("Tail", b"t");
    assert!(h.append_to_last("XFF", b", 3"));
    // The last xff is not at the end of the arena: it moved, kept its place.
    assert!(h.append_to_last("xff", b", 4"));
    assert!(!h.append_to_last("absent", b"x"));
    let mut out = Vec::new();
    h.encode(&mut out);
    assert_eq!(out, b"XFF: 1\r\nOther: o\r\nxff: 2, 3, 4\r\nTail: t\r\n");
}

#[test]
fn headers_append_to_last_field_at_arena_end() {
    let mut h = Headers::new();
    h.append("A", b"x");
    assert!(h.append_to_last("a", b"y"));
    assert_eq!(h.get("A"), Some(&b"xy"[..]));
}

#[test]
fn headers_equality_ignores_unreachable_arena_bytes() {
    let mut a = Headers::new();
    a.append("A", b"1");
    a.append("Gone", b"zzz");
    a.append("B", b"2");
    a.remove_all("gone");
    let mut b = Headers::new();
    b.append("A", b"1");
    b.append("B", b"2");
    assert_eq!(a, b);
    let mut c = Headers::new();
    c.append("a", b"1");
    c.append("B", b"2");
    assert_ne!(a, c, "name spelling is part of equality");
}

#[test]
fn headers_clear_empties_for_reuse() {
    let mut h = Headers::new();
    for i in 0..50 {
        h.append("Name", format!("value {i}").as_bytes());
    }
    assert_eq!(h.len(), 50);
    h.clear();
    assert!(h.is_empty());
    assert_eq!(h.iter().count(), 0);
    h.append("Name", b"again");
    assert_eq!(fields(&h), [("Name".to_owned(), "again".to_owned())]);
}

#[test]
fn headers_never_store_a_line_break() {
    let mut h = Headers::new();
    h.append("X", b"a\r\nInjected: yes\0");
    assert!(h.append_to_last("x", b"\n"));
    assert_eq!(h.get("x"), Some(&b"a  Injected: yes  "[..]));
    assert_eq!(
        h.try_append("Bad Name", b"v"),
        Err(ParseError::Malformed("invalid field name"))
    );
    assert_eq!(
        h.try_append("", b"v"),
        Err(ParseError::Malformed("invalid field name"))
    );
    assert_eq!(
        h.try_append("Bad\r\nName", b"v"),
        Err(ParseError::Malformed("invalid field name"))
    );
    assert_eq!(h.len(), 1);
    h.append("Tab", b"a\tb");
    assert_eq!(h.get("tab"), Some(&b"a\tb"[..]));
}

// ---- RequestHead ----------------------------------------------------------

#[test]
fn request_name_case_and_order_survive_parse_and_encode() {
    let raw = b"POST /up?x=1 HTTP/1.1\r\nhost: a.example\r\nX-Custom-CASE: 1\r\nContent-Length: 3\r\naccept:*/*\r\nX-CUSTOM-case: 2\r\n\r\nabc";
    let (head, len) = parse_req(raw);
    assert_eq!(len, raw.len() - 3);
    assert_eq!(head.method, "POST");
    assert_eq!(head.target, "/up?x=1");
    assert_eq!(head.version, 1);
    assert_eq!(
        encode_req(&head),
        "POST /up?x=1 HTTP/1.1\r\nhost: a.example\r\nX-Custom-CASE: 1\r\nContent-Length: 3\r\naccept: */*\r\nX-CUSTOM-case: 2\r\n\r\n"
    );
}

#[test]
fn request_http10_encodes_as_http11() {
    let (head, _) = parse_req(b"GET / HTTP/1.0\r\nHost: h\r\n\r\n");
    assert_eq!(head.version, 0);
    assert_eq!(encode_req(&head), "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

#[test]
fn request_leading_empty_lines_are_skipped_and_counted() {
    let raw = b"\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    let (head, len) = parse_req(raw);
    assert_eq!(len, raw.len());
    assert_eq!(head.method, "GET");
}

#[test]
fn request_incomplete_is_none_at_every_prefix() {
    let raw = b"GET /a HTTP/1.1\r\nHost: h\r\nX: y\r\n\r\n";
    for i in 0..raw.len() {
        assert_eq!(
            RequestHead::parse(&raw[..i], MAX_FIELDS),
            Ok(None),
            "prefix {i}"
        );
    }
    assert_eq!(parse_req(raw).1, raw.len());
}

#[test]
fn request_field_values_lose_surrounding_ows() {
    let (head, _) = parse_req(b"GET / HTTP/1.1\r\nA: \t v w \t\r\nB:\r\n\r\n");
    assert_eq!(head.headers.get("a"), Some(&b"v w"[..]));
    assert_eq!(head.headers.get("b"), Some(&b""[..]));
}

#[test]
fn request_methods_are_case_sensitive() {
    let (head, _) = parse_req(b"get / HTTP/1.1\r\n\r\n");
    assert!(head.is_method("get"));
    assert!(!head.is_method("GET"));
}

#[test]
fn request_field_limit() {
    let mut raw = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..5 {
        raw.extend_from_slice(format!("F{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    assert!(matches!(RequestHead::parse(&raw, 5), Ok(Some(_))));
    assert_eq!(RequestHead::parse(&raw, 4), Err(ParseError::TooManyFields));
    assert_eq!(RequestHead::parse(&raw, 0), Err(ParseError::TooManyFields));
    // A limit beyond the stack slots goes through the heap path.
    assert!(matches!(RequestHead::parse(&raw, 1000), Ok(Some(_))));
}

#[test]
fn request_bad_heads_are_malformed() {
    // (input, reason it is rejected)
    let table: &[(&[u8], &str)] = &[
        (
            b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
            "obs-fold (RFC 9112 §5.2)",
        ),
        (
            b"GET / HTTP/1.1\r\nA: b\r\n\tfolded\r\n\r\n",
            "obs-fold with HTAB",
        ),
        (
            b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
            "space before colon (RFC 9112 §5.1)",
        ),
        (b"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", "HTAB before colon"),
        (
            b"GET / HTTP/1.1\r\n Host: h\r\n\r\n",
            "whitespace before the first field",
        ),
        (b"GET / HTTP/1.2\r\n\r\n", "unknown minor version"),
        (b"GET  / HTTP/1.1\r\n\r\n", "two spaces in the request-line"),
        (b"GET /\x7f HTTP/1.1\r\n\r\n", "DEL in the target"),
        (b"G(T / HTTP/1.1\r\n\r\n", "method not a token"),
        (
            b"GET / HTTP/1.1\r\nA: b\0c\r\n\r\n",
            "NUL in a value (RFC 9110 §5.5)",
        ),
        (b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "bare CR in a value"),
        (b"GET / HTTP/1.1\r\nA(: b\r\n\r\n", "field name not a token"),
        (b"GET / HTTP/1.1\r\n: b\r\n\r\n", "empty field name"),
        (
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "field line without colon",
        ),
        (
            b"\rGET / HTTP/1.1\r\n\r\n",
            "bare CR before the request-line",
        ),
    ];
    for (raw, why) in table {
        match RequestHead::parse(raw, MAX_FIELDS) {
            Err(ParseError::Malformed(_)) => {}
            other => panic!("{why}: expected Malformed, got {other:?}"),
        }
    }
}

#[test]
fn request_encode_cannot_inject_lines() {
    let mut head = RequestHead {
        method: "GET".into(),
        target: "/a\r\nX: y".into(),
        version: 1,
        headers: Headers::new(),
    };
    head.headers.append("Host", b"h");
    assert_eq!(
        encode_req(&head),
        "GET /a  X: y HTTP/1.1\r\nHost: h\r\n\r\n"
    );
}

// ---- ResponseHead ---------------------------------------------------------

#[test]
fn response_parse_and_encode() {
    let raw = b"HTTP/1.0 404 Not Here\r\nServer: x\r\ncontent-length: 0\r\n\r\n";
    let (head, len) = parse_resp(raw);
    assert_eq!(len, raw.len());
    assert_eq!(
        (head.version, head.status, head.reason.as_str()),
        (0, 404, "Not Here")
    );
    let mut out = Vec::new();
    head.encode(&mut out);
    assert_eq!(
        out,
        b"HTTP/1.1 404 Not Here\r\nServer: x\r\ncontent-length: 0\r\n\r\n"
    );
}

#[test]
fn response_without_reason() {
    let (head, _) = parse_resp(b"HTTP/1.1 204\r\n\r\n");
    assert_eq!((head.status, head.reason.as_str()), (204, ""));
    let mut out = Vec::new();
    head.encode(&mut out);
    assert_eq!(out, b"HTTP/1.1 204 \r\n\r\n");
}

#[test]
fn response_bad_heads() {
    // (input, expected error, reason)
    let table: &[(&[u8], ParseError, &str)] = &[
        (
            b"HTTP/1.1 099 Low\r\n\r\n",
            ParseError::Malformed("status code outside 100-599"),
            "below 100 (RFC 9110 §15)",
        ),
        (
            b"HTTP/1.1 600 High\r\n\r\n",
            ParseError::Malformed("status code outside 100-599"),
            "above 599",
        ),
        (
            b"HTTP/1.1 20 OK\r\n\r\n",
            ParseError::Malformed("invalid status line"),
            "two-digit status",
        ),
        (
            b"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n",
            ParseError::Malformed("invalid field name"),
            "obs-fold in a response",
        ),
        (
            b"HTTP/1.1 200 OK\r\nA : b\r\n\r\n",
            ParseError::Malformed("invalid field name"),
            "space before colon",
        ),
        (
            b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n",
            ParseError::TooManyFields,
            "two fields, limit one",
        ),
        (
            b"HTTP/3 200 OK\r\n\r\n",
            ParseError::Malformed("invalid HTTP version"),
            "not HTTP/1.x",
        ),
    ];
    for (raw, want, why) in table {
        assert_eq!(
            ResponseHead::parse(raw, 1).as_ref().err(),
            Some(want),
            "{why}"
        );
    }
}

#[test]
fn response_new_has_the_standard_reason() {
    let head = ResponseHead::new(502);
    assert_eq!(
        (head.version, head.status, head.reason.as_str()),
        (1, 502, "Bad Gateway")
    );
    assert!(head.headers.is_empty());
    assert_eq!(ResponseHead::new(299).reason, "");
    for code in [
        200, 204, 400, 403, 404, 408, 413, 431, 500, 501, 502, 503, 504,
    ] {
        assert!(!reason_phrase(code).is_empty(), "{code}");
    }
}

// ---- HeadScanner ----------------------------------------------------------

/// Runs the scanner over `input` whole, fed as two growing prefixes split at
/// every position, byte by byte, and (if it ends) with bytes after the end;
/// asserts all agree and that no call rescans old bytes.
#[track_caller]
fn scan_agree(input: &[u8]) -> Option<usize> {
    let whole = HeadScanner::new().find_end(input);
    for i in 0..=input.len() {
        let mut s = HeadScanner::new();
        let first = s.find_end(&input[..i]);
        if let Some(len) = first {
            assert_eq!(Some(len), whole, "split at {i}: early end disagrees");
        }
        assert_eq!(s.find_end(input), whole, "split at {i} disagrees");
    }
    let mut s = HeadScanner::new();
    let mut found = None;
    for i in 0..=input.len() {
        let r = s.find_end(&input[..i]);
        if found.is_none() {
            assert!(s.scanned() <= i);
            if r.is_none() {
                assert_eq!(s.scanned(), i, "resumes exactly where it stopped");
            }
        } else {
            assert_eq!(r, found, "stays found");
        }
        found = found.or(r);
    }
    assert_eq!(found, whole, "byte by byte disagrees");
    if let Some(len) = whole {
        let mut longer = input.to_vec();
        longer.extend_from_slice(b"body bytes\r\n\r\nmore\n\n");
        assert_eq!(
            HeadScanner::new().find_end(&longer),
            Some(len),
            "trailing bytes"
        );
    }
    whole
}

#[test]
fn scanner_finds_crlf_and_lf_ends_like_httparse() {
    let heads: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\nHost: h\n\n",
        b"GET / HTTP/1.1\r\nHost: h\n\r\n",
        b"GET / HTTP/1.1\nHost: h\r\n\n",
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"\n\nGET / HTTP/1.1\nA: b\n\n",
        b"GET / HTTP/1.1\r\nA: \r\nB: x\r\n\r\n",
    ];
    for raw in heads {
        let len = scan_agree(raw);
        assert_eq!(len, Some(raw.len()), "{:?}", String::from_utf8_lossy(raw));
        assert_eq!(parse_req(raw).1, raw.len(), "httparse agrees");
    }
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(scan_agree(resp), Some(resp.len() - 2));
    assert_eq!(parse_resp(resp).1, resp.len() - 2);
}

#[test]
fn scanner_waits_for_incomplete_heads() {
    let partial: &[&[u8]] = &[
        b"",
        b"\r\n\r\n\n",
        b"GET / HTTP/1.1\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n\r",
        b"GET / HTTP/1.1\r\nA: b\r\r\n",
    ];
    for raw in partial {
        assert_eq!(scan_agree(raw), None, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn scanner_reset_starts_a_new_head() {
    let mut s = HeadScanner::new();
    assert_eq!(s.find_end(b"GET / HTTP/1.1\r\n\r\n"), Some(18));
    s.reset();
    assert_eq!(s.scanned(), 0);
    assert_eq!(s.find_end(b"GET /x HTTP/1.1\r\n"), None);
    assert_eq!(s.find_end(b"GET /x HTTP/1.1\r\n\r\n"), Some(19));
}

#[test]
fn scanner_slow_loris_is_linear() {
    // 64 KiB of one never-ending field, one byte per call: each call looks
    // only at the new byte.
    let mut raw = b"GET / HTTP/1.1\r\nX: ".to_vec();
    raw.resize(64 * 1024, b'a');
    let mut s = HeadScanner::new();
    for i in 1..=raw.len() {
        assert_eq!(s.find_end(&raw[..i]), None);
        assert_eq!(s.scanned(), i);
    }
}

#[test]
fn scanner_and_httparse_agree_on_generated_heads() {
    // Deterministic xorshift; heads built from pieces that stress line ends.
    let pieces: &[&[u8]] = &[
        b"GET / HTTP/1.1",
        b"HTTP/1.1 200 OK",
        b"\r\n",
        b"\n",
        b"\r",
        b"A: b",
        b" ",
        b":",
        b"X",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let mut raw = Vec::new();
        for _ in 0..(next() % 10) {
            raw.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
        }
        let found = HeadScanner::new().find_end(&raw);
        let req = RequestHead::parse(&raw, MAX_FIELDS).map(|o| o.map(|(_, len)| len));
        let resp = ResponseHead::parse(&raw, MAX_FIELDS).map(|o| o.map(|(_, len)| len));
        for parsed in [req, resp] {
            match (found, parsed) {
                (_, Err(_)) => {}
                (Some(len), Ok(got)) => {
                    assert_eq!(got, Some(len), "{:?}", String::from_utf8_lossy(&raw))
                }
                (None, Ok(got)) => assert_eq!(got, None, "{:?}", String::from_utf8_lossy(&raw)),
            }
        }
    }
}

#[test]
fn a_request_in_another_major_version_is_505_and_a_broken_version_400() {
    for line in ["GET / HTTP/2.0", "GET / HTTP/3.0", "\r\nPOST /x HTTP/0.9"] {
        let raw = format!("{line}\r\nHost: x\r\n\r\n");
        let err = RequestHead::parse(raw.as_bytes(), MAX_FIELDS);
        assert_eq!(err, Err(ParseError::UnsupportedVersion), "{line:?}");
        assert_eq!(ParseError::UnsupportedVersion.request_status(), 505);
    }
    for line in [
        "GET / HTTP/2",
        "GET / HTTP/1.2",
        "GET / HTTPS/2.0",
        "GET / HTTP/x.0",
    ] {
        let raw = format!("{line}\r\nHost: x\r\n\r\n");
        let err = RequestHead::parse(raw.as_bytes(), MAX_FIELDS);
        assert_eq!(
            err,
            Err(ParseError::Malformed("invalid HTTP version")),
            "{line:?}"
        );
    }
}

#[test]
fn field_limits_at_and_past_the_stack_slots_parse_every_field() {
    // 256 fields fit the stack slots; 300 take the heap path. Either way
    // every field comes through in order, and one over the limit is refused.
    for n in [256usize, 300] {
        let mut req = b"GET / HTTP/1.1\r\n".to_vec();
        let mut resp = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..n {
            let line = format!("F{i}: v{i}\r\n");
            req.extend_from_slice(line.as_bytes());
            resp.extend_from_slice(line.as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        resp.extend_from_slice(b"\r\n");
        let mut head = RequestHead::default();
        assert_eq!(head.parse_into(&req, n), Ok(Some(req.len())));
        assert_eq!(head.headers.len(), n);
        let mut rhead = ResponseHead::default();
        assert_eq!(rhead.parse_into(&resp, n), Ok(Some(resp.len())));
        assert_eq!(rhead.headers.len(), n);
        let last = format!("F{}", n - 1);
        let want = format!("v{}", n - 1);
        assert_eq!(rhead.headers.get(&last), Some(want.as_bytes()));
        assert_eq!(head.headers.get(&last), Some(want.as_bytes()));
        assert_eq!(
            rhead.parse_into(&resp, n - 1),
            Err(ParseError::TooManyFields)
        );
    }
}

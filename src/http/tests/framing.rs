//! Body framing (RFC 9112 §6.3, ARCHITECTURE.md §5 row by row), requests and
//! responses.

use crate::http::ParseHead;
use crate::http::framing::{request_framing, response_framing};
use crate::http::{BodyKind, Headers, ParseError, RequestHead, ResponseHead};

fn headers(fields: &[(&str, &str)]) -> Headers {
    let mut h = Headers::new();
    for (n, v) in fields {
        h.append(n, v.as_bytes());
    }
    h
}

const TE: &str = "Transfer-Encoding";
const CL: &str = "Content-Length";

fn framing_error(why: &'static str) -> Result<BodyKind, ParseError> {
    Err(ParseError::Framing(why))
}

// ---- requests -------------------------------------------------------------

/// (fields, expected, why) rows checked against `request_framing`.
type Row = (
    &'static [(&'static str, &'static str)],
    Result<BodyKind, ParseError>,
    &'static str,
);

#[track_caller]
fn check_requests(rows: &[Row]) {
    for (fields, want, why) in rows {
        assert_eq!(&request_framing(&headers(fields)), want, "{why}");
    }
}

#[test]
fn design_5_request_te_and_cl_is_an_error() {
    let both = framing_error("both Transfer-Encoding and Content-Length");
    check_requests(&[
        (&[(TE, "chunked"), (CL, "5")], both.clone(), "TE then CL"),
        (&[(CL, "5"), (TE, "chunked")], both.clone(), "CL then TE"),
        (
            &[(TE, "chunked"), ("content-length", "0")],
            both.clone(),
            "CL 0 is still CL",
        ),
        (
            &[("transfer-encoding", "gzip"), (CL, "5")],
            both,
            "checked before the codings",
        ),
    ]);
}

#[test]
fn design_5_request_content_length_values() {
    let digits = framing_error("Content-Length is not 1*DIGIT");
    let several = framing_error("several Content-Length values");
    check_requests(&[
        (&[(CL, "10")], Ok(BodyKind::Length(10)), "one valid value"),
        (
            &[(CL, "0")],
            Ok(BodyKind::Empty),
            "zero is Empty (module invariant)",
        ),
        (
            &[(CL, "5"), (CL, "5")],
            several.clone(),
            "identical fields: refused on requests, as nginx does",
        ),
        (
            &[(CL, "5, 5")],
            several.clone(),
            "identical list: refused on requests (RFC 9110 §8.6 allows it)",
        ),
        (
            &[(CL, "05"), (CL, "5")],
            several.clone(),
            "same number, leading zero",
        ),
        (
            &[(CL, "9223372036854775807")],
            Ok(BodyKind::Length(i64::MAX as u64)),
            "2^63 - 1, the largest the relay counts (nginx's off_t)",
        ),
        (
            &[(CL, "9223372036854775808")],
            framing_error("Content-Length over 2^63 - 1"),
            "2^63",
        ),
        (
            &[(CL, "18446744073709551615")],
            framing_error("Content-Length over 2^63 - 1"),
            "u64::MAX is refused too",
        ),
        (&[(CL, "5"), (CL, "6")], several.clone(), "differing fields"),
        (&[(CL, "5, 6")], several.clone(), "differing list"),
        (&[(CL, "abc")], digits.clone(), "letters"),
        (&[(CL, "-1")], digits.clone(), "sign"),
        (&[(CL, "+1")], digits.clone(), "plus sign"),
        (&[(CL, "1.0")], digits.clone(), "decimal point"),
        (&[(CL, "0x10")], digits.clone(), "hex"),
        (&[(CL, "1 2")], digits.clone(), "space inside"),
        (&[(CL, "")], digits.clone(), "empty value"),
        (&[(CL, "5,")], several.clone(), "empty list element"),
        (&[(CL, "5"), (CL, "x")], several, "one bad among good"),
        (&[(CL, "x")], digits, "one bad value"),
        (
            &[(CL, "18446744073709551616")],
            framing_error("Content-Length overflows u64"),
            "u64::MAX + 1",
        ),
    ]);
}

#[test]
fn design_5_request_final_coding_must_be_chunked() {
    let not_final = framing_error("chunked is not the final transfer coding");
    let not_chunked = framing_error("final transfer coding is not chunked");
    check_requests(&[
        (&[(TE, "chunked")], Ok(BodyKind::Chunked), "chunked"),
        (
            &[(TE, "Chunked")],
            Ok(BodyKind::Chunked),
            "case-insensitive",
        ),
        (
            &[(TE, "gzip, chunked")],
            Ok(BodyKind::Chunked),
            "chunked last",
        ),
        (
            &[(TE, "gzip"), (TE, "chunked")],
            Ok(BodyKind::Chunked),
            "list across fields",
        ),
        (
            &[(TE, " , chunked ,")],
            Ok(BodyKind::Chunked),
            "empty elements ignored",
        ),
        (
            &[(TE, "gzip")],
            not_chunked.clone(),
            "known, not chunked (400)",
        ),
        (&[(TE, "identity")], not_chunked.clone(), "identity alone"),
        (
            &[(TE, "x-gzip;q=1")],
            not_chunked,
            "known coding with a parameter",
        ),
        (
            &[(TE, "chunked, gzip")],
            not_final.clone(),
            "chunked not last",
        ),
        (
            &[(TE, "chunked, chunked")],
            not_final.clone(),
            "chunked twice",
        ),
        (
            &[(TE, "chunked"), (TE, "chunked")],
            not_final,
            "chunked twice across fields",
        ),
        (
            &[(TE, "foo")],
            Err(ParseError::UnknownCoding),
            "unknown (501)",
        ),
        (
            &[(TE, "foo, chunked")],
            Err(ParseError::UnknownCoding),
            "unknown before chunked",
        ),
        (
            &[(TE, "chunked, foo")],
            Err(ParseError::UnknownCoding),
            "unknown wins over position",
        ),
        (
            &[(TE, "chunked;x=1")],
            framing_error("parameters on the chunked coding"),
            "chunked parameter",
        ),
        (
            &[(TE, "")],
            framing_error("empty Transfer-Encoding"),
            "empty value",
        ),
        (
            &[(TE, ", ,")],
            framing_error("empty Transfer-Encoding"),
            "only empty elements",
        ),
        (
            &[(TE, "chun@ked")],
            framing_error("invalid transfer coding"),
            "not a token",
        ),
        (
            &[(TE, ";x=1")],
            framing_error("invalid transfer coding"),
            "parameter without coding",
        ),
    ]);
}

#[test]
fn design_5_request_without_framing_has_no_body() {
    check_requests(&[
        (&[], Ok(BodyKind::Empty), "no fields"),
        (
            &[("Host", "h"), ("Content-Type", "text/plain")],
            Ok(BodyKind::Empty),
            "unrelated fields",
        ),
    ]);
}

#[test]
fn http10_request_with_transfer_encoding_is_faulty() {
    let raw = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (head, _) = RequestHead::parse(raw, 10).unwrap().unwrap();
    assert_eq!(
        head.body_kind(),
        framing_error("Transfer-Encoding in an HTTP/1.0 request")
    );
    let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (head, _) = RequestHead::parse(raw, 10).unwrap().unwrap();
    assert_eq!(head.body_kind(), Ok(BodyKind::Chunked));
}

// ---- responses ------------------------------------------------------------

/// (method, status, fields, expected, why) rows for `response_framing`.
type RespRow = (
    &'static str,
    u16,
    &'static [(&'static str, &'static str)],
    Result<BodyKind, ParseError>,
    &'static str,
);

#[track_caller]
fn check_responses(rows: &[RespRow]) {
    for (method, status, fields, want, why) in rows {
        assert_eq!(
            &response_framing(method, *status, &headers(fields)),
            want,
            "{why}"
        );
    }
}

#[test]
fn design_5_response_without_body_whatever_the_head_says() {
    check_responses(&[
        (
            "HEAD",
            200,
            &[(CL, "100")],
            Ok(BodyKind::Empty),
            "HEAD with CL",
        ),
        (
            "HEAD",
            200,
            &[(TE, "chunked")],
            Ok(BodyKind::Empty),
            "HEAD with TE",
        ),
        (
            "HEAD",
            200,
            &[(TE, "chunked"), (CL, "1")],
            framing_error("both Transfer-Encoding and Content-Length"),
            "HEAD with both: refused like any other answer (RFC 9112 §6.3 step 3)",
        ),
        (
            "GET",
            304,
            &[(TE, "chunked"), (CL, "1")],
            framing_error("both Transfer-Encoding and Content-Length"),
            "304 with both",
        ),
        (
            "GET",
            204,
            &[(CL, "1"), (TE, "chunked")],
            framing_error("both Transfer-Encoding and Content-Length"),
            "204 with both",
        ),
        ("HEAD", 200, &[], Ok(BodyKind::Empty), "HEAD with neither"),
        (
            "GET",
            100,
            &[(CL, "5")],
            Ok(BodyKind::Empty),
            "100 Continue",
        ),
        (
            "GET",
            101,
            &[],
            Ok(BodyKind::Empty),
            "101 (the tunnel is the caller's)",
        ),
        (
            "GET",
            103,
            &[(TE, "chunked")],
            Ok(BodyKind::Empty),
            "103 Early Hints",
        ),
        ("GET", 204, &[(CL, "5")], Ok(BodyKind::Empty), "204 with CL"),
        ("GET", 304, &[(CL, "5")], Ok(BodyKind::Empty), "304 with CL"),
        (
            "GET",
            304,
            &[(TE, "chunked")],
            Ok(BodyKind::Empty),
            "304 with TE",
        ),
    ]);
}

#[test]
fn design_5_response_transfer_encoding() {
    check_responses(&[
        (
            "GET",
            200,
            &[(TE, "chunked")],
            Ok(BodyKind::Chunked),
            "last coding chunked",
        ),
        (
            "GET",
            200,
            &[(TE, "gzip, CHUNKED")],
            Ok(BodyKind::Chunked),
            "gzip then chunked",
        ),
        (
            "GET",
            200,
            &[(TE, "gzip"), (TE, "chunked")],
            Ok(BodyKind::Chunked),
            "across fields",
        ),
        (
            "GET",
            200,
            &[(TE, "gzip")],
            Ok(BodyKind::UntilClose),
            "no chunked",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked, gzip")],
            Ok(BodyKind::UntilClose),
            "chunked not last",
        ),
        (
            "GET",
            200,
            &[(TE, "foo")],
            Ok(BodyKind::UntilClose),
            "unknown coding",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked;x")],
            Ok(BodyKind::UntilClose),
            "chunked with parameter",
        ),
        (
            "GET",
            200,
            &[(TE, "")],
            Ok(BodyKind::UntilClose),
            "empty TE",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked, chunked")],
            framing_error("chunked applied more than once"),
            "chunked twice in one field (RFC 9112 §6.1)",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked"), (TE, "Chunked")],
            framing_error("chunked applied more than once"),
            "chunked twice across fields",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked, gzip, chunked")],
            framing_error("chunked applied more than once"),
            "chunked twice, last one final",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked;x=1, chunked")],
            framing_error("chunked applied more than once"),
            "chunked twice, the first with a parameter",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked ;x=1"), (TE, "chunked")],
            framing_error("chunked applied more than once"),
            "chunked twice across fields, the first with a parameter",
        ),
        (
            "HEAD",
            200,
            &[(TE, "chunked, chunked")],
            Ok(BodyKind::Empty),
            "no body follows a HEAD answer: nothing to frame",
        ),
    ]);
}

#[test]
fn design_5_response_content_length() {
    check_responses(&[
        (
            "GET",
            200,
            &[(CL, "42")],
            Ok(BodyKind::Length(42)),
            "valid CL",
        ),
        (
            "GET",
            200,
            &[(CL, "0")],
            Ok(BodyKind::Empty),
            "CL 0 is Empty",
        ),
        (
            "GET",
            200,
            &[(CL, "7"), (CL, "7")],
            Ok(BodyKind::Length(7)),
            "identical CL",
        ),
        (
            "GET",
            200,
            &[(CL, "7"), (CL, "8")],
            framing_error("differing Content-Length values"),
            "differing (502)",
        ),
        (
            "GET",
            200,
            &[(CL, "7x")],
            framing_error("Content-Length is not 1*DIGIT"),
            "invalid (502)",
        ),
        (
            "GET",
            200,
            &[(TE, "chunked"), (CL, "7")],
            framing_error("both Transfer-Encoding and Content-Length"),
            "both (502, like nginx)",
        ),
        (
            "POST",
            500,
            &[(CL, "3")],
            Ok(BodyKind::Length(3)),
            "error statuses have bodies",
        ),
    ]);
}

#[test]
fn design_5_response_without_framing_reads_until_close() {
    check_responses(&[
        ("GET", 200, &[], Ok(BodyKind::UntilClose), "neither"),
        (
            "CONNECT",
            200,
            &[(CL, "5")],
            Ok(BodyKind::UntilClose),
            "2xx to CONNECT: tunnel",
        ),
        (
            "CONNECT",
            407,
            &[(CL, "5")],
            Ok(BodyKind::Length(5)),
            "non-2xx to CONNECT",
        ),
        (
            "head",
            200,
            &[(CL, "5")],
            Ok(BodyKind::Length(5)),
            "methods are case-sensitive",
        ),
    ]);
}

#[test]
fn http10_response_with_transfer_encoding_is_faulty() {
    let raw = b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (head, _) = ResponseHead::parse(raw, 10).unwrap().unwrap();
    assert_eq!(
        head.body_kind("GET"),
        framing_error("Transfer-Encoding in an HTTP/1.0 response")
    );
    assert_eq!(head.body_kind("HEAD"), Ok(BodyKind::Empty));
}

//! Helpers shared by the request and response plan tests: a head from its
//! lines, planned with the defaults the tests start from.

use std::net::{IpAddr, Ipv4Addr};

use crate::http::request::RequestPlan;
use crate::http::response::FinalPlan;
use crate::http::{
    Forwarding, ParseError, ParseHead, Refusal, RequestHead, ResponseContext, ResponseHead,
    ResponsePlan, ResponseRefusal, plan_request, plan_response,
};

const MAX_FIELDS: usize = 100;

/// Parses the head made of `lines` (start line first), each ended by
/// CRLF, then the blank line.
#[track_caller]
pub(super) fn parse<H: ParseHead>(lines: &[&str]) -> H {
    let mut text = lines.join("\r\n");
    text.push_str("\r\n\r\n");
    let (head, len) = H::parse(text.as_bytes(), MAX_FIELDS).unwrap().unwrap();
    assert_eq!(len, text.len());
    head
}

// ---- Requests --------------------------------------------------------------

/// The client address used unless a test says otherwise.
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

/// No forwarding fields: the head's own fields only.
pub(super) const NO_FWD: Forwarding<'static> = Forwarding {
    via: false,
    via_name: "sluice",
    x_forwarded_for: false,
    x_forwarded_proto: false,
    tls: false,
    h2: false,
    client_cert: None,
};

/// Parses and plans with `fwd`; returns the (rewritten) head and the plan.
#[track_caller]
pub(super) fn plan_with(
    lines: &[&str],
    fwd: Forwarding<'_>,
) -> (RequestHead, Result<RequestPlan, Refusal>) {
    let mut head: RequestHead = parse(lines);
    let plan = plan_request(&mut head, CLIENT, fwd);
    (head, plan)
}

/// Plans without forwarding fields and expects success.
#[track_caller]
pub(super) fn planned(lines: &[&str]) -> (RequestHead, RequestPlan) {
    let (head, plan) = plan_with(lines, NO_FWD);
    (head, plan.unwrap())
}

/// Plans and expects a refusal.
#[track_caller]
pub(super) fn refused(lines: &[&str]) -> Refusal {
    let (_, plan) = plan_with(lines, Forwarding::default());
    plan.unwrap_err()
}

/// The head as it goes upstream.
pub(super) fn upstream(head: &RequestHead) -> String {
    let mut out = Vec::new();
    head.encode_upstream(&mut out);
    String::from_utf8(out).unwrap()
}

/// The kind of refusal, for tables.
pub(super) fn kind(r: &Refusal) -> &'static str {
    match r {
        Refusal::Invalid(ParseError::Framing(_)) => "framing",
        Refusal::Invalid(ParseError::UnknownCoding) => "unknown coding",
        Refusal::Invalid(ParseError::Malformed(_)) => "malformed",
        Refusal::Invalid(_) => "other invalid",
        Refusal::NotImplemented => "not implemented",
        Refusal::MaxForwards { .. } => "max-forwards",
        Refusal::LoopDetected => "loop",
    }
}

// ---- Responses -------------------------------------------------------------

/// A GET from an HTTP/1.1 client, body done, no upgrade, nothing failed.
pub(super) fn cx() -> ResponseContext<'static> {
    ResponseContext {
        method: "GET",
        request_version: 1,
        upgrade_requested: false,
        upgrade_offer: b"",
        request_body_done: true,
        request_write_failed: false,
        interim_bytes: 0,
        interim_budget: 64 * 1024,
        http1_client: true,
    }
}

/// The same, from an HTTP/1.0 client.
pub(super) fn cx10() -> ResponseContext<'static> {
    ResponseContext {
        request_version: 0,
        ..cx()
    }
}

/// The same, from a client that asked for an upgrade.
pub(super) fn upgrade_cx() -> ResponseContext<'static> {
    ResponseContext {
        upgrade_requested: true,
        upgrade_offer: b"websocket",
        ..cx()
    }
}

/// A 101 answer to an upgrade request.
pub(super) const SWITCH: &[&str] = &[
    "HTTP/1.1 101 Switching Protocols",
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Accept: a",
];

/// Parses and plans; returns the rewritten head and the verdict.
#[track_caller]
pub(super) fn plan(
    lines: &[&str],
    cx: &ResponseContext<'_>,
) -> (ResponseHead, Result<ResponsePlan, ResponseRefusal>) {
    let mut head: ResponseHead = parse(lines);
    let plan = plan_response(&mut head, cx);
    (head, plan)
}

/// Plans and expects a final head.
#[track_caller]
pub(super) fn final_plan(lines: &[&str], cx: &ResponseContext<'_>) -> (ResponseHead, FinalPlan) {
    match plan(lines, cx) {
        (head, Ok(ResponsePlan::Final(p))) => (head, p),
        other => panic!("expected a final plan, got {other:?}"),
    }
}

/// Plans and expects a refusal.
#[track_caller]
pub(super) fn refused_response(lines: &[&str], cx: &ResponseContext<'_>) -> ResponseRefusal {
    plan(lines, cx).1.unwrap_err()
}

/// The head as the client gets it.
pub(super) fn encoded(head: &ResponseHead) -> String {
    let mut out = Vec::new();
    head.encode(&mut out);
    String::from_utf8(out).unwrap()
}

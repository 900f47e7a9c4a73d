//! Request heads: parsing never panics; a head that parses re-encodes (as
//! it goes upstream) to bytes that parse to the same head; the request
//! plan never panics, and a planned head still re-encodes to a head that
//! parses the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::RequestHead;
use sluice::fuzz_api::{Forwarding, ParseHead, check_request_start, plan_request};

const MAX_FIELDS: usize = 100;

/// `head` encoded as it goes upstream, parsed back: must equal `head`
/// with version 1.1.
fn round_trip(head: &RequestHead) {
    let mut out = Vec::new();
    head.encode_upstream(&mut out);
    let mut again = RequestHead::default();
    let len = again
        .parse_into(&out, MAX_FIELDS.max(head.headers.len()))
        .expect("a re-encoded head parses")
        .expect("a re-encoded head is complete");
    assert_eq!(len, out.len());
    assert_eq!(again.method, head.method);
    assert_eq!(again.target, head.target);
    assert_eq!(again.version, 1);
    assert_eq!(again.headers, head.headers);
}

fuzz_target!(|data: &[u8]| {
    let _ = check_request_start(data);
    let mut head = RequestHead::default();
    let Ok(Some(_)) = head.parse_into(data, MAX_FIELDS) else {
        return;
    };
    round_trip(&head);
    let ip = std::net::IpAddr::from([192, 0, 2, 1]);
    if plan_request(&mut head, ip, Forwarding::default()).is_ok() {
        round_trip(&head);
    }
});

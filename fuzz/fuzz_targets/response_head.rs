//! Response heads: parsing never panics; a head that parses re-encodes to
//! bytes that parse to the same status and fields; the response plan
//! (for a context taken from the input's first byte) never panics, and a
//! planned head still re-encodes to one that parses the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::ResponseHead;
use sluice::fuzz_api::{ParseHead, ResponseContext, plan_response};

const MAX_FIELDS: usize = 256;

fn round_trip(head: &ResponseHead) {
    let mut out = Vec::new();
    head.encode(&mut out);
    let mut again = ResponseHead::default();
    let len = again
        .parse_into(&out, MAX_FIELDS.max(head.headers.len()))
        .expect("a re-encoded head parses")
        .expect("a re-encoded head is complete");
    assert_eq!(len, out.len());
    assert_eq!(again.status, head.status);
    assert_eq!(again.headers, head.headers);
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    let mut head = ResponseHead::default();
    let Ok(Some(len)) = head.parse_into(data, MAX_FIELDS) else {
        return;
    };
    round_trip(&head);
    let methods = ["GET", "HEAD", "POST", "CONNECT"];
    let cx = ResponseContext {
        method: methods[usize::from(flags & 3)],
        request_version: (flags >> 2) & 1,
        upgrade_requested: flags & 8 != 0,
        upgrade_offer: b"websocket, h2c",
        request_body_done: flags & 16 != 0,
        request_write_failed: flags & 32 != 0,
        interim_bytes: if flags & 64 != 0 { len } else { 0 },
        interim_budget: 64 * 1024,
    };
    if plan_response(&mut head, &cx).is_ok() {
        round_trip(&head);
    }
});

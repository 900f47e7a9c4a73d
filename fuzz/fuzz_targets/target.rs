//! Target and authority validation: never panics; what passes holds only
//! RFC 3986 bytes; an absolute form that passes becomes an origin form (or
//! `*`) whose `Host` passes the authority check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::RequestHead;
use sluice::fuzz_api::{check_authority, check_origin_form, normalize_absolute_form};

fn rfc3986_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%[]".contains(&b)
}

fuzz_target!(|data: &[u8]| {
    if check_origin_form(data).is_ok() {
        assert!(data.iter().all(|&b| rfc3986_byte(b) && b != b'[' && b != b']'));
        assert!(!data.contains(&b'#'));
    }
    if check_authority(data).is_ok() {
        assert!(data.iter().all(|&b| rfc3986_byte(b) && b != b'/' && b != b'?' && b != b'@'));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut req = RequestHead {
        method: "GET".into(),
        target: format!("http://{text}"),
        version: 1,
        ..RequestHead::default()
    };
    if normalize_absolute_form(&mut req).is_ok() {
        assert!(req.target.starts_with('/'), "{:?}", req.target);
        check_origin_form(req.target.as_bytes()).expect("the origin form passes");
        let host = req.headers.get("host").expect("Host set");
        check_authority(host).expect("the Host passes");
    }
});

//! `Headers` lookups by tag ([`Known`]) and by name agree with a plain scan
//! of the fields comparing names ignoring ASCII case, and `encode` (which
//! copies runs of lines from the arena) writes what writing each field
//! afresh writes, after any sequence of appends, removals, retains,
//! in-place growth and clears, from an empty set or a parsed head.

use crate::http::Headers;
use crate::http::ParseHead;
use crate::http::ResponseHead;
use crate::http::known::{ALL, Known};
use crate::tests::Lcg;

/// Names the sequence draws from: every known name in odd spellings, names
/// of the same length as known ones, and a few others.
const NAMES: [&str; 22] = [
    "Content-Length",
    "content-LENGTH",
    "Transfer-Encoding",
    "X-Forwarded-Proto",
    "CONNECTION",
    "Keep-Alive",
    "Proxy-Connection",
    "te",
    "TE",
    "Upgrade",
    "Trailer",
    "host",
    "Date",
    "Max-Forwards",
    "Via",
    "X-Forwarded-For",
    "Expect",
    "ETag",
    "Server",
    "Content-Type",
    "X-Forwarded-Fo",
    "Connectio",
];

/// The values of the fields named `name`, by a plain scan.
fn scan<'a>(h: &'a Headers, name: &str) -> Vec<&'a [u8]> {
    h.iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .collect()
}

/// What `encode` must write: every field as `name: value\r\n`.
fn encode_afresh(h: &Headers) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in h.iter() {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[track_caller]
fn assert_encodes_afresh(h: &Headers, step: usize) {
    let mut out = b"prefix".to_vec();
    h.encode(&mut out);
    let want = [&b"prefix"[..], &encode_afresh(h)].concat();
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want),
        "step {step}"
    );
}

#[track_caller]
fn assert_lookups_agree(h: &Headers, step: usize) {
    assert_encodes_afresh(h, step);
    for (k, lower) in ALL {
        let want = scan(h, lower);
        assert_eq!(
            h.get_all_known(k).collect::<Vec<_>>(),
            want,
            "step {step} {lower}"
        );
        assert_eq!(h.get_known(k), want.first().copied(), "step {step} {lower}");
        assert_eq!(h.has_known(k), !want.is_empty(), "step {step} {lower}");
    }
    for name in NAMES {
        let want = scan(h, name);
        assert_eq!(
            h.get_all(name).collect::<Vec<_>>(),
            want,
            "step {step} {name}"
        );
        assert_eq!(h.get(name), want.first().copied(), "step {step} {name}");
    }
}

/// The next index below `n` from `rng`.
fn pick(rng: &mut Lcg, n: usize) -> usize {
    usize::try_from(rng.below(n as u64)).unwrap_or(0)
}

/// Response heads of every shape httparse accepts: canonical lines, OWS
/// around values, empty values, a bare LF, obs-text, one field, none.
const HEADS: [&[u8]; 7] = [
    b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Tue, 01 Dec 2026 08:00:00 GMT\r\n\
      Content-Type: text/plain\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\
      ETag: \"x\"\r\nAccept-Ranges: bytes\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nA:b\r\nC:   d  \r\nE: f\t\r\nG: h\r\nEmpty:\r\nEmpty2: \r\nI: j\r\n\r\n",
    b"HTTP/1.1 200 OK\nA: b\nKeep-Alive: timeout=5\r\nC: d\n\n",
    b"HTTP/1.1 200 OK\r\nX-Obs: caf\xe9\r\nTE: trailers\r\nConnection: close, x-obs\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\nVia: 1.1 a\r\n\
      X-Forwarded-For: a,\r\nHost: h\r\n\r\n",
];

#[test]
fn a_parsed_head_encodes_as_its_fields_written_afresh() {
    for (i, head) in HEADS.iter().enumerate() {
        let Ok(Some((r, _))) = ResponseHead::parse(head, 100) else {
            panic!("head {i} parses");
        };
        assert_lookups_agree(&r.headers, i);
    }
    // A canonical head comes out byte for byte.
    let Ok(Some((r, _))) = ResponseHead::parse(HEADS[0], 100) else {
        panic!("head 0 parses");
    };
    let mut out = Vec::new();
    r.encode(&mut out);
    assert_eq!(out, HEADS[0]);
}

#[test]
fn tag_and_name_lookups_agree_with_a_scan_after_any_edit() {
    for (seed, head) in HEADS.iter().enumerate() {
        let Ok(Some((r, _))) = ResponseHead::parse(head, 100) else {
            panic!("head {seed} parses");
        };
        edit_at_random(r.headers, seed as u64 + 7);
    }
    edit_at_random(Headers::new(), 1);
}

/// Edits `h` 1,500 times, checking lookups and encoding after each edit.
fn edit_at_random(mut h: Headers, seed: u64) {
    let mut rng = Lcg(seed);
    for step in 0..1_500 {
        let name = NAMES[pick(&mut rng, NAMES.len())];
        let (k, lower) = ALL[pick(&mut rng, ALL.len())];
        match pick(&mut rng, 11) {
            0..=3 => h.append(name, format!("v{step}").as_bytes()),
            4 => {
                let want = scan(&h, name).len();
                assert_eq!(h.remove_all(name), want, "step {step}");
            }
            5 => {
                let want = scan(&h, lower).len();
                assert_eq!(h.remove_known(k), want, "step {step}");
            }
            6 => {
                let drop = pick(&mut rng, NAMES.len());
                h.retain(|n, _| !n.eq_ignore_ascii_case(NAMES[drop]));
            }
            7 => {
                let had = !scan(&h, lower).is_empty();
                assert_eq!(h.append_to_last_known(k, b",x"), had, "step {step}");
                assert_eq!(h.append_to_last(name, b";y"), !scan(&h, name).is_empty());
            }
            8 => {
                let (k2, lower2) = ALL[pick(&mut rng, ALL.len())];
                let want = h
                    .iter()
                    .filter(|(n, _)| {
                        !n.eq_ignore_ascii_case(lower) && !n.eq_ignore_ascii_case(lower2)
                    })
                    .map(|(n, v)| (n.to_owned(), v.to_vec()))
                    .collect::<Vec<_>>();
                h.remove_known_set(k.bit() | k2.bit());
                let got = h
                    .iter()
                    .map(|(n, v)| (n.to_owned(), v.to_vec()))
                    .collect::<Vec<_>>();
                assert_eq!(got, want, "step {step}");
            }
            9 => h.append_known(k, b"added"),
            _ => {
                if pick(&mut rng, 10) == 0 {
                    h.clear();
                }
            }
        }
        assert_lookups_agree(&h, step);
    }
}

#[test]
fn parsed_fields_are_tagged_like_appended_ones() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nCONNECTION: keep-alive\r\n\
        Keep-Alive: timeout=5\r\nDate: x\r\nServer: y\r\nTE: trailers\r\n\r\n";
    let Ok(Some((r, _))) = ResponseHead::parse(head, 100) else {
        panic!("a valid head");
    };
    assert_lookups_agree(&r.headers, 0);
    assert_eq!(r.headers.get_known(Known::ContentLength), Some(&b"3"[..]));
    assert!(r.headers.has_known(Known::Te));
    assert!(!r.headers.has_known(Known::Host));
    let mut again = r.headers.clone();
    again.remove_known(Known::Connection);
    assert!(!again.has_known(Known::Connection));
    assert_lookups_agree(&again, 1);
}

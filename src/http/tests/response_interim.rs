//! The response plan before the final head: interim (1xx) heads and 101
//! Switching Protocols, from byte strings alone (ARCHITECTURE/ARCHITECTURE.md §6,
//! §8).

use super::plan_helpers::{
    SWITCH, cx, cx10, encoded, final_plan, plan, refused_response as refused, upgrade_cx,
};
use crate::http::{BodyKind, ResponseContext, ResponsePlan, ResponseRefusal, finish_response_head};

// ---- Interim heads ---------------------------------------------------------

#[test]
fn interim_is_forwarded_to_http11_only() {
    for status in ["100 Continue", "103 Early Hints", "102 Processing"] {
        let line = format!("HTTP/1.1 {status}");
        let (_, p) = plan(&[&line], &cx());
        assert_eq!(
            p.unwrap(),
            ResponsePlan::Interim { forward: true },
            "{status}"
        );
        let (_, p) = plan(&[&line], &cx10());
        assert_eq!(
            p.unwrap(),
            ResponsePlan::Interim { forward: false },
            "{status} to HTTP/1.0 (RFC 9110 §15.2)"
        );
    }
}

#[test]
fn interim_hop_by_hop_fields_are_removed() {
    let (head, p) = plan(
        &[
            "HTTP/1.1 103 Early Hints",
            "Link: </a.css>; rel=preload",
            "Connection: keep-alive, X-Hop",
            "X-Hop: 1",
            "Keep-Alive: timeout=5",
            "link: </b.js>; rel=preload",
        ],
        &cx(),
    );
    assert_eq!(p.unwrap(), ResponsePlan::Interim { forward: true });
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\
         link: </b.js>; rel=preload\r\n\r\n"
    );
}

#[test]
fn interim_heads_are_bounded_by_bytes_not_by_count() {
    // 17 × 103 then a 200 used to be a 502 (a count of 16); RFC 9110 §15.2
    // makes a proxy forward every 1xx, so only their bytes are bounded.
    let line = "HTTP/1.1 103 Early Hints";
    for n in [1usize, 17, 1000] {
        let seen = ResponseContext {
            interim_bytes: n * (line.len() + 4),
            ..cx()
        };
        let (_, p) = plan(&[line], &seen);
        assert_eq!(p.unwrap(), ResponsePlan::Interim { forward: true }, "{n}");
    }
    let at = ResponseContext {
        interim_bytes: 64 * 1024,
        ..cx()
    };
    assert!(plan(&[line], &at).1.is_ok(), "exactly the budget");
    let over = ResponseContext {
        interim_bytes: 64 * 1024 + 1,
        ..cx()
    };
    let r = refused(&["HTTP/1.1 102 Processing"], &over);
    assert!(matches!(r, ResponseRefusal::Invalid(_)), "{r:?}");
}

#[test]
fn interim_heads_lose_framing_fields() {
    for field in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
        let (head, _) = plan(&["HTTP/1.1 103 Early Hints", field, "Link: </a>"], &cx());
        assert_eq!(
            encoded(&head),
            "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        );
    }
}

#[test]
fn interim_and_101_heads_with_both_framing_fields_are_refused() {
    // RFC 9112 §6.3 step 3, as for every response (a 101 passed both to
    // the client; found by a break-it pass).
    let both = |status: &'static str| {
        [
            status,
            "Content-Length: 0",
            "Transfer-Encoding: chunked",
            "Upgrade: websocket",
        ]
    };
    for (status, cx) in [
        ("HTTP/1.1 103 Early Hints", cx()),
        ("HTTP/1.1 100 Continue", cx()),
        ("HTTP/1.1 101 Switching Protocols", upgrade_cx()),
    ] {
        assert!(
            matches!(refused(&both(status), &cx), ResponseRefusal::Invalid(_)),
            "{status}"
        );
    }
}

// ---- 101 Switching Protocols -----------------------------------------------

#[test]
fn switching_protocols_after_an_upgrade_request_is_a_tunnel() {
    let (mut head, p) = final_plan(SWITCH, &upgrade_cx());
    assert!(p.tunnel);
    assert_eq!(p.framing, BodyKind::UntilClose);
    assert!(p.close_client);
    assert!(!p.upstream_keep_alive);
    assert!(!p.dechunk);
    assert!(!p.abandon_request);
    finish_response_head(&mut head, p.tunnel, 1, !p.close_client);
    assert_eq!(
        encoded(&head),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: a\r\nConnection: upgrade\r\n\r\n",
        "Upgrade kept, one Connection: upgrade, no Connection: close"
    );
}

#[test]
fn switching_protocols_without_an_upgrade_request_is_refused() {
    assert_eq!(refused(SWITCH, &cx()), ResponseRefusal::UnexpectedUpgrade);
}

#[test]
fn switching_protocols_before_the_request_body_is_done_is_refused() {
    let early = ResponseContext {
        request_body_done: false,
        ..upgrade_cx()
    };
    assert_eq!(refused(SWITCH, &early), ResponseRefusal::UnexpectedUpgrade);
}

#[test]
fn switching_protocols_without_upgrade_field_is_refused() {
    let r = refused(
        &["HTTP/1.1 101 Switching Protocols", "Connection: upgrade"],
        &upgrade_cx(),
    );
    assert!(
        matches!(
            r,
            ResponseRefusal::Invalid(_) | ResponseRefusal::UnexpectedUpgrade
        ),
        "{r:?}"
    );
}

#[test]
fn switching_to_a_protocol_the_client_did_not_offer_is_refused() {
    // RFC 9110 §7.8: a server MUST NOT switch to a protocol the client did
    // not indicate.
    let other = [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: h2c",
        "Connection: upgrade",
    ];
    assert_eq!(
        refused(&other, &upgrade_cx()),
        ResponseRefusal::UnexpectedUpgrade
    );
    let offered_several = ResponseContext {
        upgrade_offer: b"h2c, WebSocket/13",
        ..upgrade_cx()
    };
    assert!(
        final_plan(SWITCH, &offered_several).1.tunnel,
        "name matches, any case"
    );
    assert!(final_plan(&other, &offered_several).1.tunnel);
}

//! Tokens carry a generation, so an event for a freed slot never reaches
//! the connection that reuses the slot (DESIGN.md §3).

use crate::conn::token::{self, Kind};

#[test]
fn token_round_trips_kind_key_and_generation() {
    for &(key, generation) in &[(0usize, 1u32), (7, 2), ((1 << 30) - 1, u32::MAX)] {
        assert_eq!(
            token::split(token::session(key, generation)),
            Some((Kind::Session, key, generation))
        );
        assert_eq!(
            token::split(token::upstream(key, generation)),
            Some((Kind::Upstream, key, generation))
        );
    }
}

#[test]
fn a_reused_slot_gets_a_token_the_old_events_do_not_match() {
    // Slot 5 held a session of generation 41; it was freed and a new
    // session of generation 42 took the slot in the same batch of events.
    let stale = token::session(5, 41);
    let fresh = token::session(5, 42);
    assert_ne!(stale, fresh);
    let (_, key, generation) = token::split(stale).unwrap_or((Kind::Session, 0, 0));
    assert_eq!(key, 5, "same slot");
    assert_ne!(
        generation, 42,
        "the loop compares this with the slot's and drops the event"
    );
    // A client socket and an upstream socket in the same slot number never
    // share a token either.
    assert_ne!(token::session(5, 42), token::upstream(5, 42));
}

#[test]
fn reserved_tokens_are_not_connection_tokens() {
    assert!(token::split(token::LISTENER).is_none());
    assert!(token::split(token::WAKER).is_none());
}

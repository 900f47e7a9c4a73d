//! Tokens carry a generation, so an event for a freed slot never reaches
//! the connection that reuses the slot (ARCHITECTURE.md §3).

use crate::event_loop::token::{self, ConnId, Generations, Kind};

#[test]
fn token_round_trips_kind_key_and_generation() {
    for &(key, generation) in &[(0usize, 1u32), (7, 2), ((1 << 29) - 1, u32::MAX)] {
        let id = ConnId::new(key, generation);
        assert_eq!(token::split(id.token(Kind::Check)), Some((Kind::Check, id)));
        assert_eq!(
            token::split(id.token(Kind::Client)),
            Some((Kind::Client, id))
        );
        assert_eq!(
            token::split(id.token(Kind::Upstream)),
            Some((Kind::Upstream, id))
        );
    }
}

#[test]
fn the_reserved_tokens_are_no_connection_kind() {
    assert_eq!(token::split(token::listener(0)), None);
    assert_eq!(token::split(token::WAKER), None);
    assert_eq!(token::split(token::ADMIN_LISTENER), None);
}

#[test]
fn listener_tokens_name_their_index_and_nothing_else() {
    for i in [0, 1, 7, 1000] {
        assert_eq!(token::listener_index(token::listener(i)), Some(i));
        assert_eq!(token::split(token::listener(i)), None);
        assert_eq!(token::admin_key(token::listener(i)), None);
    }
    for t in [token::WAKER, token::ADMIN_LISTENER, token::admin(3)] {
        assert_eq!(token::listener_index(t), None, "{t:?}");
    }
    let id = ConnId::new(4, 9);
    for kind in [Kind::Client, Kind::Upstream, Kind::Check] {
        assert_eq!(token::listener_index(id.token(kind)), None);
    }
}

#[test]
fn a_reused_slot_gets_a_token_the_old_events_do_not_match() {
    // Slot 5 held a client connection of generation 41; it was freed and a
    // new connection of generation 42 took the slot in the same batch.
    let stale = ConnId::new(5, 41).token(Kind::Client);
    let fresh = ConnId::new(5, 42).token(Kind::Client);
    assert_ne!(stale, fresh);
    let (_, id) = token::split(stale).unwrap_or((Kind::Client, ConnId::new(0, 0)));
    assert_eq!(id.key(), 5, "same slot");
    assert_ne!(
        id.generation(),
        42,
        "the loop compares this with the slot's and drops the event"
    );
    // A client socket and an upstream socket in the same slot number never
    // share a token either.
    assert_ne!(
        ConnId::new(5, 42).token(Kind::Client),
        ConnId::new(5, 42).token(Kind::Upstream)
    );
}

#[test]
fn reserved_tokens_are_not_connection_tokens() {
    assert!(token::split(token::listener(2)).is_none());
    assert!(token::split(token::WAKER).is_none());
}

#[test]
fn generations_are_never_zero_and_wrap() {
    let mut g = Generations::default();
    assert_eq!(g.next(), 1);
    let mut g = Generations { last: u32::MAX - 1 };
    assert_eq!(g.next(), u32::MAX);
    assert_eq!(g.next(), 1, "0 is skipped when wrapping");
}

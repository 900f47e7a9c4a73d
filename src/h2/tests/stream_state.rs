//! Stream states (RFC 9113 §5.1): every state × every frame received,
//! and the sends that move a stream.

use crate::h2::ErrorCode::{self, *};
use crate::h2::H2Error;
use crate::h2::stream_state::{
    Closure, Recv, Send, StreamState::*, Verdict, admit, on_recv, on_send, unknown_stream,
};

fn headers(end_stream: bool) -> Recv {
    Recv::Headers { end_stream }
}
fn data(end_stream: bool) -> Recv {
    Recv::Data { end_stream }
}

/// What receiving `frame` in `state` costs, in short.
#[derive(Debug, PartialEq, Eq)]
enum Cost {
    Go(crate::h2::stream_state::StreamState),
    Ignore,
    Conn(ErrorCode),
    Stream(ErrorCode),
}

fn cost(state: crate::h2::stream_state::StreamState, frame: Recv) -> Cost {
    match on_recv(state, 1, frame) {
        Ok(Verdict::Go(s)) => Cost::Go(s),
        Ok(Verdict::Ignore) => Cost::Ignore,
        Err(H2Error::Connection(c, _)) => Cost::Conn(c),
        Err(H2Error::Stream(id, c, _)) => {
            assert_eq!(id, 1);
            Cost::Stream(c)
        }
    }
}

#[test]
fn rfc9113_5_1_idle_streams() {
    assert_eq!(cost(Idle, headers(false)), Cost::Go(Open));
    assert_eq!(cost(Idle, headers(true)), Cost::Go(HalfClosedRemote));
    assert_eq!(cost(Idle, Recv::Priority), Cost::Go(Idle));
    // h2spec 5.1/1-3: DATA, RST_STREAM, WINDOW_UPDATE on an idle stream.
    assert_eq!(cost(Idle, data(true)), Cost::Conn(ProtocolError));
    assert_eq!(cost(Idle, Recv::RstStream), Cost::Conn(ProtocolError));
    assert_eq!(cost(Idle, Recv::WindowUpdate), Cost::Conn(ProtocolError));
}

#[test]
fn rfc9113_5_1_1_an_even_stream_identifier_from_a_client_is_a_protocol_error() {
    assert!(matches!(
        on_recv(Idle, 2, headers(true)),
        Err(H2Error::Connection(ProtocolError, _))
    ));
}

#[test]
fn rfc9113_5_1_1_a_smaller_stream_identifier_is_a_protocol_error() {
    // h2spec 5.1.1/2: stream 5 opened, then HEADERS on 3.
    assert_eq!(unknown_stream(3, 5), Closed(Closure::Forgotten));
    assert_eq!(unknown_stream(7, 5), Idle);
    assert_eq!(
        cost(unknown_stream(3, 5), headers(true)),
        Cost::Conn(ProtocolError)
    );
    // A PRIORITY there is fine.
    assert_eq!(
        cost(unknown_stream(3, 5), Recv::Priority),
        Cost::Go(Closed(Closure::Forgotten))
    );
}

#[test]
fn rfc9113_5_1_open_and_half_closed_local_streams() {
    for s in [Open, HalfClosedLocal] {
        let ended = if s == Open {
            HalfClosedRemote
        } else {
            Closed(Closure::Ended)
        };
        assert_eq!(cost(s, data(false)), Cost::Go(s));
        assert_eq!(cost(s, data(true)), Cost::Go(ended));
        // Trailers end the stream; a second HEADERS without END_STREAM is
        // malformed (RFC 9113 §8.1).
        assert_eq!(cost(s, headers(true)), Cost::Go(ended));
        assert_eq!(cost(s, headers(false)), Cost::Stream(ProtocolError));
        assert_eq!(cost(s, Recv::WindowUpdate), Cost::Go(s));
        assert_eq!(
            cost(s, Recv::RstStream),
            Cost::Go(Closed(Closure::ResetByPeer))
        );
    }
}

#[test]
fn rfc9113_5_1_half_closed_remote_data_or_headers_is_a_stream_closed_error() {
    // h2spec 5.1/5-6, 6.1/2.
    assert_eq!(
        cost(HalfClosedRemote, data(true)),
        Cost::Stream(StreamClosed)
    );
    assert_eq!(
        cost(HalfClosedRemote, headers(true)),
        Cost::Stream(StreamClosed)
    );
    assert_eq!(
        cost(HalfClosedRemote, Recv::WindowUpdate),
        Cost::Go(HalfClosedRemote)
    );
    assert_eq!(
        cost(HalfClosedRemote, Recv::RstStream),
        Cost::Go(Closed(Closure::ResetByPeer))
    );
}

#[test]
fn rfc9113_5_1_closed_streams() {
    // h2spec 5.1/8-9: after the client's RST_STREAM.
    let reset = Closed(Closure::ResetByPeer);
    assert_eq!(cost(reset, data(true)), Cost::Stream(StreamClosed));
    assert_eq!(cost(reset, headers(true)), Cost::Stream(StreamClosed));
    // h2spec 5.1/11-12: after END_STREAM both ways.
    let ended = Closed(Closure::Ended);
    assert_eq!(cost(ended, data(true)), Cost::Stream(StreamClosed));
    assert_eq!(cost(ended, headers(true)), Cost::Conn(StreamClosed));
    // WINDOW_UPDATE and RST_STREAM may cross our END_STREAM.
    for s in [reset, ended, Closed(Closure::Forgotten)] {
        assert_eq!(cost(s, Recv::WindowUpdate), Cost::Ignore);
        assert_eq!(cost(s, Recv::RstStream), Cost::Ignore);
        assert_eq!(cost(s, Recv::Priority), Cost::Go(s));
    }
    // After our RST_STREAM everything is ignored.
    let ours = Closed(Closure::ResetByUs);
    for f in [
        data(true),
        headers(true),
        Recv::WindowUpdate,
        Recv::RstStream,
    ] {
        assert_eq!(cost(ours, f), Cost::Ignore);
    }
}

#[test]
fn sends_move_the_stream() {
    assert_eq!(on_send(Open, Send::Headers { end_stream: false }), Open);
    assert_eq!(
        on_send(Open, Send::Data { end_stream: true }),
        HalfClosedLocal
    );
    assert_eq!(
        on_send(HalfClosedRemote, Send::Headers { end_stream: true }),
        Closed(Closure::Ended)
    );
    assert_eq!(
        on_send(HalfClosedRemote, Send::RstStream),
        Closed(Closure::ResetByUs)
    );
}

#[test]
fn rfc9113_5_1_2_a_stream_over_the_limit_is_refused() {
    assert!(admit(1, 127, 128).is_ok());
    assert!(matches!(
        admit(3, 128, 128),
        Err(H2Error::Stream(3, RefusedStream, _))
    ));
}

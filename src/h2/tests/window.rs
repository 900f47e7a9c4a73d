//! Flow-control windows (RFC 9113 §6.9).

use crate::h2::ErrorCode::FlowControlError;
use crate::h2::H2Error;
use crate::h2::window::{MAX_WINDOW, Window};

#[test]
fn rfc9113_6_9_1_a_window_over_2_31_minus_1_is_a_flow_control_error() {
    let mut w = Window::new(65_535);
    let max_increment = (1u32 << 31) - 1;
    // On a stream: a stream error; on the connection: a connection error.
    assert!(matches!(
        w.grant(max_increment, 3),
        Err(H2Error::Stream(3, FlowControlError, _))
    ));
    assert!(matches!(
        w.grant(max_increment, 0),
        Err(H2Error::Connection(FlowControlError, _))
    ));
    assert_eq!(w.size(), 65_535, "a refused grant changes nothing");
    // Exactly to the maximum is fine.
    assert!(w.grant(max_increment - 65_535, 1).is_ok());
    assert_eq!(w.size(), MAX_WINDOW);
}

#[test]
fn rfc9113_6_9_1_data_past_the_window_is_a_flow_control_error() {
    let mut w = Window::new(100);
    assert!(w.receive(60, 1).is_ok());
    assert!(w.receive(40, 1).is_ok());
    assert_eq!(w.size(), 0);
    assert!(matches!(
        w.receive(1, 1),
        Err(H2Error::Stream(1, FlowControlError, _))
    ));
    assert!(matches!(
        w.receive(1, 0),
        Err(H2Error::Connection(FlowControlError, _))
    ));
    // A zero-length frame always fits.
    assert!(w.receive(0, 1).is_ok());
}

#[test]
fn rfc9113_6_9_2_a_smaller_initial_window_can_make_a_window_negative() {
    // The RFC's example: 60 KB sent, then the initial window drops to
    // 16 KB: the window is -44 KB until WINDOW_UPDATEs.
    let mut w = Window::new(65_535);
    w.spend(60_000);
    w.adjust(16_384 - 65_535).unwrap();
    assert_eq!(w.size(), 5_535 + 16_384 - 65_535);
    assert!(w.size() < 0);
    assert_eq!(w.available(), 0);
    w.grant(50_000, 1).unwrap();
    assert_eq!(w.available(), (5_535 + 16_384 - 65_535 + 50_000) as u32);
}

#[test]
fn rfc9113_6_9_2_an_initial_window_change_past_the_maximum_is_a_connection_error() {
    let mut w = Window::new(65_535);
    w.grant(1 << 30, 1).unwrap();
    assert!(matches!(
        w.adjust(i64::from(1u32 << 30)),
        Err(H2Error::Connection(FlowControlError, _))
    ));
}

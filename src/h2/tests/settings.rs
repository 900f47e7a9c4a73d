//! SETTINGS applied with the checks of RFC 9113 §6.5.2.

use crate::h2::ErrorCode::*;
use crate::h2::settings::{Params, PeerSettings, id};

/// A SETTINGS payload of `params`.
fn payload(params: &[(u16, u32)]) -> Vec<u8> {
    params
        .iter()
        .flat_map(|(i, v)| {
            let mut p = i.to_be_bytes().to_vec();
            p.extend_from_slice(&v.to_be_bytes());
            p
        })
        .collect()
}

fn apply(params: &[(u16, u32)]) -> Result<PeerSettings, crate::h2::ErrorCode> {
    let mut s = PeerSettings::default();
    let bytes = payload(params);
    s.apply(Params::new(&bytes)).map_err(|e| {
        assert!(
            e.stream_id().is_none(),
            "settings errors are connection errors"
        );
        e.code()
    })?;
    Ok(s)
}

#[test]
fn rfc9113_6_5_2_enable_push_other_than_0_or_1_is_a_protocol_error() {
    assert_eq!(apply(&[(id::ENABLE_PUSH, 2)]), Err(ProtocolError));
    assert!(apply(&[(id::ENABLE_PUSH, 0)]).is_ok());
    assert!(apply(&[(id::ENABLE_PUSH, 1)]).is_ok());
}

#[test]
fn rfc9113_6_5_2_initial_window_size_over_2_31_minus_1_is_a_flow_control_error() {
    assert_eq!(
        apply(&[(id::INITIAL_WINDOW_SIZE, 1 << 31)]),
        Err(FlowControlError)
    );
    assert_eq!(
        apply(&[(id::INITIAL_WINDOW_SIZE, (1 << 31) - 1)]).map(|s| s.initial_window_size),
        Ok((1 << 31) - 1)
    );
}

#[test]
fn rfc9113_6_5_2_max_frame_size_outside_its_range_is_a_protocol_error() {
    assert_eq!(apply(&[(id::MAX_FRAME_SIZE, 16_383)]), Err(ProtocolError));
    assert_eq!(apply(&[(id::MAX_FRAME_SIZE, 1 << 24)]), Err(ProtocolError));
    assert!(apply(&[(id::MAX_FRAME_SIZE, 16_384)]).is_ok());
    assert!(apply(&[(id::MAX_FRAME_SIZE, (1 << 24) - 1)]).is_ok());
}

#[test]
fn rfc9113_6_5_2_unknown_settings_are_ignored() {
    assert_eq!(apply(&[(0xff, 1), (0, 9)]), Ok(PeerSettings::default()));
}

#[test]
fn rfc9113_6_5_3_values_apply_in_order_and_the_last_wins() {
    let mut s = PeerSettings::default();
    let bytes = payload(&[
        (id::INITIAL_WINDOW_SIZE, 100),
        (id::HEADER_TABLE_SIZE, 0),
        (id::INITIAL_WINDOW_SIZE, 1000),
        (id::MAX_CONCURRENT_STREAMS, 10),
        (id::MAX_HEADER_LIST_SIZE, 8192),
    ]);
    let applied = s.apply(Params::new(&bytes)).unwrap();
    assert_eq!(applied.window_delta, 1000 - 65_535);
    assert_eq!(applied.header_table_size, Some(0));
    assert_eq!(s.initial_window_size, 1000);
    assert_eq!(s.max_concurrent_streams, Some(10));
    assert_eq!(s.max_header_list_size, Some(8192));
    // Nothing changed: a delta of 0.
    let again = s.apply(Params::new(&payload(&[]))).unwrap();
    assert_eq!(again.window_delta, 0);
    assert_eq!(again.header_table_size, None);
}

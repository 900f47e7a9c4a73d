//! The handshake gate's rule on byte strings (docs/tls.md "The
//! handshake's bound"): each case fed whole, split at every byte position
//! into pieces of that size, and byte by byte, with every admitted record
//! processed at once as a caller meets it; the verdicts must agree. A
//! child of `handshake_gate.rs` so that it sees the record layout's
//! private constants.
//!
//! What it must not know: sockets, rustls' session, the transport.

use super::*;
use crate::tls::tests::handshake_records as records;

/// A handshake message of type `typ` with a body of `len` bytes.
fn message(typ: u8, len: usize) -> Vec<u8> {
    let mut m = vec![typ];
    m.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    m.extend(std::iter::repeat_n(7, len));
    m
}

fn record(typ: u8, len: usize) -> Vec<u8> {
    let mut r = vec![typ, 3, 3];
    r.extend_from_slice(&(len as u16).to_be_bytes());
    r.extend(std::iter::repeat_n(9, len));
    r
}

/// What the gate says of `wire` as a caller meets it: bytes arrive
/// `cut` at a time (whole: `usize::MAX`), each admitted record is
/// processed at once (dropped from the front). Returns the verdicts
/// that were not `NeedMore`, and the bytes processed.
fn run(gate: &mut HandshakeGate, wire: &[u8], cut: usize, tls12: bool) -> (Vec<Admit>, usize) {
    let mut pending = Vec::new();
    let mut said = Vec::new();
    let mut processed = 0;
    for piece in wire.chunks(cut.max(1)) {
        pending.extend_from_slice(piece);
        loop {
            match gate.admit(&pending, tls12) {
                Admit::NeedMore => break,
                Admit::Record => {
                    let n = gate.open();
                    pending.drain(..n);
                    gate.consumed(n);
                    processed += n;
                    said.push(Admit::Record);
                }
                r @ Admit::Refuse(_) => {
                    said.push(r);
                    return (said, processed);
                }
            }
        }
    }
    (said, processed)
}

/// The same verdicts whole, split at every byte position in pieces
/// of that size, and byte by byte.
fn verdicts(client_auth: bool, wire: &[u8], tls12: bool) -> (Vec<Admit>, usize) {
    let whole = run(
        &mut HandshakeGate::new(client_auth),
        wire,
        usize::MAX,
        tls12,
    );
    for cut in 1..wire.len().min(600) {
        let split = run(&mut HandshakeGate::new(client_auth), wire, cut, tls12);
        assert_eq!(split, whole, "pieces of {cut}");
    }
    whole
}

#[test]
fn a_browser_sized_hello_and_finished_pass() {
    let mut wire = records(&message(1, 1800), 16384);
    wire.extend(record(CHANGE_CIPHER_SPEC, 1));
    wire.extend(record(APPLICATION_DATA, 69));
    let (said, processed) = verdicts(false, &wire, false);
    assert_eq!(said, [Admit::Record; 3]);
    assert_eq!(processed, wire.len());
}

#[test]
fn a_hello_across_small_records_passes() {
    let wire = records(&message(1, 2000), 100);
    let (said, processed) = verdicts(false, &wire, false);
    assert!(said.iter().all(|a| *a == Admit::Record));
    assert_eq!(processed, wire.len());
}

#[test]
fn a_hello_declaring_more_than_the_bound_is_refused_at_its_header() {
    // 65,000 bytes declared, 200 sent: refused once the message
    // header is in, whatever the record says.
    let mut hello = message(1, 65_000);
    hello.truncate(200);
    let mut wire = vec![HANDSHAKE, 3, 1, 0x40, 0];
    wire.extend_from_slice(&hello);
    assert_eq!(
        run(&mut HandshakeGate::new(false), &wire, 1, false),
        (vec![Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX))], 0),
        "the record's 16 KiB are over the bound"
    );
    // In small records, the message header says it.
    let wire = records(&hello, 50);
    let (said, _) = verdicts(false, &wire, false);
    assert_eq!(
        said.last(),
        Some(&Admit::Refuse(Refusal::MessageTooLarge(1, 65_000)))
    );
    // A hello of 8 KiB in one record: refused at the record's header.
    let wire = records(&message(1, HANDSHAKE_MAX), 16384);
    assert_eq!(
        run(&mut HandshakeGate::new(false), &wire[..9], 1, false).0,
        [Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX))]
    );
}

#[test]
fn the_largest_hello_that_fits_passes() {
    let most = HANDSHAKE_MAX - RECORD_HEADER - MESSAGE_HEADER;
    let wire = records(&message(1, most), 16384);
    assert_eq!(verdicts(false, &wire, false).0, [Admit::Record]);
    let wire = records(&message(1, most + 1), 16384);
    assert_eq!(
        verdicts(false, &wire, false).0,
        [Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX))]
    );
    // In two records, the message's header says it.
    let wire = records(&message(1, most + 1), 4096);
    assert_eq!(
        verdicts(false, &wire, false).0,
        [Admit::Refuse(Refusal::MessageTooLarge(1, most + 1))]
    );
}

#[test]
fn a_record_of_many_empty_messages_is_refused() {
    let mut wire = vec![HANDSHAKE, 3, 1, 0x1f, 0xf0];
    wire.extend(std::iter::repeat_n(0, 0x1ff0));
    assert_eq!(
        verdicts(false, &wire, false).0,
        [Admit::Refuse(Refusal::TooManyMessages)]
    );
    // Sixteen pass (then rustls judges them).
    let wire = records(&[0; 16 * MESSAGE_HEADER], 16384);
    assert_eq!(verdicts(false, &wire, false).0, [Admit::Record]);
}

#[test]
fn the_whole_handshake_is_bounded_not_each_record() {
    // 1-byte records, 6 bytes each on the wire: refused once their
    // sum passes the bound.
    let hello = message(1, 2000);
    let wire = records(&hello, 1);
    let (said, processed) = verdicts(false, &wire, false);
    assert_eq!(
        said.last(),
        Some(&Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX)))
    );
    assert!(processed <= HANDSHAKE_MAX);
    assert!(processed > HANDSHAKE_MAX - 6);
}

#[test]
fn encrypted_records_are_small_without_client_auth() {
    let mut wire = records(&message(1, 300), 16384);
    wire.extend(record(APPLICATION_DATA, SEALED_MAX));
    assert_eq!(verdicts(false, &wire, false).0, [Admit::Record; 2]);
    let mut wire = records(&message(1, 300), 16384);
    wire.extend(record(APPLICATION_DATA, SEALED_MAX + 1));
    let (said, _) = verdicts(false, &wire, false);
    assert_eq!(
        said,
        [
            Admit::Record,
            Admit::Refuse(Refusal::SealedTooLarge(SEALED_MAX + 1))
        ]
    );
    // TLS 1.2: a handshake record after the client's ChangeCipherSpec
    // is its encrypted Finished.
    let mut wire = records(&message(1, 300), 16384);
    wire.extend(records(&message(16, 100), 16384));
    wire.extend(record(CHANGE_CIPHER_SPEC, 1));
    wire.extend(record(HANDSHAKE, 40));
    assert_eq!(verdicts(false, &wire, true).0, [Admit::Record; 4]);
    let n = wire.len();
    wire.truncate(n - 45);
    wire.extend(record(HANDSHAKE, SEALED_MAX + 1));
    assert_eq!(
        verdicts(false, &wire, true).0.last(),
        Some(&Admit::Refuse(Refusal::SealedTooLarge(SEALED_MAX + 1)))
    );
    // TLS 1.3: a second ClientHello after a ChangeCipherSpec is
    // plaintext (RFC 8446 D.4).
    let mut wire = records(&message(1, 300), 16384);
    wire.extend(record(CHANGE_CIPHER_SPEC, 1));
    wire.extend(records(&message(1, 1800), 16384));
    assert_eq!(verdicts(false, &wire, false).0, [Admit::Record; 3]);
}

#[test]
fn client_auth_lets_a_certificate_chain_pass_8_kib() {
    // TLS 1.3: a hello, then the encrypted flight in full records.
    let mut wire = records(&message(1, 1800), 16384);
    for _ in 0..3 {
        wire.extend(record(APPLICATION_DATA, 16384 + 17));
    }
    assert_eq!(verdicts(true, &wire, false).0, [Admit::Record; 4]);
    assert_eq!(
        verdicts(false, &wire, false).0,
        [
            Admit::Record,
            Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX))
        ]
    );
    // TLS 1.2: a plaintext Certificate (11) of 40 KB.
    let mut wire = records(&message(1, 300), 16384);
    wire.extend(records(&message(11, 40_000), 16384));
    assert!(
        verdicts(true, &wire, true)
            .0
            .iter()
            .all(|a| *a == Admit::Record)
    );
    // Not past the bound: 64 KiB of chain and 8 KiB for the rest.
    let mut wire = records(&message(1, 300), 16384);
    let most = HANDSHAKE_MAX + CLIENT_CERT_MAX;
    wire.extend(records(&message(11, most), 16384));
    assert_eq!(
        verdicts(true, &wire, true).0.last(),
        Some(&Admit::Refuse(Refusal::MessageTooLarge(11, most)))
    );
    // A ClientHello resuming such a session carries the chain in its
    // ticket: it may pass 8 KiB too.
    let wire = records(&message(1, 12_000), 16384);
    assert_eq!(verdicts(true, &wire, false).0, [Admit::Record]);
    assert_eq!(
        verdicts(false, &wire, false).0,
        [Admit::Refuse(Refusal::TooLarge(HANDSHAKE_MAX))]
    );
}

#[test]
fn record_headers_rustls_refuses_are_refused_first() {
    let hello = records(&message(1, 300), 16384);
    let n = hello.len();
    for (bad, typ) in [
        (vec![0x33, 3, 3, 0, 1, 0], 0x33),
        (vec![24, 3, 3, 0, 1, 0], 24),
        (vec![22, 2, 0, 0, 1, 0], 22),
        (vec![21, 3, 3, 0, 0], 21),
        (vec![22, 3, 3, 0x48, 0], 22),
    ] {
        let mut wire = hello.clone();
        wire.extend_from_slice(&bad);
        let (said, processed) = verdicts(true, &wire, false);
        assert_eq!(
            said,
            [Admit::Record, Admit::Refuse(Refusal::BadRecord(typ))],
            "{bad:?}"
        );
        assert_eq!(processed, n);
    }
    // An empty application data record is for rustls to judge.
    let mut wire = hello.clone();
    wire.extend(record(APPLICATION_DATA, 0));
    assert_eq!(verdicts(false, &wire, false).0, [Admit::Record; 2]);
}

#[test]
fn bytes_behind_an_admitted_record_wait_for_the_next_look() {
    // The caller asks again only while the handshake lasts: what
    // follows the last handshake record is never judged.
    let mut wire = records(&message(1, 300), 16384);
    let hello = wire.len();
    wire.extend(record(APPLICATION_DATA, 16384));
    let mut gate = HandshakeGate::new(false);
    assert_eq!(gate.admit(&wire, false), Admit::Record);
    assert_eq!(gate.open(), hello);
    assert_eq!(gate.used(), hello);
}

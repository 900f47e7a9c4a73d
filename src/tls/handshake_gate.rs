//! What a client may make a server session hold before its handshake
//! ends (issue 23: "a half-done handshake holds at most 8 KiB"): the
//! transport hands rustls the client's records one at a time while the
//! handshake lasts, and this gate judges each from its header (and, for
//! a plaintext handshake record, from its messages' headers) before
//! rustls sees it. rustls alone keeps a handshake message of up to 64 KiB
//! whole before it judges it, and 40 bytes of bookkeeping per message of
//! a record it took apart (a 16 KiB record of 4,096 empty messages: 160
//! KiB); the gate refuses such input while it is at most
//! [`HANDSHAKE_MAX`] bytes.
//!
//! The rule, per record the client sends while the handshake lasts:
//! - every record counts, header included: the records up to the one
//!   whose processing ends the handshake may take [`HANDSHAKE_MAX`]
//!   bytes, and [`CLIENT_CERT_MAX`] more when the listener asks for
//!   client certificates (a chain may pass 8 KiB, and so may the
//!   ClientHello that resumes such a session: rustls' ticket carries the
//!   chain). A record whose header declares more than is left is refused
//!   at its header, before its bytes come. What follows the handshake (a
//!   request sent right behind the client's `Finished`) is application
//!   data: it is never judged, since rustls has ended the handshake
//!   before it is handed over.
//! - a plaintext handshake record (the ClientHello, a second one after a
//!   HelloRetryRequest, TLS 1.2's Certificate, ClientKeyExchange and
//!   CertificateVerify): each message's declared length must fit what is
//!   left (refused at the message's header); at most
//!   [`MESSAGES_PER_RECORD`] messages start in one record (rustls' list
//!   of messages has room for 16 from the start).
//! - a record the client encrypted (TLS 1.3's `application_data` records,
//!   TLS 1.2's handshake records after its ChangeCipherSpec) carries the
//!   `Finished` (53 to 74 bytes on the wire) and, under client
//!   authentication, the Certificate and CertificateVerify: without client
//!   authentication its fragment may be at most [`SEALED_MAX`] bytes
//!   (the messages inside cannot be counted before rustls decrypts them).
//! - a record header rustls' deframer would refuse (a type other than 20
//!   to 23, a legacy version not 3.x, an empty fragment, an oversized
//!   one) is refused here first: rustls, asked again for the alert of
//!   such a failure, reads the header again and fails a second time.
//!
//! Layout (RFC 8446 §5.1, §4): a record is a type (20 ChangeCipherSpec,
//! 21 alert, 22 handshake, 23 application data), a 2-byte legacy version
//! and a 2-byte length, then its fragment; a handshake message is a type,
//! a 3-byte length, then its body, and may span records.
//!
//! What it must not know: sockets, rustls' session, HTTP.

/// Bytes of the client's records while its handshake lasts (headers
/// included): a ClientHello (browsers send up to about 2 KB, with
/// post-quantum key shares), a second one after a HelloRetryRequest, a
/// ChangeCipherSpec and the `Finished`, or TLS 1.2's ClientKeyExchange,
/// ChangeCipherSpec and `Finished`. OpenSSL (nginx) takes a ClientHello
/// of up to 16 KiB.
pub const HANDSHAKE_MAX: usize = 8 * 1024;

/// Bytes the client's certificate flight may add when the listener asks
/// for client certificates (`tls_client_auth` `optional` or `required`):
/// a chain of a few certificates may pass 8 KiB, and so may a ClientHello
/// with a ticket of such a session (rustls keeps the chain in it);
/// rustls' own cap on a handshake message is 64 KiB.
pub const CLIENT_CERT_MAX: usize = 64 * 1024;

/// Most fragment bytes of a record the client encrypted while the
/// handshake lasts, without client authentication: its `Finished` (TLS
/// 1.3: 53 or 69 bytes; TLS 1.2: 40) with room for padding; rustls'
/// bookkeeping of such a record's messages stays under 6 KiB.
pub const SEALED_MAX: usize = 512;

/// Most handshake messages that may start in one plaintext record (a
/// TLS 1.2 client's flight has three): rustls keeps 40 bytes per message
/// of a record it took apart, in a list with room for 16.
pub const MESSAGES_PER_RECORD: usize = 16;

/// A fatal `decode_error` alert (50) as one plaintext record (RFC 8446
/// §6.2: "some field was out of the specified range or the length of
/// the message was incorrect"), what rustls answers a handshake message
/// over its own cap with: written when the gate refuses before the
/// server has answered anything.
pub const DECODE_ERROR_ALERT: [u8; 7] = [21, 3, 3, 0, 2, 2, 50];

/// Bytes of a record header: type, legacy version, length.
const RECORD_HEADER: usize = 5;

/// Bytes of a handshake message header: type, 3-byte length.
const MESSAGE_HEADER: usize = 4;

/// Record content types (RFC 8446 §5.1).
const CHANGE_CIPHER_SPEC: u8 = 20;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// Why the gate refused a client's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The records would pass the handshake's bound (bytes).
    TooLarge(usize),
    /// A handshake message declares more than the bound leaves (its
    /// type, its declared length).
    MessageTooLarge(u8, usize),
    /// More than [`MESSAGES_PER_RECORD`] messages start in one record.
    TooManyMessages,
    /// An encrypted record longer than [`SEALED_MAX`] (its fragment's
    /// length).
    SealedTooLarge(usize),
    /// A record header rustls refuses (its content type).
    BadRecord(u8),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooLarge(limit) => {
                write!(f, "the client's handshake records pass {limit} bytes")
            }
            Refusal::MessageTooLarge(typ, len) => {
                write!(f, "a handshake message of type {typ} declares {len} bytes")
            }
            Refusal::TooManyMessages => write!(
                f,
                "more than {MESSAGES_PER_RECORD} handshake messages in one record"
            ),
            Refusal::SealedTooLarge(len) => write!(
                f,
                "an encrypted handshake record of {len} bytes (at most {SEALED_MAX})"
            ),
            Refusal::BadRecord(typ) => write!(f, "a record header rustls refuses (type {typ})"),
        }
    }
}

impl std::error::Error for Refusal {}

/// What the gate says of the next record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// A whole record, judged: rustls may see it (the gate's
    /// [`HandshakeGate::open`] grew by its length).
    Record,
    /// The next record is not whole yet, and nothing of it is refused so
    /// far.
    NeedMore,
    /// The handshake is refused.
    Refuse(Refusal),
}

/// Where the client's plaintext handshake messages stand between records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Message {
    /// At a message's start.
    Start,
    /// Inside a message header: the bytes of it so far.
    Header([u8; MESSAGE_HEADER], usize),
    /// Inside a message body: its bytes still to come.
    Body(usize),
}

/// The gate of one server session while its handshake lasts. Its
/// offsets are into the caller's ciphertext not yet processed, oldest
/// first: the first [`HandshakeGate::open`] bytes were judged.
#[derive(Debug, Clone)]
pub struct HandshakeGate {
    /// Bytes the records may take in all.
    limit: usize,
    /// The listener asks for client certificates (encrypted records may
    /// be whole ones).
    client_auth: bool,
    /// Bytes of the records judged so far.
    used: usize,
    /// Bytes at the front of the caller's unprocessed ciphertext that
    /// rustls may see.
    open: usize,
    /// Bytes of the last record let through (the end of `open`).
    last: usize,
    /// The plaintext handshake message at the start of the next record.
    message: Message,
    /// The client sent ChangeCipherSpec: in TLS 1.2 its later handshake
    /// records are encrypted.
    ccs: bool,
}

impl HandshakeGate {
    /// The gate of a listener that asks for client certificates
    /// (`client_auth`) or not.
    pub fn new(client_auth: bool) -> Self {
        HandshakeGate {
            limit: HANDSHAKE_MAX + if client_auth { CLIENT_CERT_MAX } else { 0 },
            client_auth,
            used: 0,
            open: 0,
            last: 0,
            message: Message::Start,
            ccs: false,
        }
    }

    /// Bytes at the front of the unprocessed ciphertext that rustls may
    /// see: whole records, judged.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Bytes of the records judged so far.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Bytes of the last record let through: the last of [`Self::open`]'s.
    pub fn last(&self) -> usize {
        self.last
    }

    /// rustls processed `n` bytes at the front (the caller drops them).
    pub fn consumed(&mut self, n: usize) {
        self.open = self.open.saturating_sub(n);
    }

    /// Judges the record that starts at [`Self::open`] in `pending` (the
    /// unprocessed ciphertext, oldest first), once rustls processed every
    /// record before it and its handshake still runs. `tls12`: the
    /// session negotiated TLS 1.2 (its handshake records after the
    /// client's ChangeCipherSpec are encrypted).
    pub fn admit(&mut self, pending: &[u8], tls12: bool) -> Admit {
        let rest = pending.get(self.open..).unwrap_or_default();
        let Some(header) = rest.get(..RECORD_HEADER) else {
            return Admit::NeedMore;
        };
        let (Some(&typ), Some(&hi), Some(&lo)) = (header.first(), header.get(3), header.get(4))
        else {
            return Admit::NeedMore;
        };
        let len = usize::from(hi) << 8 | usize::from(lo);
        if !rustls_takes(header, len) {
            return Admit::Refuse(Refusal::BadRecord(typ));
        }
        let whole = RECORD_HEADER + len;
        if self.used + whole > self.limit {
            return Admit::Refuse(Refusal::TooLarge(self.limit));
        }
        let sealed = typ == APPLICATION_DATA || (typ == HANDSHAKE && self.ccs && tls12);
        if sealed && !self.client_auth && len > SEALED_MAX {
            return Admit::Refuse(Refusal::SealedTooLarge(len));
        }
        let fragment = rest.get(RECORD_HEADER..whole.min(rest.len()));
        let mut after = self.message;
        if typ == HANDSHAKE && !sealed {
            let base = self.used + RECORD_HEADER;
            match self.scan(self.message, fragment.unwrap_or_default(), base) {
                Ok(m) => after = m,
                Err(r) => return Admit::Refuse(r),
            }
        }
        if rest.len() < whole {
            return Admit::NeedMore;
        }
        self.message = after;
        self.ccs |= typ == CHANGE_CIPHER_SPEC;
        self.used += whole;
        self.open += whole;
        self.last = whole;
        Admit::Record
    }

    /// Walks the message headers of a plaintext handshake fragment (or
    /// the part of it that came), from `message`, the state at its start;
    /// `base` is the fragment's offset from the first record's start.
    /// Returns the state at the fragment's end.
    fn scan(&self, mut message: Message, fragment: &[u8], base: usize) -> Result<Message, Refusal> {
        let mut at = 0;
        let mut starts = 0;
        while at < fragment.len() {
            let left = fragment.len() - at;
            message = match message {
                Message::Body(need) => {
                    let n = need.min(left);
                    at += n;
                    if n == need {
                        Message::Start
                    } else {
                        Message::Body(need - n)
                    }
                }
                Message::Start | Message::Header(..) => {
                    let (mut bytes, mut have) = match message {
                        Message::Header(b, h) => (b, h),
                        _ => {
                            starts += 1;
                            if starts > MESSAGES_PER_RECORD {
                                return Err(Refusal::TooManyMessages);
                            }
                            ([0; MESSAGE_HEADER], 0)
                        }
                    };
                    while have < MESSAGE_HEADER {
                        let (Some(slot), Some(&b)) = (bytes.get_mut(have), fragment.get(at)) else {
                            break;
                        };
                        *slot = b;
                        have += 1;
                        at += 1;
                    }
                    if have < MESSAGE_HEADER {
                        Message::Header(bytes, have)
                    } else {
                        let [typ, a, b, c] = bytes;
                        let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                        self.check(typ, len, base + at)?;
                        if len == 0 {
                            Message::Start
                        } else {
                            Message::Body(len)
                        }
                    }
                }
            };
        }
        Ok(message)
    }

    /// A message of type `typ` declaring `len` body bytes, whose body
    /// starts `from` bytes after the first record's start: it must end
    /// within the bound (its end is at least `from + len` bytes in, more
    /// with later record headers).
    fn check(&self, typ: u8, len: usize, from: usize) -> Result<(), Refusal> {
        if from + len > self.limit {
            return Err(Refusal::MessageTooLarge(typ, len));
        }
        Ok(())
    }
}

/// Most fragment bytes rustls takes in a record (RFC 5246 §6.2.3: 2^14
/// and 2,048 of expansion; rustls refuses this many and more).
const MAX_PAYLOAD: usize = 16384 + 2048;

/// A record header rustls' deframer takes (rustls 0.23
/// `read_opaque_message_header`): a content type of TLS 1.2 and 1.3
/// (20 to 23), a legacy version 0x03XX, a fragment that is not empty
/// (but for application data) and under [`MAX_PAYLOAD`] bytes. The gate
/// refuses the others itself, so that rustls never fails on a header:
/// asked again for its alert, it would read the header again and fail
/// with a second alert.
fn rustls_takes(header: &[u8], len: usize) -> bool {
    let [typ, major, ..] = *header else {
        return false;
    };
    (CHANGE_CIPHER_SPEC..=APPLICATION_DATA).contains(&typ)
        && major == 3
        && (len > 0 || typ == APPLICATION_DATA)
        && len < MAX_PAYLOAD
}

#[cfg(test)]
mod tests {
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
}

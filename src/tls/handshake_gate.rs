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
mod tests;

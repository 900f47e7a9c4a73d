//! The server name a ClientHello asks for (RFC 6066 §3), read from the
//! bytes a client sends first, before the session acts on them: the
//! access record's `sni` and, under `tls_unknown_sni = "reject"`, the
//! look that answers `unrecognized_name` (`conn/transport/tls/read.rs`).
//! rustls' unbuffered server session does not tell its SNI, so the
//! transport reads it here, once per handshake.
//!
//! Layout (RFC 8446 §5.1, §4.1.2, RFC 6066 §3): records of type 22
//! (handshake) carry the handshake message, which may span several of
//! them; the message is `msg_type` 1, a 3-byte length, then
//! `legacy_version` (2), `random` (32), `legacy_session_id` (1-byte
//! length), `cipher_suites` (2-byte length), `legacy_compression_methods`
//! (1-byte length) and the extensions (2-byte length; absent in a
//! ClientHello without any), each a 2-byte type and a 2-byte length. The
//! `server_name` extension (type 0) holds a 2-byte list length and
//! entries of a 1-byte type (0: `host_name`) and a 2-byte length.
//!
//! A name is kept as rustls keeps it: a valid DNS name (pki-types' rule:
//! no IP literal), in lower case, without a trailing dot.
//!
//! The hello is read field by field as its bytes come, across records,
//! keeping only the `server_name` extension's data: what the handshake
//! holds while a hello is half-sent is its bytes in the session's record
//! storage, once (`handshake_gate.rs` bounds them).
//!
//! What it must not know: sockets, rustls' session, HTTP.

/// The first byte of a TLS handshake record (RFC 8446 §5.1).
const HANDSHAKE_RECORD: u8 = 22;

/// `msg_type` of a ClientHello (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;

/// Bytes of a record header: type, version, length.
const RECORD_HEADER: usize = 5;

/// Largest record fragment a client may send (2^14 plaintext, plus the
/// expansion RFC 5246 §6.2.3 allows).
const MAX_FRAGMENT: usize = 16384 + 2048;

/// Largest ClientHello looked at (rustls' own handshake message cap;
/// the handshake's bound, `handshake_gate.rs`, refuses one past 8 KiB
/// unless the listener asks for client certificates).
const MAX_HELLO: usize = 0xffff;

/// Most bytes of the `server_name` extension kept while it comes: one
/// `host_name` (a DNS name has at most 253 bytes) with its list and
/// entry headers, and room to spare. A longer one carries no usable name.
const MAX_SNI_EXTENSION: usize = 512;

/// Bytes of `legacy_version` and `random`.
const FIXED: usize = 2 + 32;

/// What the bytes so far say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// The ClientHello is not whole yet.
    NeedMore,
    /// A whole ClientHello: the name it asks for (`None`: no SNI, or an
    /// IP literal).
    Name(Option<String>),
    /// Not a ClientHello in TLS records, or one whose `server_name` is
    /// malformed or no DNS name (the session refuses it itself).
    Invalid,
}

/// The server name of the ClientHello at the start of `bytes` (raw
/// records, as read from the socket).
pub fn server_name(bytes: &[u8]) -> Hello {
    HelloScan::default().feed(bytes)
}

/// The field of the ClientHello the next bytes belong to, in order
/// (RFC 8446 §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `msg_type` (1 byte).
    MsgType,
    /// The body's length (3 bytes).
    MsgLen,
    /// `legacy_version` and `random`, skipped.
    Fixed,
    /// `legacy_session_id`'s length (1 byte), then its bytes.
    SessionIdLen,
    SessionId,
    /// `cipher_suites`' length (2 bytes), then its bytes.
    SuitesLen,
    Suites,
    /// `legacy_compression_methods`' length (1 byte), then its bytes.
    CompressionLen,
    Compression,
    /// The extension block's length (2 bytes; absent when the body ends
    /// before it).
    ExtensionsLen,
    /// An extension's type and length (2 bytes each), then its data.
    ExtType,
    ExtLen,
    Ext,
    /// The rest of the body, skipped: the name is known, or the
    /// extensions ended without one.
    Rest,
}

impl Field {
    /// The field's bytes are a big-endian number (a type or a length).
    fn is_number(self) -> bool {
        matches!(
            self,
            Field::MsgType
                | Field::MsgLen
                | Field::SessionIdLen
                | Field::SuitesLen
                | Field::CompressionLen
                | Field::ExtensionsLen
                | Field::ExtType
                | Field::ExtLen
        )
    }
}

/// [`server_name`] over bytes that arrive in pieces: each piece is read
/// as it comes (the session may rewrite its copy in place once it
/// processed it), field by field, and nothing of it is kept but the
/// `server_name` extension's data: a half-sent hello costs the scan a
/// few words, not a copy.
#[derive(Debug)]
pub struct HelloScan {
    /// The header of the record being read, and its bytes so far.
    header: [u8; RECORD_HEADER],
    header_have: usize,
    /// Fragment bytes of the current record still to come (0: a record
    /// header is next).
    fragment_left: usize,
    /// The hello's field being read.
    field: Field,
    /// Bytes of that field still to come.
    left: usize,
    /// The number a numeric field holds, so far.
    value: usize,
    /// Bytes of the hello's body still to come (after its header).
    body_left: usize,
    /// Bytes of the extension block still to come.
    exts_left: usize,
    /// The extension being read is `server_name`: its data is kept.
    sni_ext: bool,
    /// The `server_name` extension's data so far.
    sni: Vec<u8>,
    /// The name, once the `server_name` extension was read.
    name: Option<Option<String>>,
    /// The verdict, once reached.
    verdict: Option<Hello>,
}

impl Default for HelloScan {
    fn default() -> Self {
        HelloScan {
            header: [0; RECORD_HEADER],
            header_have: 0,
            fragment_left: 0,
            field: Field::MsgType,
            left: 1,
            value: 0,
            body_left: 0,
            exts_left: 0,
            sni_ext: false,
            sni: Vec::new(),
            name: None,
            verdict: None,
        }
    }
}

impl HelloScan {
    /// The verdict once `fresh`, the next bytes the client sent, is added.
    pub fn feed(&mut self, mut fresh: &[u8]) -> Hello {
        while self.verdict.is_none() && !fresh.is_empty() {
            if self.fragment_left == 0 {
                fresh = self.record_header(fresh);
                continue;
            }
            let n = self.fragment_left.min(fresh.len());
            let (fragment, rest) = fresh.split_at(n);
            self.fragment_left -= n;
            fresh = rest;
            if let Err(v) = self.hello_bytes(fragment) {
                self.verdict = Some(v);
            }
        }
        self.verdict.clone().unwrap_or(Hello::NeedMore)
    }

    /// Reads record header bytes from the front of `bytes`; returns the
    /// rest. A header that is no handshake record's, or announces an
    /// empty or oversized fragment, ends the scan.
    fn record_header<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let n = (RECORD_HEADER - self.header_have).min(bytes.len());
        let (head, rest) = bytes.split_at(n);
        if let Some(dst) = self.header.get_mut(self.header_have..self.header_have + n) {
            dst.copy_from_slice(head);
        }
        self.header_have += n;
        if self.header.first() != Some(&HANDSHAKE_RECORD) {
            self.verdict = Some(Hello::Invalid);
        } else if self.header_have == RECORD_HEADER {
            let [_, _, _, hi, lo] = self.header;
            let len = usize::from(hi) << 8 | usize::from(lo);
            if len == 0 || len > MAX_FRAGMENT {
                self.verdict = Some(Hello::Invalid);
            }
            self.fragment_left = len;
            self.header_have = 0;
        }
        rest
    }

    /// Reads the hello's bytes of one fragment; `Err` with the verdict
    /// once it is reached.
    fn hello_bytes(&mut self, mut bytes: &[u8]) -> Result<(), Hello> {
        while !bytes.is_empty() {
            let n = if self.field.is_number() {
                let Some(&b) = bytes.first() else {
                    break;
                };
                self.value = self.value << 8 | usize::from(b);
                1
            } else {
                self.left.min(bytes.len())
            };
            let (taken, rest) = bytes.split_at(n);
            if self.field == Field::Ext && self.sni_ext {
                self.sni.extend_from_slice(taken);
            }
            bytes = rest;
            self.left -= n;
            if !matches!(self.field, Field::MsgType | Field::MsgLen) {
                self.body_left -= n;
            }
            if matches!(self.field, Field::ExtType | Field::ExtLen | Field::Ext) {
                self.exts_left -= n;
            }
            while self.left == 0 {
                self.next()?;
            }
        }
        Ok(())
    }

    /// The field just read is whole: on to the next one (`Err` with the
    /// verdict once reached).
    fn next(&mut self) -> Result<(), Hello> {
        let value = std::mem::take(&mut self.value);
        match self.field {
            Field::MsgType if value != usize::from(CLIENT_HELLO) => Err(Hello::Invalid),
            Field::MsgType => self.enter(Field::MsgLen, 3),
            Field::MsgLen if value > MAX_HELLO => Err(Hello::Invalid),
            Field::MsgLen => {
                self.body_left = value;
                self.enter(Field::Fixed, FIXED)
            }
            Field::Fixed => self.enter(Field::SessionIdLen, 1),
            Field::SessionIdLen => self.enter(Field::SessionId, value),
            Field::SessionId => self.enter(Field::SuitesLen, 2),
            Field::SuitesLen => self.enter(Field::Suites, value),
            Field::Suites => self.enter(Field::CompressionLen, 1),
            Field::CompressionLen => self.enter(Field::Compression, value),
            // No extensions at all.
            Field::Compression if self.body_left == 0 => Err(Hello::Name(None)),
            Field::Compression => self.enter(Field::ExtensionsLen, 2),
            Field::ExtensionsLen if value > self.body_left => Err(Hello::Invalid),
            Field::ExtensionsLen => {
                self.exts_left = value;
                self.next_extension()
            }
            Field::ExtType => {
                self.sni_ext = value == 0;
                self.enter(Field::ExtLen, 2)
            }
            Field::ExtLen if value > self.exts_left => Err(Hello::Invalid),
            Field::ExtLen if self.sni_ext && value > MAX_SNI_EXTENSION => {
                // Too long for one name: none usable.
                self.name = Some(None);
                self.sni_ext = false;
                self.enter(Field::Ext, value)
            }
            Field::ExtLen => self.enter(Field::Ext, value),
            Field::Ext if self.sni_ext => {
                self.sni_ext = false;
                self.name = Some(sni_of(&std::mem::take(&mut self.sni)).ok_or(Hello::Invalid)?);
                self.enter(Field::Rest, self.body_left)
            }
            Field::Ext if self.name.is_some() => self.enter(Field::Rest, self.body_left),
            Field::Ext => self.next_extension(),
            Field::Rest => Err(Hello::Name(self.name.take().flatten())),
        }
    }

    /// The next extension, or the end of the block (no name in it).
    fn next_extension(&mut self) -> Result<(), Hello> {
        if self.exts_left == 0 {
            return self.enter(Field::Rest, self.body_left);
        }
        self.enter(Field::ExtType, 2)
    }

    /// Reads `field`, of `len` bytes, next; `Err(Invalid)` if it overruns
    /// the body (or, inside the extension block, the block).
    fn enter(&mut self, field: Field, len: usize) -> Result<(), Hello> {
        let inside_exts = matches!(field, Field::ExtType | Field::ExtLen | Field::Ext);
        let body = !matches!(field, Field::MsgType | Field::MsgLen);
        if (body && len > self.body_left) || (inside_exts && len > self.exts_left) {
            return Err(Hello::Invalid);
        }
        self.field = field;
        self.left = len;
        self.value = 0;
        Ok(())
    }
}

/// A cursor over a whole `server_name` extension; every read is
/// bounds-checked.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let head = self.bytes.get(..n)?;
        self.bytes = self.bytes.get(n..)?;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1)?.first().map(|&b| usize::from(b))
    }

    fn u16(&mut self) -> Option<usize> {
        let b = self.take(2)?;
        Some(usize::from(*b.first()?) << 8 | usize::from(*b.get(1)?))
    }

    /// A vector with a 2-byte length prefix.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The name of a `server_name` extension's data (RFC 6066 §3): `None`
/// for a malformed one (also a `host_name` that is no DNS name: rustls
/// refuses the hello with illegal_parameter, whatever `tls_unknown_sni`
/// says), `Some(None)` for one without a name (an IP literal).
fn sni_of(data: &[u8]) -> Option<Option<String>> {
    let mut list = Cursor {
        bytes: Cursor { bytes: data }.vec16()?,
    };
    while !list.bytes.is_empty() {
        let name_type = list.u8()?;
        let name = list.vec16()?;
        if name_type == 0 {
            return dns_name(name);
        }
    }
    Some(None)
}

/// A `host_name` as rustls keeps it: `Some(Some(name))` for a valid DNS
/// name (lower case, no trailing dot), `Some(None)` for an IP literal
/// (rustls lets it pass as no name), `None` for bytes that are no name
/// (`a..test`, `a b`: rustls refuses them).
fn dns_name(raw: &[u8]) -> Option<Option<String>> {
    let s = std::str::from_utf8(raw).ok()?;
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Some(None);
    }
    // Checked as sent (rustls does): `a.test..` is no name.
    rustls::pki_types::DnsName::try_from(s).ok()?;
    let s = s.strip_suffix('.').unwrap_or(s);
    Some(Some(s.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::tests::handshake_records as records;

    /// A ClientHello record: `exts` is the extension block (None: no
    /// extensions at all).
    fn hello_with(exts: Option<Vec<u8>>) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.push(32);
        body.extend_from_slice(&[9; 32]);
        body.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02]);
        body.extend_from_slice(&[1, 0]);
        if let Some(e) = exts {
            body.extend_from_slice(&(e.len() as u16).to_be_bytes());
            body.extend_from_slice(&e);
        }
        let mut hs = vec![CLIENT_HELLO];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        hs
    }

    fn sni_ext(name: &[u8]) -> Vec<u8> {
        let mut entry = vec![0];
        entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
        entry.extend_from_slice(name);
        let mut list = (entry.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&entry);
        let mut ext = vec![0, 0];
        ext.extend_from_slice(&(list.len() as u16).to_be_bytes());
        ext.extend_from_slice(&list);
        ext
    }

    fn with_name(name: &[u8]) -> Vec<u8> {
        // an extension before and after the name, as real clients send
        let mut exts = vec![0, 10, 0, 4, 0, 2, 0, 29];
        exts.extend_from_slice(&sni_ext(name));
        exts.extend_from_slice(&[0, 16, 0, 11, 0, 9, 8]);
        exts.extend_from_slice(b"http/1.1");
        hello_with(Some(exts))
    }

    /// The verdict for `wire` whole, and fed to a [`HelloScan`] split at
    /// every byte position: every way must agree.
    fn verdict(wire: &[u8]) -> Hello {
        let whole = server_name(wire);
        for cut in 0..=wire.len() {
            let mut scan = HelloScan::default();
            let (a, b) = wire.split_at(cut);
            let first = scan.feed(a);
            let v = if first == Hello::NeedMore {
                scan.feed(b)
            } else {
                first
            };
            assert_eq!(v, whole, "split at {cut}");
        }
        let mut scan = HelloScan::default();
        let mut v = Hello::NeedMore;
        for b in wire.chunks(1) {
            v = scan.feed(b);
            // Nothing kept but the name's extension.
            assert!(scan.sni.capacity() <= MAX_SNI_EXTENSION);
        }
        assert_eq!(v, whole, "byte by byte");
        whole
    }

    #[test]
    fn name_in_one_record() {
        let wire = records(&with_name(b"Example.COM"), 16384);
        assert_eq!(verdict(&wire), Hello::Name(Some("example.com".into())));
    }

    #[test]
    fn name_across_records() {
        let hs = with_name(b"a.example.net");
        for max in [1, 7, 40, 100] {
            let wire = records(&hs, max);
            assert_eq!(
                verdict(&wire),
                Hello::Name(Some("a.example.net".into())),
                "{max}"
            );
        }
    }

    #[test]
    fn bytes_after_the_hello_are_ignored() {
        let mut wire = records(&with_name(b"localhost"), 16384);
        wire.extend_from_slice(&[20, 3, 3, 0, 1, 1, 23, 3, 3]);
        assert_eq!(verdict(&wire), Hello::Name(Some("localhost".into())));
    }

    #[test]
    fn trailing_dot_dropped() {
        let wire = records(&with_name(b"localhost."), 16384);
        assert_eq!(server_name(&wire), Hello::Name(Some("localhost".into())));
    }

    #[test]
    fn no_name() {
        assert_eq!(
            verdict(&records(&hello_with(None), 16384)),
            Hello::Name(None)
        );
        let no_sni = hello_with(Some(vec![0, 10, 0, 4, 0, 2, 0, 29]));
        assert_eq!(verdict(&records(&no_sni, 16384)), Hello::Name(None));
        // an IP literal is not a DNS name (RFC 6066 §3)
        let ip = records(&with_name(b"127.0.0.1"), 16384);
        assert_eq!(verdict(&ip), Hello::Name(None));
        // bytes that are no name are the session's to refuse
        // (illegal_parameter, whatever tls_unknown_sni says)
        for junk in [&b"a b"[..], b"a..test", b"-a.test", b"a.test.."] {
            let wire = records(&with_name(junk), 16384);
            assert_eq!(verdict(&wire), Hello::Invalid, "{junk:?}");
        }
    }

    #[test]
    fn a_name_extension_too_long_for_one_name_gives_none() {
        let long = vec![b'a'; MAX_SNI_EXTENSION];
        let wire = records(&with_name(&long), 100);
        assert_eq!(verdict(&wire), Hello::Name(None));
    }

    #[test]
    fn a_large_hello_in_small_records_keeps_nothing_of_it() {
        // 3 KB of ALPN names before the name, in records of 7 bytes.
        let mut exts = vec![0, 16];
        let names: Vec<u8> = (0..3000).map(|i| b'a' + (i % 26) as u8).collect();
        exts.extend_from_slice(&((names.len() + 2) as u16).to_be_bytes());
        exts.extend_from_slice(&(names.len() as u16).to_be_bytes());
        exts.extend_from_slice(&names);
        exts.extend_from_slice(&sni_ext(b"big.example"));
        let wire = records(&hello_with(Some(exts)), 7);
        assert_eq!(verdict(&wire), Hello::Name(Some("big.example".into())));
        // A HelloScan is a few words; it holds no copy of the hello.
        assert!(std::mem::size_of::<HelloScan>() <= 160);
    }

    #[test]
    fn not_a_hello() {
        assert_eq!(server_name(b"GET / HTTP/1.1\r\n"), Hello::Invalid);
        assert_eq!(
            server_name(&[23, 3, 3, 0, 5, 1, 2, 3, 4, 5]),
            Hello::Invalid
        );
        // a handshake record whose message is a ServerHello
        assert_eq!(server_name(&records(&[2, 0, 0, 1, 0], 100)), Hello::Invalid);
        // a hello whose extension block overruns it
        let mut bad = with_name(b"localhost");
        let n = bad.len();
        bad.truncate(n - 3);
        let len = (bad.len() - 4) as u32;
        bad[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
        assert_eq!(verdict(&records(&bad, 16384)), Hello::Invalid);
    }

    #[test]
    fn need_more() {
        let wire = records(&with_name(b"localhost"), 50);
        assert_eq!(server_name(&wire[..wire.len() - 1]), Hello::NeedMore);
        assert_eq!(server_name(&[]), Hello::NeedMore);
        assert_eq!(server_name(&[22, 3]), Hello::NeedMore);
    }
}

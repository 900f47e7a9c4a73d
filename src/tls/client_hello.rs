//! The server name a ClientHello asks for (RFC 6066 §3), read from the
//! bytes a client sends first, before the session acts on them: the
//! access record's `sni` and, under `tls_unknown_sni = "reject"`, the
//! look that answers `unrecognized_name` (`conn/transport/tls.rs`).
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

/// Largest ClientHello looked at (rustls' own handshake message cap).
const MAX_HELLO: usize = 0xffff;

/// What the bytes so far say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// The ClientHello is not whole yet.
    NeedMore,
    /// A whole ClientHello: the name it asks for (`None`: no SNI, or one
    /// that is no DNS name).
    Name(Option<String>),
    /// Not a ClientHello in TLS records (the session refuses it itself).
    Invalid,
}

/// The server name of the ClientHello at the start of `bytes` (raw
/// records, as read from the socket).
pub fn server_name(bytes: &[u8]) -> Hello {
    // The common case: the whole hello in the first record, read in place.
    match first_record_hello(bytes) {
        Some(Ok(body)) => return parse_hello(body),
        Some(Err(h)) => return h,
        None => {}
    }
    // The hello spans records: their fragments, joined.
    let mut joined = Vec::new();
    let mut at = 0;
    loop {
        let Some(header) = bytes.get(at..at + RECORD_HEADER) else {
            return Hello::NeedMore;
        };
        let (Some(&typ), Some(&hi), Some(&lo)) = (header.first(), header.get(3), header.get(4))
        else {
            return Hello::NeedMore;
        };
        let len = usize::from(hi) << 8 | usize::from(lo);
        if typ != HANDSHAKE_RECORD || len == 0 || len > MAX_FRAGMENT {
            return Hello::Invalid;
        }
        let Some(fragment) = bytes.get(at + RECORD_HEADER..at + RECORD_HEADER + len) else {
            return Hello::NeedMore;
        };
        joined.extend_from_slice(fragment);
        at += RECORD_HEADER + len;
        match message(&joined) {
            Some(Ok(body)) => return parse_hello(body),
            Some(Err(h)) => return h,
            None => {}
        }
    }
}

/// The hello's body if the first record holds all of it; `Err` for a
/// verdict already reached (not a handshake, more bytes needed for the
/// first record itself); `None` if it continues in a later record.
fn first_record_hello(bytes: &[u8]) -> Option<Result<&[u8], Hello>> {
    let Some(header) = bytes.get(..RECORD_HEADER) else {
        return match bytes.first() {
            Some(&t) if t != HANDSHAKE_RECORD => Some(Err(Hello::Invalid)),
            _ => Some(Err(Hello::NeedMore)),
        };
    };
    let (Some(&typ), Some(&hi), Some(&lo)) = (header.first(), header.get(3), header.get(4)) else {
        return Some(Err(Hello::NeedMore));
    };
    let len = usize::from(hi) << 8 | usize::from(lo);
    if typ != HANDSHAKE_RECORD || len == 0 || len > MAX_FRAGMENT {
        return Some(Err(Hello::Invalid));
    }
    let Some(fragment) = bytes.get(RECORD_HEADER..RECORD_HEADER + len) else {
        // The first record is not whole: its own header says whether the
        // hello fits it.
        return Some(Err(Hello::NeedMore));
    };
    message(fragment)
}

/// The ClientHello's body from the handshake bytes `hs` (joined
/// fragments): `None` if more are needed.
fn message(hs: &[u8]) -> Option<Result<&[u8], Hello>> {
    let (Some(&typ), Some(len)) = (hs.first(), hs.get(1..4)) else {
        return None;
    };
    if typ != CLIENT_HELLO {
        return Some(Err(Hello::Invalid));
    }
    let len = len.iter().fold(0usize, |n, &b| n << 8 | usize::from(b));
    if len > MAX_HELLO {
        return Some(Err(Hello::Invalid));
    }
    hs.get(4..4 + len).map(Ok)
}

/// A cursor over a whole ClientHello body; every read is bounds-checked.
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

    /// A vector with a `len_bytes`-byte length prefix.
    fn vec(&mut self, len_bytes: usize) -> Option<&'a [u8]> {
        let n = if len_bytes == 1 {
            self.u8()?
        } else {
            self.u16()?
        };
        self.take(n)
    }
}

fn parse_hello(body: &[u8]) -> Hello {
    match sni_of(body) {
        Some(name) => Hello::Name(name),
        None => Hello::Invalid,
    }
}

/// `None` for a malformed hello; `Some(None)` for one without a usable
/// name.
fn sni_of(body: &[u8]) -> Option<Option<String>> {
    let mut c = Cursor { bytes: body };
    c.take(2 + 32)?; // legacy_version, random
    c.vec(1)?; // legacy_session_id
    c.vec(2)?; // cipher_suites
    c.vec(1)?; // legacy_compression_methods
    if c.bytes.is_empty() {
        return Some(None); // no extensions at all
    }
    let mut exts = Cursor { bytes: c.vec(2)? };
    while !exts.bytes.is_empty() {
        let typ = exts.u16()?;
        let data = exts.vec(2)?;
        if typ != 0 {
            continue;
        }
        let mut list = Cursor {
            bytes: Cursor { bytes: data }.vec(2)?,
        };
        while !list.bytes.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec(2)?;
            if name_type == 0 {
                return Some(dns_name(name));
            }
        }
        return Some(None);
    }
    Some(None)
}

/// A `host_name` as rustls keeps it: a valid DNS name, lower case, no
/// trailing dot; `None` otherwise (an IP literal, bytes that are no name).
fn dns_name(raw: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(raw).ok()?;
    let s = s.strip_suffix('.').unwrap_or(s);
    rustls::pki_types::DnsName::try_from(s).ok()?;
    Some(s.to_ascii_lowercase())
}

/// [`server_name`] over bytes that arrive in pieces: each piece is looked
/// at as it comes (the session may rewrite its copy in place once it
/// processed it), and kept only while the hello is not whole.
#[derive(Debug, Default)]
pub struct HelloScan {
    kept: Vec<u8>,
}

impl HelloScan {
    /// The verdict once `fresh`, the next bytes the client sent, is added.
    pub fn feed(&mut self, fresh: &[u8]) -> Hello {
        if self.kept.is_empty() {
            let h = server_name(fresh);
            if h == Hello::NeedMore {
                self.kept.extend_from_slice(fresh);
            }
            return h;
        }
        if self.kept.len() + fresh.len() > MAX_HELLO + 8 * RECORD_HEADER {
            return Hello::Invalid;
        }
        self.kept.extend_from_slice(fresh);
        server_name(&self.kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Handshake bytes in records of at most `max` bytes each.
    fn records(hs: &[u8], max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for part in hs.chunks(max) {
            out.extend_from_slice(&[HANDSHAKE_RECORD, 3, 1]);
            out.extend_from_slice(&(part.len() as u16).to_be_bytes());
            out.extend_from_slice(part);
        }
        out
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
        let junk = records(&with_name(b"a b"), 16384);
        assert_eq!(verdict(&junk), Hello::Name(None));
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

//! Heap bytes one idle TLS server session holds (docs/tls.md, "Memory and
//! syscalls"; issue 23's T5): N sessions, each after a full handshake and
//! one request and response, kept while their clients are dropped; the
//! live heap before and after, divided by N. A counting global allocator,
//! no sockets.
//!
//!     cargo run --release --example tls_session_mem -- [N]
//!
//! Rows: rustls' buffered `ServerConnection` as it stands after the
//! exchange (its deframer keeps a 4 KiB `Vec` from the first read on), and
//! the unbuffered `UnbufferedServerConnection` whose record storages are
//! the caller's (given back when the connection waits: what sluice's
//! transport does at park). TLS 1.3 and 1.2, ECDSA P-256, X25519.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Live heap bytes (requested sizes, not the allocator's rounding).
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const REQUEST: &[u8] = b"GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn response() -> Vec<u8> {
    let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n".to_vec();
    r.resize(r.len() + 1024, b'x');
    r
}

/// Client → server bytes, and back, until neither has anything to send.
fn pump_buffered(c: &mut ClientConnection, s: &mut ServerConnection) -> Res<()> {
    let mut buf = Vec::new();
    for _ in 0..100 {
        buf.clear();
        while c.wants_write() {
            c.write_tls(&mut buf)?;
        }
        let moved = !buf.is_empty();
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd)?;
            s.process_new_packets()?;
        }
        buf.clear();
        while s.wants_write() {
            s.write_tls(&mut buf)?;
        }
        let back = !buf.is_empty();
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd)?;
            c.process_new_packets()?;
        }
        if !moved && !back {
            return Ok(());
        }
    }
    Err("pump did not settle".into())
}

fn exchange_buffered(cc: &Arc<ClientConfig>, sc: &Arc<ServerConfig>) -> Res<ServerConnection> {
    let mut c = ClientConnection::new(cc.clone(), ServerName::try_from("localhost")?)?;
    let mut s = ServerConnection::new(sc.clone())?;
    pump_buffered(&mut c, &mut s)?;
    c.writer().write_all(REQUEST)?;
    pump_buffered(&mut c, &mut s)?;
    let mut got = vec![0u8; 4096];
    let n = s.reader().read(&mut got)?;
    if n != REQUEST.len() {
        return Err("request not whole".into());
    }
    s.writer().write_all(&response())?;
    pump_buffered(&mut c, &mut s)?;
    Ok(s)
}

/// The unbuffered server side of one exchange: `incoming` and `outgoing`
/// are the caller's storages (dropped at the end, as a pool takes them
/// back).
fn exchange_unbuffered(
    cc: &Arc<ClientConfig>,
    sc: &Arc<ServerConfig>,
) -> Res<UnbufferedServerConnection> {
    let mut c = ClientConnection::new(cc.clone(), ServerName::try_from("localhost")?)?;
    let mut s = UnbufferedServerConnection::new(sc.clone())?;
    let mut incoming: Vec<u8> = Vec::new();
    let mut outgoing: Vec<u8> = Vec::new();
    let mut used_out = 0;
    let mut request = Vec::new();
    let mut answered = false;
    for _ in 0..200 {
        while c.wants_write() {
            c.write_tls(&mut incoming)?;
        }
        let mut progressed = false;
        loop {
            let st = s.process_tls_records(&mut incoming);
            let discard = st.discard;
            let mut stop = false;
            match st.state? {
                ConnectionState::ReadTraffic(mut r) => {
                    while let Some(rec) = r.next_record() {
                        request.extend_from_slice(rec?.payload);
                    }
                }
                ConnectionState::EncodeTlsData(mut e) => loop {
                    match e.encode(&mut outgoing[used_out..]) {
                        Ok(n) => {
                            used_out += n;
                            break;
                        }
                        Err(EncodeError::InsufficientSize(sz)) => {
                            outgoing.resize(used_out + sz.required_size, 0)
                        }
                        Err(e) => return Err(e.into()),
                    }
                },
                ConnectionState::TransmitTlsData(t) => {
                    let mut rd = &outgoing[..used_out];
                    while !rd.is_empty() {
                        c.read_tls(&mut rd)?;
                        c.process_new_packets()?;
                    }
                    used_out = 0;
                    t.done();
                    progressed = true;
                }
                ConnectionState::WriteTraffic(mut w) => {
                    if request.len() == REQUEST.len() && !answered {
                        let resp = response();
                        loop {
                            match w.encrypt(&resp, &mut outgoing[used_out..]) {
                                Ok(n) => {
                                    used_out += n;
                                    break;
                                }
                                Err(EncryptError::InsufficientSize(sz)) => {
                                    outgoing.resize(used_out + sz.required_size, 0)
                                }
                                Err(e) => return Err(e.into()),
                            }
                        }
                        let mut rd = &outgoing[..used_out];
                        while !rd.is_empty() {
                            c.read_tls(&mut rd)?;
                            c.process_new_packets()?;
                        }
                        used_out = 0;
                        answered = true;
                        progressed = true;
                    }
                    stop = true;
                }
                ConnectionState::BlockedHandshake => stop = true,
                _ => return Err("unexpected state".into()),
            }
            incoming.drain(..discard);
            if stop {
                break;
            }
        }
        if !s.is_handshaking() && request.is_empty() {
            c.writer().write_all(REQUEST)?;
            progressed = true;
        }
        if answered {
            let mut body = Vec::new();
            let _ = c.reader().read_to_end(&mut body);
            return Ok(s);
        }
        if !progressed && !c.wants_write() {
            return Err("unbuffered exchange stalled".into());
        }
    }
    Err("unbuffered exchange did not finish".into())
}

fn configs(
    version: &'static rustls::SupportedProtocolVersion,
) -> Res<(Arc<ClientConfig>, Arc<ServerConfig>)> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])?.self_signed(&key)?;
    let der = CertificateDer::from(cert.der().to_vec());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[version])?
        .with_no_client_auth()
        .with_single_cert(
            vec![der.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut roots = RootCertStore::empty();
    roots.add(der)?;
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    client.resumption = rustls::client::Resumption::disabled();
    Ok((Arc::new(client), Arc::new(server)))
}

fn main() -> Res<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1000);
    println!("| session (after one request) | TLS | heap bytes per idle session |");
    println!("|---|---|---|");
    for (name, version) in [
        ("1.3", &rustls::version::TLS13),
        ("1.2", &rustls::version::TLS12),
    ] {
        let (cc, sc) = configs(version)?;
        // one of each first: lazily made statics are not counted
        drop(exchange_buffered(&cc, &sc)?);
        drop(exchange_unbuffered(&cc, &sc)?);
        let before = live();
        let mut held = Vec::with_capacity(n);
        let base = live();
        for _ in 0..n {
            held.push(exchange_buffered(&cc, &sc)?);
        }
        let per = (live() - base) as f64 / n as f64;
        println!("| buffered `ServerConnection` | {name} | {per:.0} |");
        drop(held);
        let mut held = Vec::with_capacity(n);
        let base = live();
        for _ in 0..n {
            held.push(exchange_unbuffered(&cc, &sc)?);
        }
        let per = (live() - base) as f64 / n as f64;
        println!("| unbuffered, storages given back | {name} | {per:.0} |");
        drop(held);
        let _ = before;
    }
    Ok(())
}

//! The TLS transport over a real loopback socket, driven by hand (no
//! loop; every step sets the readiness an event would): an upload takes a
//! socket read per record (17 KiB), not one per 4 KiB as rustls' buffered
//! `read_tls` did; and a session between requests holds no record
//! storage (issue 23's T5).

use std::io::Write;
use std::net::{TcpListener, TcpStream as StdStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::buffer::WatermarkBuffer;
use crate::conn::io::{Io, Read1};
use crate::conn::transport::{Tls, Transport};
use crate::stats::Stats;

/// A server configuration with a fresh P-256 certificate for
/// `localhost`, and a TLS 1.3 client trusting it.
fn configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = rustls::pki_types::CertificateDer::from(cert.der().to_vec());
    let provider = crate::tls::provider();
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![der.clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// A socket that counts the bytes written to it.
struct Counted {
    sock: StdStream,
    written: Arc<AtomicUsize>,
}

impl std::io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(&mut self.sock, buf)
    }
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.sock.write(buf)?;
        self.written.fetch_add(n, Ordering::SeqCst);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.sock.flush()
    }
}

/// The server side: the accepted socket under a TLS transport.
struct Server {
    t: Transport,
    io: Io,
    stats: Stats,
    inbuf: WatermarkBuffer,
    sock: StdStream,
}

impl Server {
    /// Reads as a loop would on readiness until `want` plaintext bytes
    /// arrived (they are consumed), within 3 s.
    fn read(&mut self, want: usize) {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = 0;
        while got < want {
            assert!(Instant::now() < deadline, "{got} of {want} bytes came");
            self.io.readable = true;
            self.io.writable = true;
            let max = self.inbuf.room();
            match self
                .t
                .read_into(&mut self.io, &mut self.inbuf, max, &self.stats)
                .unwrap()
            {
                Read1::Data(n) => {
                    got += n;
                    self.inbuf.consume(n);
                }
                Read1::Idle => thread::sleep(Duration::from_millis(1)),
                Read1::Eof => panic!("EOF after {got} bytes"),
            }
        }
    }

    /// Bytes waiting in the socket's receive queue (`FIONREAD`).
    fn queued(&self) -> usize {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the valid pointer.
        unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&self.sock),
                libc::FIONREAD,
                &mut n,
            )
        };
        usize::try_from(n).unwrap_or(0)
    }
}

/// A connected pair: the server side in this thread, the client (a rustls
/// stream) in its own, which sends `head`, waits for a go, then `body`;
/// the count of bytes it has written so far.
fn pair(
    head: &'static [u8],
    body: Vec<u8>,
    chunk: usize,
) -> (
    Server,
    mpsc::Sender<()>,
    Arc<AtomicUsize>,
    thread::JoinHandle<()>,
) {
    let (server_cfg, client_cfg) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Room for the whole upload in the receive queue before any read.
    socket2::SockRef::from(&listener)
        .set_recv_buffer_size(1 << 20)
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let w = written.clone();
    let client = thread::spawn(move || {
        let sock = StdStream::connect(addr).unwrap();
        sock.set_nodelay(true).unwrap();
        let conn = rustls::ClientConnection::new(
            client_cfg,
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut s = rustls::StreamOwned::new(conn, Counted { sock, written: w });
        s.write_all(head).unwrap();
        s.flush().unwrap();
        if go_rx.recv_timeout(Duration::from_secs(5)).is_ok() {
            if chunk == usize::MAX {
                s.write_all(&body).unwrap();
            } else {
                // A record per `chunk` bytes, all sent in one write: many
                // small records reach one socket read.
                let mut out = Vec::new();
                for piece in body.chunks(chunk.max(1)) {
                    s.conn.writer().write_all(piece).unwrap();
                    while s.conn.wants_write() {
                        s.conn.write_tls(&mut out).unwrap();
                    }
                }
                s.sock.write_all(&out).unwrap();
            }
            s.flush().unwrap();
        }
        let _ = go_rx.recv_timeout(Duration::from_secs(5));
    });
    let (sock, _) = listener.accept().unwrap();
    sock.set_nonblocking(true).unwrap();
    let stream = mio::net::TcpStream::from_std(sock.try_clone().unwrap());
    let conn = rustls::server::UnbufferedServerConnection::new(server_cfg).unwrap();
    let server = Server {
        t: Transport::tls(
            stream,
            Tls::server(
                conn,
                None,
                crate::tls::handshake_gate::HandshakeGate::new(false),
            ),
        ),
        io: Io::default(),
        stats: Stats::default(),
        inbuf: WatermarkBuffer::new(vec![0; 1 << 20], 1 << 20, 1 << 19),
        sock,
    };
    (server, go_tx, written, client)
}

const HEAD: &[u8] = b"POST /up HTTP/1.1\r\nHost: localhost\r\nContent-Length: 98304\r\n\r\n";

#[test]
fn an_upload_takes_a_socket_read_per_record() {
    let body = vec![b'u'; 96 * 1024];
    let (mut s, go, _, client) = pair(HEAD, body, usize::MAX);
    s.read(HEAD.len());
    assert!(!s.t.is_handshaking());
    // The whole upload (six 16 KiB records) in the receive queue first:
    // more than 96 KiB queued is all six (five are 82,030 bytes). Not
    // compared with `written`: the client thread may count the head's
    // record (83 bytes, read already) only after `before` was taken.
    go.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && s.queued() <= 96 * 1024 {
        thread::sleep(Duration::from_millis(2));
    }
    let sent = s.queued();
    assert!(sent > 96 * 1024, "only {sent} bytes of the upload queued");
    let reads = s.stats.snapshot().socket_reads;
    s.read(96 * 1024);
    let reads = s.stats.snapshot().socket_reads - reads;
    // 6 records of 16,406 bytes: 6 reads of a 17 KiB storage (rustls'
    // own `read_tls` took 4 KiB a read: 25).
    assert!(
        reads <= 7,
        "{reads} socket reads for {sent} bytes of records"
    );
    let _ = go.send(());
    client.join().unwrap();
}

#[test]
fn a_session_between_requests_holds_no_record_storage() {
    let (mut s, go, _, client) = pair(
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /2 HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
        usize::MAX,
    );
    s.read(35);
    // the response: encrypted, written, gone
    let mut out = WatermarkBuffer::new(vec![0; 4096], 4096, 1024);
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    s.io.writable = true;
    let n =
        s.t.write_from(&mut s.io, &mut out, false, &s.stats)
            .unwrap();
    assert_eq!(n, 38);
    assert!(!s.t.wants_write());
    assert_eq!(s.t.tls_held(), 0, "nothing in flight, no storage held");
    go.send(()).unwrap();
    s.read(36);
    assert_eq!(s.t.tls_held(), 0);
    let _ = go.send(());
    client.join().unwrap();
}

/// Records read into a head buffer (which starts at 1 KiB and grows by
/// steps, so it may take less than its room says) come out in order: the
/// part of a record the buffer could not take waits, and a later record's
/// bytes never pass it (h2spec 6.10/1 over TLS saw a frame header read from
/// the middle of a block before the fix).
#[test]
fn records_read_into_a_growing_head_buffer_stay_in_order() {
    let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let (mut s, go, _written, client) = pair(HEAD, body.clone(), 3000);
    s.read(HEAD.len());
    go.send(()).unwrap();
    let stats = std::sync::Arc::new(Stats::default());
    let mut head = crate::buffer::BufferPool::new(16 * 1024, 4, stats).head(64 * 1024);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < body.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} bytes came",
            got.len(),
            body.len()
        );
        s.io.readable = true;
        let max = head.room();
        match s.t.read_into(&mut s.io, &mut head, max, &s.stats).unwrap() {
            Read1::Data(n) => {
                got.extend_from_slice(head.as_slice());
                head.consume(head.pending());
                assert!(n > 0);
            }
            Read1::Idle => thread::sleep(Duration::from_millis(1)),
            Read1::Eof => panic!("EOF after {} bytes", got.len()),
        }
    }
    assert!(
        got == body,
        "bytes out of order or lost ({} bytes)",
        got.len()
    );
    drop(go);
    client.join().unwrap();
}

//! The server side of the TLS transport (issue 23's fuzz item):
//! arbitrary bytes, cut into chunks the input chooses, reach a TLS
//! listener's transport over a loopback socket as a client's would
//! (ClientHello fragments, records split anywhere, plain HTTP, junk, a
//! FIN at the end). Invariants: no panic; a session ends `Open`, `Eof`
//! or with an error, never hangs; one handshake is counted at most; the
//! heap a session holds at its peak stays under `HEAP_BOUND`.
//!
//! Input: byte 0 = flags (bit 0: the `reject` listener; bit 1: a FIN after
//! the data; bits 2..8: the cut: 0 whole, 1 byte by byte, n: pieces of 1
//! to 16·n bytes), byte 1 = the cut's seed, then the bytes.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use sluice::fuzz_api::{End, ServerFeed};
use sluice::{CertificateSpec, Config, UnknownSni};

/// Most heap bytes one session may hold at its peak, above what was live
/// before it started: the session's fixed state (rustls' and the
/// transport's, a few KB), the record storages (17 KiB each, from the
/// thread's free list once the first sessions gave them back), the
/// client's handshake records (at most 8 KiB: `tls::handshake_gate`) and
/// what rustls makes of a hello it answers (its flight, its keys).
/// Before that bound rustls kept a handshake message of up to 64 KiB
/// whole and 40 bytes per message of a record it took apart: this
/// target found 317 KB.
const HEAP_BOUND: usize = 96 * 1024;

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The largest session peak seen in this run (logged when it grows).
static MOST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` unchanged; only counters are
// added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A test certificate (made here; no key is checked in) and the two
/// listeners: `default` and `reject` for unknown names.
fn feeds() -> &'static [ServerFeed; 2] {
    static FEEDS: OnceLock<[ServerFeed; 2]> = OnceLock::new();
    FEEDS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("sluice-fuzz-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.example.com".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        let config = |unknown_sni| Config {
            listen_tls: vec!["127.0.0.1:0".parse().unwrap()],
            certificate: vec![CertificateSpec::new(dir.join("cert.pem"), dir.join("key.pem"))],
            tls_unknown_sni: unknown_sni,
            ..Config::default()
        };
        [
            ServerFeed::new(&config(UnknownSni::Default)).unwrap(),
            ServerFeed::new(&config(UnknownSni::Reject)).unwrap(),
        ]
    })
}

/// `data` cut as `style` and `seed` say.
fn cut(data: &[u8], style: u8, mut seed: u64) -> Vec<&[u8]> {
    match style {
        0 => vec![data],
        1 => data.chunks(1).collect(),
        n => {
            let most = 16 * usize::from(n);
            let mut out = Vec::new();
            let mut rest = data;
            while !rest.is_empty() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (1 + (seed >> 33) as usize % most).min(rest.len());
                let (a, b) = rest.split_at(len);
                out.push(a);
                rest = b;
            }
            out
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let [flags, seed, data @ ..] = input else {
        return;
    };
    let feed = &feeds()[usize::from(flags & 1)];
    let chunks = cut(data, flags >> 2, u64::from(*seed));
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut session = feed.session().expect("a loopback session");
    for c in &chunks {
        session.push(c);
    }
    if flags & 2 != 0 {
        session.close_write();
        assert_ne!(session.end(), End::Open, "a FIN is an end");
    }
    let _ = session.is_handshaking();
    let _ = session.plaintext().len();
    let (done, failed) = session.handshakes();
    assert!(done + failed <= 1, "one handshake per session: {done} {failed}");
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    drop(session);
    if peak > MOST.fetch_max(peak, Ordering::Relaxed) {
        eprintln!("tls_server: a session's heap peak {peak} bytes (input {} bytes)", input.len());
    }
    assert!(
        peak <= HEAP_BOUND,
        "a session held {peak} bytes of heap at its peak (bound {HEAP_BOUND})"
    );
});

//! The measurement that chose sluice's rustls crypto provider (README,
//! "Dependencies"): in-memory handshakes and bulk transfer, client and
//! server connections pumping records to each other through byte buffers,
//! once with `ring` and once with `aws-lc-rs`. An ECDSA P-256 certificate,
//! X25519 key exchange for both providers (the group most clients offer
//! first).
//!
//!     cargo run --release --features provider-bench --example tls_provider_bench -- [HANDSHAKES] [MIB]
//!
//! Prints, per provider and scenario, CPU µs per handshake (the server's
//! share, which is what the proxy pays, and both sides together) and the
//! bulk rate in MiB/s of CPU time (client encrypt + server decrypt).

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// CPU time of this thread, in nanoseconds.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU nanoseconds spent on each side.
#[derive(Default)]
struct Cpu {
    server: u64,
    client: u64,
}

/// Moves every pending record from client to server and back until neither
/// has anything to send; time is charged to the side doing the work.
fn pump(c: &mut ClientConnection, s: &mut ServerConnection, cpu: &mut Cpu) -> Res<()> {
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        let t = cpu_ns();
        buf.clear();
        while c.wants_write() {
            c.write_tls(&mut buf)?;
        }
        cpu.client += cpu_ns() - t;
        if !buf.is_empty() {
            moved = true;
            let t = cpu_ns();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd)?;
                s.process_new_packets()?;
            }
            buf.clear();
            while s.wants_write() {
                s.write_tls(&mut buf)?;
            }
            cpu.server += cpu_ns() - t;
        }
        if !buf.is_empty() {
            moved = true;
            let t = cpu_ns();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd)?;
                c.process_new_packets()?;
            }
            cpu.client += cpu_ns() - t;
        }
        if !moved {
            return Ok(());
        }
    }
}

struct Setup {
    server: Arc<ServerConfig>,
    root: RootCertStore,
    provider: Arc<CryptoProvider>,
}

/// Makes a provider and its own ticketer.
type Make = (
    fn() -> CryptoProvider,
    fn() -> Result<Arc<dyn rustls::server::ProducesTickets>, rustls::Error>,
);

fn setup(make: Make, cert: &CertificateDer<'static>, key: &[u8]) -> Res<Setup> {
    let provider = make.0();
    let mut provider = provider;
    provider
        .kx_groups
        .retain(|g| g.name() == rustls::NamedGroup::X25519);
    let provider = Arc::new(provider);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.to_vec()));
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)?;
    server.ticketer = make.1()?;
    let mut root = RootCertStore::empty();
    root.add(cert.clone())?;
    Ok(Setup {
        server: Arc::new(server),
        root,
        provider,
    })
}

fn client_config(
    s: &Setup,
    version: &'static rustls::SupportedProtocolVersion,
    resume: bool,
) -> Res<Arc<ClientConfig>> {
    let mut c = ClientConfig::builder_with_provider(s.provider.clone())
        .with_protocol_versions(&[version])?
        .with_root_certificates(s.root.clone())
        .with_no_client_auth();
    if !resume {
        c.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(c))
}

/// `n` handshakes; with `resume`, one full handshake first, not counted.
fn handshakes(s: &Setup, cc: &Arc<ClientConfig>, n: u32, resume: bool) -> Res<(f64, f64, u32)> {
    let name = ServerName::try_from("bench.example")?;
    let mut cpu = Cpu::default();
    let mut resumed = 0;
    let rounds = if resume { n + 1 } else { n };
    for i in 0..rounds {
        let mut before = Cpu::default();
        std::mem::swap(&mut before, &mut cpu);
        let mut c = ClientConnection::new(cc.clone(), name.clone())?;
        let mut sv = ServerConnection::new(s.server.clone())?;
        pump(&mut c, &mut sv, &mut cpu)?;
        if c.is_handshaking() || sv.is_handshaking() {
            return Err("handshake did not finish".into());
        }
        if sv.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            resumed += 1;
        }
        if resume && i == 0 {
            cpu = before;
        } else {
            cpu.server += before.server;
            cpu.client += before.client;
        }
    }
    let us = |ns: u64| ns as f64 / 1000.0 / f64::from(n);
    Ok((us(cpu.server), us(cpu.server + cpu.client), resumed))
}

/// `mib` MiB from client to server in 16 KiB writes; MiB per CPU second.
fn bulk(s: &Setup, mib: usize) -> Res<f64> {
    let cc = client_config(s, &rustls::version::TLS13, false)?;
    let mut c = ClientConnection::new(cc, ServerName::try_from("bench.example")?)?;
    let mut sv = ServerConnection::new(s.server.clone())?;
    let mut cpu = Cpu::default();
    pump(&mut c, &mut sv, &mut cpu)?;
    let chunk = vec![0x5a_u8; 16 * 1024];
    let mut out = vec![0_u8; 64 * 1024];
    let mut tls = Vec::with_capacity(64 * 1024);
    let mut got = 0_usize;
    let total = mib * 1024 * 1024;
    let t = cpu_ns();
    for _ in 0..total / chunk.len() {
        c.writer().write_all(&chunk)?;
        tls.clear();
        while c.wants_write() {
            c.write_tls(&mut tls)?;
        }
        let mut rd = &tls[..];
        while !rd.is_empty() {
            sv.read_tls(&mut rd)?;
            sv.process_new_packets()?;
            loop {
                match sv.reader().read(&mut out) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    let secs = (cpu_ns() - t) as f64 / 1e9;
    if got != total {
        return Err(format!("bulk: {got} of {total} bytes arrived").into());
    }
    Ok(mib as f64 / secs)
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(2000), |a| a.parse())?;
    let mib: usize = args.next().map_or(Ok(100), |a| a.parse())?;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let cert = rcgen::CertificateParams::new(vec!["bench.example".into()])?.self_signed(&key)?;
    let cert = cert.der().clone();
    let key = key.serialize_der();
    println!("{n} handshakes per scenario, {mib} MiB bulk; ECDSA P-256, X25519");
    println!(
        "{:<10} {:<18} {:>12} {:>12} {:>8}",
        "provider", "scenario", "server µs", "both µs", "resumed"
    );
    let providers: [(&str, Make); 2] = [
        (
            "ring",
            (
                rustls::crypto::ring::default_provider,
                rustls::crypto::ring::Ticketer::new,
            ),
        ),
        (
            "aws-lc-rs",
            (
                rustls::crypto::aws_lc_rs::default_provider,
                rustls::crypto::aws_lc_rs::Ticketer::new,
            ),
        ),
    ];
    for (pname, make) in providers {
        let s = setup(make, &cert, &key)?;
        let scenarios = [
            ("TLS 1.3 full", &rustls::version::TLS13, false),
            ("TLS 1.3 resumed", &rustls::version::TLS13, true),
            ("TLS 1.2 full", &rustls::version::TLS12, false),
        ];
        for (sname, version, resume) in scenarios {
            let cc = client_config(&s, version, resume)?;
            let (server, both, resumed) = handshakes(&s, &cc, n, resume)?;
            println!("{pname:<10} {sname:<18} {server:>12.1} {both:>12.1} {resumed:>8}");
        }
        let rate = bulk(&s, mib)?;
        println!("{pname:<10} {:<18} {rate:>12.0} MiB/s", "bulk TLS 1.3");
    }
    Ok(())
}

//! The server side's certificate choice by SNI (RFC 6066 §3): which of the
//! loaded certificates answers a ClientHello, as a rustls
//! `ResolvesServerCert`.
//!
//! Rules:
//! - each certificate serves the DNS names of its subjectAltName; when two
//!   certificates name the same DNS name, the first one listed serves it;
//! - an exact name beats a wildcard; `*.example.net` matches exactly one
//!   label in its place (`a.example.net`, not `example.net` nor
//!   `a.b.example.net`), and only a whole left-most label `*` is a
//!   wildcard (RFC 6125 §6.4.3; `f*.example.net` serves nothing);
//! - matching ignores ASCII case and one trailing dot (RFC 6066 §3 sends
//!   the name without it, but clients differ);
//! - no SNI, or a name no certificate covers: the first certificate, or
//!   with [`UnknownSni::Reject`] none.
//!
//! Refusing a name: when the resolver returns no certificate, rustls 0.23
//! ends the handshake with the alert `access_denied` (server/hs.rs), not
//! `unrecognized_name`. The transport therefore decides first, reading
//! the ClientHello's name itself before the session acts on the hello
//! (`client_hello.rs`): [`CertStore::covers`] says whether that name is
//! served, and [`UNRECOGNIZED_NAME_ALERT`] is the record to write before
//! closing (RFC 8446 §6.2, RFC 6066 §3). The resolver's `None` stays as
//! the fallback for a caller that skips that step.
//!
//! What it must not know: sockets, the loop, files (certificates come
//! loaded).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::certs::LoadedCert;
use crate::config::UnknownSni;

/// A fatal `unrecognized_name` alert (112) as one plaintext TLS record:
/// content type alert (21), legacy record version 0x0303, length 2, level
/// fatal (2), description (RFC 8446 §5.1, §6; RFC 6066 §3).
pub const UNRECOGNIZED_NAME_ALERT: [u8; 7] = [21, 3, 3, 0, 2, 2, 112];

/// The loaded certificates, indexed by the DNS names they serve.
#[derive(Debug)]
pub struct CertStore {
    /// In the order configured; the first is the default.
    certs: Vec<LoadedCert>,
    /// Exact name (lower case, no trailing dot) → index into `certs`.
    exact: FxHashMap<String, usize>,
    /// A wildcard's suffix (`example.net` for `*.example.net`) → index.
    wildcard: FxHashMap<String, usize>,
    /// What an unknown or absent name gets.
    unknown: UnknownSni,
}

impl CertStore {
    /// Indexes `certs` by their SAN DNS names.
    pub fn new(certs: Vec<LoadedCert>, unknown: UnknownSni) -> CertStore {
        let mut exact = FxHashMap::default();
        let mut wildcard = FxHashMap::default();
        for (i, c) in certs.iter().enumerate() {
            for name in &c.names {
                let name = normalize(name);
                match name.strip_prefix("*.") {
                    Some(suffix) if !suffix.is_empty() && !suffix.contains('*') => {
                        wildcard.entry(suffix.to_string()).or_insert(i);
                    }
                    Some(_) => {}
                    None if !name.contains('*') => {
                        exact.entry(name).or_insert(i);
                    }
                    None => {}
                }
            }
        }
        CertStore {
            certs,
            exact,
            wildcard,
            unknown,
        }
    }

    /// The certificates, in the order configured.
    pub fn certs(&self) -> &[LoadedCert] {
        &self.certs
    }

    /// The index of the certificate whose SAN covers `name` (any case, one
    /// trailing dot allowed), by the rules of the module doc; `None` when
    /// none does.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        let name = normalize(name);
        if let Some(&i) = self.exact.get(&name) {
            return Some(i);
        }
        let (label, suffix) = name.split_once('.')?;
        if label.is_empty() || suffix.is_empty() {
            return None;
        }
        self.wildcard.get(suffix).copied()
    }

    /// Whether a ClientHello naming `sni` (or none) gets a certificate:
    /// false only with [`UnknownSni::Reject`] for an absent or uncovered
    /// name, or when no certificate is loaded.
    pub fn covers(&self, sni: Option<&str>) -> bool {
        self.choose(sni).is_some()
    }

    /// Whether some ClientHello gets no certificate
    /// (`tls_unknown_sni = "reject"`), so that the transport must look at
    /// the name first ([`UNRECOGNIZED_NAME_ALERT`]).
    pub fn rejects_unknown(&self) -> bool {
        self.unknown == UnknownSni::Reject
    }

    /// The certificate a ClientHello naming `sni` gets.
    fn choose(&self, sni: Option<&str>) -> Option<&LoadedCert> {
        let found = sni.and_then(|n| self.lookup(n));
        let index = match (found, self.unknown) {
            (Some(i), _) => i,
            (None, UnknownSni::Default) => 0,
            (None, UnknownSni::Reject) => return None,
        };
        self.certs.get(index)
    }
}

/// Lower case, without one trailing dot.
fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.choose(hello.server_name()).map(|c| c.key.clone())
    }
}

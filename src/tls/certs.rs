//! The certificate store's entries: a PEM certificate chain and its private
//! key read from files, checked to belong together, with the facts the
//! proxy needs about the leaf (its subjectAltName DNS names, its
//! not-after) and the expiry warning derived from them.
//!
//! Keys: PKCS#8, PKCS#1 (RSA) or SEC1 (EC), whichever the PEM block says;
//! ECDSA P-256/P-384, RSA and Ed25519 (what the crypto provider signs
//! with). A chain is the leaf first, then its intermediates (certbot's
//! `fullchain.pem`), RFC 8446 §4.4.2.
//!
//! What it must not know: sockets, the loop, SNI (`sni.rs` uses the
//! names), where the paths came from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::TlsError;

/// A certificate expiring within this many seconds (14 days) is warned
/// about at start, at reload and in `/status` (certbot renews at 30 days
/// left, so a certificate this close to its end means renewal failed).
pub const EXPIRY_WARNING_SECS: i64 = 14 * 24 * 3600;

/// One certificate chain and its key, loaded and checked.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    /// The chain and its signing key, as rustls serves them.
    pub key: Arc<CertifiedKey>,
    /// The leaf's subjectAltName DNS names as written there (wildcards
    /// such as `*.example.net` included), in lower case (RFC 6125 §6.4.1:
    /// DNS names compare without regard to case).
    pub names: Vec<String>,
    /// The leaf's notAfter, seconds since the Unix epoch (RFC 5280
    /// §4.1.2.5).
    pub not_after: i64,
    /// The notAfter as text, for messages (`Jan  1 00:00:00 2027 +00:00`).
    pub not_after_text: String,
    /// The chain's file.
    pub cert_file: PathBuf,
    /// The key's file.
    pub key_file: PathBuf,
}

impl LoadedCert {
    /// Reads the chain in `cert_file` and the key in `key_file`.
    ///
    /// Errors, each naming the file: unreadable; no PEM certificate in it
    /// (an empty chain); a block that is not valid PEM or DER; no private
    /// key in it, or one of a kind the provider cannot sign with; a key
    /// that does not match the leaf certificate's public key (rustls
    /// `CertifiedKey::keys_match`).
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<LoadedCert, TlsError> {
        let chain = read_chain(cert_file)?;
        let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
            let why = match &e {
                rustls::pki_types::pem::Error::Io(_) => None,
                _ => not_a_plain_key(key_file),
            };
            TlsError::in_file(
                key_file,
                format!(
                    "no usable private key: {}",
                    why.unwrap_or_else(|| pem_reason(&e))
                ),
            )
        })?;
        let provider = super::provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::in_file(key_file, format!("unusable private key: {e}")))?;
        let certified = CertifiedKey::new(chain, signing);
        certified.keys_match().map_err(|e| {
            TlsError::in_file(
                key_file,
                format!(
                    "the key does not match the certificate in {} ({e})",
                    cert_file.display()
                ),
            )
        })?;
        let leaf = certified
            .end_entity_cert()
            .map_err(|e| TlsError::in_file(cert_file, format!("no leaf certificate: {e}")))?;
        let facts = leaf_facts(leaf).map_err(|r| TlsError::in_file(cert_file, r))?;
        Ok(LoadedCert {
            key: Arc::new(certified),
            names: facts.names,
            not_after: facts.not_after,
            not_after_text: facts.not_after_text,
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
        })
    }

    /// Seconds from `now` (Unix seconds) to the notAfter; negative once
    /// expired. The `/status` gauge.
    pub fn seconds_left(&self, now: i64) -> i64 {
        self.not_after.saturating_sub(now)
    }

    /// The warning to log (at start, at reload) and show in `/status`
    /// when the certificate has expired or expires within
    /// [`EXPIRY_WARNING_SECS`] of `now` (Unix seconds); `None` otherwise.
    pub fn expiry_warning(&self, now: i64) -> Option<String> {
        let left = self.seconds_left(now);
        if left > EXPIRY_WARNING_SECS {
            return None;
        }
        let names = self.names.join(", ");
        let file = self.cert_file.display();
        Some(if left < 0 {
            format!(
                "certificate {file} ({names}) has expired (not after {})",
                self.not_after_text
            )
        } else {
            format!(
                "certificate {file} ({names}) expires in {} (not after {})",
                time_left(left),
                self.not_after_text
            )
        })
    }
}

/// Reads every certificate of a PEM file, in order.
pub(crate) fn read_chain(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let iter =
        CertificateDer::pem_file_iter(file).map_err(|e| TlsError::in_file(file, pem_reason(&e)))?;
    let chain = iter
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::in_file(file, pem_reason(&e)))?;
    if chain.is_empty() {
        return Err(TlsError::in_file(file, "no PEM certificate in it"));
    }
    Ok(chain)
}

/// The trust anchors in a PEM file of CA certificates.
///
/// Errors (naming the file): as [`read_chain`], or a certificate that
/// cannot be a trust anchor.
pub(crate) fn read_roots(file: &Path) -> Result<rustls::RootCertStore, TlsError> {
    roots_of(file, read_chain(file)?)
}

/// The trust anchors of `chain`, the certificates read from `file` (named
/// in errors).
///
/// Errors: a certificate rustls cannot use as a trust anchor.
pub(crate) fn roots_of(
    file: &Path,
    chain: Vec<CertificateDer<'static>>,
) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in chain {
        roots
            .add(c)
            .map_err(|e| TlsError::in_file(file, format!("unusable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// Why a key file that holds no key rustls reads is not one, when its
/// PEM labels tell: a key encrypted with a passphrase (PKCS#8 `ENCRYPTED
/// PRIVATE KEY`, or OpenSSL's legacy `Proc-Type: 4,ENCRYPTED`), which
/// nothing here can decrypt, or a certificate where the key should be.
/// `None` when the file cannot be read as text or says neither.
fn not_a_plain_key(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.contains("Proc-Type: 4,ENCRYPTED")
    {
        return Some(
            "the key is encrypted with a passphrase, which sluice does not read: \
             write it out unencrypted once (`openssl pkey -in KEY -out NEW_KEY`) and \
             make that file readable only by the user sluice runs as"
                .to_string(),
        );
    }
    if text.contains("-----BEGIN CERTIFICATE-----") && !text.contains("PRIVATE KEY-----") {
        return Some(
            "it holds a certificate, not a private key (are `cert` and `key` swapped?)".to_string(),
        );
    }
    None
}

/// A PEM error in words (the file is named by the caller).
fn pem_reason(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => format!("cannot read it: {io}"),
        Error::NoItemsFound => "no PEM block of the expected kind in it".to_string(),
        other => format!("not valid PEM: {other:?}"),
    }
}

/// What the proxy reads from a leaf certificate.
struct LeafFacts {
    names: Vec<String>,
    not_after: i64,
    not_after_text: String,
}

/// The leaf's SAN DNS names and notAfter (x509-parser).
fn leaf_facts(der: &CertificateDer<'_>) -> Result<LeafFacts, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| format!("the leaf certificate is not valid X.509: {e}"))?;
    let not_after = cert.validity().not_after;
    let mut names = Vec::new();
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("unreadable subjectAltName: {e}"))?;
    for name in san.iter().flat_map(|s| s.value.general_names.iter()) {
        if let x509_parser::extensions::GeneralName::DNSName(n) = name {
            names.push(n.to_ascii_lowercase());
        }
    }
    Ok(LeafFacts {
        names,
        not_after: not_after.timestamp(),
        not_after_text: rfc3339_secs(not_after.timestamp()),
    })
}

/// Unix seconds `t` as RFC 3339 in UTC (`2026-12-03T13:12:47Z`), as the
/// other times of `/status` are written; before 1970: the epoch.
fn rfc3339_secs(t: i64) -> String {
    let secs = u64::try_from(t).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = crate::http::date::civil_from_days(secs / 86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How long `left` seconds are, for a warning: days from two days on,
/// else hours, else minutes.
fn time_left(left: i64) -> String {
    match left {
        172_800.. => format!("{} days", left / 86_400),
        7_200.. => format!("{} hours", left / 3_600),
        3_600.. => "1 hour".to_string(),
        120.. => format!("{} minutes", left / 60),
        _ => "less than 2 minutes".to_string(),
    }
}

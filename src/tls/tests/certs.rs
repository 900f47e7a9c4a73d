//! Loading certificates and keys: every key kind, the errors that name
//! their file, SAN names, expiry warnings; the SNI lookup rules.

use super::*;
use crate::config::UnknownSni;
use crate::tls::certs::{EXPIRY_WARNING_SECS, LoadedCert};
use crate::tls::sni::CertStore;

#[test]
fn every_key_kind_loads_with_its_san_names() {
    let pki = Pki::new("kinds");
    for alg in [
        &rcgen::PKCS_ECDSA_P256_SHA256,
        &rcgen::PKCS_ECDSA_P384_SHA384,
        &rcgen::PKCS_ED25519,
    ] {
        let (cert, key) = pki.leaf_with(&["A.Example.com", "*.example.net"], alg, |_| {});
        let loaded = LoadedCert::load(&cert, &key).unwrap();
        assert_eq!(loaded.names, ["a.example.com", "*.example.net"]);
        assert_eq!(loaded.key.cert.len(), 2, "leaf and CA");
    }
}

#[test]
fn a_key_of_another_certificate_is_refused_naming_the_key_file() {
    let pki = Pki::new("mismatch");
    let (cert, _) = pki.leaf(&["a.example.com"]);
    let (_, other_key) = pki.leaf(&["b.example.com"]);
    let e = LoadedCert::load(&cert, &other_key).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(other_key.as_path()));
    assert!(e.reason.contains("does not match the certificate"), "{e}");
    assert!(e.to_string().starts_with(&other_key.display().to_string()));
}

#[test]
fn unreadable_empty_and_garbage_files_are_refused_naming_the_file() {
    let pki = Pki::new("bad-files");
    let (cert, key) = pki.leaf(&["a.example.com"]);
    let missing = pki.dir.join("missing.pem");
    let e = LoadedCert::load(&missing, &key).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(missing.as_path()));
    assert!(e.reason.contains("cannot read"), "{e}");

    let empty = pki.file("empty.pem", "no PEM here\n");
    let e = LoadedCert::load(&empty, &key).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(empty.as_path()));
    assert!(e.reason.contains("no PEM certificate"), "{e}");

    let garbage = pki.file(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
    );
    let e = LoadedCert::load(&garbage, &key).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(garbage.as_path()));

    // A certificate where the key should be.
    let e = LoadedCert::load(&cert, &cert).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(cert.as_path()));
    assert!(e.reason.contains("private key"), "{e}");
    assert!(
        e.reason
            .contains("it holds a certificate, not a private key"),
        "{e}"
    );
}

#[test]
fn an_encrypted_key_is_refused_saying_it_is_encrypted() {
    // Was "no PEM block of the expected kind in it": `openssl genrsa
    // -aes128` (PKCS#8) and `-traditional` keys both have PEM blocks.
    let pki = Pki::new("encrypted");
    let (cert, _) = pki.leaf(&["a.example.com"]);
    let pkcs8 = pki.file(
        "enc8.pem",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n\
         -----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let legacy = pki.file(
        "enc1.pem",
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
         DEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nAAAA\n\
         -----END RSA PRIVATE KEY-----\n",
    );
    for key in [pkcs8, legacy] {
        let e = LoadedCert::load(&cert, &key).unwrap_err();
        assert_eq!(e.file.as_deref(), Some(key.as_path()));
        assert!(e.reason.contains("encrypted with a passphrase"), "{e}");
    }
}

#[test]
fn expiry_within_14_days_or_past_is_a_warning() {
    let pki = Pki::new("expiry");
    let (cert, key) = pki.leaf_with(&["a.example.com"], &rcgen::PKCS_ECDSA_P256_SHA256, |p| {
        p.not_after = rcgen::date_time_ymd(2030, 1, 1);
    });
    let c = LoadedCert::load(&cert, &key).unwrap();
    let end = c.not_after;
    assert_eq!(c.expiry_warning(end - 30 * 86_400), None);
    assert_eq!(c.expiry_warning(end - EXPIRY_WARNING_SECS - 1), None);
    let soon = c.expiry_warning(end - 5 * 86_400).unwrap();
    assert!(
        soon.contains("expires in 5 days") && soon.contains("a.example.com"),
        "{soon}"
    );
    assert!(soon.contains(&cert.display().to_string()), "{soon}");
    // Under two days: hours, then minutes; never "1 days" or "0 days".
    let day = c.expiry_warning(end - 86_398).unwrap();
    assert!(day.contains("expires in 23 hours"), "{day}");
    let hour = c.expiry_warning(end - 3_700).unwrap();
    assert!(hour.contains("expires in 1 hour "), "{hour}");
    let mins = c.expiry_warning(end - 600).unwrap();
    assert!(mins.contains("expires in 10 minutes"), "{mins}");
    // notAfter in RFC 3339, as the other times of /status.
    assert_eq!(c.not_after_text, "2030-01-01T00:00:00Z");
    assert!(soon.contains("(not after 2030-01-01T00:00:00Z)"), "{soon}");
    let past = c.expiry_warning(end + 1).unwrap();
    assert!(past.contains("has expired"), "{past}");
    assert_eq!(c.seconds_left(end - 10), 10);
}

/// A store of three certificates: exact `a.example.com`, wildcard
/// `*.example.net`, exact `www.example.net`.
fn store(unknown: UnknownSni) -> CertStore {
    let pki = Pki::new(&format!("store-{unknown:?}"));
    let certs = [
        pki.leaf(&["a.example.com"]),
        pki.leaf(&["*.example.net"]),
        pki.leaf(&["www.example.net", "f*.example.org"]),
    ];
    let loaded = certs
        .iter()
        .map(|(c, k)| LoadedCert::load(c, k).unwrap())
        .collect();
    CertStore::new(loaded, unknown)
}

#[test]
fn sni_lookup_follows_rfc_6125_wildcards_exact_first() {
    let s = store(UnknownSni::Default);
    // (name, certificate index, why)
    let table: [(&str, Option<usize>, &str); 11] = [
        ("a.example.com", Some(0), "exact"),
        ("A.EXAMPLE.COM", Some(0), "case is ignored"),
        ("a.example.com.", Some(0), "one trailing dot is ignored"),
        ("x.example.net", Some(1), "wildcard, one label"),
        ("www.example.net", Some(2), "exact beats the wildcard"),
        ("WWW.example.net.", Some(2), "exact, case and dot"),
        ("example.net", None, "a wildcard needs a label in its place"),
        ("a.b.example.net", None, "a wildcard covers one label only"),
        (".example.net", None, "an empty label is no label"),
        (
            "fa.example.org",
            None,
            "a partial-label wildcard serves nothing",
        ),
        ("b.example.com", None, "unknown"),
    ];
    for (name, want, why) in table {
        assert_eq!(s.lookup(name), want, "{name}: {why}");
    }
    assert!(s.covers(None) && s.covers(Some("unknown.test")), "default");
    let r = store(UnknownSni::Reject);
    assert!(!r.covers(None) && !r.covers(Some("unknown.test")), "reject");
    assert!(r.covers(Some("x.example.net")));
}

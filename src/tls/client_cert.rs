//! The `X-Forwarded-Client-Cert` value for a client certificate that
//! rustls verified (`tls_client_auth`, issue 23 item 5), in Envoy's
//! form:
//!
//! ```text
//! Hash=<sha256 of the DER, lower-case hex>;Subject="<subject DN, RFC 4514>";DNS=<name>;DNS=<name>
//! ```
//!
//! - `Hash`: SHA-256 of the leaf certificate's DER, 64 lower-case hex
//!   digits;
//! - `Subject`: the subject's distinguished name as an RFC 4514 string
//!   (RDNs last to first, `,` between them, `+` inside a multi-valued
//!   one; `CN`, `O`, `OU`, `C`, `L`, `ST`, `STREET`, `DC`, `UID` by
//!   name, other types as a dotted OID), its special characters escaped
//!   (RFC 4514 §2.4), and every byte outside printable ASCII as `\XX`
//!   (so the value is a valid field value, RFC 9110 §5.5); a value that
//!   is not a string type is `#` and the hex of its content octets;
//! - `DNS`: each subjectAltName DNS name, in order; a name with a byte
//!   outside `[A-Za-z0-9.*_-]` is left out.
//!
//! What it must not know: sockets, HTTP messages (the request plan puts
//! the value in its field), the loop.

use std::fmt::Write as _;

use x509_parser::extensions::GeneralName;
use x509_parser::x509::X509Name;

/// The field value for the leaf certificate `der`; `None` if it does not
/// parse as X.509 (rustls verified it, so only a certificate rustls reads
/// and x509-parser does not).
pub fn forwarded_value(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = String::with_capacity(160);
    out.push_str("Hash=");
    for b in digest.as_ref() {
        let _ = write!(out, "{b:02x}");
    }
    out.push_str(";Subject=\"");
    push_rfc4514(&mut out, cert.subject());
    out.push('"');
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(n) = name
                && !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".*_-".contains(&b))
            {
                out.push_str(";DNS=");
                out.push_str(n);
            }
        }
    }
    Some(out)
}

/// The short names of RFC 4514 §3 (and RFC 4519's `STREET`), by OID.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// Appends `name` as an RFC 4514 string (§2.1: the last RDN first).
fn push_rfc4514(out: &mut String, name: &X509Name<'_>) {
    let rdns: Vec<_> = name.iter().collect();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, attr) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attr.attr_type().to_id_string();
            out.push_str(short_name(&oid).unwrap_or(&oid));
            out.push('=');
            match attr.as_str() {
                Ok(value) => push_escaped(out, value),
                Err(_) => {
                    out.push('#');
                    for b in attr.as_slice() {
                        let _ = write!(out, "{b:02x}");
                    }
                }
            }
        }
    }
}

/// Appends an attribute value escaped by RFC 4514 §2.4 (`"+,;<>\` with a
/// backslash, a leading `#` or space and a trailing space too), with every
/// byte outside printable ASCII as `\XX`.
fn push_escaped(out: &mut String, value: &str) {
    let bytes = value.as_bytes();
    let last = bytes.len().saturating_sub(1);
    for (i, &b) in bytes.iter().enumerate() {
        let special = matches!(b, b'"' | b'+' | b',' | b';' | b'<' | b'>' | b'\\')
            || (i == 0 && (b == b'#' || b == b' '))
            || (i == last && b == b' ');
        if special {
            out.push('\\');
            out.push(char::from(b));
        } else if (0x20..0x7f).contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\{b:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_has_the_hash_the_subject_in_rfc_4514_order_and_the_dns_names() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec![
            "client.example".to_string(),
            "bad name".to_string(),
            "*.example.org".to_string(),
        ])
        .unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::CommonName, " #client\"1\u{e9}");
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().as_ref();
        let value = forwarded_value(der).unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            value,
            format!(
                "Hash={hex};Subject=\"CN=\\ #client\\\"1\\C3\\A9,O=Acme\\, Inc.,C=DE\";\
                 DNS=client.example;DNS=*.example.org"
            )
        );
        assert!(value.bytes().all(|b| (0x20..0x7f).contains(&b)));
    }

    #[test]
    fn bytes_that_are_no_certificate_give_no_value() {
        assert_eq!(forwarded_value(b"not a certificate"), None);
    }
}

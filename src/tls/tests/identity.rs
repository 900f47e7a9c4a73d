//! Upstream TLS: client configurations (CA file, IP names, no
//! verification) and the interned identity table.

use super::*;
use crate::tls::client::UpstreamTls;
use crate::tls::identity::{TlsId, TlsIdentities};
use crate::tls::server::{ALPN_HTTP11, ServerTls};
use crate::tls::tickets::TicketSecret;

fn server(pki: &Pki, names: &[&str]) -> ServerTls {
    let config = tls_config(&[pki.leaf(names)], |_| {});
    ServerTls::build(&config, &TicketSecret::generate().unwrap(), &[ALPN_HTTP11]).unwrap()
}

#[test]
fn upstream_client_verifies_names_and_ips_against_its_ca() {
    let pki = Pki::new("upstream");
    let s = server(&pki, &["api.internal", "127.0.0.1"]);
    let profile = UpstreamTls {
        ca: Some(pki.ca_file()),
        verify: true,
        client_cert: None,
    };
    let client = profile.client_config().unwrap();
    let (c, _, out) = connect(&client, &s.config, "api.internal");
    assert!(out.ok(), "{out:?}");
    assert_eq!(c.alpn_protocol(), Some(ALPN_HTTP11));
    assert!(connect(&client, &s.config, "127.0.0.1").2.ok(), "an IP SAN");
    let (_, _, out) = connect(&client, &s.config, "other.internal");
    let e = out.client.unwrap_err().to_string();
    assert!(e.contains("not valid for name"), "{e}");
    // tls_verify = false accepts the name it does not cover.
    let lax = UpstreamTls {
        verify: false,
        ..profile
    };
    let (_, _, out) = connect(&lax.client_config().unwrap(), &s.config, "other.internal");
    assert!(out.ok(), "{out:?}");
}

#[test]
fn identities_are_interned_per_profile_and_name() {
    assert_eq!(std::mem::size_of::<Option<TlsId>>(), 4);
    let pki = Pki::new("identities");
    let p = UpstreamTls {
        ca: Some(pki.ca_file()),
        verify: true,
        client_cert: None,
    };
    let q = UpstreamTls {
        verify: false,
        ..p.clone()
    };
    let mut t = TlsIdentities::new();
    let a = t.intern(&p, "api.internal").unwrap();
    assert_eq!(t.intern(&p, "api.internal").unwrap(), a);
    let b = t.intern(&p, "db.internal").unwrap();
    let c = t.intern(&q, "api.internal").unwrap();
    assert!(a != b && a != c && b != c);
    assert_eq!(t.len(), 3);
    let got = t.get(b).unwrap();
    assert_eq!(
        got.server_name,
        ServerName::try_from("db.internal").unwrap()
    );
    assert!(
        Arc::ptr_eq(&got.config, &t.get(a).unwrap().config),
        "one config per profile"
    );
    assert!(!Arc::ptr_eq(&t.get(c).unwrap().config, &got.config));
    assert!(t.intern(&p, "not a name!").is_err());
    let missing = UpstreamTls {
        ca: Some(pki.dir.join("missing.pem")),
        ..p
    };
    let e = t.intern(&missing, "api.internal").unwrap_err();
    assert!(e.file.is_some(), "{e}");
}

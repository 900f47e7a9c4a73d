//! The TLS keys and flags with the built binary: `--check-config` and the
//! start load every certificate and key and refuse (exit 2, the file
//! named, with its line for a TOML key) what cannot be served; repeated
//! `--listen`, `listen_tls` without `listen`, `--upstream https://`.
//! Certificates are made here (rcgen); no key is checked in.

mod util;

use std::path::PathBuf;

use util::*;

/// A directory with a CA-less self-signed P-256 certificate for
/// `a.example.com` (`cert.pem`, `key.pem`) and another key (`other.key`).
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(tag: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("sluice-cfgtls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.example.com".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        std::fs::write(dir.join("other.key"), other.serialize_pem()).unwrap();
        std::fs::write(dir.join("empty.pem"), "nothing\n").unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value `key = …` in `--check-config` output.
fn value<'a>(rendered: &'a str, key: &str) -> Option<&'a str> {
    rendered.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.trim_start().strip_prefix('='))
            .map(str::trim)
    })
}

fn check(args: &[&str]) -> Exited {
    run_sluice(args)
}

#[test]
fn a_tls_listener_with_its_certificate_passes_the_check() {
    let f = Files::new("ok");
    let toml = format!(
        "listen_tls = [\"127.0.0.1:8443\"]\ntls_min_version = \"1.3\"\n\
         tls_unknown_sni = \"reject\"\n[[certificate]]\ncert = {:?}\nkey = {:?}\n",
        f.path("cert.pem"),
        f.path("key.pem")
    );
    let file = TempFile::new(&toml);
    let o = check(&["--check-config", file.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(
        value(&o.stdout, "listen"),
        Some("[]"),
        "listen_tls alone: no plain listener"
    );
    assert_eq!(value(&o.stdout, "listen_tls"), Some("\"127.0.0.1:8443\""));
    assert_eq!(value(&o.stdout, "tls_min_version"), Some("\"1.3\""));
    assert!(o.stdout.contains("[[certificate]]"), "{}", o.stdout);
    // The same on the command line.
    let o = check(&[
        "--check-config",
        TempFile::new("").path(),
        "--listen-tls",
        "127.0.0.1:8443",
        "--listen",
        "127.0.0.1:8080",
        "--listen",
        "127.0.0.1:8081",
        "--tls-cert",
        &f.path("cert.pem"),
        "--tls-key",
        &f.path("key.pem"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(
        value(&o.stdout, "listen"),
        Some("[\"127.0.0.1:8080\", \"127.0.0.1:8081\"]")
    );
}

#[test]
fn tls_mistakes_are_refused_naming_the_file_exit_2() {
    let f = Files::new("bad");
    let (cert, key, other, empty) = (
        f.path("cert.pem"),
        f.path("key.pem"),
        f.path("other.key"),
        f.path("empty.pem"),
    );
    let missing = f.path("missing.pem");
    let cases: [(Vec<&str>, &str); 6] = [
        (
            vec!["--listen-tls", "127.0.0.1:8443"],
            "needs a certificate",
        ),
        (
            vec![
                "--listen-tls",
                "127.0.0.1:8443",
                "--tls-cert",
                &cert,
                "--tls-key",
                &other,
            ],
            "does not match the certificate",
        ),
        (
            vec![
                "--listen-tls",
                "127.0.0.1:8443",
                "--tls-cert",
                &missing,
                "--tls-key",
                &key,
            ],
            "missing.pem",
        ),
        (
            vec![
                "--listen-tls",
                "127.0.0.1:8443",
                "--tls-cert",
                &empty,
                "--tls-key",
                &key,
            ],
            "no PEM certificate",
        ),
        (vec!["--tls-client-auth", "required"], "needs tls_client_ca"),
        (vec!["--tls-min-version", "1.1"], "is not a TLS version"),
    ];
    for (args, needle) in cases {
        for flag in ["--check-config", "--config"] {
            let file = TempFile::new("");
            let mut all = vec![flag, file.path()];
            all.extend(&args);
            let o = check(&all);
            assert_eq!(o.status.code(), Some(2), "{all:?}: {}", o.stderr);
            assert!(
                o.stderr.contains(needle),
                "{all:?}: {needle:?} not in {}",
                o.stderr
            );
        }
    }
    // The mismatched key is named with its file.
    let o = check(&[
        "--check-config",
        TempFile::new("").path(),
        "--listen-tls",
        "127.0.0.1:8443",
        "--tls-cert",
        &cert,
        "--tls-key",
        &other,
    ]);
    assert!(o.stderr.contains(&other), "{}", o.stderr);
}

#[test]
fn tls_keys_in_the_file_are_refused_with_file_and_line() {
    let f = Files::new("lines");
    let cases = [
        (
            format!(
                "listen_tls = \"127.0.0.1:8443\"\n\n[[certificate]]\ncert = {:?}\nkey = {:?}\n",
                f.path("cert.pem"),
                f.path("other.key")
            ),
            5,
            "does not match",
        ),
        (
            "tls_min_version = \"1.0\"\n".to_string(),
            1,
            "tls_min_version",
        ),
        (
            "\ntls_unknown_sni = \"drop\"\n".to_string(),
            2,
            "tls_unknown_sni",
        ),
        (
            "[[upstream]]\nname = \"api\"\nservers = [\"127.0.0.1:443\"]\ntls_verify = false\n"
                .to_string(),
            4,
            "upstream[0].tls_verify: group \"api\": tls_* settings without tls = true",
        ),
    ];
    for (text, line, needle) in cases {
        refused_at(&text, line, needle, &["--check-config", "--config"]);
    }
}

#[test]
fn a_key_file_named_by_two_certificates_is_blamed_on_the_one_it_does_not_match() {
    // A second [[certificate]] copied from the first with only `cert`
    // changed: its key is the first one's. The error named
    // `certificate[0].key` and the first entry's line (the first entry
    // naming the file), though that pair is sound.
    let f = Files::new("twokeys");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["b.example.com".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(f.dir.join("b.pem"), cert.pem()).unwrap();
    let text = format!(
        "listen_tls = \"127.0.0.1:8443\"\n\n[[certificate]]\ncert = {:?}\nkey = {:?}\n\
         [[certificate]]\ncert = {:?}\nkey = {:?}\n",
        f.path("cert.pem"),
        f.path("key.pem"),
        f.path("b.pem"),
        f.path("key.pem"),
    );
    refused_at(
        &text,
        8,
        "certificate[1].key",
        &["--check-config", "--config"],
    );
}

/// `text` as the config file is refused (exit 2) by each of `flags`,
/// naming the file and `line`, and saying `needle`.
#[track_caller]
fn refused_at(text: &str, line: usize, needle: &str, flags: &[&str]) {
    let file = TempFile::new(text);
    let at = format!("{}:{line}:", file.path());
    for flag in flags {
        let o = check(&[flag, file.path()]);
        assert_eq!(o.status.code(), Some(2), "{text:?}: {}", o.stderr);
        assert!(
            o.stderr.contains(&at),
            "{text:?}: {at:?} not in {}",
            o.stderr
        );
        assert!(
            o.stderr.contains(needle),
            "{text:?}: {needle:?} not in {}",
            o.stderr
        );
    }
}

/// Mistakes `Config::validate` and the TLS check find after parsing (no
/// value span): the line of the key in the file is named all the same.
#[test]
fn tls_values_refused_after_parsing_name_the_file_and_the_key_line() {
    let f = Files::new("validate");
    let cert = format!(
        "[[certificate]]\ncert = {:?}\nkey = {:?}\n",
        f.path("cert.pem"),
        f.path("key.pem")
    );
    let cases = [
        (
            format!("listen_tls = \"127.0.0.1:8443\"\n\ntls_handshake_timeout = \"0s\"\n{cert}"),
            3,
            "tls_handshake_timeout",
        ),
        (
            format!("listen_tls = \"127.0.0.1:8443\"\ntls_client_auth = \"required\"\n{cert}"),
            2,
            "needs tls_client_ca",
        ),
        (
            format!(
                "listen_tls = \"127.0.0.1:8443\"\ntls_client_auth = \"optional\"\n\
                 tls_client_ca = {:?}\n{cert}",
                f.path("missing-ca.pem")
            ),
            3,
            "missing-ca.pem",
        ),
        (
            "listen = \"127.0.0.1:8443\"\nlisten_tls = \"127.0.0.1:8443\"\n".to_string() + &cert,
            2,
            "overlaps",
        ),
        (
            "listen = []\nlisten_tls = \"127.0.0.1:8443\"\n".to_string(),
            2,
            "needs a certificate",
        ),
    ];
    for (text, line, needle) in cases {
        refused_at(&text, line, needle, &["--check-config"]);
    }
}

#[test]
fn upstream_https_makes_a_tls_group() {
    let o = check(&[
        "--check-config",
        TempFile::new("").path(),
        "--upstream",
        "https://127.0.0.1:8443",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("tls = true"), "{}", o.stdout);
    let o = check(&[
        "--check-config",
        TempFile::new("").path(),
        "--upstream",
        "https://127.0.0.1:8443",
        "--upstream",
        "127.0.0.1:8000",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    let f = Files::new("upstream");
    let toml = format!(
        "[[upstream]]\nname = \"api\"\nservers = [\"127.0.0.1:8443\"]\ntls = true\n\
         tls_server_name = \"a.example.com\"\ntls_ca = {:?}\n",
        f.path("cert.pem")
    );
    let o = check(&["--check-config", TempFile::new(&toml).path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    let toml = "[[upstream]]\nname = \"api\"\nservers = [\"127.0.0.1:8443\"]\ntls = true\n\
                tls_verify = false\n";
    let o = check(&["--check-config", TempFile::new(toml).path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert!(
        o.stderr.contains("tls_verify = false"),
        "warned: {}",
        o.stderr
    );
}

//! The small value types of [`Config`](super::Config) (certificates, TLS
//! versions, access log targets) and the parsers of the flags that build
//! them. The general value syntax (durations, addresses) is `values.rs`.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::upstreams::spec::{DEFAULT_GROUP, GroupSpec, ServerSpec};

/// One certificate of the TLS listeners: `[[certificate]]` in the file,
/// `--tls-cert FILE --tls-key FILE` on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateSpec {
    /// PEM file of the chain, leaf first.
    pub cert: Spanned<PathBuf>,
    /// PEM file of its private key.
    pub key: Spanned<PathBuf>,
}

impl CertificateSpec {
    /// A certificate from the command line (no place in a file).
    pub fn new(cert: PathBuf, key: PathBuf) -> Self {
        CertificateSpec {
            cert: Spanned::new(0..0, cert),
            key: Spanned::new(0..0, key),
        }
    }
}

/// The oldest TLS version the listeners accept (`tls_min_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246) and 1.3.
    #[serde(rename = "1.2")]
    V1_2,
    /// TLS 1.3 only (RFC 8446).
    #[serde(rename = "1.3")]
    V1_3,
}

/// Parses `1.2` or `1.3`.
pub(super) fn parse_tls_version(v: &str) -> Result<TlsVersion, String> {
    match v {
        "1.2" => Ok(TlsVersion::V1_2),
        "1.3" => Ok(TlsVersion::V1_3),
        _ => Err(format!("{v:?} is not a TLS version (\"1.2\" or \"1.3\")")),
    }
}

/// What a ClientHello without SNI, or with a name no certificate covers,
/// gets (`tls_unknown_sni`; `tls/sni.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownSni {
    /// The first certificate listed.
    #[default]
    Default,
    /// No certificate: the fatal alert `unrecognized_name`.
    Reject,
}

/// Whether TLS clients must present a certificate (`tls_client_auth`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// None is asked for.
    #[default]
    Off,
    /// Asked for; a client without one is served.
    Optional,
    /// Every client must present a valid one.
    Required,
}

/// Where access records are written (`--access-log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// Standard output (the default).
    Stdout,
    /// Standard error.
    Stderr,
    /// No access log.
    Off,
    /// A file, opened for appending (created if missing).
    File(std::path::PathBuf),
}

impl fmt::Display for AccessLogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessLogTarget::Stdout => f.write_str("stdout"),
            AccessLogTarget::Stderr => f.write_str("stderr"),
            AccessLogTarget::Off => f.write_str("off"),
            AccessLogTarget::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The access record's format (`--access-log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// One line of `key=value` fields (docs/observability.md, "Access log").
    Text,
    /// One JSON object per line.
    Json,
}

// --- value syntax: the command line's parsers and the file's codecs ----------

/// Parses `stdout`, `stderr`, `off` or a path (non-empty).
pub(super) fn parse_access_log(v: &str) -> Result<AccessLogTarget, String> {
    Ok(match v {
        "stdout" | "-" => AccessLogTarget::Stdout,
        "stderr" => AccessLogTarget::Stderr,
        "off" => AccessLogTarget::Off,
        "" => return Err("the access log path is empty (use off for none)".into()),
        path => AccessLogTarget::File(path.into()),
    })
}

/// Parses one `--upstream` server into a one-server group `default`
/// (several flags are joined into one group by the binary).
/// `https://HOST:PORT` makes the group speak TLS (`tls = true`).
pub(super) fn parse_server(v: &str) -> Result<GroupSpec, String> {
    let (tls, server) = match v.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, v.strip_prefix("http://").unwrap_or(v)),
    };
    let mut g = GroupSpec::new(DEFAULT_GROUP, vec![server.parse::<ServerSpec>()?]);
    g.tls = tls;
    Ok(g)
}

/// An access log target in the file: a string, as on the command line.
pub(super) mod access_log {
    use serde::de::{Deserialize, Deserializer, Error};
    use serde::ser::Serializer;

    use super::AccessLogTarget;

    pub fn serialize<S: Serializer>(t: &AccessLogTarget, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(t)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AccessLogTarget, D::Error> {
        let v = String::deserialize(d)?;
        super::parse_access_log(&v).map_err(D::Error::custom)
    }
}

//! `TlsError`: what went wrong while loading TLS material or building a
//! rustls configuration, always naming the file it came from when there
//! is one, so `--check-config`, the start and a reload can print it as it
//! is.
//!
//! What it must not know: sockets, the loop, where the path came from
//! (flag or file key: the caller adds that).

use std::fmt;
use std::path::{Path, PathBuf};

/// A TLS setting that cannot be used: the file (if any) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    /// The certificate, key or CA file at fault; `None` for an error of no
    /// one file (e.g. no certificate configured).
    pub file: Option<PathBuf>,
    /// What is wrong, one sentence without the file name.
    pub reason: String,
}

impl TlsError {
    /// An error about `file`.
    pub fn in_file(file: &Path, reason: impl Into<String>) -> Self {
        TlsError {
            file: Some(file.to_path_buf()),
            reason: reason.into(),
        }
    }

    /// An error of no one file.
    pub fn general(reason: impl Into<String>) -> Self {
        TlsError {
            file: None,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}: {}", p.display(), self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for TlsError {}

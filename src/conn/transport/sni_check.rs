//! The SNI look before a server session answers (`tls_unknown_sni =
//! "reject"`, `tls/sni.rs`): rustls' `Acceptor` reads a copy of the
//! ClientHello's bytes beside the session, and once the hello is whole
//! the name it carries (or its absence) is checked against the
//! certificates. A name no certificate covers gets the fatal alert
//! `unrecognized_name` (RFC 6066 §3, RFC 8446 §6.2) instead of the
//! `access_denied` rustls would send for a resolver without an answer.
//!
//! The session sees the same bytes after the look, so it never acts on a
//! hello the look has not judged: both deframe the same records and a
//! handshake message counts only once whole.
//!
//! What it must not know: HTTP, the loop, the socket (the caller writes
//! the alert).

use std::sync::Arc;

use rustls::server::Acceptor;

use crate::tls::sni::CertStore;

/// What the look at a ClientHello decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The hello is not whole yet: look again at the next bytes.
    Undecided,
    /// A certificate serves it (or the bytes are no valid hello, which
    /// the session itself refuses with its own alert): the look is over.
    Served,
    /// No certificate serves the name (`None`: no SNI was sent).
    Refused(Option<String>),
}

/// The look, while it lasts (one per server session of a rejecting
/// listener, dropped once it decided).
pub(crate) struct SniCheck {
    acceptor: Acceptor,
    store: Arc<CertStore>,
}

impl std::fmt::Debug for SniCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniCheck").finish_non_exhaustive()
    }
}

impl SniCheck {
    /// A look against `store`'s certificates.
    pub(crate) fn new(store: Arc<CertStore>) -> Self {
        SniCheck {
            acceptor: Acceptor::default(),
            store,
        }
    }

    /// Takes the next bytes the peer sent (ciphertext, as read from the
    /// socket) and says whether the hello is judged.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Verdict {
        // Bounded: each turn consumes bytes or stops.
        while !bytes.is_empty() {
            match self.acceptor.read_tls(&mut bytes) {
                Ok(0) => break,
                Ok(_) => {}
                // Over the Acceptor's buffer, or not TLS: the session
                // fails it with its own alert.
                Err(_) => return Verdict::Served,
            }
        }
        match self.acceptor.accept() {
            Ok(None) => Verdict::Undecided,
            Ok(Some(accepted)) => {
                let name = accepted.client_hello().server_name().map(str::to_string);
                if self.store.covers(name.as_deref()) {
                    Verdict::Served
                } else {
                    Verdict::Refused(name)
                }
            }
            Err(_) => Verdict::Served,
        }
    }
}

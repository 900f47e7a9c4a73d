//! The TLS identity of an upstream peer, cheap to copy: a small id
//! interned in a per-loop table of (client configuration, server name).
//!
//! How it plugs in (for the transport's integration; `Peer` and the pool
//! are not changed here): `Peer` gains a field `tls: Option<TlsId>`.
//! `Option<TlsId>` is 4 bytes (`TlsId` wraps a `NonZeroU32`), so `Peer`
//! stays `Copy`, `Eq`, `Hash` and `Ord`, and the pool, keyed by `Peer`,
//! never mixes a TLS connection with a plain one to the same address, nor
//! two TLS connections with different names or trust settings (Pingora
//! hashes SNI, CA, verify and client certificate into its pool key the
//! same way). The loop owns one [`TlsIdentities`], fills it at start from
//! the groups (`intern` per TLS group and server name), and looks up the
//! `ClientConfig` and `ServerName` with [`TlsIdentities::get`] when it
//! opens a connection. Ids are valid only in the table that made them:
//! each loop (and each reload's new loop) has its own, as it has its own
//! pool.
//!
//! What it must not know: sockets, the pool, `Peer` itself.

use std::num::NonZeroU32;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::TlsError;
use super::client::{UpstreamTls, server_name};

/// Most identities one table holds: a `Filter` that made a new server
/// name per request must not grow it without bound.
pub const MAX_IDENTITIES: usize = 65_536;

/// An interned TLS identity: an index into its [`TlsIdentities`], plus
/// one (so that `Option<TlsId>` costs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TlsId(NonZeroU32);

/// What a TLS connection to an upstream is made with.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The client configuration (trust, client certificate, ALPN, session
    /// cache), shared by every identity of one profile.
    pub config: Arc<ClientConfig>,
    /// The name sent as SNI and verified (or the IP address verified).
    pub server_name: ServerName<'static>,
}

/// The table behind [`TlsId`]s: one per loop.
#[derive(Debug, Default)]
pub struct TlsIdentities {
    /// By id - 1.
    entries: Vec<TlsIdentity>,
    /// (profile index, server name) → id.
    index: FxHashMap<(usize, ServerName<'static>), TlsId>,
    /// Each profile and the configuration built for it.
    profiles: Vec<(UpstreamTls, Arc<ClientConfig>)>,
}

impl TlsIdentities {
    /// An empty table.
    pub fn new() -> Self {
        TlsIdentities::default()
    }

    /// The id of (`profile`, `name`), made if new; a profile's client
    /// configuration is built once, at its first identity.
    ///
    /// Errors: `name` is not a DNS name or IP address; the profile's files
    /// cannot be loaded; the table holds [`MAX_IDENTITIES`] already.
    pub fn intern(&mut self, profile: &UpstreamTls, name: &str) -> Result<TlsId, TlsError> {
        let name = server_name(name)?;
        let p = match self.profiles.iter().position(|(u, _)| u == profile) {
            Some(p) => p,
            None => {
                let config = profile.client_config()?;
                self.profiles.push((profile.clone(), config));
                self.profiles.len() - 1
            }
        };
        if let Some(&id) = self.index.get(&(p, name.clone())) {
            return Ok(id);
        }
        if self.entries.len() >= MAX_IDENTITIES {
            return Err(TlsError::general(format!(
                "more than {MAX_IDENTITIES} upstream TLS identities"
            )));
        }
        let config = self
            .profiles
            .get(p)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| TlsError::general("TLS profile table out of step"))?;
        self.entries.push(TlsIdentity {
            config,
            server_name: name.clone(),
        });
        let n = u32::try_from(self.entries.len())
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| TlsError::general("TLS identity table full"))?;
        let id = TlsId(n);
        self.index.insert((p, name), id);
        Ok(id)
    }

    /// The identity `id` names, if this table made it.
    pub fn get(&self, id: TlsId) -> Option<&TlsIdentity> {
        self.entries.get(id.0.get() as usize - 1)
    }

    /// Identities interned so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none was interned.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

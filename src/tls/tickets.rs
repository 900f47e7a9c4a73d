//! Session tickets shared by every worker of one instance and kept across
//! reloads (RFC 8446 §4.6.1 for TLS 1.3, RFC 5077 for TLS 1.2): a rustls
//! `ProducesTickets` whose keys are derived from one master secret, so a
//! ticket one worker issued resumes on any other, and on the workers of
//! the next reload, without a key file.
//!
//! - The master secret ([`TicketSecret`], 32 random bytes) is made once by
//!   the process that starts the instance and handed to its workers
//!   (`secret_fd.rs`); it never touches a disk.
//! - Time is cut into periods of [`PERIOD_SECS`] (12 h) since the Unix
//!   epoch. The key of period `p` is HKDF-SHA256 (RFC 5869) of the secret
//!   with the info `"sluice ticket key" || p` (8 bytes, big-endian): every
//!   process with the secret derives the same key, and a key lives one
//!   period, then is never used to seal again.
//! - A ticket is `p` (8 bytes) || nonce (12 random bytes) ||
//!   AES-256-GCM(state, aad = `p` || context) with its 16-byte tag. It is
//!   accepted while `p` is the current or the previous period, so it
//!   stays valid at least 12 h and at most 24 h; the lifetime announced
//!   is 12 h.
//! - The context ([`SharedTicketer::bound_to`]) is the SHA-256 of what a
//!   resumed session skips checking: the client-certificate settings
//!   (`tls_client_auth` and the `tls_client_ca` certificates). rustls
//!   resumes a session with the client certificate it had, without
//!   verifying it again, so a ticket issued before a reload that turned
//!   `tls_client_auth = "required"` on, or replaced the CA, would let a
//!   client past the new settings (found by a break-it pass). A ticket
//!   sealed under another context does not open: the client gets a full
//!   handshake, like nginx's session id context (`ssl_session_id_context`
//!   follows its certificate and client CA settings).
//! - Random nonces under one key: at 2^32 tickets per period the chance
//!   of a repeated nonce reaches 2^-33 (NIST SP 800-38D §8.3), i.e. about
//!   100,000 full handshakes a second for 12 hours across the instance.
//!
//! What it must not know: sockets, processes (how the secret arrives).

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

use super::TlsError;

/// Length of a period, seconds: a ticket key seals for this long.
pub const PERIOD_SECS: u64 = 12 * 3600;
/// Bytes of the master secret.
pub const SECRET_LEN: usize = 32;
/// Bytes before the sealed state: the period and the nonce.
const HEADER_LEN: usize = 8 + NONCE_LEN;
/// Bytes of the AES-GCM tag after it.
const TAG_LEN: usize = 16;
/// HKDF salt: names the use, so the secret could serve other keys too.
const SALT: &[u8] = b"sluice session ticket keys v1";

/// The instance's master secret for ticket keys. Its `Debug` shows no
/// byte of it.
#[derive(Clone, PartialEq, Eq)]
pub struct TicketSecret([u8; SECRET_LEN]);

impl fmt::Debug for TicketSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketSecret(..)")
    }
}

impl TicketSecret {
    /// 32 bytes from the operating system's random source.
    ///
    /// Errors: the random source failed.
    pub fn generate() -> Result<TicketSecret, TlsError> {
        let mut b = [0_u8; SECRET_LEN];
        SystemRandom::new()
            .fill(&mut b)
            .map_err(|_| TlsError::general("the system's random source failed"))?;
        Ok(TicketSecret(b))
    }

    /// The secret made of these bytes (as handed over by the supervisor).
    pub fn from_bytes(b: [u8; SECRET_LEN]) -> TicketSecret {
        TicketSecret(b)
    }

    /// The bytes, to hand to a worker.
    pub(crate) fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }

    /// The AES-256-GCM key of `period`; `None` only if HKDF refused the
    /// output length, which 32 bytes never is.
    fn key(&self, period: u64) -> Option<LessSafeKey> {
        let info = period.to_be_bytes();
        let info: [&[u8]; 2] = [b"sluice ticket key", &info];
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(&self.0);
        let okm = prk.expand(&info, &AES_256_GCM).ok()?;
        Some(LessSafeKey::new(UnboundKey::from(okm)))
    }
}

/// The current period index; a function so tests can move time.
pub type PeriodClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The period of the system clock.
pub fn system_period() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / PERIOD_SECS)
}

/// Seals and opens tickets with the keys of the current and previous
/// period, for one context (module doc).
pub struct SharedTicketer {
    secret: TicketSecret,
    period: PeriodClock,
    random: SystemRandom,
    /// SHA-256 of the context the tickets are good for.
    context: [u8; CONTEXT_LEN],
}

/// Bytes of the context digest.
const CONTEXT_LEN: usize = 32;

impl fmt::Debug for SharedTicketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedTicketer")
            .field("period", &(self.period)())
            .finish_non_exhaustive()
    }
}

impl SharedTicketer {
    /// A ticketer on `secret` that follows the system clock.
    pub fn new(secret: TicketSecret) -> SharedTicketer {
        SharedTicketer::with_clock(secret, Arc::new(system_period))
    }

    /// A ticketer on `secret` whose periods come from `period`.
    pub fn with_clock(secret: TicketSecret, period: PeriodClock) -> SharedTicketer {
        SharedTicketer {
            secret,
            period,
            random: SystemRandom::new(),
            context: digest_of(b""),
        }
    }

    /// This ticketer for tickets good only under `context` (any bytes;
    /// its SHA-256 is kept): a ticket sealed under another context does
    /// not open, so its session is not resumed.
    pub fn bound_to(mut self, context: &[u8]) -> SharedTicketer {
        self.context = digest_of(context);
        self
    }

    /// The additional data sealed with a ticket of `period`.
    fn aad(&self, period: u64) -> [u8; 8 + CONTEXT_LEN] {
        let mut aad = [0_u8; 8 + CONTEXT_LEN];
        let (p, c) = aad.split_at_mut(8);
        p.copy_from_slice(&period.to_be_bytes());
        c.copy_from_slice(&self.context);
        aad
    }
}

/// SHA-256 of `bytes`.
fn digest_of(bytes: &[u8]) -> [u8; CONTEXT_LEN] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().try_into().unwrap_or([0_u8; CONTEXT_LEN])
}

impl ProducesTickets for SharedTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // The least a ticket lives (issued at the end of a period, it is
        // good until the end of the next); RFC 8446 §4.6.1 caps it at 7 days.
        PERIOD_SECS as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let period = (self.period)();
        let mut nonce = [0_u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(HEADER_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&period.to_be_bytes());
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        self.secret
            .key(period)?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad(period)),
                &mut body,
            )
            .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let period_bytes: [u8; 8] = cipher.get(..8)?.try_into().ok()?;
        let nonce: [u8; NONCE_LEN] = cipher.get(8..HEADER_LEN)?.try_into().ok()?;
        let sealed = cipher.get(HEADER_LEN..)?;
        let period = u64::from_be_bytes(period_bytes);
        let now = (self.period)();
        if period != now && Some(period) != now.checked_sub(1) {
            return None;
        }
        let mut body = sealed.to_vec();
        let plain = self
            .secret
            .key(period)?
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad(period)),
                &mut body,
            )
            .ok()?;
        let len = plain.len();
        body.truncate(len);
        Some(body)
    }
}

//! How the ticket master secret (`tickets.rs`) reaches the worker
//! processes of one instance without touching a disk: an anonymous,
//! sealed memory file (`memfd_create`) made once by the process that
//! starts the instance, inherited by every worker it spawns (the first
//! generation and every reload's), its number in [`TICKET_SECRET_FD_ENV`].
//! The metrics region reaches workers the same way (`metrics/region.rs`).
//!
//! Why not an environment variable: the secret would be in every
//! worker's `/proc/PID/environ` and in anything that dumps the
//! environment (a crash reporter, a `ps e`), and would pass on to any
//! process a worker starts. A descriptor is readable only through
//! `/proc/PID/fd` by the same user (who can read the process's memory
//! anyway), is sealed against writes, and is closed by the worker once
//! read. The cost: the supervisor keeps the descriptor open for its
//! lifetime, and a worker started by hand (without a supervisor) makes a
//! secret of its own, so its tickets resume only on itself.
//!
//! What it must not know: tickets' format, the supervisor's policy.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::sync::OnceLock;

use super::TlsError;
use super::tickets::{SECRET_LEN, TicketSecret};

/// Environment variable with the number of the inherited descriptor that
/// holds the instance's ticket secret.
pub const TICKET_SECRET_FD_ENV: &str = "SLUICE_TICKET_SECRET_FD";

/// The secret of this process's instance: read from the descriptor named
/// by [`TICKET_SECRET_FD_ENV`] (a supervisor's worker), else generated
/// here once (a single process, whose in-process reloads keep it). The
/// same value for the whole life of the process.
///
/// Errors: the inherited descriptor could not be read, or the random
/// source failed.
pub fn process_secret() -> Result<&'static TicketSecret, TlsError> {
    static SECRET: OnceLock<TicketSecret> = OnceLock::new();
    if let Some(s) = SECRET.get() {
        return Ok(s);
    }
    let secret = match std::env::var(TICKET_SECRET_FD_ENV).ok() {
        Some(v) => {
            let fd: RawFd = v.parse().map_err(|_| {
                TlsError::general(format!("{TICKET_SECRET_FD_ENV}={v:?} is not a descriptor"))
            })?;
            // SAFETY: the supervisor passed this descriptor to this
            // process alone, for this use; taking ownership closes it
            // once read, and nothing else here opens or uses it.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            read_secret(&fd).map_err(|e| {
                TlsError::general(format!("cannot read the inherited ticket secret: {e}"))
            })?
        }
        None => TicketSecret::generate()?,
    };
    Ok(SECRET.get_or_init(|| secret))
}

/// A sealed memory file holding `secret`, closed on exec unless passed
/// with [`pass_to`].
///
/// Errors: `memfd_create`, `write` or the sealing failed.
pub fn secret_memfd(secret: &TicketSecret) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and valid flags.
    let raw = unsafe {
        libc::memfd_create(
            c"sluice-ticket-secret".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned by memfd_create and is ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let bytes = secret.bytes();
    // SAFETY: writes from a live buffer of its stated length.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    if n != SECRET_LEN as isize {
        return Err(io::Error::other("short write of the ticket secret"));
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on our own descriptor.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Reads the secret from the start of `fd`.
pub(crate) fn read_secret(fd: &OwnedFd) -> io::Result<TicketSecret> {
    let mut b = [0_u8; SECRET_LEN];
    // SAFETY: reads into a live buffer of its stated length.
    let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), 0) };
    if n != SECRET_LEN as isize {
        return Err(io::Error::other(format!(
            "{n} bytes where {SECRET_LEN} were expected"
        )));
    }
    Ok(TicketSecret::from_bytes(b))
}

/// Makes the process `cmd` starts inherit `fd` and find it through
/// [`TICKET_SECRET_FD_ENV`].
pub fn pass_to(fd: &OwnedFd, cmd: &mut Command) {
    let raw = fd.as_raw_fd();
    cmd.env(TICKET_SECRET_FD_ENV, raw.to_string());
    crate::shm::inherit(cmd, [raw]);
}

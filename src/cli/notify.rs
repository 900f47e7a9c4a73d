//! Readiness for a service manager (systemd `Type=notify`, the `sd_notify`
//! protocol through the `sd-notify` crate) and for a supervisor.
//!
//! - A process that serves sends `READY=1` once its listener is up; a
//!   worker adds `X_SLUICE_PID=<pid>` so its supervisor knows which one.
//! - A reload sends `RELOADING=1` with `MONOTONIC_USEC` (systemd ≥ 253
//!   needs both), then `READY=1` when the new configuration serves (or the
//!   old one stays); a drain sends `STOPPING=1`.
//! - A supervisor binds a private datagram socket ([`Inbox`]) and gives its
//!   path to its workers as their `NOTIFY_SOCKET`, so a worker speaks the
//!   same protocol whoever supervises it; the supervisor itself tells the
//!   real service manager once all its workers are ready.
//!
//! Without `NOTIFY_SOCKET` every call here does nothing.
//!
//! What it must not know: the loop, HTTP, the configuration.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use sd_notify::NotifyState;

/// The field a worker adds to its `READY=1`.
const PID_FIELD: &str = "X_SLUICE_PID=";

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        log::warn!("sd_notify: {e}");
    }
}

/// The listeners are up: `READY=1` (with this pid for a supervisor if
/// `worker`).
pub fn ready(worker: bool) {
    let pid = format!("{PID_FIELD}{}", std::process::id());
    if worker {
        send(&[NotifyState::Ready, NotifyState::Custom(&pid)]);
    } else {
        send(&[NotifyState::Ready]);
    }
}

/// A reload began: `RELOADING=1` and the monotonic time.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// A reload ended (done, or refused and the old config kept): `READY=1`
/// with a status line.
pub fn reloaded(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A graceful drain began: `STOPPING=1`.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// The supervisor's private notification socket: workers send their
/// `READY=1` here.
pub struct Inbox {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Inbox {
    /// Binds a non-blocking datagram socket in the temporary directory,
    /// named after this pid.
    ///
    /// Errors: the socket cannot be bound.
    pub fn bind() -> io::Result<Inbox> {
        let path = std::env::temp_dir().join(format!("sluice-{}.notify", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let socket = UnixDatagram::bind(&path)?;
        socket.set_nonblocking(true)?;
        Ok(Inbox { socket, path })
    }

    /// The path to give workers as `NOTIFY_SOCKET`.
    pub fn path(&self) -> &PathBuf {
        &self.path
    }

    /// The pids of the workers that said `READY=1` since the last call.
    pub fn ready_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = self.socket.recv(&mut buf) {
            let text = String::from_utf8_lossy(buf.get(..n).unwrap_or(&[]));
            if text.lines().any(|l| l == "READY=1")
                && let Some(pid) = text
                    .lines()
                    .find_map(|l| l.strip_prefix(PID_FIELD))
                    .and_then(|p| p.parse().ok())
            {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

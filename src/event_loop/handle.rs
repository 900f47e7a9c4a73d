//! [`ServerHandle`]: how another thread (the signal thread, a test) asks
//! the loop to stop, drain or reopen its access log: each sets a flag and
//! wakes the loop through its `mio::Waker`.
//!
//! What it must not know: the loop's state beyond those flags.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use log::info;
use mio::Waker;
use mio::net::TcpListener;

/// Stops a running [`Server`](super::Server) from another thread (a signal handler
/// thread, a test). It does not keep the loop's resources alive: once the
/// server is dropped, its waker (an eventfd) is closed and the handle's
/// requests do nothing ([`ServerHandle::is_running`] says false).
#[derive(Clone)]
pub struct ServerHandle {
    pub(super) shutdown: Arc<AtomicBool>,
    pub(super) drain: Arc<AtomicBool>,
    pub(super) reopen: Arc<AtomicBool>,
    pub(super) unready: Arc<AtomicBool>,
    pub(super) waker: Weak<Waker>,
    /// The loop's listening sockets while it has them, by listener index.
    pub(super) listeners: Vec<Weak<TcpListener>>,
    /// Set when a successor serves on those sockets (`Server::succeed`).
    pub(super) handed_over: Arc<AtomicBool>,
    /// Where the loop hands its servers' health to a successor.
    pub(super) carry: Arc<crate::upstreams::carry::CarrySlot>,
}

/// Longest a reload waits for the old loop's health: a loop turn is
/// milliseconds; one that takes longer is stuck, and the new loop starts
/// fresh rather than delay the reload.
const CARRY_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl ServerHandle {
    /// Whether the server still exists (its `run` has not returned and
    /// dropped it).
    pub fn is_running(&self) -> bool {
        self.waker.strong_count() > 0
    }

    /// The loop's servers' health and its pool's learned idle limits,
    /// asked of it and waited for at most [`CARRY_WAIT`], with when it
    /// was taken; `None` if it did not answer (ended, or stuck).
    pub(super) fn health(&self) -> Option<(crate::upstreams::carry::Snapshot, std::time::Instant)> {
        self.carry.request(|| self.wake(), CARRY_WAIT)
    }

    /// Copies of the loop's listening sockets (new descriptors for the
    /// same sockets and accept queues), by listener index; `None` for one
    /// the loop no longer has (its drain closed them).
    ///
    /// Errors: a `dup` failed (`EMFILE`).
    pub(super) fn listener_copies(&self) -> std::io::Result<Vec<Option<std::net::TcpListener>>> {
        self.listeners
            .iter()
            .map(|l| copy_of(l).transpose())
            .collect()
    }

    fn wake(&self) {
        if let Some(w) = self.waker.upgrade() {
            let _ = w.wake();
        }
    }

    /// Asks the loop to stop now: open connections are closed, `run`
    /// returns soon after.
    pub fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Asks for a graceful drain: the listener closes (connections already
    /// queued on it are accepted first; handed over to a successor,
    /// `Server::succeed`, only this loop's descriptor of it closes), idle keep-alive clients are
    /// closed, in-flight exchanges finish with `Connection: close`, pooled
    /// upstream connections are closed, and `run` returns when no client
    /// connection is left or after `drain_timeout`.
    pub fn drain(&self) {
        self.drain.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Makes `/readyz` answer 503 for this loop while it goes on serving
    /// every connection and accepting new ones (SIGUSR2): a balancer that
    /// checks `/readyz` stops sending before a drain closes the listener
    /// (docs/edge.md, the Kubernetes `preStop`). One-way; a reload's new
    /// loop is ready again.
    pub fn set_unready(&self) {
        self.unready.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Asks the loop to write out its buffered access records and reopen
    /// the access log file (SIGUSR1, after logrotate moved it). A failed
    /// reopen is logged and the old file kept.
    pub fn reopen_access_log(&self) {
        self.reopen.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Reopens the log files (SIGUSR1): the access log file, if there is
    /// one ([`ServerHandle::reopen_access_log`]); diagnostics go to stderr.
    pub fn reopen_logs(&self) {
        info!("reopening logs");
        self.reopen_access_log();
    }
}

/// A new descriptor for the listening socket behind `l`, if it still
/// exists. Errors: the `dup` failed (`EMFILE`).
fn copy_of(l: &Weak<TcpListener>) -> Option<std::io::Result<std::net::TcpListener>> {
    use std::os::fd::AsFd;
    let l = l.upgrade()?;
    Some(
        l.as_fd()
            .try_clone_to_owned()
            .map(std::net::TcpListener::from),
    )
}

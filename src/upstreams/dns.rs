//! Host names of upstream servers (ARCHITECTURE.md §13): the [`Resolver`]
//! trait (the system's resolver by default; a test passes its own), and
//! the resolver thread that looks names up again every `resolve_interval`
//! off the loop's thread and hands changed address sets to the loop
//! through a channel and the loop's `mio::Waker` (the loop stays one
//! thread; a slow DNS server never stalls it).
//!
//! What it must not know: the loop, groups beyond the indices it is given,
//! connections.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use mio::Waker;

/// Turns a host name and port into socket addresses. Called at start on
/// the loop's thread (before it runs), then on the resolver thread.
pub trait Resolver: Send + Sync {
    /// The addresses of `host` (a name, never an IP literal) at `port`.
    ///
    /// Errors: the name does not resolve (the caller keeps the last set).
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (`getaddrinfo`, which reads `/etc/hosts`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// One name to keep resolving: server `origin` of group `group`.
#[derive(Debug, Clone)]
pub(crate) struct Name {
    /// Index of the group.
    pub group: usize,
    /// Index of the server in the group's declaration.
    pub origin: usize,
    /// The host name.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Time between lookups.
    pub interval: Duration,
    /// The last address set handed to the loop (sorted).
    pub last: Vec<SocketAddr>,
}

/// A changed address set for server `origin` of group `group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Update {
    /// Index of the group.
    pub group: usize,
    /// Index of the server in the group's declaration.
    pub origin: usize,
    /// Its addresses now (sorted, never empty).
    pub addrs: Vec<SocketAddr>,
}

/// The running resolver thread: the loop reads [`Update`]s from it. When
/// dropped, the thread ends at its next wake-up (it is not waited for: a
/// lookup may block for the system resolver's timeout).
pub(crate) struct ResolverThread {
    updates: Receiver<Update>,
    _stop: Sender<()>,
}

impl ResolverThread {
    /// Starts a thread resolving `names` with `resolver`, waking the loop
    /// through `waker` after each changed set.
    ///
    /// Errors: the thread could not be spawned.
    pub(crate) fn spawn(
        mut names: Vec<Name>,
        resolver: Arc<dyn Resolver>,
        waker: Arc<Waker>,
    ) -> io::Result<Self> {
        let (tx, updates) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("sluice-resolver".into())
            .spawn(move || {
                let start = Instant::now();
                let mut due: Vec<Instant> = names.iter().map(|n| start + n.interval).collect();
                loop {
                    let now = Instant::now();
                    let next = due
                        .iter()
                        .min()
                        .copied()
                        .unwrap_or(now + Duration::from_secs(3600));
                    match stopped.recv_timeout(next.saturating_duration_since(now)) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let now = Instant::now();
                    for (n, at) in names.iter_mut().zip(due.iter_mut()) {
                        if *at > now {
                            continue;
                        }
                        *at = now + n.interval;
                        if let Some(u) = lookup(resolver.as_ref(), n) {
                            if tx.send(u).is_err() {
                                return;
                            }
                            let _ = waker.wake();
                        }
                    }
                }
            })?;
        Ok(ResolverThread {
            updates,
            _stop: stop,
        })
    }

    /// The next update waiting, if any.
    pub(crate) fn try_next(&self) -> Option<Update> {
        self.updates.try_recv().ok()
    }
}

/// Looks `n` up once: the update if its set changed. A failed or empty
/// lookup keeps the last set (logged).
pub(crate) fn lookup(resolver: &dyn Resolver, n: &mut Name) -> Option<Update> {
    match resolver.resolve(&n.host, n.port) {
        Ok(mut addrs) if !addrs.is_empty() => {
            addrs.sort_unstable();
            addrs.dedup();
            if addrs == n.last {
                return None;
            }
            log::info!(
                "upstream host {}:{} now resolves to {addrs:?}",
                n.host,
                n.port
            );
            n.last = addrs.clone();
            Some(Update {
                group: n.group,
                origin: n.origin,
                addrs,
            })
        }
        Ok(_) => {
            log::warn!("upstream host {}: no address{}", n.host, keeping(n));
            None
        }
        Err(e) => {
            log::warn!("upstream host {}: {e}{}", n.host, keeping(n));
            None
        }
    }
}

/// What a failed lookup leaves in place: the last set, or (before any
/// lookup succeeded, `resolve = "lazy"`) nothing yet.
fn keeping(n: &Name) -> &'static str {
    if n.last.is_empty() {
        "; no address yet, retried at the next resolve interval"
    } else {
        "; keeping the last set"
    }
}

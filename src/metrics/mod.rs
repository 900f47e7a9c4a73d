//! Metrics for the whole process group (ARCHITECTURE.md §11): the shared
//! [`Region`] every worker publishes its [`Stats`] into, how it and the
//! admin listener are handed from the supervisor to its workers
//! ([`GroupMetrics`] → [`Observer`]), and their rendering for the admin
//! endpoints (`expose`, with the families it declares in `families`, the
//! upstream servers' series in `servers`, the certificates in `certs` and
//! the upstream tier of `/status` in `tier`).
//!
//! Handoff: the supervisor binds the admin address once (a plain bind, so
//! an address in use is an error) and creates the region; each worker
//! inherits both descriptors, named by [`ADMIN_FD_ENV`] and
//! [`METRICS_FD_ENV`], and its worker index by [`SLOT_ENV`]. Every
//! worker's loop serves the one admin socket (the kernel gives each
//! connection to one of them), and any of them can answer for all: the
//! region holds every worker's numbers (per index totals that only grow,
//! and one slot per running loop: `region`). A single process does the
//! same with a region of one index; a reload's new loop takes over its
//! admin socket and region ([`Observer::clone_for`]).
//!
//! What it must not know: HTTP, the loop's internals.

pub(crate) mod certs;
pub(crate) mod expose;
mod families;
mod region;
mod servers;
pub(crate) mod tier;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::Command;
use std::sync::Arc;

pub use region::Region;

use crate::config::Config;
use crate::config::MAX_WORKERS;
use crate::stats::{Stats, VALUE_COUNT};

/// Loop slots of a single process's region: the running loop and those
/// that still drain after reloads.
const STANDALONE_LOOPS: usize = 16;

/// Environment variable naming the inherited region's descriptor.
pub const METRICS_FD_ENV: &str = "SLUICE_METRICS_FD";
/// Environment variable naming the inherited admin listener's descriptor.
pub const ADMIN_FD_ENV: &str = "SLUICE_ADMIN_FD";
/// Environment variable naming the worker's index in the region.
pub const SLOT_ENV: &str = "SLUICE_METRICS_SLOT";

/// What one loop needs to publish its numbers and serve the admin
/// endpoints.
#[derive(Debug)]
pub struct Observer {
    pub(crate) region: Arc<Region>,
    /// The worker index (`worker` label).
    pub(crate) slot: usize,
    pub(crate) admin: Option<TcpListener>,
    pub(crate) started_ms: u64,
    pub(crate) digest: u64,
    /// The loop slot this loop holds in the region ([`Observer::claim`]),
    /// released on drop.
    pub(crate) claimed: Option<usize>,
    /// What was last added to the index's totals.
    last: Vec<u64>,
}

impl Observer {
    /// For a process of its own (not a supervised worker): a region of one
    /// index and the admin listener bound on `config.admin`; `None` when no
    /// admin address is set.
    ///
    /// Errors: the admin address cannot be bound (the message names it), or
    /// the region cannot be created.
    pub fn standalone(config: &Config) -> io::Result<Option<Observer>> {
        let Some(addr) = config.admin else {
            return Ok(None);
        };
        let admin = bind_admin(addr)?;
        Ok(Some(Observer::new(
            Arc::new(Region::create(1, STANDALONE_LOOPS)?),
            0,
            Some(admin),
            config,
        )))
    }

    /// For a worker started by a supervisor that set [`METRICS_FD_ENV`],
    /// [`ADMIN_FD_ENV`] and [`SLOT_ENV`]; otherwise as
    /// [`Observer::standalone`].
    ///
    /// Errors: as `standalone`, or the inherited descriptors are not what
    /// they should be.
    pub fn from_env(config: &Config) -> io::Result<Option<Observer>> {
        let fd = |name| std::env::var(name).ok().and_then(|v| v.parse::<i32>().ok());
        let (Some(metrics_fd), Some(admin_fd), Some(slot)) = (
            fd(METRICS_FD_ENV),
            fd(ADMIN_FD_ENV),
            std::env::var(SLOT_ENV)
                .ok()
                .and_then(|v| v.parse::<usize>().ok()),
        ) else {
            return Observer::standalone(config);
        };
        // SAFETY: the supervisor passed these descriptors to this process
        // alone, for this use; nothing else here opens or uses them.
        let region = unsafe { Region::from_raw_fd(metrics_fd)? };
        // SAFETY: as above.
        let admin = unsafe { TcpListener::from_raw_fd(admin_fd) };
        admin.set_nonblocking(true)?;
        Ok(Some(Observer::new(
            Arc::new(region),
            slot,
            Some(admin),
            config,
        )))
    }

    fn new(region: Arc<Region>, slot: usize, admin: Option<TcpListener>, cfg: &Config) -> Self {
        Observer {
            region,
            slot,
            admin,
            started_ms: region::now_ms(),
            digest: config_digest(cfg),
            claimed: None,
            last: vec![0; VALUE_COUNT],
        }
    }

    /// A handle on the same region for reading only (the admin side): it
    /// holds no loop slot and publishes nothing.
    pub(crate) fn reader(&self) -> Observer {
        Observer {
            region: self.region.clone(),
            slot: self.slot,
            admin: None,
            started_ms: self.started_ms,
            digest: self.digest,
            claimed: self.claimed,
            last: Vec::new(),
        }
    }

    /// Takes a loop slot in the region for the loop about to run (its
    /// numbers, draining flag and `/status` entry); the slot is freed when
    /// this observer drops. Without a free slot the loop still adds to its
    /// index's totals (logged).
    pub(crate) fn claim(&mut self) {
        self.claimed =
            self.region
                .claim(std::process::id(), self.slot, self.started_ms, self.digest);
        if self.claimed.is_none() {
            log::warn!(
                "metrics: no free loop slot for worker {}: its gauges and /status entry are missing",
                self.slot
            );
        }
    }

    /// Another observer for a loop of this process that replaces this
    /// one's (a reload with `--workers 1`): the same region and worker
    /// index, the same admin socket (a duplicated descriptor, so both loops
    /// serve it while the old one drains), and the digest of `config`.
    ///
    /// Errors: the admin descriptor could not be duplicated.
    pub fn clone_for(&self, config: &Config) -> io::Result<Observer> {
        let admin = match &self.admin {
            Some(l) => Some(l.try_clone()?),
            None => None,
        };
        Ok(Observer::new(self.region.clone(), self.slot, admin, config))
    }

    /// Adds what `stats` grew by to the index's totals and copies it into
    /// this loop's slot.
    pub(crate) fn publish(&mut self, stats: &Stats, draining: bool) {
        self.region.publish(
            self.slot,
            self.claimed,
            draining,
            &mut self.last,
            stats.values(),
        );
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        // Only the publishing observer (it has `last`) frees its slot.
        if let Some(slot) = self.claimed
            && !self.last.is_empty()
        {
            self.region.release(slot);
        }
    }
}

/// The supervisor's side: the admin listener and the region, made once
/// before the workers start.
#[derive(Debug)]
pub struct GroupMetrics {
    region: Region,
    admin: TcpListener,
}

impl GroupMetrics {
    /// Binds `config.admin` and creates a region with totals for every
    /// worker index a reload may ask for (`MAX_WORKERS`, at least
    /// `workers`) and loop slots for two generations of them; `None` when
    /// no admin address is set.
    ///
    /// Errors: the bind (naming the address) or the region failed.
    pub fn prepare(config: &Config, workers: usize) -> io::Result<Option<GroupMetrics>> {
        let Some(addr) = config.admin else {
            return Ok(None);
        };
        Ok(Some(GroupMetrics {
            admin: bind_admin(addr)?,
            region: {
                let indices = workers.max(MAX_WORKERS);
                Region::create(indices, indices * 2 + STANDALONE_LOOPS)?
            },
        }))
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> io::Result<SocketAddr> {
        self.admin.local_addr()
    }

    /// Makes the worker `cmd` starts inherit both descriptors, in slot
    /// `slot`.
    pub fn pass_to(&self, cmd: &mut Command, slot: usize) {
        let fds = [self.region.raw_fd(), self.admin.as_raw_fd()];
        cmd.env(METRICS_FD_ENV, fds[0].to_string())
            .env(ADMIN_FD_ENV, fds[1].to_string())
            .env(SLOT_ENV, slot.to_string());
        crate::shm::inherit(cmd, fds);
    }
}

/// Binds the admin listener (no `SO_REUSEPORT`: an address in use is an
/// error), non-blocking, with `TCP_DEFER_ACCEPT` (1 s): a scrape is
/// accepted once its request is there, so the admin cap's 20 ms grace
/// (`event_loop::admin`) runs from a request that can be answered at once,
/// not from a connect whose client was slow to write.
fn bind_admin(addr: SocketAddr) -> io::Result<TcpListener> {
    let l = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("admin listener {addr}: {e}")))?;
    l.set_nonblocking(true)?;
    // An optimisation: without it (a kernel that refuses it) the admin
    // listener works as before.
    let _ = crate::event_loop::listen::set_defer_accept(&l, 1);
    Ok(l)
}

/// FNV-1a (64-bit) of the effective configuration in its file form: the
/// same settings give the same digest in every process.
pub(crate) fn config_digest(config: &Config) -> u64 {
    let text = toml::to_string(config).unwrap_or_default();
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

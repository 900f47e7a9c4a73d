//! The supervisor's worker processes: one [`Slot`] per worker, how a
//! worker is started (this same executable, its whole configuration in
//! the environment), signalled, and described when it exits.
//!
//! A worker gets `SLUICE_WORKER=<index>`, `SLUICE_WORKER_CONFIG=<the
//! validated configuration as TOML>` (its `listen` is the supervisor's
//! resolved address, `takeover` on, `workers = 1`), `NOTIFY_SOCKET` =
//! the supervisor's inbox, and the inherited descriptors it shares with
//! the group: the tier board (`SLUICE_TIER`: its seat, generation, and
//! whether it replaces a worker that died), the ticket secret, and with
//! `--admin` the admin listener and metrics region. It parses no command line, so the user's
//! command line can refuse a repeated flag.
//!
//! What it must not know: HTTP, the loop's internals, the supervisor's
//! policy (when to start, restart or retire).

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{info, warn};
use sluice::Config;

use super::file;
use super::signals::signal_name;

/// Environment variable that tells a process it is worker number N.
pub const WORKER_ENV: &str = "SLUICE_WORKER";
/// Environment variable holding a worker's configuration (TOML).
pub const CONFIG_ENV: &str = "SLUICE_WORKER_CONFIG";

/// First restart delay after a worker died.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest restart delay.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A worker that lived this long resets its slot's backoff.
const STABLE_AFTER: Duration = Duration::from_secs(10);

/// The configuration a worker process runs with, if this process is one:
/// its index and the configuration its supervisor validated.
///
/// Errors: `SLUICE_WORKER` is set but the configuration is missing or
/// invalid.
pub fn worker_config() -> Option<Result<(usize, Config), String>> {
    let index = std::env::var(WORKER_ENV).ok()?;
    Some((|| {
        let index = index
            .parse()
            .map_err(|_| format!("{WORKER_ENV}={index:?} is not a worker index"))?;
        let text =
            std::env::var(CONFIG_ENV).map_err(|_| format!("{WORKER_ENV} without {CONFIG_ENV}"))?;
        let config = file::parse(&text).map_err(|e| format!("{CONFIG_ENV}{e}"))?;
        config
            .validate()
            .map_err(|e| file::describe_invalid(&e, None, false))?;
        Ok((index, config))
    })())
}

/// The addresses the supervisor holds for its workers (each port 0
/// resolved to the one real port all of them share): the plain
/// listeners' and the TLS listeners', in their configured order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listens {
    /// `listen`.
    pub plain: Vec<std::net::SocketAddr>,
    /// `listen_tls`.
    pub tls: Vec<std::net::SocketAddr>,
}

impl std::fmt::Display for Listens {
    /// `127.0.0.1:8080, 127.0.0.1:8081`, `TLS 127.0.0.1:8443`, or both
    /// joined by ` and `.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |addrs: &[std::net::SocketAddr]| {
            addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (self.plain.is_empty(), self.tls.is_empty()) {
            (false, false) => write!(f, "{} and TLS {}", join(&self.plain), join(&self.tls)),
            (false, true) => write!(f, "{}", join(&self.plain)),
            (true, false) => write!(f, "TLS {}", join(&self.tls)),
            (true, true) => write!(f, "-"),
        }
    }
}

/// The configuration handed to the workers of one generation: `config`
/// on the resolved addresses, shared (`takeover`), one loop each, no pid
/// file of their own.
pub fn for_workers(config: &Config, listen: &Listens) -> Result<Arc<String>, String> {
    let worker = Config {
        listen: listen.plain.clone(),
        listen_tls: listen.tls.clone(),
        takeover: true,
        workers: 1,
        pid_file: None,
        ..config.clone()
    };
    toml::to_string(&worker)
        .map(Arc::new)
        .map_err(|e| format!("cannot write the workers' configuration: {e}"))
}

/// What every worker inherits from the supervisor: the group's admin
/// listener and metrics region (with `--admin`), the instance's
/// session-ticket secret (`sluice::tls::secret_fd`), and the tier board.
pub struct Handoff<'a> {
    /// The admin listener and metrics region, if any.
    pub group: Option<&'a sluice::GroupMetrics>,
    /// The sealed memory file holding the ticket secret.
    pub ticket_secret: &'a std::os::fd::OwnedFd,
    /// The workers' tier board (`sluice::TierBoard`).
    pub board: &'a sluice::TierBoard,
}

/// One worker position: the process in it now, and its restart state.
pub struct Slot {
    /// Worker index (in log tags: `w<index>`).
    pub index: usize,
    /// Reload generation the slot belongs to.
    pub generation: u64,
    /// The configuration its process runs (TOML, see [`for_workers`]).
    pub config: Arc<String>,
    /// The running process.
    pub child: Option<Child>,
    /// The running process said `READY=1`.
    pub ready: bool,
    /// Its process is draining and is not restarted when it exits.
    pub retiring: bool,
    started: Instant,
    backoff: Duration,
    restart_at: Option<Instant>,
    /// Processes started in this slot so far (a later one replaces one
    /// that died).
    starts: u32,
}

impl Slot {
    /// A slot whose process starts at the next [`Slot::tick`].
    pub fn new(index: usize, generation: u64, config: Arc<String>, now: Instant) -> Slot {
        Slot {
            index,
            generation,
            config,
            child: None,
            ready: false,
            retiring: false,
            started: now,
            backoff: BACKOFF_MIN,
            restart_at: Some(now),
            starts: 0,
        }
    }

    /// The pid of its process, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Reaps its process if it exited: the exit status, logged. A slot
    /// that is not retiring schedules a restart after its backoff (when
    /// `restart`).
    pub fn reap(&mut self, now: Instant, restart: bool) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let status = match child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) => return None,
            Err(e) => {
                warn!("worker {}: wait failed: {e}", self.index);
                return None;
            }
        };
        let pid = child.id();
        self.child = None;
        self.ready = false;
        let lived = now.saturating_duration_since(self.started);
        if self.retiring || !restart {
            info!(
                "worker {} pid={pid} exited: {}",
                self.index,
                describe(status)
            );
            return Some(status);
        }
        if lived >= STABLE_AFTER {
            self.backoff = BACKOFF_MIN;
        }
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        self.restart_at = Some(now + delay);
        warn!(
            "worker {} pid={pid} died unexpectedly: {} after {:.1}s; restarting in {delay:?}",
            self.index,
            describe(status),
            lived.as_secs_f64()
        );
        Some(status)
    }

    /// Starts its process if it is due.
    ///
    /// Errors: the process could not be started (the executable is gone,
    /// not executable, ...); the caller decides whether to
    /// [retry](Slot::retry_later).
    pub fn tick(
        &mut self,
        exe: &Path,
        notify: &Path,
        handoff: &Handoff<'_>,
        now: Instant,
    ) -> io::Result<()> {
        if self.child.is_some() || self.retiring || self.restart_at.is_none_or(|t| t > now) {
            return Ok(());
        }
        self.restart_at = None;
        self.started = now;
        let child = spawn(exe, notify, handoff, self)?;
        self.starts += 1;
        info!("worker {} started pid={}", self.index, child.id());
        self.child = Some(child);
        Ok(())
    }

    /// After a start that failed: tries again after its backoff, which it
    /// returns.
    pub fn retry_later(&mut self, now: Instant) -> Duration {
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        self.restart_at = Some(now + delay);
        delay
    }

    /// Sends `sig` to its process, if one runs.
    pub fn signal(&self, sig: i32) {
        let Some(Ok(pid)) = self.pid().map(libc::pid_t::try_from) else {
            return;
        };
        // SAFETY: kill(2) with a pid of our own child that has not been
        // reaped yet (a reaped child leaves `child`), so it is not reused.
        if unsafe { libc::kill(pid, sig) } != 0 {
            warn!("kill({pid}, {sig}): {}", io::Error::last_os_error());
        }
    }

    /// Drains its process (SIGTERM) and never restarts it.
    pub fn retire(&mut self) {
        self.retiring = true;
        self.restart_at = None;
        self.signal(libc::SIGTERM);
    }
}

/// Starts the worker of `slot`: its configuration and index in the
/// environment, readiness to `notify`, and the group's admin listener and
/// metrics region (`group`) inherited, in its slot if the region has one.
fn spawn(exe: &Path, notify: &Path, handoff: &Handoff<'_>, slot: &Slot) -> io::Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.env(WORKER_ENV, slot.index.to_string())
        .env(CONFIG_ENV, slot.config.as_str())
        .env("NOTIFY_SOCKET", notify)
        .stdin(Stdio::null())
        .process_group(0);
    if let Some(g) = handoff.group {
        g.pass_to(&mut cmd, slot.index);
    }
    sluice::tls::secret_fd::pass_to(handoff.ticket_secret, &mut cmd);
    handoff
        .board
        .pass_to(&mut cmd, slot.index, slot.generation, slot.starts > 0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only async-signal-safe functions (prctl, getppid); it does
        // not allocate.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // The supervisor died before prctl: do not run orphaned.
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// An exit status in words: `exit status 2`, `killed by SIGKILL`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by {}", signal_name(sig)),
        _ => status.to_string(),
    }
}

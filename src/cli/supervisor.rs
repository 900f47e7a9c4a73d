//! `--workers N` (N > 1): this process becomes a small supervisor.
//!
//! It starts N worker processes, each the current executable run again
//! with the same arguments plus `--listen ADDR --workers 1` and
//! `SLUICE_WORKER=<index>` in its environment. Each worker binds its own
//! `SO_REUSEPORT` listener on the same address and runs one loop on one
//! thread; the kernel spreads new connections across them.
//!
//! - A worker that exits while the supervisor is not draining is restarted
//!   after a backoff: 100 ms, doubling to 5 s, back to 100 ms once a worker
//!   has lived 10 s. Every exit and restart is logged.
//! - SIGTERM/SIGINT are forwarded to every worker (a graceful drain there);
//!   from then on nothing is restarted, and the supervisor exits when the
//!   last worker is gone: 0 if every worker exited 0, else 1. A second
//!   signal is forwarded too (the workers stop at once); a third one sends
//!   SIGKILL.
//! - Workers are in their own process group, so a terminal's Ctrl-C reaches
//!   only the supervisor (which forwards it once), and on Linux they get
//!   SIGTERM if the supervisor dies (`PR_SET_PDEATHSIG`).
//!
//! The supervisor binds (without listening) a socket on the address first:
//! this reports an address that cannot be bound before any worker starts,
//! turns port 0 into one real port shared by all workers, and receives no
//! connection (only listening sockets do).
//!
//! What it must not know: HTTP, the loop's internals (workers are this
//! same binary).

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use log::{error, info, warn};
use signal_hook::iterator::Signals;
use sluice::Config;

use super::signals::signal_name;

/// Environment variable that tells a process it is worker number N.
pub const WORKER_ENV: &str = "SLUICE_WORKER";

/// First restart delay after a worker died.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest restart delay.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A worker that lived this long resets its slot's backoff.
const STABLE_AFTER: Duration = Duration::from_secs(10);
/// How often the supervisor looks at signals and children.
const TICK: Duration = Duration::from_millis(20);

struct Slot {
    index: usize,
    child: Option<Child>,
    started: Instant,
    backoff: Duration,
    restart_at: Option<Instant>,
}

/// Runs `n` workers until a signal and their exit. `signals` must already
/// be registered for SIGTERM and SIGINT.
pub fn run(config: &Config, n: usize, mut signals: Signals) -> ExitCode {
    let (probe, listen) = match probe_bind(config.listen) {
        Ok(p) => p,
        Err(e) => {
            error!("cannot bind {}: {e}", config.listen);
            eprintln!("sluice: cannot start: bind {}: {e}", config.listen);
            return ExitCode::from(1);
        }
    };
    // One admin listener and one metrics region for the whole group,
    // inherited by every worker (`sluice::GroupMetrics`).
    let group = match sluice::GroupMetrics::prepare(config, n) {
        Ok(g) => g,
        Err(e) => {
            error!("cannot start: {e}");
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sluice: cannot start workers: current executable: {e}");
            return ExitCode::from(1);
        }
    };
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    args.extend(["--listen".into(), listen.to_string().into()]);
    args.extend(["--workers".into(), "1".into()]);
    info!(
        "sluice {} supervisor: {n} workers on {listen} → upstream {}",
        env!("CARGO_PKG_VERSION"),
        super::file::groups_summary(config)
    );
    if let Some(addr) = group.as_ref().and_then(|g| g.admin_addr().ok()) {
        info!("admin endpoints on http://{addr}/ (metrics, healthz, readyz, status)");
    }

    let now = Instant::now();
    let mut slots: Vec<Slot> = (0..n)
        .map(|index| Slot {
            index,
            child: None,
            started: now,
            backoff: BACKOFF_MIN,
            restart_at: Some(now),
        })
        .collect();
    let mut draining = false;
    let mut received = 0u32;
    let mut all_clean = true;
    loop {
        for sig in signals.pending() {
            if sig == libc::SIGHUP {
                info!("SIGHUP ignored: no reload (restart with SIGTERM, see the README)");
                continue;
            }
            received += 1;
            let live = slots.iter().filter(|s| s.child.is_some()).count();
            let forward = match received {
                1 => {
                    info!("{}: draining {live} workers", signal_name(sig));
                    draining = true;
                    sig
                }
                2 => {
                    warn!("{} again: workers stop now", signal_name(sig));
                    sig
                }
                _ => {
                    warn!("{} a third time: killing workers", signal_name(sig));
                    libc::SIGKILL
                }
            };
            for child in slots.iter().filter_map(|s| s.child.as_ref()) {
                send(child, forward);
            }
        }
        let now = Instant::now();
        for slot in &mut slots {
            if let Some(child) = slot.child.as_mut() {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        let pid = child.id();
                        slot.child = None;
                        let lived = now.saturating_duration_since(slot.started);
                        if draining {
                            info!(
                                "worker {} pid={pid} exited: {}",
                                slot.index,
                                describe(status)
                            );
                            all_clean &= status.success();
                        } else {
                            if lived >= STABLE_AFTER {
                                slot.backoff = BACKOFF_MIN;
                            }
                            let delay = slot.backoff;
                            slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
                            slot.restart_at = Some(now + delay);
                            warn!(
                                "worker {} pid={pid} died unexpectedly: {} after {:.1}s; \
                                 restarting in {delay:?}",
                                slot.index,
                                describe(status),
                                lived.as_secs_f64()
                            );
                        }
                    }
                    Ok(None) => {}
                    Err(e) => warn!("worker {}: wait failed: {e}", slot.index),
                }
            }
            if slot.child.is_none() && !draining && slot.restart_at.is_some_and(|t| t <= now) {
                start(slot, &exe, &args, group.as_ref(), now);
            }
        }
        if draining && slots.iter().all(|s| s.child.is_none()) {
            break;
        }
        thread::sleep(TICK);
    }
    drop(probe);
    if all_clean {
        info!("all workers exited: supervisor exits");
        ExitCode::SUCCESS
    } else {
        warn!("all workers exited, not all cleanly: supervisor exits with status 1");
        ExitCode::from(1)
    }
}

fn start(
    slot: &mut Slot,
    exe: &Path,
    args: &[OsString],
    group: Option<&sluice::GroupMetrics>,
    now: Instant,
) {
    slot.restart_at = None;
    slot.started = now;
    match spawn_worker(exe, args, slot.index, group) {
        Ok(child) => {
            info!("worker {} started pid={}", slot.index, child.id());
            slot.child = Some(child);
        }
        Err(e) => {
            let delay = slot.backoff;
            slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
            slot.restart_at = Some(now + delay);
            error!(
                "worker {}: cannot start {}: {e}; retrying in {delay:?}",
                slot.index,
                exe.display()
            );
        }
    }
}

fn spawn_worker(
    exe: &Path,
    args: &[OsString],
    index: usize,
    group: Option<&sluice::GroupMetrics>,
) -> io::Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env(WORKER_ENV, index.to_string())
        .stdin(Stdio::null())
        .process_group(0);
    if let Some(g) = group {
        g.pass_to(&mut cmd, index);
    }
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

fn send(child: &Child, sig: i32) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) with a pid of our own child that has not been reaped
    // yet (a reaped child leaves `slot.child`), so the pid is not reused.
    if unsafe { libc::kill(pid, sig) } != 0 {
        warn!("kill({pid}, {sig}): {}", io::Error::last_os_error());
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by {}", signal_name(sig)),
        _ => status.to_string(),
    }
}

/// Binds (does not listen on) `addr` with `SO_REUSEADDR` + `SO_REUSEPORT`,
/// like the workers' listeners: the bind error, or the socket and the
/// address with its real port.
fn probe_bind(addr: SocketAddr) -> io::Result<(socket2::Socket, SocketAddr)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    let local = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("bound address is not an IP address"))?;
    Ok((socket, local))
}

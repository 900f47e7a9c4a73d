//! `--workers N` (N > 1): this process becomes a small supervisor of N
//! worker processes (`cli::workers`), each one loop on one thread with its
//! own `SO_REUSEPORT` listeners on the same addresses; the kernel spreads
//! new connections across them.
//!
//! - Start: every `listen` and `listen_tls` address is checked (nothing
//!   else may listen there, unless `--takeover`) and held by a bound,
//!   non-listening socket: this reports a bad address before any worker
//!   starts, turns each port 0 into one real port for all workers, and
//!   receives no connection. Once every worker
//!   said `READY=1` (`cli::notify`), the supervisor tells the service
//!   manager `READY=1` and writes `--pid-file`.
//! - At start, before the first generation is ready, a worker that exits
//!   before it is ready (or cannot be started) ends the start: the
//!   supervisor stops the other workers and exits with that worker's
//!   status, 2 for an invalid configuration (an upstream host that does
//!   not resolve) and 1 otherwise, as the single process would. Retrying
//!   could not help, and a service manager must see the failure.
//! - Later, a worker that exits unasked is restarted after a backoff (100
//!   ms, doubling to 5 s, back to 100 ms once a worker lived 10 s).
//! - SIGHUP (reload): the configuration is read again (`cli::source`). If
//!   it is invalid, or changes `listen` or `listen_tls`, it is refused and
//!   logged, and nothing changes. Otherwise a new generation of workers starts with
//!   it; once all of them are ready, the old generation gets SIGTERM and
//!   drains (it is not restarted). A new worker that dies before it is
//!   ready, or cannot be started (the executable was removed), or a
//!   generation not ready within `READY_WITHIN`, fails the reload at once:
//!   the new generation is drained and the old one keeps serving.
//! - SIGTERM/SIGINT/SIGQUIT are forwarded to every worker (a graceful
//!   drain there) but those of a reload's old generation, which already
//!   drain on the supervisor's SIGTERM; from then on nothing is started, and the supervisor
//!   exits when the last worker is gone, with status 0 if every worker
//!   exited 0 and 1 otherwise. A second signal is forwarded too (the
//!   workers stop at once); a third one sends SIGKILL. SIGUSR1 (reopen
//!   logs) and SIGUSR2 (`/readyz` 503, serving goes on) are forwarded to
//!   the ready workers; other caught signals are logged.
//! - Workers are in their own process group, so a terminal's Ctrl-C reaches
//!   only the supervisor (which forwards it once), and on Linux they get
//!   SIGTERM if the supervisor dies (`PR_SET_PDEATHSIG`).
//!
//! What it must not know: HTTP, the loop's internals (workers are this
//! same binary).

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use log::{error, info, warn};
use sluice::Config;
use sluice::listen::{bind_error, check_free, reuse_port_socket};

use super::file::resolve_workers;
use super::notify::{self, Inbox};
use super::pidfile::PidFile;
use super::signals::{Action, Signals, action, log_ignored, signal_name};
use super::source::Source;
use super::workers::{Handoff, Listens, Slot, describe, for_workers};

/// How often the supervisor looks at signals, readiness and children.
const TICK: Duration = Duration::from_millis(20);
/// Longest time a new generation may take until all its workers are ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A reload under way: its generation and when it must be ready by.
struct Pending {
    generation: u64,
    deadline: Instant,
    config: Config,
}

/// The supervisor's state between ticks.
struct Supervisor {
    listen: Listens,
    config: Config,
    slots: Vec<Slot>,
    generation: u64,
    pending: Option<Pending>,
    draining: bool,
    stops: u32,
    all_clean: bool,
    announced: bool,
    pid_file: Option<PidFile>,
    /// The start failed: the supervisor's exit status.
    failed_start: Option<u8>,
}

/// Runs `n` workers until a signal and their exit. `signals` must already
/// be registered (`signals::register`).
pub fn run(config: Config, n: usize, source: &Source, mut signals: Signals) -> ExitCode {
    // Every address, plain and TLS, is held: checked, and port 0 made
    // one real port for every worker.
    let hold_all = |addrs: &[SocketAddr]| -> std::io::Result<Vec<(socket2::Socket, SocketAddr)>> {
        addrs.iter().map(|a| hold(*a, config.takeover)).collect()
    };
    let held = hold_all(&config.listen).and_then(|p| Ok((p, hold_all(&config.listen_tls)?)));
    let (held, listen) = match held {
        Ok((plain, tls)) => {
            let listen = Listens {
                plain: plain.iter().map(|h| h.1).collect(),
                tls: tls.iter().map(|h| h.1).collect(),
            };
            ((plain, tls), listen)
        }
        Err(e) => {
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let inbox = match Inbox::bind() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("sluice: cannot start: notification socket: {e}");
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
    let worker_config = match for_workers(&config, &listen) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    // One admin listener and one metrics region for the whole group,
    // inherited by every worker (`sluice::GroupMetrics`).
    let group = match sluice::GroupMetrics::prepare(&config, n) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    // The instance's session-ticket secret, made here once and inherited
    // by every worker of every generation (`sluice::tls::secret_fd`).
    let ticket_secret = match sluice::tls::secret_fd::process_secret()
        .map_err(|e| e.to_string())
        .and_then(|s| sluice::tls::secret_fd::secret_memfd(s).map_err(|e| e.to_string()))
    {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("sluice: cannot start: session ticket secret: {e}");
            return ExitCode::from(1);
        }
    };
    // The board the workers share their view of the upstream tier on,
    // and hand it over to the next generation (`sluice::TierBoard`).
    let board = match sluice::TierBoard::create(board_slots(n)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("sluice: cannot start: tier board: {e}");
            return ExitCode::from(1);
        }
    };
    info!(
        "sluice {} supervisor: {n} workers on {listen} → upstream {}",
        env!("CARGO_PKG_VERSION"),
        super::file::groups_summary(&config)
    );
    if let Some(addr) = group.as_ref().and_then(|g| g.admin_addr().ok()) {
        info!("admin endpoints on http://{addr}/ (metrics, healthz, readyz, status)");
    }
    let now = Instant::now();
    let mut sup = Supervisor {
        listen,
        slots: (0..n)
            .map(|i| Slot::new(i, 0, worker_config.clone(), now))
            .collect(),
        config,
        generation: 0,
        pending: None,
        draining: false,
        stops: 0,
        all_clean: true,
        announced: false,
        pid_file: None,
        failed_start: None,
    };
    loop {
        for origin in signals.pending() {
            sup.on_signal(origin.signal, source);
        }
        let now = Instant::now();
        let ready = inbox.ready_pids();
        sup.tick(now, &ready);
        let handoff = Handoff {
            group: group.as_ref(),
            ticket_secret: &ticket_secret,
            board: &board,
        };
        sup.start_due(&exe, inbox.path(), &handoff, now);
        if sup.draining && sup.slots.iter().all(|s| s.child.is_none()) {
            break;
        }
        thread::sleep(TICK);
    }
    drop(held);
    if let Some(code) = sup.failed_start {
        error!("start failed: supervisor exits with status {code}");
        ExitCode::from(code)
    } else if sup.all_clean {
        info!("all workers exited: supervisor exits");
        ExitCode::SUCCESS
    } else {
        warn!("all workers exited, not all cleanly: supervisor exits with status 1");
        ExitCode::from(1)
    }
}

/// Loop slots of the tier board for a group started with `n` workers:
/// three generations of them (a reload's old and new side, and one more
/// reload under way), at least 8 workers' worth, and 16 to spare. A
/// reload to many more workers leaves the ones past it without a slot
/// (logged; their health starts fresh and the others do not see it).
fn board_slots(n: usize) -> usize {
    n.max(8) * 3 + 16
}

/// Checks `addr` (unless `takeover`) and binds, without listening, a
/// socket on it like the workers' listeners: the socket and the address
/// with its real port.
fn hold(addr: SocketAddr, takeover: bool) -> std::io::Result<(socket2::Socket, SocketAddr)> {
    let bind = || {
        let addr = if takeover { addr } else { check_free(addr)? };
        let socket = reuse_port_socket(addr)?;
        socket.bind(&addr.into())?;
        Ok((socket, addr))
    };
    bind().map_err(|e| bind_error(addr, e))
}

impl Supervisor {
    fn on_signal(&mut self, sig: i32, source: &Source) {
        let name = signal_name(sig);
        let action = action(sig);
        match action {
            Action::Stop => {
                self.stops += 1;
                let forward = match self.stops {
                    1 => {
                        let live = self.slots.iter().filter(|s| s.child.is_some()).count();
                        info!("{name}: draining {live} workers");
                        notify::stopping();
                        self.draining = true;
                        self.pending = None;
                        sig
                    }
                    2 => {
                        warn!("{name} again: workers stop now");
                        sig
                    }
                    _ => {
                        warn!("{name} a third time: killing workers");
                        libc::SIGKILL
                    }
                };
                // A reload's old generation already drains on the
                // supervisor's SIGTERM: the first stop passes it by (a
                // second SIGTERM from the supervisor would stop it at once
                // and cut its exchanges); a later stop reaches every worker.
                let first = self.stops == 1;
                self.slots
                    .iter()
                    .filter(|s| !(first && s.retiring))
                    .for_each(|s| s.signal(forward));
            }
            Action::Reload if self.draining => warn!("{name} ignored: draining"),
            Action::Reload => self.reload(source),
            Action::ReopenLogs | Action::Unready => {
                if action == Action::ReopenLogs {
                    info!("{name}: workers reopen their logs");
                } else {
                    info!("{name}: workers say not ready on /readyz; still serving");
                }
                // A worker not ready yet may not have its handlers yet (and
                // opens its logs fresh anyway).
                self.slots
                    .iter()
                    .filter(|s| s.ready)
                    .for_each(|s| s.signal(sig));
            }
            Action::Ignore => log_ignored(sig),
        }
    }

    /// SIGHUP: a new generation with the configuration read again, or the
    /// reason it is refused.
    fn reload(&mut self, source: &Source) {
        notify::reloading();
        let started = source.load().and_then(|new| {
            if let Some(why) = super::signals::listeners_changed(&self.config, &new) {
                return Err(why);
            }
            let new = super::signals::keep_admin(&self.config, new);
            // What would stop every new worker, said here with its reason
            // rather than as "exited before it was ready".
            sluice::check_token_file(&new).map_err(|e| e.to_string())?;
            let worker_config = for_workers(&new, &self.listen)?;
            if let Some(old) = self.pending.take() {
                warn!("SIGHUP: replaces the reload still starting");
                self.retire_generation(old.generation);
            }
            self.generation += 1;
            let n = resolve_workers(new.workers);
            let now = Instant::now();
            for i in 0..n {
                let slot = Slot::new(i, self.generation, worker_config.clone(), now);
                self.slots.push(slot);
            }
            info!(
                "SIGHUP: starting {n} workers with the new configuration → upstream {}",
                super::file::groups_summary(&new)
            );
            self.pending = Some(Pending {
                generation: self.generation,
                deadline: now + READY_WITHIN,
                config: new,
            });
            Ok(())
        });
        if let Err(msg) = started {
            error!("SIGHUP: reload failed, the running configuration stays: {msg}");
            notify::reloaded("reload failed; the running configuration stays");
        }
    }

    /// Readiness, exits, and the end of a reload.
    fn tick(&mut self, now: Instant, ready: &[u32]) {
        for slot in &mut self.slots {
            if slot.pid().is_some_and(|p| ready.contains(&p)) {
                slot.ready = true;
            }
        }
        let pending = self.pending.as_ref().map(|p| p.generation);
        let mut failed = None;
        let mut start_failed = None;
        let at_start = self.at_start();
        for slot in &mut self.slots {
            let was_ready = slot.ready;
            let fails_reload = Some(slot.generation) == pending && !was_ready;
            let fails_start = at_start && first_generation(slot) && !was_ready;
            let restart = !self.draining && !fails_reload && !fails_start;
            let Some(status) = slot.reap(now, restart) else {
                continue;
            };
            // A worker stopped before it was ready may have had no handler
            // for the signal yet: its status says nothing about the drain.
            if self.draining && was_ready {
                self.all_clean &= status.success();
            }
            let why = || {
                format!(
                    "worker {} exited before it was ready ({})",
                    slot.index,
                    describe(status)
                )
            };
            if fails_reload {
                failed = Some(format!("new {}", why()));
            }
            if fails_start && !self.draining && start_failed.is_none() {
                start_failed = Some((why(), status));
            }
        }
        if let Some((why, status)) = start_failed {
            // 2: the worker found the configuration invalid.
            self.give_up(&why, if status.code() == Some(2) { 2 } else { 1 });
        }
        self.slots.retain(|s| !(s.retiring && s.child.is_none()));
        if let Some(p) = &self.pending {
            let gen_ready = self
                .slots
                .iter()
                .filter(|s| s.generation == p.generation)
                .all(|s| s.ready);
            if failed.is_none() && now >= p.deadline && !gen_ready {
                failed = Some(format!("new workers not ready within {READY_WITHIN:?}"));
            }
            if let Some(why) = failed {
                self.fail_reload(&why);
            } else if gen_ready {
                self.finish_reload();
            }
        }
        if !self.announced && !self.draining && self.slots.iter().all(|s| s.ready || s.retiring) {
            self.announce();
        }
    }

    /// Starts the processes of the slots that are due. A start that fails
    /// fails the reload (a new generation's slot) or the start (a slot of
    /// the first generation before it was ready); else it is retried after
    /// the slot's backoff.
    fn start_due(&mut self, exe: &Path, notify: &Path, handoff: &Handoff<'_>, now: Instant) {
        if self.draining {
            return;
        }
        let pending = self.pending.as_ref().map(|p| p.generation);
        let mut reload_failed = None;
        let mut start_failed = None;
        let at_start = self.at_start();
        for slot in &mut self.slots {
            let Err(e) = slot.tick(exe, notify, handoff, now) else {
                continue;
            };
            let why = format!("cannot start worker {}: {}: {e}", slot.index, exe.display());
            if Some(slot.generation) == pending {
                reload_failed.get_or_insert(why);
            } else if at_start && first_generation(slot) {
                // Not an invalid configuration: a runtime error (1).
                start_failed = Some(why);
                break;
            } else {
                let delay = slot.retry_later(now);
                error!("{why}; retrying in {delay:?}");
            }
        }
        if let Some(why) = start_failed {
            self.give_up(&why, 1);
        } else if let Some(why) = reload_failed {
            self.fail_reload(&why);
        }
    }

    /// The first generation was never ready yet, and no stop was asked:
    /// a worker of it that fails fails the start.
    fn at_start(&self) -> bool {
        !self.announced && !self.draining
    }

    /// A worker of the first generation could not start (`why`): the
    /// others stop and the supervisor exits with `code`.
    fn give_up(&mut self, why: &str, code: u8) {
        error!(
            "{why} at start: stopping the other workers; the supervisor exits with status {code}"
        );
        self.failed_start = Some(code);
        self.draining = true;
        self.all_clean = false;
        self.pending = None;
        self.slots.iter().for_each(|s| s.signal(libc::SIGTERM));
    }

    /// The reload under way failed (`why`): its workers drain, the running
    /// ones stay.
    fn fail_reload(&mut self, why: &str) {
        let Some(p) = self.pending.take() else {
            return;
        };
        self.retire_generation(p.generation);
        error!("SIGHUP: reload failed ({why}); the running workers stay");
        notify::reloaded("reload failed; the running configuration stays");
    }

    /// The new generation is ready: the others drain.
    fn finish_reload(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        for slot in &mut self.slots {
            if slot.generation != p.generation && !slot.retiring {
                slot.retire();
            }
        }
        // 1.5 s: `DEFERRED_GRACE` in the library's event_loop/drain.rs.
        info!(
            "SIGHUP: reloaded; the previous workers drain (their listeners stay open 1.5 s for \
             the connections the kernel holds, so a new connection may reach the previous \
             configuration until then)"
        );
        self.config = p.config;
        notify::reloaded("reloaded");
    }

    fn retire_generation(&mut self, generation: u64) {
        for slot in &mut self.slots {
            if slot.generation == generation {
                slot.retire();
            }
        }
    }

    /// Every worker listens: tell the service manager, write the pid file.
    fn announce(&mut self) {
        self.announced = true;
        info!("all workers ready on {}", self.listen);
        if let Some(path) = &self.config.pid_file {
            match PidFile::write(path) {
                Ok(p) => self.pid_file = Some(p),
                Err(msg) => {
                    error!("{msg}: draining");
                    self.draining = true;
                    self.all_clean = false;
                    self.slots.iter().for_each(|s| s.signal(libc::SIGTERM));
                    return;
                }
            }
        }
        notify::ready(false);
    }
}

/// Whether `slot` is one of the first generation's, not stopped on purpose.
fn first_generation(slot: &Slot) -> bool {
    slot.generation == 0 && !slot.retiring
}

//! Signals: which ones sluice catches and what each means
//! ([`Action`]), and the signal thread of a process that runs the loop
//! itself (a worker, or the single process of `--workers 1`).
//!
//! | signal | sluice | nginx | HAProxy |
//! |---|---|---|---|
//! | SIGTERM, SIGINT, SIGQUIT | graceful drain; again: stop now | TERM/INT fast stop, QUIT graceful | TERM hard stop, USR1 soft stop |
//! | SIGHUP | reload the config file | reload | (master) reload |
//! | SIGUSR1 | reopen logs | reopen logs | soft stop |
//! | SIGUSR2 | `/readyz` 503, serving goes on (before a drain) | USR2 binary upgrade | (master) reload |
//! | others caught | logged, ignored | | |
//!
//! Design choice: the signals are caught with `signal-hook`'s [`Signals`]
//! iterator on a small dedicated thread, not inside the loop. That thread
//! only calls [`ServerHandle`] methods (each sets a flag and wakes the
//! loop through its `mio::Waker`); the event loop stays on one thread and
//! knows nothing of signals.
//!
//! Reload with `--workers 1` (no supervisor): the process starts a second
//! [`Server`] with the new configuration on the old one's listening socket
//! ([`Server::succeed`]: no bind), runs it on a new thread, and drains the old
//! one, which returns from `run` when its connections are done. Each loop
//! still has one thread; for the length of a drain two loops run side by
//! side. The pid stays the same (systemd's main pid, the pid file).
//!
//! What it must not know: the loop's internals beyond [`ServerHandle`].

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::{self, JoinHandle};

use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use sluice::{ByRoutes, Config, Observer, Server, ServerHandle};

use super::notify;
use super::source::Source;

/// The caught signals as they come, each with the pid that sent it.
pub type Signals = SignalsInfo<WithOrigin>;

/// Every signal sluice catches. Others keep their default action.
const CAUGHT: [i32; 11] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
];

/// What a caught signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Drain (the first), stop now (the second), exit (the third).
    Stop,
    /// Re-read the config file.
    Reload,
    /// Reopen the log files (logrotate).
    ReopenLogs,
    /// Say not ready on `/readyz`, go on serving (a balancer's cue).
    Unready,
    /// Log it and carry on.
    Ignore,
}

/// The action of `sig`.
pub fn action(sig: i32) -> Action {
    match sig {
        libc::SIGTERM | libc::SIGINT | libc::SIGQUIT => Action::Stop,
        libc::SIGHUP => Action::Reload,
        libc::SIGUSR1 => Action::ReopenLogs,
        libc::SIGUSR2 => Action::Unready,
        _ => Action::Ignore,
    }
}

/// Registers the handlers for every signal of [`CAUGHT`]. Do it before
/// binding: a signal that arrives before the thread starts is kept and
/// acted on then, and none of them kills the process meanwhile.
pub fn register() -> io::Result<Signals> {
    Signals::new(CAUGHT)
}

/// Counts the stop signals (SIGTERM, SIGINT, SIGQUIT) of a process that
/// runs the loop, by sender: the second one from the same side stops at
/// once, the third exits. A worker's sides are its supervisor and everyone
/// else, so `killall -TERM sluice` (or systemd's default
/// `KillMode=control-group`), which signals each worker and the supervisor
/// that forwards it, is one graceful drain and not two signals.
#[derive(Debug)]
pub struct Stops {
    /// The supervisor's pid, for a worker.
    supervisor: Option<i32>,
    /// Stops from the supervisor, from others.
    counts: [u32; 2],
}

impl Stops {
    /// No stop yet; `supervisor`: the supervisor's pid if this is a worker.
    pub fn new(supervisor: Option<i32>) -> Stops {
        Stops {
            supervisor,
            counts: [0, 0],
        }
    }

    /// Counts a stop sent by `sender` (None: unknown, counted as another
    /// process). Returns the step it asks for (1 drain, 2 stop at once, 3
    /// exit), or None if the other side already asked for as much (a
    /// duplicate).
    pub fn count(&mut self, sender: Option<i32>) -> Option<u32> {
        let before = self.level();
        let side = usize::from(sender.is_some() && sender == self.supervisor);
        if let Some(n) = self.counts.get_mut(side) {
            *n += 1;
        }
        let after = self.level();
        (after > before).then_some(after)
    }

    /// How far the stop went: 0 none, 1 drain, 2 stop at once, 3 exit.
    pub fn level(&self) -> u32 {
        self.counts.iter().copied().max().unwrap_or(0)
    }
}

/// `SIGTERM`, `SIGVTALRM`, …, or the number (the names are
/// `signal-hook`'s, which lacks the Linux-only `SIGPWR`).
pub fn signal_name(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(name) => name.to_string(),
        None if sig == libc::SIGPWR => "SIGPWR".to_string(),
        None => format!("signal {sig}"),
    }
}

/// The log line of a signal that changes nothing.
pub fn log_ignored(sig: i32) {
    log::warn!(
        "{} ignored (SIGHUP reloads, SIGUSR1 reopens logs, SIGUSR2 turns /readyz 503, SIGTERM drains)",
        signal_name(sig)
    );
}

/// The loops of this process: the newest serves, older ones drain.
struct Loops {
    /// Handles of every loop that may still run, newest last.
    handles: Vec<ServerHandle>,
    /// The configuration the newest loop runs with.
    config: Config,
    /// Where a reload reads the configuration (None for a worker, whose
    /// supervisor reloads).
    source: Option<Source>,
    /// Threads of loops started by a reload, for `main` to join.
    started: Sender<JoinHandle<io::Result<()>>>,
    /// The first loop's metrics and admin endpoints, which a reloaded loop
    /// takes over (`Observer::clone_for`).
    observer: Option<Observer>,
}

/// Starts the thread that acts on signals for `handle`'s loop. Returns the
/// receiver of the loops a reload starts: `main` joins them after its own
/// loop returned ([`join_reloaded`]).
pub fn spawn(
    mut signals: Signals,
    handle: ServerHandle,
    config: Config,
    source: Option<Source>,
    observer: Option<Observer>,
) -> io::Result<Receiver<JoinHandle<io::Result<()>>>> {
    let (tx, rx) = mpsc::channel();
    let mut loops = Loops {
        handles: vec![handle],
        config,
        source,
        started: tx,
        observer,
    };
    // A worker (no source: its supervisor reloads) knows its supervisor's
    // signals from others'.
    let supervisor = loops
        .source
        .is_none()
        .then(|| std::os::unix::process::parent_id() as i32);
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut stops = Stops::new(supervisor);
            for origin in signals.forever() {
                let sig = origin.signal;
                let name = signal_name(sig);
                // A loop a reload drained may have ended since: its handle
                // is not asked anything (SIGUSR1 logged "reopening logs"
                // for it too).
                loops.handles.retain(ServerHandle::is_running);
                match action(sig) {
                    Action::Stop => match stops.count(origin.process.map(|p| p.pid)) {
                        None => log::info!(
                            "{name} from the supervisor and from another process: \
                                 one drain (send again to stop at once)"
                        ),
                        Some(1) => {
                            log::info!("{name}: graceful drain (send again to stop at once)");
                            notify::stopping();
                            loops.handles.iter().for_each(ServerHandle::drain);
                        }
                        Some(2) => {
                            log::warn!("{name}, a second stop signal: stopping now");
                            loops.handles.iter().for_each(ServerHandle::shutdown);
                        }
                        _ => {
                            log::warn!("{name} a third time: exiting");
                            std::process::exit(1);
                        }
                    },
                    Action::Reload if stops.level() > 0 => log::warn!("{name} ignored: draining"),
                    Action::Reload => loops.reload(),
                    Action::ReopenLogs => {
                        log::info!("{name}: reopening logs");
                        // The access log's reopen (issue 13, deliverable 1).
                        loops.handles.iter().for_each(ServerHandle::reopen_logs);
                    }
                    Action::Unready => {
                        log::info!("{name}: /readyz says 503 from now on; still serving");
                        loops.handles.iter().for_each(ServerHandle::set_unready);
                    }
                    Action::Ignore => log_ignored(sig),
                }
            }
        })?;
    Ok(rx)
}

impl Loops {
    /// SIGHUP: read the configuration again; if it is valid, a new loop
    /// serves with it and the old one drains; if not, nothing changes.
    fn reload(&mut self) {
        let Some(source) = &self.source else {
            log::warn!("SIGHUP ignored: a worker is reloaded by its supervisor");
            return;
        };
        notify::reloading();
        let outcome = source.load().and_then(|new| self.start(new));
        match outcome {
            Ok(()) => {
                log::info!("SIGHUP: reloaded; the previous loop drains");
                notify::reloaded("reloaded");
            }
            Err(msg) => {
                log::error!("SIGHUP: reload failed, the running configuration stays: {msg}");
                notify::reloaded("reload failed; the running configuration stays");
            }
        }
    }

    /// Binds a loop with `new` on a thread of its own, then drains the
    /// others.
    fn start(&mut self, new: Config) -> Result<(), String> {
        if let Some(why) = listeners_changed(&self.config, &new) {
            return Err(why);
        }
        if new.workers != self.config.workers {
            log::warn!("workers changed in the file: takes effect on restart");
        }
        let new = keep_admin(&self.config, new);
        // The new loop shares the address with the running one.
        let bound = Config {
            takeover: true,
            ..new.clone()
        };
        let observer = match &self.observer {
            Some(o) => Some(
                o.clone_for(&bound)
                    .map_err(|e| format!("admin endpoints: {e}"))?,
            ),
            None => None,
        };
        let (tx, rx) = mpsc::channel();
        // The new loop serves on the newest loop's socket (no bind).
        let p = self.handles.last().cloned();
        let bind = move |c, o| Server::succeed(c, ByRoutes, o, p.as_ref());
        let thread = thread::Builder::new()
            .name("loop".into())
            .spawn(move || match bind(bound, observer) {
                Ok(server) => {
                    let _ = tx.send(Ok(server.handle()));
                    server.run()
                }
                Err(e) => {
                    let msg = e.to_string();
                    let _ = tx.send(Err(msg));
                    Err(e)
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let handle = rx
            .recv()
            .map_err(|_| "the new loop did not start".to_string())??;
        // Sent before the old loops drain: `main` finds it when they end.
        let _ = self.started.send(thread);
        // Loops that ended are forgotten (a handle per reload would add up).
        self.handles.retain(ServerHandle::is_running);
        for old in &self.handles {
            old.drain();
        }
        self.handles.push(handle);
        log::info!(
            "serving with the new configuration → upstream {}",
            super::file::groups_summary(&new)
        );
        self.config = new;
        Ok(())
    }
}

/// `new` with the admin address of the `running` configuration: the admin
/// listener is bound once, at start, and every loop (and worker) of a
/// reload takes it over; a changed `admin` is logged (WARN) as needing a
/// restart, like a changed `workers` for a single process. Keeping the
/// running address in the stored configuration warns again at the next
/// reload, and a worker never binds an admin address of its own.
pub fn keep_admin(running: &Config, new: Config) -> Config {
    if new.admin != running.admin {
        let show = |a: Option<std::net::SocketAddr>| a.map_or("off".to_string(), |a| a.to_string());
        log::warn!(
            "admin changed in the file ({} → {}): takes effect on restart; the admin endpoints stay on {}",
            show(running.admin),
            show(new.admin),
            show(running.admin)
        );
    }
    Config {
        admin: running.admin,
        ..new
    }
}

/// Waits for the loops started by reloads, in order, until none is left;
/// `first` is how the first loop ended. Errors: the last failure.
pub fn join_reloaded(
    first: io::Result<()>,
    started: &Receiver<JoinHandle<io::Result<()>>>,
) -> io::Result<()> {
    let mut result = first;
    while let Ok(next) = started.try_recv() {
        let ended = next
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("a loop thread panicked")));
        if ended.is_err() {
            result = ended;
        }
    }
    result
}

/// Why a reload to `new` is refused when it changes the listeners (they
/// are bound once, at start): each list that changed, before and after.
pub(super) fn listeners_changed(old: &Config, new: &Config) -> Option<String> {
    let lists = [
        ("listen", &old.listen, &new.listen),
        ("listen_tls", &old.listen_tls, &new.listen_tls),
    ];
    let changed: Vec<String> = lists
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name} {a:?} → {b:?}"))
        .collect();
    (!changed.is_empty()).then(|| {
        format!(
            "the listeners cannot change on reload ({}): restart instead",
            changed.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::Stops;

    #[test]
    fn a_stop_from_the_supervisor_and_one_from_another_process_are_one_drain() {
        let mut w = Stops::new(Some(100));
        assert_eq!(w.count(Some(7)), Some(1)); // killall: the worker itself
        assert_eq!(w.count(Some(100)), None); // and the supervisor's forward
        assert_eq!(w.count(Some(7)), Some(2)); // killall again: stop now
        assert_eq!(w.count(Some(100)), None);
        assert_eq!(w.count(Some(100)), Some(3));
    }

    #[test]
    fn stops_from_one_sender_count_one_by_one() {
        let mut w = Stops::new(Some(100));
        assert_eq!(w.count(Some(100)), Some(1));
        assert_eq!(w.count(Some(100)), Some(2));
        let mut single = Stops::new(None);
        assert_eq!(single.count(None), Some(1));
        assert_eq!(single.count(Some(5)), Some(2));
        assert_eq!(single.count(Some(6)), Some(3));
    }
}

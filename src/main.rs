//! The `sluice` binary: command line and config file → `Config`, logging,
//! signals, and either one loop on this thread or a supervisor of worker
//! processes.
//!
//! - `--workers 1` (the default), or a worker of a supervisor
//!   (`SLUICE_WORKER` set; its configuration comes from the supervisor,
//!   `cli::workers`): the loop runs here (`cli::signals` for what each
//!   signal does, reload included).
//! - `--workers N` (N > 1, or `auto` on a machine with more than one CPU):
//!   this process supervises N workers (`cli::supervisor`).
//! - `--check-config FILE`: validate, print the effective configuration,
//!   exit.
//! - `status [--admin ADDR] [--drain GROUP ADDR]`: the admin endpoint's
//!   `/status` as a table, or a server's state set (`cli::status`).
//!
//! Exit status: 0 after a clean stop or drain, 1 for a runtime error (the
//! address cannot be bound, the loop failed, a worker did not exit 0), 2
//! for an invalid command line or configuration.
//!
//! What it must not know: the loop's internals; it uses the library's
//! public API only.

use std::process::ExitCode;

use sluice::{ByRoutes, Config, Observer, Server};

mod cli {
    pub mod args;
    pub mod file;
    pub mod help;
    pub mod logging;
    pub mod manual;
    pub mod notify;
    pub mod pidfile;
    pub mod signals;
    pub mod source;
    pub mod status;
    pub mod supervisor;
    pub mod workers;
}

use cli::args::{self, Cli};
use cli::logging::{self, Role};
use cli::pidfile::PidFile;
use cli::source::Source;
use cli::{file, notify, signals, supervisor, workers};

fn main() -> ExitCode {
    // A worker runs what its supervisor validated; it parses no arguments.
    if let Some(worker) = workers::worker_config() {
        return match worker {
            Ok((index, config)) => {
                logging::init(Role::Worker(index));
                start(config, None, true)
            }
            Err(msg) => {
                logging::early(&format!("worker: {msg}"));
                ExitCode::from(2)
            }
        };
    }
    // `sluice status …`: a client of the admin endpoint (cli::status).
    if std::env::args_os().nth(1).is_some_and(|a| a == "status") {
        return cli::status::run(std::env::args_os().skip(1).collect());
    }
    let parsed = match args::parse(std::env::args_os().skip(1)) {
        Ok(Cli::Run(p)) => p,
        Ok(Cli::Exit(code)) => return code,
        Err(msg) => {
            eprintln!("sluice: {msg}\n(see sluice --help)");
            return ExitCode::from(2);
        }
    };
    let check = parsed.check;
    let source = Source::new(parsed);
    // Defaults < config file < flags.
    let (config, warnings) = match source.load_with_warnings() {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("sluice: {msg}");
            return ExitCode::from(2);
        }
    };
    if check {
        // A name that would stop the start (exit 2) stops the check too.
        if let Err(msg) = source.check_names(&config, &sluice::SystemResolver) {
            eprintln!("sluice: {msg}");
            return ExitCode::from(2);
        }
        // The admin token file as the start reads it, with its exit code:
        // 2 for an empty one (invalid), 1 for one that cannot be read.
        if let Err(e) = sluice::check_token_file(&config) {
            eprintln!("sluice: {e}");
            let invalid = e.kind() == std::io::ErrorKind::InvalidInput;
            return ExitCode::from(if invalid { 2 } else { 1 });
        }
        // A path that would stop the start (exit 1) stops the check too.
        if let Err(msg) = file::check_paths(&config) {
            eprintln!("sluice: {msg}");
            return ExitCode::from(1);
        }
        for w in &warnings {
            eprintln!("sluice: warning: {w}");
        }
        return match file::render(&config) {
            Ok(text) => {
                // The effective configuration on stdout, then the verdict
                // as the last line (nginx -t's "test is successful").
                print!("{text}");
                let _ = std::io::Write::flush(&mut std::io::stdout());
                eprintln!(
                    "sluice: {}",
                    file::valid_line(source.file(), warnings.len())
                );
                ExitCode::SUCCESS
            }
            Err(msg) => {
                eprintln!("sluice: {msg}");
                ExitCode::from(1)
            }
        };
    }
    let workers = file::resolve_workers(config.workers);
    let supervise = workers > 1;
    logging::init(if supervise {
        Role::Supervisor
    } else {
        Role::Worker(0)
    });
    for w in &warnings {
        log::warn!("{w}");
    }
    if supervise {
        // Handlers first: a signal that comes while we start is not lost.
        match signals::register() {
            Ok(sigs) => supervisor::run(config, workers, &source, sigs),
            Err(e) => {
                eprintln!("sluice: cannot start: signal handlers: {e}");
                ExitCode::from(1)
            }
        }
    } else {
        start(config, Some(source), false)
    }
}

/// One loop on this thread (and, after a reload, its successors) until a
/// signal's drain or shutdown ends them. `source`: where a reload reads
/// the configuration (None for a worker). `worker`: this process is a
/// supervisor's worker.
fn start(config: Config, source: Option<Source>, worker: bool) -> ExitCode {
    // Handlers first: a signal that comes while we start is not lost.
    let sigs = match signals::register() {
        Ok(s) => s,
        Err(e) => {
            logging::early(&format!("cannot start: signal handlers: {e}"));
            return ExitCode::from(1);
        }
    };
    let upstream = file::groups_summary(&config);
    // A worker inherits the admin listener and the metrics region from its
    // supervisor; a single process makes its own.
    let observer = match Observer::from_env(&config) {
        Ok(o) => o,
        Err(e) => {
            logging::early(&format!("cannot start: {e}"));
            return ExitCode::from(1);
        }
    };
    // A reload of this process hands the endpoints to its next loop.
    let spare = match observer.as_ref().map(|o| o.clone_for(&config)).transpose() {
        Ok(o) => o,
        Err(e) => {
            logging::early(&format!("cannot start: admin endpoints: {e}"));
            return ExitCode::from(1);
        }
    };
    let server = match Server::bind_with(config.clone(), ByRoutes, observer) {
        Ok(s) => s,
        Err(e) => {
            logging::early(&format!("cannot start: {e}"));
            // An upstream host that does not resolve is a configuration
            // error (2), like an invalid value.
            let invalid = e.kind() == std::io::ErrorKind::InvalidInput;
            return ExitCode::from(if invalid { 2 } else { 1 });
        }
    };
    let reloaded = match signals::spawn(sigs, server.handle(), config.clone(), source, spare) {
        Ok(rx) => rx,
        Err(e) => {
            logging::early(&format!("cannot start: signal thread: {e}"));
            return ExitCode::from(1);
        }
    };
    log::info!(
        "sluice {} pid={} on {} → upstream {upstream}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        workers::Listens {
            plain: server.plain_addrs(),
            tls: server.tls_addrs(),
        }
    );
    // The listener is up: the pid file, then readiness.
    let _pid_file = match config.pid_file.as_deref().map(PidFile::write) {
        Some(Err(msg)) => {
            logging::early(&format!("cannot start: {msg}"));
            return ExitCode::from(1);
        }
        Some(Ok(p)) => Some(p),
        None => None,
    };
    if let Some(addr) = server.admin_addr() {
        log::info!("admin endpoints on http://{addr}/ (metrics, healthz, readyz, status)");
    }
    notify::ready(worker);
    let first = server.run();
    match signals::join_reloaded(first, &reloaded) {
        Ok(()) => {
            log::info!("exiting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::error!("event loop failed: {e}");
            ExitCode::from(1)
        }
    }
}

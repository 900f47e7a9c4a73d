//! The `sluice` binary: command line and config file → `Config`, logging,
//! signals, and either one loop on this thread or a supervisor of worker
//! processes.
//!
//! - `--workers 1` (the default), or any process started as a worker
//!   (`SLUICE_WORKER` set): the loop runs here; SIGTERM/SIGINT start a
//!   graceful drain, a second one stops at once (`cli::signals`).
//! - `--workers N` (N > 1, or `auto` on a machine with more than one CPU):
//!   this process supervises N workers (`cli::supervisor`).
//! - `--check-config FILE`: validate, print the effective configuration,
//!   exit.
//!
//! Exit status: 0 after a clean stop or drain, 1 if the loop failed to
//! start or failed, 2 for an invalid command line or configuration.
//!
//! What it must not know: the loop's internals; it uses the library's
//! public API only.

use std::process::ExitCode;

use sluice::{ByRoutes, Config, Observer, Server};

mod cli {
    pub mod args;
    pub mod file;
    pub mod logging;
    pub mod signals;
    pub mod supervisor;
}

use cli::args::{self, Cli};
use cli::logging::{self, Role};
use cli::{file, signals, supervisor};

fn main() -> ExitCode {
    let parsed = match args::parse(std::env::args_os().skip(1)) {
        Ok(Cli::Run(p)) => p,
        Ok(Cli::Exit(code)) => return code,
        Err(msg) => {
            eprintln!("sluice: {msg}\n(see sluice --help)");
            return ExitCode::from(2);
        }
    };
    // Defaults < config file < flags.
    let mut config = match &parsed.config_file {
        None => Config::default(),
        Some(path) => match file::load(path) {
            Ok(from_file) => from_file,
            Err(msg) => {
                eprintln!("sluice: {msg}");
                return ExitCode::from(2);
            }
        },
    };
    if let Err(msg) = parsed.apply(&mut config) {
        eprintln!("sluice: {msg}\n(see sluice --help)");
        return ExitCode::from(2);
    }
    if let Err(e) = config.validate() {
        eprintln!(
            "sluice: {}",
            file::describe_invalid(&e, parsed.config_file.as_deref())
        );
        return ExitCode::from(2);
    }
    if parsed.check {
        return match file::render(&config) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(msg) => {
                eprintln!("sluice: {msg}");
                ExitCode::from(1)
            }
        };
    }

    let worker_index = std::env::var(supervisor::WORKER_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let workers = file::resolve_workers(config.workers);
    // A worker never supervises, whatever its arguments say.
    let supervise = worker_index.is_none() && workers > 1;
    logging::init(if supervise {
        Role::Supervisor
    } else {
        Role::Worker(worker_index.unwrap_or(0))
    });
    // Handlers first: a signal that comes while we start is not lost.
    let sigs = match signals::register() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice: cannot start: signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    if supervise {
        supervisor::run(&config, workers, sigs)
    } else {
        serve(config, sigs)
    }
}

/// One loop on this thread until a signal's drain (or shutdown) ends it.
fn serve(config: Config, sigs: signal_hook::iterator::Signals) -> ExitCode {
    let upstream = file::groups_summary(&config);
    // A worker inherits the admin listener and the metrics region from its
    // supervisor; a single process makes its own.
    let observer = match Observer::from_env(&config) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let server = match Server::bind_with(config, ByRoutes, observer) {
        Ok(s) => s,
        Err(e) => {
            log::error!("cannot start: {e}");
            eprintln!("sluice: cannot start: {e}");
            // An upstream host that does not resolve is a configuration
            // error (2), like an invalid value.
            let invalid = e.kind() == std::io::ErrorKind::InvalidInput;
            return ExitCode::from(if invalid { 2 } else { 1 });
        }
    };
    if let Err(e) = signals::spawn(sigs, server.handle()) {
        eprintln!("sluice: cannot start: signal thread: {e}");
        return ExitCode::from(1);
    }
    log::info!(
        "sluice {} pid={} on {} → upstream {upstream}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        server.local_addr()
    );
    if let Some(addr) = server.admin_addr() {
        log::info!("admin endpoints on http://{addr}/ (metrics, healthz, readyz, status)");
    }
    match server.run() {
        Ok(()) => {
            log::info!("exiting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::error!("event loop failed: {e}");
            eprintln!("sluice: event loop failed: {e}");
            ExitCode::from(1)
        }
    }
}

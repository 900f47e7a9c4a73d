//! SIGTERM/SIGINT in a process that runs the loop (a worker, or the single
//! process of `--workers 1`).
//!
//! Design choice: the signals are caught with `signal-hook`'s
//! [`Signals`] iterator on a small dedicated thread, not inside the loop.
//! That thread only calls [`ServerHandle::drain`] on the first signal and
//! [`ServerHandle::shutdown`] on the second (both set a flag and wake the
//! loop through its `mio::Waker`); a third one exits the process at once.
//! The event loop itself stays on one thread and knows nothing of signals.
//!
//! What it must not know: the loop's internals beyond [`ServerHandle`].

use std::io;
use std::thread;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use sluice::ServerHandle;

/// Registers the handlers for SIGTERM, SIGINT and SIGHUP. Do it before
/// binding: a signal that arrives before [`spawn`] is kept and acted on
/// then. SIGHUP (a closed terminal, or a service manager's "reload") is
/// logged and ignored: sluice has no reload; a restart is the recipe in the
/// README.
pub fn register() -> io::Result<Signals> {
    Signals::new([SIGTERM, SIGINT, SIGHUP])
}

/// Starts the thread that turns signals into a drain, then a shutdown.
pub fn spawn(mut signals: Signals, handle: ServerHandle) -> io::Result<()> {
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut count = 0;
            for sig in signals.forever() {
                if sig == SIGHUP {
                    log::info!("SIGHUP ignored: no reload (restart with SIGTERM, see the README)");
                    continue;
                }
                count += 1;
                let name = signal_name(sig);
                match count {
                    1 => {
                        log::info!("{name}: graceful drain (send again to stop at once)");
                        handle.drain();
                    }
                    2 => {
                        log::warn!("{name} again: stopping now");
                        handle.shutdown();
                    }
                    _ => {
                        log::warn!("{name} a third time: exiting");
                        std::process::exit(1);
                    }
                }
            }
        })
        .map(|_| ())
}

/// `SIGTERM`, `SIGINT`, or the number.
pub fn signal_name(sig: i32) -> String {
    match sig {
        SIGTERM => "SIGTERM".into(),
        SIGINT => "SIGINT".into(),
        SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        n => format!("signal {n}"),
    }
}

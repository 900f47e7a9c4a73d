//! Logging: `env_logger` with `RUST_LOG` (default `info`). Every line
//! carries the process's role and pid, `[w0 12345]` for worker 0 (or a
//! single process) and `[sup 12340]` for the supervisor, so the lines of
//! several processes sharing one stderr or one file can be told apart.
//!
//! What it must not know: what is logged.

use std::io::Write;

/// Which process is logging.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// The supervisor of `--workers N`.
    Supervisor,
    /// A worker (its index), or the single process (index 0).
    Worker(usize),
}

/// Installs the logger. Call once, after the command line was read.
pub fn init(role: Role) {
    let pid = std::process::id();
    let tag = match role {
        Role::Supervisor => format!("sup {pid}"),
        Role::Worker(i) => format!("w{i} {pid}"),
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format(move |buf, rec| {
            let ts = buf.timestamp_millis();
            if rec.level() <= log::Level::Info {
                writeln!(buf, "{ts} {:<5} [{tag}] {}", rec.level(), rec.args())
            } else {
                writeln!(
                    buf,
                    "{ts} {:<5} [{tag}] {}: {}",
                    rec.level(),
                    rec.target(),
                    rec.args()
                )
            }
        })
        .init();
}

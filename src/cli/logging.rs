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
///
/// `RUST_LOG` is checked first ([`check_filter`]): an invalid value (which
/// `env_logger` would quietly turn into "log nothing") falls back to `warn`,
/// with a warning that says so.
pub fn init(role: Role) {
    let pid = std::process::id();
    let tag = match role {
        Role::Supervisor => format!("sup {pid}"),
        Role::Worker(i) => format!("w{i} {pid}"),
    };
    let asked = std::env::var("RUST_LOG").ok();
    let bad = asked.as_deref().and_then(|v| check_filter(v).err());
    let filter = match (&asked, &bad) {
        (Some(v), None) => v.clone(),
        (_, Some(_)) => "warn".to_string(),
        (None, None) => "info".to_string(),
    };
    env_logger::Builder::new()
        .parse_filters(&filter)
        // A stalled stderr reader (a paused journald, a log driver that
        // lags) drops lines instead of stopping the loop.
        .target(env_logger::Target::Pipe(Box::new(
            sluice::stderr_log::StderrLog::new(),
        )))
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
    if let (Some(v), Some(why)) = (asked, bad) {
        log::warn!("RUST_LOG={v:?} is invalid ({why}); logging at warn");
    }
}

/// Writes `sluice: <msg>` and a newline to stderr in one `write`, for the
/// errors of a process before (or instead of) its logger: `eprintln!`
/// writes the pieces one by one, and the lines of workers that share one
/// stderr would run together.
pub fn early(msg: &str) {
    let line = format!("sluice: {msg}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Levels `RUST_LOG` may name.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a `RUST_LOG` value: comma-separated directives, each a level, or
/// `target[=level]` where the target is a module path of sluice or one of
/// its libraries (`sluice`, `mio`, …: a word that is neither a level nor
/// such a path, like `inf` or `bogus`, is a typo that would silence every
/// line). A `/regex` suffix is accepted.
///
/// Errors: the first directive that is not valid, and why.
pub fn check_filter(value: &str) -> Result<(), String> {
    let spec = value.split('/').next().unwrap_or_default();
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (target, level) = match directive.split_once('=') {
            Some((t, l)) => (Some(t.trim()), Some(l.trim())),
            None if is_level(directive) => (None, Some(directive)),
            None => (Some(directive), None),
        };
        if let Some(l) = level
            && !is_level(l)
        {
            return Err(format!("{l:?} is not a level ({})", LEVELS.join(", ")));
        }
        if let Some(t) = target {
            let root = t.split("::").next().unwrap_or_default();
            let known = [
                "sluice",
                "mio",
                "env_logger",
                "signal_hook",
                "socket2",
                "clap",
            ];
            if !known.contains(&root) {
                return Err(format!(
                    "{t:?} is neither a level ({}) nor a module of sluice",
                    LEVELS.join(", ")
                ));
            }
        }
    }
    Ok(())
}

fn is_level(word: &str) -> bool {
    LEVELS.iter().any(|l| l.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::check_filter;

    #[test]
    fn rust_log_typos_are_refused_and_real_filters_pass() {
        for ok in [
            "info",
            "WARN",
            "sluice=debug",
            "warn,sluice::pool=trace",
            "off",
            "",
        ] {
            assert_eq!(check_filter(ok), Ok(()), "{ok}");
        }
        for bad in ["inf", "bogus", "sluice=loud", "info,nonsense"] {
            assert!(check_filter(bad).is_err(), "{bad}");
        }
    }
}

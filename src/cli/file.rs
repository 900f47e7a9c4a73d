//! The configuration file (TOML).
//!
//! The file is deserialized straight into [`Config`] (serde, declared on its
//! fields): keys are the field names (snake_case), a missing key keeps its
//! default, an unknown one is an error. Durations are strings (`"500ms"`,
//! `"10s"`, `"2m"`), sizes and counts are integers, `workers` is an integer
//! or `"auto"`. The command line's flags are laid over it afterwards
//! (`args::Parsed::apply`), so a flag overrides the file.
//!
//! What it must not know: the knobs one by one (they are declared in
//! `Config`), the loop.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use sluice::{AccessLogTarget, Config, ConfigError, Resolve, Resolver};

use super::pidfile::PidFile;

/// Reads and parses a configuration file, and whether it gave `listen`
/// (a `--listen-tls` flag without `--listen` then keeps the file's plain
/// listeners). The error names the file, the line and the key.
pub fn load(path: &Path) -> Result<(Config, bool), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let config = parse(&text).map_err(|e| format!("config file {}{e}", path.display()))?;
    Ok((config, gives_key(&text, "listen")))
}

/// Parses the text of a configuration file. The error starts with `:LINE: `
/// when the line is known, then names the key.
///
/// `listen_tls` without `listen`: no plain listener (`listen` is empty).
pub fn parse(text: &str) -> Result<Config, String> {
    let mut config: Config = toml::from_str(text).map_err(|e| describe(text, &e))?;
    if gives_key(text, "listen_tls") && !gives_key(text, "listen") {
        config.listen.clear();
    }
    Ok(config)
}

/// Whether the top level of a TOML document that parsed has `key`.
fn gives_key(text: &str, key: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key(key))
}

/// One line for a TOML or serde error: where, which key, what is wrong.
fn describe(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    let unknown = msg
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    let Some(span) = e.span() else {
        return match unknown {
            Some(k) => format!(": unknown key `{k}`"),
            None => format!(": {msg}"),
        };
    };
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let line_no = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    if let Some(k) = unknown {
        return format!(
            ":{line_no}: unknown key `{k}` (the keys are listed in examples/sluice.toml \
             and by sluice --check-config)"
        );
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty() && !k.starts_with('#') && !k.starts_with('['));
    match key {
        Some(k) => format!(":{line_no}: key `{k}`: {msg}"),
        None => format!(":{line_no}: {msg}"),
    }
}

/// `Config::validate`'s error with the knob in both spellings: the file's
/// key and the command line's flag; with the file and line when the error
/// carries the span of a value read from `file`, or else when `file` sets
/// that key at its top level (the line of the key; the flag, if given,
/// overrides it, so the message keeps naming both).
pub fn describe_invalid(e: &ConfigError, file: Option<&Path>) -> String {
    let key = e.key.replace('-', "_");
    let whole = format!(
        "invalid {} (--{} / {key} in the config file): {}",
        e.key, e.key, e.reason
    );
    let Some(path) = file else {
        return whole;
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return whole;
    };
    match e.span.as_ref() {
        Some(span) => {
            let end = span.start.min(text.len());
            let line = text.get(..end).map_or(0, |t| t.matches('\n').count()) + 1;
            format!("config file {}:{line}: {}", path.display(), e.reason)
        }
        None => match key_line(&text, &key) {
            Some(line) => format!("config file {}:{line}: {whole}", path.display()),
            None => whole,
        },
    }
}

/// The line (from 1) where `text` sets the top-level `key` (`key = …`,
/// before the first table header), if it does.
fn key_line(text: &str, key: &str) -> Option<usize> {
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.starts_with('[') {
            return None;
        }
        let named = line
            .strip_prefix(key)
            .or_else(|| line.strip_prefix(&format!("\"{key}\"")));
        if named.is_some_and(|rest| rest.trim_start().starts_with('=')) {
            return Some(i + 1);
        }
    }
    None
}

/// The groups in one line for the start-up log: `app=[a, b] api=[c]`.
pub fn groups_summary(c: &Config) -> String {
    let groups: Vec<String> = c
        .upstream
        .iter()
        .map(|g| {
            let servers: Vec<String> = g.servers.get_ref().iter().map(|s| s.to_string()).collect();
            format!("{}=[{}]", g.name.get_ref(), servers.join(", "))
        })
        .collect();
    groups.join(" ")
}

/// `--check-config`: every upstream host name of a group that must
/// resolve at start (`resolve = "start"`, the default) resolves now, as
/// the start would demand (else it exits 2). One lookup per name.
///
/// Errors: one line per name that does not resolve, naming it and its
/// group.
pub fn check_names(c: &Config, resolver: &dyn Resolver) -> Result<(), String> {
    let mut failed = Vec::new();
    for group in c.upstream.iter().filter(|g| g.resolve == Resolve::Start) {
        for server in group.servers.get_ref().iter().filter(|s| s.ip().is_none()) {
            let found = resolver.resolve(&server.host, server.port);
            if let Err(e) = found.and_then(|a| {
                if a.is_empty() {
                    Err(std::io::Error::other("no address"))
                } else {
                    Ok(())
                }
            }) {
                failed.push(format!(
                    "upstream host {:?} (group {:?}) does not resolve: {e}",
                    server.host,
                    group.name.get_ref()
                ));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// `--check-config`: the access log file can be opened for appending and
/// the pid file written, as the start will demand (else it exits 1). An
/// access log file that exists is opened without truncating it; one that
/// does not is created and removed again. The pid file: see
/// [`PidFile::check`].
///
/// Errors: one line per path, naming it and the OS error.
pub fn check_paths(c: &Config) -> Result<(), String> {
    let mut failed = Vec::new();
    if let AccessLogTarget::File(path) = &c.access_log {
        let mut open = OpenOptions::new();
        open.append(true);
        let opened = match open.open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => open
                .create_new(true)
                .open(path)
                .map(|_| std::fs::remove_file(path)),
            other => other.map(|_| Ok(())),
        };
        if let Err(e) = opened {
            failed.push(format!("access log {}: {e}", path.display()));
        }
    }
    if let Some(path) = &c.pid_file
        && let Err(msg) = PidFile::check(path)
    {
        failed.push(msg);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// The effective configuration as a TOML document with every key, in the
/// form [`parse`] reads back: `Config`'s own `Serialize`, in field order.
pub fn render(c: &Config) -> Result<String, String> {
    let body =
        toml::to_string(c).map_err(|e| format!("cannot write the configuration as TOML: {e}"))?;
    let mut s =
        String::from("# sluice: effective configuration (defaults < config file < command line)\n");
    for line in body.lines() {
        s.push_str(line);
        if c.workers == 0 && line.starts_with("workers =") {
            s.push_str(&format!("  # {} on this machine", resolve_workers(0)));
        }
        s.push('\n');
    }
    Ok(s)
}

/// The number of worker processes to run: `n`, or one per CPU for 0.
pub fn resolve_workers(n: usize) -> usize {
    match n {
        0 => std::thread::available_parallelism().map_or(1, |p| p.get()),
        n => n,
    }
}

//! The configuration file (TOML).
//!
//! The file is deserialized straight into [`Config`] (serde, declared on its
//! fields): keys are the field names (snake_case), a missing key keeps its
//! default, an unknown one is an error. Durations are strings (`"500ms"`,
//! `"10s"`, `"2m"`), sizes and counts are integers, `workers` is an integer
//! or `"auto"`. The command line's flags are laid over it afterwards
//! (`args::Parsed::apply`), so a flag overrides the file.
//!
//! Every error and warning about the file names it, the line of the key
//! (or value) at fault and the key's path (`upstream[0].health_check.rise`,
//! `file/locate.rs`); an unknown key comes with a hint (`file/keys.rs`).
//!
//! What it must not know: the knobs one by one (they are declared in
//! `Config`), the loop.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use sluice::{AccessLogTarget, Config, ConfigError, ConfigWarning, Resolve, Resolver};

use super::pidfile::PidFile;

mod keys;
mod locate;

pub use keys::nearest;

use locate::Doc;

/// Reads and parses a configuration file; returns it with the file's text
/// (kept so that errors and warnings found later name their line).
///
/// Errors: one line naming the file, the line, the key path and what is
/// wrong (`config file F:14: upstream[0].health_check.rise: …`).
pub fn load(path: &Path) -> Result<(Config, String), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let config = parse(&text).map_err(|e| format!("config file {}{e}", path.display()))?;
    Ok((config, text))
}

/// Parses the text of a configuration file. The error starts with `:LINE: `
/// when the line is known, then gives the key path and what is wrong:
/// TOML syntax, an unknown key (with a hint, [`keys`]), a value of the
/// wrong type or syntax.
///
/// `listen_tls` without `listen`: no plain listener (`listen` is empty).
pub fn parse(text: &str) -> Result<Config, String> {
    parse_unescaped(text).map_err(|e| printable(&e))
}

/// Longest message [`parse`] gives, in characters: a key or value of
/// 100 KB is not echoed whole.
const MESSAGE_MAX: usize = 1000;

/// `msg` on one line a terminal shows as it is: control characters
/// (from a quoted key or value, `"a\nb"`, an ESC sequence) escaped as
/// Rust writes them, and cut at [`MESSAGE_MAX`] characters.
fn printable(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(MESSAGE_MAX + 4));
    for (n, c) in msg.chars().enumerate() {
        if n == MESSAGE_MAX {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_unescaped(text: &str) -> Result<Config, String> {
    let doc = Doc::parse(text).map_err(|e| single_table_hint(text, describe_syntax(text, &e)))?;
    if let Some(u) = keys::first_unknown(&doc) {
        return Err(format!(":{}: {}: {}", doc.line_at(u.at), u.path, u.reason));
    }
    let mut config: Config = toml::from_str(text)
        .map_err(|e| single_table_hint(text, describe_value(text, &doc, &e)))?;
    if gives_key(text, "listen_tls") && !gives_key(text, "listen") {
        config.listen.clear();
    }
    Ok(config)
}

/// Whether the top level of a TOML document that parses has `key`.
pub fn gives_key(text: &str, key: &str) -> bool {
    Doc::parse(text).is_ok_and(|d| d.root().contains_key(key))
}

/// The tables a file repeats, each written `[[NAME]]`.
const TABLE_ARRAYS: [&str; 3] = ["upstream", "route", "certificate"];

/// `msg` with a hint when the text writes one of [`TABLE_ARRAYS`] with
/// single brackets (`[route]`: one table, so a second one is a duplicate
/// key, and one alone is "a map, expected a sequence").
fn single_table_hint(text: &str, msg: String) -> String {
    let single = text.lines().find_map(|l| {
        let name = l.trim().strip_prefix('[')?.strip_suffix(']')?;
        TABLE_ARRAYS.contains(&name).then_some(name)
    });
    match single {
        Some(name) if msg.contains("duplicate key") || msg.contains("expected a sequence") => {
            format!("{msg} (write each {name} as a [[{name}]] table, with double brackets)")
        }
        _ => msg,
    }
}

/// One line for a TOML syntax error: where, which key, what is wrong.
fn describe_syntax(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    let Some(span) = e.span() else {
        return format!(": {msg}");
    };
    let line_no = locate::line_at(text, span.start);
    if msg.starts_with("duplicate key")
        && let Some(why) = keys::upstream_forms(text, span.start)
    {
        return format!(":{line_no}: upstream: {why}");
    }
    let start = span.start.min(text.len());
    let line_start = text
        .get(..start)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line = text
        .get(line_start..)
        .and_then(|l| l.lines().next())
        .unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty() && !k.starts_with('#') && !k.starts_with('['));
    // An address without quotes (`listen = 127.0.0.1:8080`, `[::1]:8080`)
    // reads to TOML as a float or an array that goes wrong midway.
    let bare = line
        .split_once('=')
        .map(|(_, v)| v.split(" #").next().unwrap_or("").trim())
        .filter(|v| {
            v.contains(':')
                && (v.starts_with('[')
                    || v.starts_with(|c: char| c.is_ascii_digit()) && v.contains('.'))
                && !v.contains(['"', '\''])
        });
    let msg = match bare {
        Some(v) => format!("{msg} (an address is a string in quotes: \"{v}\")"),
        None => msg.to_string(),
    };
    match key {
        Some(k) => format!(":{line_no}: {k}: {msg}"),
        None => format!(":{line_no}: {msg}"),
    }
}

/// One line for a value serde refused (type, syntax, a missing key):
/// the line and key path where it points.
fn describe_value(text: &str, doc: &Doc<'_>, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    let Some(span) = e.span() else {
        return format!(": {msg}");
    };
    let msg = &match msg {
        // toml's words for a number, a boolean or an array where a key
        // takes one of a few words (`tls_min_version = 1.3`).
        "wanted string or table" => not_a_word(text, span.clone()),
        _ => plain_type_names(msg),
    };
    let line = doc.line_at(span.start);
    match doc.path_at(span.start) {
        Some(path) => format!(":{line}: {path}: {msg}"),
        None => format!(":{line}: {msg}"),
    }
}

/// The message for a value at `span` of `text` that is not a string where
/// the key takes one of a few words: the value as written, and the words
/// (found by reading the file again with an empty string in its place,
/// which serde answers with the list).
fn not_a_word(text: &str, span: std::ops::Range<usize>) -> String {
    let written = text.get(span.clone()).unwrap_or("").trim();
    let words = text
        .get(..span.start)
        .zip(text.get(span.end..))
        .and_then(|(before, after)| {
            let e = toml::from_str::<Config>(&format!("{before}\"\"{after}")).err()?;
            let (variant, words) = e.message().split_once("expected ")?;
            if !variant.starts_with("unknown variant") {
                return None;
            }
            Some(words.trim().to_string())
        });
    match words {
        Some(w) => format!("invalid type: {written}, expected a string in quotes: {w}"),
        None => format!("invalid type: {written}, expected a string in quotes"),
    }
}

/// serde's message with the Rust type of a table (`expected struct
/// RateLimitSpec`) in words, with what such a table holds; a string
/// where an array goes, with the array.
fn tables_in_words(msg: &str) -> String {
    const TABLES: [(&str, &str); 7] = [
        (
            "RateLimitSpec",
            "a table like { requests_per_second = 10, burst = 20 }",
        ),
        (
            "RespondSpec",
            "a table like { status = 503, body = \"maintenance\\n\" }",
        ),
        (
            "HealthCheck",
            "a table: [upstream.health_check] with path = \"/healthz\" and the rest below it",
        ),
        ("RouteSpec", "a [[route]] table"),
        ("GroupSpec", "an [[upstream]] table"),
        (
            "CertificateSpec",
            "a [[certificate]] table with cert and key",
        ),
        ("StatusRange", "a status range like \"200-399\""),
    ];
    // One string where a list goes (`servers = "127.0.0.1:8001"`): the
    // list it should have been.
    if let Some(one) = msg
        .strip_prefix("invalid type: string ")
        .and_then(|m| m.strip_suffix(", expected a sequence"))
    {
        return format!("invalid type: string {one}, expected an array: [{one}]");
    }
    let Some((before, after)) = msg.split_once("expected struct ") else {
        return msg.to_string();
    };
    let name_len = after
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(after.len());
    let (name, rest) = after.split_at(name_len);
    let words = TABLES
        .iter()
        .find(|(rust, _)| *rust == name)
        .map_or("a table", |(_, words)| words);
    format!("{before}expected {words}{rest}")
}

/// serde's message with Rust's number type names (`expected u32`) in
/// words a user reads (`expected a whole number from 0 to 4294967295`).
fn plain_type_names(msg: &str) -> String {
    const NAMES: [(&str, &str); 8] = [
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
    ];
    let mut out = tables_in_words(msg);
    for (rust, words) in NAMES {
        let ends_word = |at: usize| {
            !out.as_bytes()
                .get(at + rust.len())
                .is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if let Some(at) = out.find(rust).filter(|&at| ends_word(at)) {
            out.replace_range(at..at + rust.len(), words);
        }
    }
    out
}

/// The config file an error or warning may point into: its name and the
/// text that was read.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    /// The file's name as given.
    pub file: &'a Path,
    /// Its text.
    pub text: &'a str,
}

impl Place<'_> {
    /// `config file F:LINE: PATH` when key path `path` (or its deepest
    /// prefix) is in the file; `None` otherwise.
    fn at(&self, path: &str) -> Option<String> {
        let doc = Doc::parse(self.text).ok()?;
        let line = doc.line_of(path)?;
        Some(format!(
            "config file {}:{line}: {path}",
            self.file.display()
        ))
    }
}

/// `Config::validate`'s (or the TLS check's) error as one line: with the
/// file, the line and the key path when the value at fault came from the
/// file (`place`, and not `from_flag`); else the knob in both spellings,
/// the flag and the file's key.
pub fn describe_invalid(e: &ConfigError, place: Option<Place<'_>>, from_flag: bool) -> String {
    let path = e.path();
    if let Some(at) = place.filter(|_| !from_flag).and_then(|p| p.at(&path)) {
        return format!("{at}: {}", e.reason);
    }
    // `[[certificate]]` has two flags, neither named after the table.
    let flag = match e.key {
        "certificate" => "tls-cert / --tls-key",
        key => key,
    };
    if path == flag.replace('-', "_") {
        format!(
            "invalid {path} (--{flag} / {path} in the config file): {}",
            e.reason
        )
    } else {
        format!("invalid {path} (--{flag}): {}", e.reason)
    }
}

/// A warning as one line, placed in the file as [`describe_invalid`]
/// places an error.
pub fn describe_warning(w: &ConfigWarning, place: Option<Place<'_>>, from_flag: bool) -> String {
    match place.filter(|_| !from_flag).and_then(|p| p.at(&w.path)) {
        Some(at) => format!("{at}: {}", w.text),
        None => w.to_string(),
    }
}

/// `text` about the value at key path `path` as one line, placed in the
/// file as [`describe_invalid`] places an error; `text` alone when the
/// value came from a flag (`from_flag`) or is not in the file.
pub fn describe_at(path: &str, text: &str, place: Option<Place<'_>>, from_flag: bool) -> String {
    match place.filter(|_| !from_flag).and_then(|p| p.at(path)) {
        Some(at) => format!("{at}: {text}"),
        None => text.to_string(),
    }
}

/// `--check-config`'s last line: the file (or the command line, without
/// one) is valid, and how many warnings came before.
pub fn valid_line(file: Option<&std::path::PathBuf>, warnings: usize) -> String {
    let what = match file {
        Some(f) => format!("config file {} is valid", f.display()),
        None => "the configuration is valid".to_string(),
    };
    match warnings {
        0 => what,
        1 => format!("{what} (1 warning above)"),
        n => format!("{what} ({n} warnings above)"),
    }
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
/// Returns one `(key path, reason)` per name that does not resolve
/// (`upstream[0].servers[1]`), naming it and its group; empty when all do.
pub fn check_names(c: &Config, resolver: &dyn Resolver) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    for (gi, group) in c.upstream.iter().enumerate() {
        if group.resolve != Resolve::Start {
            continue;
        }
        for (si, server) in group.servers.get_ref().iter().enumerate() {
            if server.ip().is_some() {
                continue;
            }
            let found = resolver.resolve(&server.host, server.port);
            if let Err(e) = found.and_then(|a| {
                if a.is_empty() {
                    Err(std::io::Error::other("no address"))
                } else {
                    Ok(())
                }
            }) {
                failed.push((
                    format!("upstream[{gi}].servers[{si}]"),
                    format!(
                        "upstream host {:?} (group {:?}) does not resolve: {e}",
                        server.host,
                        group.name.get_ref()
                    ),
                ));
            }
        }
    }
    failed
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

//! The `--help` text, rendered from the declared arguments: the usage
//! lines, the flags by heading ([`HEADINGS`]), one line per flag with its
//! help and default, wrapped at a fixed width; and the default a flag
//! shows (also in the man page, `cli::manual`).
//!
//! What it must not know: the knobs one by one (their help is their doc
//! comment in `sluice::Config`), parsing.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};
use sluice::Config;

use super::args::HEADINGS;

/// The help's first lines.
pub(super) const USAGE: &str = "\
usage: sluice --listen ADDR --upstream ADDR [options]
       sluice --config FILE [options]
       sluice --check-config FILE [options]
       sluice status [--admin ADDR] [--config FILE] [--token-file FILE] [--json]
                     [--drain|--maintenance|--ready GROUP ADDR]
       sluice --print-man | --print-completions bash|zsh|fish

";

/// The help's last lines.
const AFTER_HELP: &str = "
Upstream groups (balancing, weights, backup servers), health checks, routes
by host and path, and the edge rules (redirects, header rules, allow/deny) are
set in the config file: see examples/sluice.toml, docs/configuration.md and
man sluice. DUR is a number with a unit (required): 500ms, 10s, 2m, 1h.
Diagnostics: stderr, RUST_LOG (default info). Access records: --access-log
(default stdout). Signals: SIGTERM, SIGINT or SIGQUIT: graceful drain, then
exit 0 (a second one: stop at once); SIGHUP: reload the config file; SIGUSR1:
reopen the access log; SIGUSR2: /readyz says 503 while serving goes on (before
a drain); others are logged.
Exit status: 0 stopped or drained, 1 runtime or bind error, 2 usage or config.
";

/// Where a help line's text starts, and the width it wraps at (a `\n` in
/// a help text also starts a new line).
const HELP_COLUMN: usize = 32;
const HELP_WIDTH: usize = 84;

/// `--listen ADDR` takes a value; `--no-via` and `--help` do not.
pub(super) fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

/// The `--help` text: the flags by heading ([`HEADINGS`]), one line per
/// argument, `--flag VALUE`, its help (the first paragraph of the field's
/// doc comment) and its default. A flag whose heading is not in
/// [`HEADINGS`] is shown last, under its own heading.
pub fn help_text(cmd: &Command) -> String {
    let mut out = String::from(USAGE);
    let mut headings: Vec<&str> = HEADINGS.to_vec();
    for arg in cmd.get_arguments() {
        let h = arg.get_help_heading().unwrap_or("Other");
        if !headings.contains(&h) {
            headings.push(h);
        }
    }
    for heading in headings {
        let mut args = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_help_heading().unwrap_or("Other") == heading)
            .peekable();
        if args.peek().is_none() {
            continue;
        }
        let _ = writeln!(out, "{heading}:");
        for arg in args {
            help_line(&mut out, arg);
        }
        out.push('\n');
    }
    out.push_str(AFTER_HELP.trim_start_matches('\n'));
    out
}

/// The default a knob's help shows, as the file would write it: `60s`,
/// `stdout`, `1024`; `None` for a flag without a value, a knob unset by
/// default, or an empty default (`--via-name`: its help says what empty
/// means).
pub fn default_shown(arg: &Arg) -> Option<String> {
    let defaults = toml::Table::try_from(Config::default()).unwrap_or_default();
    match defaults
        .get(arg.get_id().as_str())
        .filter(|_| takes_value(arg))?
    {
        toml::Value::String(s) if s.is_empty() => None,
        toml::Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

/// Appends one argument's help line(s) to `out`.
fn help_line(out: &mut String, arg: &Arg) {
    let mut spec = String::new();
    if let Some(short) = arg.get_short() {
        let _ = write!(spec, "-{short}, ");
    }
    if let Some(long) = arg.get_long() {
        let _ = write!(spec, "--{long}");
    }
    if takes_value(arg) {
        for name in arg.get_value_names().unwrap_or_default() {
            let _ = write!(spec, " {name}");
        }
    }
    let mut help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    if let Some(d) = default_shown(arg) {
        let _ = write!(help, " ({d})");
    }
    let mut line = format!("  {spec:<w$}  ", w = HELP_COLUMN - 4);
    let mut empty = true;
    for (i, part) in lowercase_start(&help).split('\n').enumerate() {
        for (j, word) in part.split_whitespace().enumerate() {
            let wrap = i > 0 && j == 0 || line.len() + 1 + word.len() > HELP_WIDTH;
            if !empty && wrap {
                out.push_str(line.trim_end());
                out.push('\n');
                line = " ".repeat(HELP_COLUMN);
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(word);
            empty = false;
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// `"Idle time …"` → `"idle time …"`: help lines start in lower case, doc
/// comments (their source) in upper case. `"DUR …"` stays.
fn lowercase_start(text: &str) -> String {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && !b.is_uppercase() => a
            .to_lowercase()
            .chain(text[a.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

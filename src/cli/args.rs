//! The command line (clap): the knobs' flags come from the declarations in
//! `sluice::Config` (`clap::Args` derive); this module adds `--config`,
//! `--check-config`, `-h` and `-V` (the help's text is rendered by
//! `cli::help`), and turns clap's errors into one line that names the
//! flag.
//!
//! What it must not know: the knobs one by one (they are declared in
//! `Config`), the loop.

use std::error::Error as _;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args as _, Command, FromArgMatches as _};
use sluice::Config;

use super::help::{help_text, takes_value};

/// The man page's DESCRIPTION.
const DESCRIPTION: &str = "sluice is a reverse proxy: HTTP/1.1 and HTTP/2 to clients (plain and TLS), HTTP/1.1 to upstreams. Each process runs \
one poll loop on one thread; --workers N runs N such processes on one port (SO_REUSEPORT) \
under a supervisor that restarts them. Upstream connections are kept in a keep-alive pool; \
request and response bodies stream at the same time under high and low watermarks, so a \
slow client slows its upstream instead of filling the proxy's memory.\n\n\
The flags below override the config file's keys of the same name (--keepalive-timeout is \
keepalive_timeout). DUR is a number with a unit: 500ms, 10s, 2m, 1h. Sizes are bytes.";

/// The help's groups of flags, in the order `--help` and the man page show
/// them. Every flag has one (`help_heading` in `sluice::Config` for the
/// knobs, here for the binary's own flags).
pub const HEADINGS: [&str; 13] = [
    HEADING_CONFIG,
    "Listening",
    "TLS",
    "HTTP/2",
    "Upstreams",
    "Timeouts",
    "Limits",
    "Pool",
    "Logs",
    "Admin",
    "Processes",
    "Forwarding",
    HEADING_HELP,
];
const HEADING_CONFIG: &str = "Config file";
const HEADING_HELP: &str = "Help and documentation";

/// What the command line asks for.
pub enum Cli {
    /// Run (or, with `check`, only validate and print) with these settings.
    Run(Box<Parsed>),
    /// `--help` or `--version` was answered: exit with this status.
    Exit(ExitCode),
}

/// A parsed command line.
pub struct Parsed {
    /// The knobs given on the command line, and only those.
    flags: ArgMatches,
    /// `--config FILE` or `--check-config FILE`.
    pub config_file: Option<PathBuf>,
    /// `--check-config` was given.
    pub check: bool,
}

impl Parsed {
    /// Whether the command line gave the knob at the root of key path
    /// `path` (`upstream[0].servers` is `--upstream`'s, `certificate[1]`
    /// `--tls-cert`'s): then the value at fault is not the file's.
    pub fn gave(&self, path: &str) -> bool {
        let root = path.split(['.', '[']).next().unwrap_or(path);
        // `try_`: a key with no flag (`route`) is simply not given.
        let given = |id: &str| self.flags.try_contains_id(id).unwrap_or(false);
        match root {
            "certificate" => given("tls-cert") || given("tls-key"),
            root => given(root),
        }
    }

    /// Writes the knobs given on the command line into `config` (which
    /// holds the defaults, or the config file's values), leaving the others.
    /// `file_gave_listen`: the config file named `listen` (then a
    /// `--listen-tls` flag alone keeps those plain listeners).
    pub fn apply(&self, config: &mut Config, file_gave_listen: bool) -> Result<(), String> {
        config
            .update_from_arg_matches(&self.flags)
            .map_err(|e| describe(&e))?;
        // Each `--upstream` gave a one-server group `default`: a repeated
        // flag builds one group with all of them.
        if self.flags.contains_id("upstream") && config.upstream.len() > 1 {
            let mut groups = std::mem::take(&mut config.upstream).into_iter();
            if let Some(mut first) = groups.next() {
                for g in groups {
                    if g.tls != first.tls {
                        return Err("--upstream: https:// and plain servers in one group \
                                    (use [[upstream]] groups in the config file)"
                            .to_string());
                    }
                    first.servers.get_mut().extend(g.servers.into_inner());
                }
                config.upstream = vec![first];
            }
        }
        // `--tls-cert` and `--tls-key` pair in order; given, they replace
        // the file's `[[certificate]]`s, as any flag overrides the file.
        let paths = |id| -> Vec<PathBuf> {
            self.flags
                .get_many::<PathBuf>(id)
                .map(|v| v.cloned().collect())
                .unwrap_or_default()
        };
        let (certs, keys) = (paths("tls-cert"), paths("tls-key"));
        if certs.len() != keys.len() {
            return Err(format!(
                "--tls-cert and --tls-key pair in order: {} --tls-cert, {} --tls-key",
                certs.len(),
                keys.len()
            ));
        }
        if !certs.is_empty() {
            config.certificate = certs
                .into_iter()
                .zip(keys)
                .map(|(c, k)| sluice::CertificateSpec::new(c, k))
                .collect();
        }
        // TLS listeners on the command line, no plain one anywhere: none
        // is opened (as a file with `listen_tls` and no `listen`).
        if self.flags.contains_id("listen_tls")
            && !self.flags.contains_id("listen")
            && !file_gave_listen
        {
            config.listen.clear();
        }
        Ok(())
    }
}

/// The whole command line: every knob of [`Config`], then the binary's own
/// flags. The help text is rendered from these arguments; the man page and
/// the shell completions (`cli::manual`) are generated from them too.
pub fn command() -> Command {
    let path_arg = |id: &'static str, heading: &'static str| {
        Arg::new(id)
            .long(id)
            .value_name("FILE")
            .value_parser(clap::value_parser!(PathBuf))
            .action(ArgAction::Append)
            .help_heading(heading)
    };
    let cmd = Config::augment_args_for_update(Command::new("sluice"))
        .no_binary_name(true)
        .version(env!("CARGO_PKG_VERSION"))
        .about("HTTP/1.1 and HTTP/2 reverse proxy")
        .long_about(DESCRIPTION)
        // A single-value flag given twice is an error (clap's default):
        // `--admin A --admin B` must not silently keep B. The supervisor
        // hands its workers their settings in the environment instead.
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(
            path_arg("config", HEADING_CONFIG)
                .help("Read settings from a TOML file; flags override it"),
        )
        .arg(path_arg("check-config", HEADING_CONFIG).help(
            "Validate FILE (with the flags), print the\n\
             effective configuration, exit 0 (2 if invalid,\n\
             1 if a path cannot be written)",
        ))
        .arg(path_arg("tls-cert", "TLS").help(
            "Certificate chain (PEM) of the TLS listeners;\n\
             repeatable, paired in order with --tls-key",
        ))
        .arg(path_arg("tls-key", "TLS").help("Private key (PEM) of the --tls-cert before it"))
        .arg(
            Arg::new("print-man")
                .long("print-man")
                .action(ArgAction::SetTrue)
                .help_heading(HEADING_HELP)
                .help("Print the man page sluice(8) (roff) and exit"),
        )
        .arg(
            Arg::new("print-completions")
                .long("print-completions")
                .value_name("SHELL")
                .value_parser(["bash", "zsh", "fish"])
                .help_heading(HEADING_HELP)
                .help("Print the completion script for bash, zsh or fish and exit"),
        )
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::Help)
                .help_heading(HEADING_HELP)
                .help("This text"),
        )
        .arg(
            Arg::new("version")
                .short('V')
                .long("version")
                .action(ArgAction::Version)
                .help_heading(HEADING_HELP)
                .help("The version"),
        );
    // A value may start with `-` (`--max-head-size -1` is a bad number,
    // not an unknown flag `-1`), as with the hand-written parser before.
    let cmd = cmd.mut_args(|a| {
        let value = takes_value(&a);
        a.allow_hyphen_values(value)
    });
    let help = help_text(&cmd);
    cmd.override_help(help)
}

/// Parses `args` (without the program name). Errors name the flag.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, String> {
    let args: Vec<OsString> = args.into_iter().collect();
    let mut matches = match command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // Both go to stdout; only a broken pipe can fail here.
            let _ = e.print();
            return Ok(Cli::Exit(ExitCode::SUCCESS));
        }
        Err(e) if e.kind() == ErrorKind::InvalidUtf8 => return Err(not_utf8(&args)),
        Err(e) => return Err(describe(&e)),
    };
    if matches.get_flag("print-man") {
        return Ok(Cli::Exit(super::manual::print_man()));
    }
    if let Some(shell) = matches.get_one::<String>("print-completions") {
        return Ok(Cli::Exit(super::manual::print_completions(shell)));
    }
    let config_file = config_file(&matches)?;
    let check = matches.value_source("check-config") == Some(ValueSource::CommandLine);
    // Keep only what the command line said: a flag that was not given must
    // not overwrite the file's value (`--no-via` has an implicit `true`).
    let not_given: Vec<String> = matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) != Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect();
    for id in not_given {
        let _ = matches.try_clear_id(&id);
    }
    Ok(Cli::Run(Box::new(Parsed {
        flags: matches,
        config_file,
        check,
    })))
}

/// The file of `--config` / `--check-config`; naming two different files
/// is an error.
fn config_file(m: &ArgMatches) -> Result<Option<PathBuf>, String> {
    let mut given: Vec<(usize, &str, &PathBuf)> = Vec::new();
    for flag in ["config", "check-config"] {
        if let (Some(idx), Some(paths)) = (m.indices_of(flag), m.get_many::<PathBuf>(flag)) {
            given.extend(idx.zip(paths).map(|(i, p)| (i, flag, p)));
        }
    }
    given.sort_by_key(|&(i, _, _)| i);
    let mut chosen: Option<&PathBuf> = None;
    for (_, flag, path) in given {
        match chosen {
            Some(old) if old != path => {
                return Err(format!(
                    "--{flag}: a second config file ({})",
                    path.display()
                ));
            }
            _ => chosen = Some(path),
        }
    }
    Ok(chosen.cloned())
}

/// clap's "invalid UTF-8" names no flag: name the one whose value it is.
fn not_utf8(args: &[OsString]) -> String {
    let flag = args.iter().enumerate().find_map(|(i, a)| {
        if a.to_str().is_some() {
            return None;
        }
        let text = a.to_string_lossy();
        match text.split_once('=') {
            Some((flag, _)) if flag.starts_with("--") => Some(flag.to_string()),
            _ => args[..i].last()?.to_str().map(str::to_string),
        }
    });
    match flag {
        Some(flag) if flag.starts_with('-') => format!("{flag}: value is not UTF-8"),
        _ => "an argument is not UTF-8".to_string(),
    }
}

/// The long flag closest to `given` (`--max-request-per-connection`,
/// `--max-requests-per-connection=3`), by the same edit distance as a
/// config key's "did you mean" ([`super::file::nearest`]); its name
/// without the dashes.
fn nearest_flag(given: &str) -> Option<String> {
    let name = given.trim_start_matches('-');
    let name = name.split_once('=').map_or(name, |(n, _)| n);
    let cmd = command();
    let longs: Vec<String> = cmd
        .get_arguments()
        .filter_map(Arg::get_long)
        .map(|l| l.replace('-', "_"))
        .collect();
    let known: Vec<&str> = longs.iter().map(String::as_str).collect();
    super::file::nearest(name, &known).map(|n| n.replace('_', "-"))
}

/// One line for a clap error, naming the flag: `--keepalive-timeout:
/// "soon" is not a duration like 500ms, 10s or 2m`.
fn describe(e: &clap::Error) -> String {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    // "--keepalive-timeout <DUR>" → "--keepalive-timeout"
    let arg = context(ContextKind::InvalidArg).map(|a| a.split(' ').next().unwrap_or(a));
    match (e.kind(), arg) {
        (ErrorKind::ValueValidation, Some(flag)) => {
            if let Some(reason) = e.source() {
                return format!("{flag}: {reason}");
            }
        }
        (ErrorKind::InvalidValue, Some(flag))
            if context(ContextKind::InvalidValue).is_some_and(str::is_empty) =>
        {
            return format!("missing argument for option '{flag}'");
        }
        (ErrorKind::UnknownArgument, Some(a)) if a.starts_with('-') => {
            return match nearest_flag(a) {
                Some(near) => format!("unknown option {a}; did you mean --{near}?"),
                None => format!("unknown option {a}"),
            };
        }
        (ErrorKind::UnknownArgument, Some(a)) => return format!("unexpected argument {a:?}"),
        (ErrorKind::ArgumentConflict, Some(flag))
            if context(ContextKind::PriorArg).is_some_and(|p| p.starts_with(flag)) =>
        {
            return format!("{flag}: given more than once (it takes one value)");
        }
        (ErrorKind::TooManyValues, Some(flag)) => {
            if let Some(value) = context(ContextKind::InvalidValue) {
                return format!("unexpected argument for option '{flag}': {value:?}");
            }
        }
        _ => {}
    }
    // Anything else: clap's own first line, which names the flag.
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("invalid command line");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;
    use std::time::Duration;

    use super::*;

    fn parsed(args: &[&str]) -> Parsed {
        match parse(args.iter().map(OsString::from)) {
            Ok(Cli::Run(p)) => *p,
            Ok(Cli::Exit(_)) => panic!("{args:?}: exit"),
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    /// A config as a file might leave it: not the defaults.
    fn from_file() -> Config {
        Config {
            keepalive_timeout: Duration::from_secs(5),
            workers: 4,
            add_via: false,
            add_x_forwarded_for: false,
            ..Config::default()
        }
    }

    #[test]
    fn only_the_flags_given_override_the_file() {
        let mut c = from_file();
        parsed(&["--keepalive-timeout", "7s", "--no-x-forwarded-proto"])
            .apply(&mut c, false)
            .unwrap();
        let want = Config {
            keepalive_timeout: Duration::from_secs(7),
            add_x_forwarded_proto: false,
            ..from_file()
        };
        assert_eq!(c, want);

        let mut c = from_file();
        parsed(&[]).apply(&mut c, false).unwrap();
        assert_eq!(c, from_file());
    }

    #[test]
    fn a_repeated_single_value_flag_is_refused() {
        let err = |args: &[&str]| parse(args.iter().map(OsString::from)).err().unwrap();
        assert_eq!(
            err(&["--admin", "127.0.0.1:1", "--admin", "127.0.0.1:2"]),
            "--admin: given more than once (it takes one value)"
        );
        assert_eq!(
            err(&["--no-via", "--no-via"]),
            "--no-via: given more than once (it takes one value)"
        );
    }

    #[test]
    fn config_files() {
        let p = parsed(&["--config", "a.toml", "--max-retries", "2"]);
        assert_eq!((p.config_file, p.check), (Some("a.toml".into()), false));
        let p = parsed(&["--config=a.toml", "--check-config", "a.toml"]);
        assert_eq!((p.config_file, p.check), (Some("a.toml".into()), true));
        let e = parse(["--check-config", "a", "--config", "b"].map(OsString::from));
        assert_eq!(
            e.err().as_deref(),
            Some("--config: a second config file (b)")
        );
    }

    #[test]
    fn errors_name_the_flag() {
        let err = |args: &[&str]| parse(args.iter().map(OsString::from)).err().unwrap();
        assert_eq!(
            err(&["--drain-timeout", "soon"]),
            "--drain-timeout: \"soon\" is not a duration like 500ms, 10s or 2m \
             (a unit is required)"
        );
        assert_eq!(
            err(&["--keepalive-timeout", "10"]),
            "--keepalive-timeout: \"10\" is not a duration like 500ms, 10s or 2m \
             (a unit is required)"
        );
        assert_eq!(
            err(&["--request-head-timeout", "99999999999999h"]),
            "--request-head-timeout: \"99999999999999h\" is too long a duration \
             (at most 18446744073709551615 ms)"
        );
        assert_eq!(
            err(&["--request-head-timeout", "99999999999999999999ms"]),
            "--request-head-timeout: \"99999999999999999999ms\" is too long a duration \
             (at most 18446744073709551615 ms)"
        );
        assert_eq!(
            err(&["--request-head-timeout", "ms"]),
            "--request-head-timeout: \"ms\" is not a duration like 500ms, 10s or 2m \
             (a unit is required)"
        );
        assert_eq!(
            err(&["--workers", "0"]),
            "--workers: \"0\" is not a number of workers (1, 2, … or \"auto\")"
        );
        assert_eq!(
            err(&["--max-head-size", "-1"]),
            "--max-head-size: \"-1\" is not a whole number"
        );
        assert_eq!(err(&["--frobnicate"]), "unknown option --frobnicate");
        assert_eq!(
            err(&["--max-request-per-connection", "3"]),
            "unknown option --max-request-per-connection; did you mean --max-requests-per-connection?"
        );
        assert_eq!(
            err(&["--keepalive-timout=5s"]),
            "unknown option --keepalive-timout; did you mean --keepalive-timeout?"
        );
        let bad = OsString::from(std::ffi::OsStr::from_bytes(b"\xff"));
        let e = parse([OsString::from("--upstream"), bad.clone()]).err();
        assert_eq!(e.as_deref(), Some("--upstream: value is not UTF-8"));
        let mut eq = OsString::from("--workers=");
        eq.push(&bad);
        assert_eq!(
            parse([eq]).err().as_deref(),
            Some("--workers: value is not UTF-8")
        );
        assert_eq!(err(&["x"]), "unexpected argument \"x\"");
        assert_eq!(err(&["--listen"]), "missing argument for option '--listen'");
        assert_eq!(
            err(&["--listen", "--no-via"]),
            "--listen: \"--no-via\" is not an address like 127.0.0.1:8080"
        );
    }

    /// Every knob has a flag and a help line with its default, and is a
    /// key of the file form: each comes from the one declaration.
    #[test]
    fn every_knob_has_a_flag_a_key_and_a_help_line() {
        let keys = toml::Table::try_from(Config::default()).unwrap();
        let cmd = command();
        let help = help_text(&cmd);
        for (key, value) in &keys {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id().as_str() == key.as_str())
                .unwrap_or_else(|| panic!("no flag for {key}"));
            let flag = format!("--{}", arg.get_long().unwrap());
            let line = help
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{flag} ")))
                .unwrap_or_else(|| panic!("{flag} not in the help:\n{help}"));
            if !value.is_bool() {
                assert_eq!(flag, format!("--{}", key.replace('_', "-")));
                let shown = value.as_str().map_or(value.to_string(), str::to_string);
                if shown.is_empty() {
                    assert!(!line.contains("()"), "{line}");
                } else {
                    assert!(line.contains(&format!("({shown})")), "{line}");
                }
            }
        }
        let knobs = cmd
            .get_arguments()
            .filter(|a| keys.contains_key(a.get_id().as_str()))
            .count();
        assert_eq!(knobs, keys.len());
        // Knobs whose default is "not set" have no key in the defaults.
        let unset_by_default = [
            "admin",
            "admin-token-file",
            "pid-file",
            "listen-tls",
            "tls-client-ca",
            "accept-proxy-protocol",
            "trusted-proxies",
        ];
        // + --config, --check-config, --tls-cert, --tls-key, --print-man,
        // --print-completions, -h, -V.
        assert_eq!(
            keys.len() + unset_by_default.len() + 8,
            cmd.get_arguments().count()
        );
    }

    /// Every flag sits under one of the help's headings: a new knob in
    /// `sluice::Config` needs `help_heading` in its `#[arg(..)]`.
    #[test]
    fn every_flag_has_a_heading() {
        let cmd = command();
        for arg in cmd.get_arguments() {
            let heading = arg.get_help_heading();
            assert!(
                heading.is_some_and(|h| HEADINGS.contains(&h)),
                "--{}: help_heading {heading:?} is not one of {HEADINGS:?}; add \
                 `help_heading = \"…\"` to its #[arg(..)] in src/config.rs",
                arg.get_long().unwrap_or_default()
            );
        }
        let help = help_text(&cmd);
        assert!(
            help.contains("\nTimeouts:\n  --keepalive-timeout DUR"),
            "{help}"
        );
        assert!(help.contains("--tunnel-idle-timeout DUR"), "{help}");
        assert!(help.contains("(1h)"), "{help}");
        assert!(help.contains("health checks"), "{help}");
    }
}

//! Where the configuration comes from, kept so it can be read again:
//! defaults < config file < command-line flags, validated. The binary loads
//! it once at start and again on every SIGHUP (reload); a worker of a
//! supervisor gets the supervisor's validated configuration instead
//! (`supervisor::worker_config`).
//!
//! What it must not know: the knobs one by one, the loop, signals.

use std::path::PathBuf;

use sluice::{Config, Resolver};

use super::args::Parsed;
use super::file;

/// The command line's flags and the config file they name.
pub struct Source {
    parsed: Box<Parsed>,
}

impl Source {
    /// Keeps the parsed command line (its flags and `--config FILE`).
    pub fn new(parsed: Box<Parsed>) -> Source {
        Source { parsed }
    }

    /// The file named by `--config` / `--check-config`, if any.
    pub fn file(&self) -> Option<&PathBuf> {
        self.parsed.config_file.as_ref()
    }

    /// Reads the file (if any) afresh, lays the flags over it and validates
    /// the result.
    ///
    /// Errors: one line naming the file and key, or the flag, or the knob
    /// that does not fit (the binary exits 2 with it at start; a reload
    /// logs it and keeps the running configuration).
    pub fn load(&self) -> Result<Config, String> {
        let (config, warnings) = self.load_with_warnings()?;
        for w in warnings {
            log::warn!("{w}");
        }
        Ok(config)
    }

    /// `--check-config`'s look-up of the upstream host names
    /// ([`file::check_names`]), each failure placed in the file (read
    /// again) when the group came from it.
    ///
    /// Errors: one line per name that does not resolve.
    pub fn check_names(&self, config: &Config, resolver: &dyn Resolver) -> Result<(), String> {
        let failed = file::check_names(config, resolver);
        if failed.is_empty() {
            return Ok(());
        }
        let text = self.file().and_then(|f| std::fs::read_to_string(f).ok());
        let place = self
            .file()
            .zip(text.as_deref())
            .map(|(file, text)| file::Place { file, text });
        let lines: Vec<String> = failed
            .iter()
            .map(|(path, why)| file::describe_at(path, why, place, self.parsed.gave(path)))
            .collect();
        Err(lines.join("\n"))
    }

    /// As [`Source::load`], and every TLS file the configuration names is
    /// loaded as the start will (`sluice::tls::check`); returns the
    /// warnings to show (`Config::warnings`, certificates close to their
    /// end, `tls_verify = false`), each as one line placed in the file,
    /// instead of logging them.
    pub fn load_with_warnings(&self) -> Result<(Config, Vec<String>), String> {
        let (mut config, text) = match self.file() {
            None => (Config::default(), None),
            Some(path) => {
                let (config, text) = file::load(path)?;
                (config, Some(text))
            }
        };
        let file_gave_listen = text
            .as_deref()
            .is_some_and(|t| file::gives_key(t, "listen"));
        self.parsed
            .apply(&mut config, file_gave_listen)
            .map_err(|msg| format!("{msg}\n(see sluice --help)"))?;
        let place = self
            .file()
            .zip(text.as_deref())
            .map(|(file, text)| file::Place { file, text });
        let invalid = |e: sluice::ConfigError| {
            let from_flag = self.parsed.gave(&e.path());
            let mut line = file::describe_invalid(&e, place, from_flag);
            // A route of the file to a group the flag took away.
            if e.reason.contains("unknown upstream group") && self.parsed.gave("upstream") {
                line.push_str(
                    " (--upstream on the command line replaces the file's [[upstream]] groups \
                     with one group named \"default\")",
                );
            }
            line
        };
        config.validate().map_err(invalid)?;
        let tls_warnings = sluice::tls::check(&config).map_err(invalid)?;
        let warnings = config
            .warnings()
            .into_iter()
            .chain(tls_warnings)
            .map(|w| file::describe_warning(&w, place, self.parsed.gave(&w.path)))
            .collect();
        Ok((config, warnings))
    }
}

//! Where the configuration comes from, kept so it can be read again:
//! defaults < config file < command-line flags, validated. The binary loads
//! it once at start and again on every SIGHUP (reload); a worker of a
//! supervisor gets the supervisor's validated configuration instead
//! (`supervisor::worker_config`).
//!
//! What it must not know: the knobs one by one, the loop, signals.

use std::path::PathBuf;

use sluice::Config;

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

    /// As [`Source::load`], and every TLS file the configuration names is
    /// loaded as the start will (`sluice::tls::check`); returns the
    /// warnings to show (certificates close to their end, `tls_verify =
    /// false`) instead of logging them.
    pub fn load_with_warnings(&self) -> Result<(Config, Vec<String>), String> {
        let (mut config, file_gave_listen) = match self.file() {
            None => (Config::default(), false),
            Some(path) => file::load(path)?,
        };
        self.parsed
            .apply(&mut config, file_gave_listen)
            .map_err(|msg| format!("{msg}\n(see sluice --help)"))?;
        let file = self.file().map(PathBuf::as_path);
        config
            .validate()
            .map_err(|e| file::describe_invalid(&e, file))?;
        let warnings = sluice::tls::check(&config).map_err(|e| file::describe_invalid(&e, file))?;
        Ok((config, warnings))
    }
}

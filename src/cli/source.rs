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
        let mut config = match self.file() {
            None => Config::default(),
            Some(path) => file::load(path)?,
        };
        self.parsed
            .apply(&mut config)
            .map_err(|msg| format!("{msg}\n(see sluice --help)"))?;
        config
            .validate()
            .map_err(|e| file::describe_invalid(&e, self.file().map(PathBuf::as_path)))?;
        Ok(config)
    }
}

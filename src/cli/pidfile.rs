//! `--pid-file FILE`: the PID to signal (the supervisor's with
//! `--workers`), written once the listeners are up and removed at exit if
//! it still holds this pid (as nginx does): after a zero-downtime swap
//! (`--takeover` with the same file) it holds the new process's pid, and
//! the old one's exit must not take it away.
//!
//! What it must not know: anything else.

use std::path::{Path, PathBuf};

/// A written pid file; removed when dropped.
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes this process's pid and a newline to `path` (through a
    /// temporary file and a rename, so a reader never sees half of it).
    ///
    /// Errors: one line naming the file and the OS error.
    pub fn write(path: &Path) -> Result<PidFile, String> {
        let tmp = temporary(path);
        std::fs::write(&tmp, format!("{}\n", std::process::id()))
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("cannot write pid file {}: {e}", path.display())
            })?;
        Ok(PidFile(path.to_path_buf()))
    }

    /// `--check-config`: whether [`PidFile::write`] could write `path`,
    /// by creating its temporary file and removing it again (`path`
    /// itself is not touched).
    ///
    /// Errors: the line `write` would give.
    pub fn check(path: &Path) -> Result<(), String> {
        let tmp = temporary(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
            .map_err(|e| format!("cannot write pid file {}: {e}", path.display()))
    }
}

/// The file written first, then renamed to `path`.
fn temporary(path: &Path) -> PathBuf {
    path.with_extension(format!("tmp.{}", std::process::id()))
}

impl Drop for PidFile {
    /// Removes the file if it still holds this process's pid.
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.0)
            .is_ok_and(|text| text.trim() == std::process::id().to_string());
        if ours {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

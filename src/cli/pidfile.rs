//! `--pid-file FILE`: the PID to signal (the supervisor's with
//! `--workers`), written once the listeners are up and removed at exit.
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
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, format!("{}\n", std::process::id()))
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("cannot write pid file {}: {e}", path.display())
            })?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

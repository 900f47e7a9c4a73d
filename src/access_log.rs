//! The access log's output: a buffer the loop's records are formatted
//! into, written out in large pieces (ARCHITECTURE.md §11).
//!
//! Why: one `write` per request would be a syscall per request on the
//! loop thread. Records go into one buffer; it is written when it holds
//! [`FLUSH_AT`] bytes or when its oldest record is [`FLUSH_EVERY`] old
//! (nginx's `access_log … buffer=64k flush=1s`), checked once per loop
//! turn, and always when a drain begins, at a reopen and when the loop
//! stops: a graceful stop loses no record. The loop's poll timeout
//! includes [`AccessLog::next_flush`], so a quiet loop still writes.
//!
//! A file is opened for appending (`O_APPEND`: several workers share it
//! safely) and reopened by [`AccessLog::reopen`] (SIGUSR1, after logrotate
//! moved it). Standard output and error are shared by every worker too:
//! when they are a pipe, writes are cut at line ends into pieces of at most
//! `PIPE_BUF` bytes, which the kernel never interleaves with another
//! writer's. Writes are blocking, as nginx's: a log on a stalled disk slows
//! the loop rather than losing records. A write error is reported (rate
//! limited) and the buffer dropped.
//!
//! What it must not know: HTTP, connections; it moves bytes it is given.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use log::warn;

use crate::config::{AccessLogFormat, AccessLogTarget};
use crate::conn::access::StampCache;

/// Buffered bytes that trigger a write.
pub(crate) const FLUSH_AT: usize = 64 * 1024;

/// Longest time a record waits in the buffer.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Shortest time between two warnings about failed writes.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Where the bytes go.
enum Output {
    Stdout,
    Stderr,
    File(File),
}

/// The access log of one loop.
pub(crate) struct AccessLog {
    target: AccessLogTarget,
    format: AccessLogFormat,
    out: Option<Output>,
    /// Writes must be cut at `PIPE_BUF` (the output is a pipe).
    pipe: bool,
    buf: Vec<u8>,
    /// When the oldest buffered record was added.
    oldest: Option<Instant>,
    /// The records' time of day, formatted once a second.
    stamps: StampCache,
    warned_at: Option<Instant>,
}

impl AccessLog {
    /// Opens `target` (nothing for `Off`).
    ///
    /// Errors: the file cannot be opened for appending (the message names
    /// it).
    pub(crate) fn open(target: &AccessLogTarget, format: AccessLogFormat) -> io::Result<Self> {
        let mut log = AccessLog {
            target: target.clone(),
            format,
            out: None,
            pipe: false,
            buf: Vec::new(),
            oldest: None,
            stamps: StampCache::default(),
            warned_at: None,
        };
        log.out = open_output(target)?;
        log.pipe = log.out.as_ref().is_some_and(is_pipe);
        Ok(log)
    }

    /// The record format.
    /// `time` as the records write it (RFC 3339, milliseconds), into `out`.
    pub(crate) fn stamp<'a>(&mut self, time: Option<SystemTime>, out: &'a mut [u8; 24]) -> &'a str {
        self.stamps.stamp(time, out)
    }

    /// Records go somewhere (not `off`).
    pub(crate) fn is_on(&self) -> bool {
        self.out.is_some()
    }

    pub(crate) fn format(&self) -> AccessLogFormat {
        self.format
    }

    /// The buffer to append one record to (`None` when the log is off).
    /// `now` dates the record for the flush deadline; a full buffer is
    /// written out first.
    pub(crate) fn line_buffer(&mut self, now: Instant) -> Option<&mut Vec<u8>> {
        self.out.as_ref()?;
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
        self.oldest.get_or_insert(now);
        Some(&mut self.buf)
    }

    /// When the buffer must be written at the latest (`None` if empty).
    pub(crate) fn next_flush(&self) -> Option<Instant> {
        self.oldest.map(|t| t + FLUSH_EVERY)
    }

    /// Writes the buffer if it is due at `now` (full, or its oldest record
    /// waited [`FLUSH_EVERY`]). Called once per loop turn.
    pub(crate) fn flush_if_due(&mut self, now: Instant) {
        if self.buf.len() >= FLUSH_AT || self.next_flush().is_some_and(|t| t <= now) {
            self.flush();
        }
    }

    /// Writes every buffered record now.
    pub(crate) fn flush(&mut self) {
        self.oldest = None;
        if self.buf.is_empty() {
            return;
        }
        let result = match self.out.as_mut() {
            None => Ok(()),
            Some(out) => write_all(out, &self.buf, self.pipe),
        };
        self.buf.clear();
        if self.buf.capacity() > 4 * FLUSH_AT {
            self.buf.shrink_to(FLUSH_AT);
        }
        if let Err(e) = result {
            let now = Instant::now();
            if self
                .warned_at
                .is_none_or(|t| now.saturating_duration_since(t) >= WARN_EVERY)
            {
                self.warned_at = Some(now);
                warn!("access log {}: write failed: {e}", self.target);
            }
        }
    }

    /// Writes what is buffered, then reopens a file target (logrotate moved
    /// the old one). On failure the old file stays in use.
    pub(crate) fn reopen(&mut self) {
        self.flush();
        if !matches!(self.target, AccessLogTarget::File(_)) {
            return;
        }
        match open_output(&self.target) {
            Ok(out) => {
                self.pipe = out.as_ref().is_some_and(is_pipe);
                self.out = out;
                log::info!("access log {} reopened", self.target);
            }
            Err(e) => warn!("access log: cannot reopen: {e}; still writing the old file"),
        }
    }
}

fn open_output(target: &AccessLogTarget) -> io::Result<Option<Output>> {
    Ok(match target {
        AccessLogTarget::Off => None,
        AccessLogTarget::Stdout => Some(Output::Stdout),
        AccessLogTarget::Stderr => Some(Output::Stderr),
        AccessLogTarget::File(path) => Some(Output::File(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("access log {}: {e}", path.display()))
                })?,
        )),
    })
}

fn is_pipe(out: &Output) -> bool {
    let fd = match out {
        Output::Stdout => io::stdout().as_raw_fd(),
        Output::Stderr => io::stderr().as_raw_fd(),
        Output::File(f) => f.as_raw_fd(),
    };
    std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .map(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()))
        .unwrap_or(false)
}

/// Writes `bytes` whole; into a pipe in pieces of at most `PIPE_BUF` cut
/// after a newline (a record longer than that goes alone).
fn write_all(out: &mut Output, bytes: &[u8], pipe: bool) -> io::Result<()> {
    let mut write = |part: &[u8]| match out {
        Output::Stdout => io::stdout().lock().write_all(part),
        Output::Stderr => io::stderr().lock().write_all(part),
        Output::File(f) => f.write_all(part),
    };
    if !pipe {
        return write(bytes);
    }
    let mut rest = bytes;
    while !rest.is_empty() {
        let window = rest.get(..rest.len().min(libc::PIPE_BUF)).unwrap_or(rest);
        let cut = if window.len() == rest.len() {
            rest.len()
        } else {
            match window.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(rest.len(), |i| i + 1),
            }
        };
        let (part, tail) = rest.split_at(cut);
        write(part)?;
        rest = tail;
    }
    Ok(())
}

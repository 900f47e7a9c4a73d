//! Where the access log's bytes go, and how each kind of destination is
//! written without ever blocking the loop on a reader (ARCHITECTURE.md §11).
//!
//! Why: a pipe, a socket or a terminal has a reader that can stall (a
//! container's log driver, journald, a paused `less`); a blocking write
//! to it would stop the whole loop, its clients and its signals with it.
//! Such a *stream* destination is written without blocking:
//! - a pipe, FIFO or terminal through a file description of our own
//!   (standard output is reopened through `/proc/self/fd/1`, a FIFO path
//!   is opened by us anyway) with `O_NONBLOCK`: the flag is never set on
//!   a description shared with the parent or the other workers;
//! - a socket (systemd's journal stream) with `send(MSG_DONTWAIT)`, which
//!   is non-blocking for that one call.
//!
//! A regular file is written blocking, as nginx does: the page cache takes
//! the bytes, and only a failing disk can hold a write. If the private
//! description cannot be had, the destination is written blocking too
//! (logged once).
//!
//! The error log on standard error gets the same treatment through
//! [`StderrLog`]: a line a stalled reader has no room for is dropped and
//! counted, never waited for.
//!
//! What it must not know: records, buffering policy (`access_log.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use crate::config::AccessLogTarget;

/// An open access log destination.
pub(super) enum Output {
    /// Standard output or error, written blocking (a regular file, or a
    /// stream whose private description could not be opened).
    Std(RawFd),
    /// A regular file, opened for appending (`O_APPEND`: several workers
    /// share it safely), written blocking.
    File(File),
    /// A pipe, FIFO or terminal, through a private `O_NONBLOCK` description.
    Stream(File),
    /// A socket, written with `send(MSG_DONTWAIT | MSG_NOSIGNAL)`.
    Socket(RawFd),
}

impl Output {
    /// Opens `target` (`None` for `Off`).
    ///
    /// Errors: a file target cannot be opened for appending (the message
    /// names it).
    pub(super) fn open(target: &AccessLogTarget) -> io::Result<Option<Output>> {
        Ok(Some(match target {
            AccessLogTarget::Off => return Ok(None),
            AccessLogTarget::Stdout => Output::standard(libc::STDOUT_FILENO),
            AccessLogTarget::Stderr => Output::standard(libc::STDERR_FILENO),
            AccessLogTarget::File(path) => {
                // `O_NONBLOCK`: opening a FIFO never waits for a reader (no
                // reader is `ENXIO`), and a FIFO is then written without
                // blocking; a regular file ignores the flag.
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(path)
                    .map_err(|e| {
                        let why = if e.raw_os_error() == Some(libc::ENXIO) {
                            "a FIFO with no reader (start its reader first)".to_string()
                        } else {
                            e.to_string()
                        };
                        io::Error::new(e.kind(), format!("access log {}: {why}", path.display()))
                    })?;
                if is_stream(file.as_raw_fd()) {
                    Output::Stream(file)
                } else {
                    Output::File(file)
                }
            }
        }))
    }

    /// Standard output or error (`fd`) in the form that cannot block on a
    /// stalled reader, where it can have one.
    fn standard(fd: RawFd) -> Output {
        let Ok(meta) = std::fs::metadata(format!("/proc/self/fd/{fd}")) else {
            return Output::Std(fd);
        };
        let kind = meta.file_type();
        if kind.is_socket() {
            return Output::Socket(fd);
        }
        // SAFETY: isatty only inspects the descriptor.
        let tty = kind.is_char_device() && unsafe { libc::isatty(fd) } == 1;
        if !(kind.is_fifo() || tty) {
            // A regular file, `/dev/null`: a write never waits for a reader.
            return Output::Std(fd);
        }
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{fd}"))
        {
            Ok(file) => Output::Stream(file),
            Err(e) => {
                log::info!(
                    "access log: cannot open a non-blocking description of descriptor {fd} \
                     ({e}); writing it blocking"
                );
                Output::Std(fd)
            }
        }
    }

    /// The destination is a pipe or a socket that other writers (the
    /// other workers) share: writes must be whole records of at most
    /// `PIPE_BUF` bytes to stay apart from theirs.
    pub(super) fn shared_stream(&self) -> bool {
        match self {
            Output::Stream(f) => is_fifo(f.as_raw_fd()),
            Output::Socket(_) => true,
            Output::Std(fd) => is_fifo(*fd),
            Output::File(f) => is_fifo(f.as_raw_fd()),
        }
    }

    /// True if a write can find the reader full (and then waits for it in
    /// [`Output::wait_writable`] rather than blocking).
    pub(super) fn can_stall(&self) -> bool {
        matches!(self, Output::Stream(_) | Output::Socket(_))
    }

    /// Writes a prefix of `bytes`: `Ok(n)` bytes went out, 0 if the reader
    /// is full (a stream) — a blocking destination takes everything.
    /// Errors: the destination's write error (`EPIPE` when the reader is
    /// gone), never `WouldBlock`.
    pub(super) fn write_some(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let result = match self {
            Output::Std(fd) => write_fd_all(*fd, bytes).map(|()| bytes.len()),
            Output::File(f) => f.write_all(bytes).map(|()| bytes.len()),
            Output::Stream(f) => f.write(bytes),
            Output::Socket(fd) => {
                // SAFETY: `bytes` is valid for reads of its length; `fd`
                // is this process's standard output or error.
                let n = unsafe {
                    libc::send(
                        *fd,
                        bytes.as_ptr().cast(),
                        bytes.len(),
                        libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                    )
                };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            }
        };
        match result {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            other => other,
        }
    }

    /// Waits until the destination takes bytes again, at most until
    /// `deadline` and never longer than `slice` at a time (the caller
    /// checks its stop flags between slices). False if the time ran out.
    pub(super) fn wait_writable(&self, deadline: Instant, slice: Duration) -> bool {
        let fd = match self {
            Output::Stream(f) => f.as_raw_fd(),
            Output::Socket(fd) => *fd,
            Output::Std(_) | Output::File(_) => return true,
        };
        let now = Instant::now();
        if deadline <= now {
            return false;
        }
        let wait = deadline.saturating_duration_since(now).min(slice);
        let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms.max(1)) };
        n > 0 || Instant::now() < deadline
    }
}

/// The descriptor is a pipe, FIFO or terminal.
fn is_stream(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    is_fifo(fd) || unsafe { libc::isatty(fd) } == 1
}

/// The descriptor is a pipe or FIFO.
fn is_fifo(fd: RawFd) -> bool {
    std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .map(|m| m.file_type().is_fifo())
        .unwrap_or(false)
}

/// Writes all of `bytes` to standard output or error (blocking).
fn write_fd_all(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    if fd == libc::STDERR_FILENO {
        io::stderr().lock().write_all(bytes)
    } else {
        io::stdout().lock().write_all(bytes)
    }
}

/// Standard error as the error log's writer (`env_logger`'s pipe target):
/// a pipe, FIFO, terminal or socket is written without blocking, and a
/// line its stalled reader has no room for is dropped; the next line that
/// goes out is preceded by one that says how many were dropped. A regular
/// file is written as usual. A line is one `write` (`env_logger` formats a
/// record whole first), so a pipe takes it whole or not at all; a terminal
/// or a socket may take part of it, and the rest is then dropped (the
/// notice starts on a line of its own).
pub struct StderrLog {
    out: Output,
    dropped: u64,
    /// The last bytes written did not end a line (a line cut short).
    mid_line: bool,
}

impl StderrLog {
    /// Standard error, in the form that cannot block on a stalled reader
    /// where it can have one.
    pub fn new() -> Self {
        StderrLog {
            out: Output::standard(libc::STDERR_FILENO),
            dropped: 0,
            mid_line: false,
        }
    }
}

impl Default for StderrLog {
    fn default() -> Self {
        StderrLog::new()
    }
}

impl Write for StderrLog {
    /// Writes `buf`, or drops it if the reader has no room: `Ok(buf.len())`
    /// either way (a partial write returns its count, and a rest that
    /// finds no room is dropped). Errors: the destination's write error.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.dropped > 0 {
            let notice = format!(
                "{}sluice: {} log lines dropped: standard error's reader did not take them\n",
                if self.mid_line { "\n" } else { "" },
                self.dropped
            );
            let n = self.out.write_some(notice.as_bytes())?;
            if n == 0 {
                self.dropped = self.dropped.saturating_add(1);
                return Ok(buf.len());
            }
            self.mid_line = n < notice.len();
            self.dropped = u64::from(self.mid_line);
        }
        match self.out.write_some(buf)? {
            0 if !buf.is_empty() => {
                self.dropped = self.dropped.saturating_add(1);
                Ok(buf.len())
            }
            n => {
                self.mid_line = buf.get(..n).is_some_and(|w| !w.ends_with(b"\n"));
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

//! The access log's output: a buffer the loop's records are formatted
//! into, written out in large pieces (ARCHITECTURE.md §11).
//!
//! Why: one `write` per request would be a syscall per request on the
//! loop thread. Records go into one buffer; it is written when it holds
//! [`FLUSH_AT`] bytes or when its oldest record is [`FLUSH_EVERY`] old
//! (nginx's `access_log … buffer=64k flush=1s`), checked once per loop
//! turn, and always when a drain begins, at a reopen and when the loop
//! stops. The loop's poll timeout includes [`AccessLog::next_flush`], so a
//! quiet loop still writes.
//!
//! A file is opened for appending (`O_APPEND`: several workers share it
//! safely) and reopened by [`AccessLog::reopen`] (SIGUSR1, after logrotate
//! moved it). Standard output and error are shared by every worker too:
//! when they are a pipe (or a socket), writes are cut at line ends into
//! pieces of at most `PIPE_BUF` bytes, which the kernel never interleaves
//! with another writer's, and a record that would be longer has its
//! client-sent fields shortened to fit (`conn/access.rs`).
//!
//! **A stalled reader never stops the loop** (`output.rs`): a pipe, socket
//! or terminal is written without blocking. While its reader does not
//! take bytes, records stay in the buffer, which is tried again every
//! [`RETRY_EVERY`] and holds at most [`MAX_PENDING`] bytes; records beyond
//! that are dropped and counted, and once the reader takes bytes again
//! one warning says how many were lost. A graceful stop waits for the
//! reader until the drain deadline (`--drain-timeout`), never longer; a
//! stop at once tries once. A healthy reader loses nothing. A regular
//! file is written blocking, as nginx's. A write error is reported (rate
//! limited) and the buffer dropped.
//!
//! What it must not know: HTTP, connections; it moves bytes it is given.

pub(crate) mod output;

use std::io;
use std::time::{Duration, Instant, SystemTime};

use log::warn;

use self::output::Output;
use crate::config::{AccessLogFormat, AccessLogTarget};
use crate::conn::access::StampCache;

/// Buffered bytes that trigger a write.
pub(crate) const FLUSH_AT: usize = 64 * 1024;

/// Longest time a record waits in the buffer.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Most bytes held for a stream whose reader does not take them (about
/// 20,000 records: two seconds of a busy loop).
pub(crate) const MAX_PENDING: usize = 4 * 1024 * 1024;

/// While a stream's reader takes nothing, how often the loop tries again.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(20);

/// Shortest time between two warnings about failed writes.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The access log of one loop.
pub(crate) struct AccessLog {
    target: AccessLogTarget,
    format: AccessLogFormat,
    out: Option<Output>,
    /// Writes must be cut at `PIPE_BUF` (a pipe or socket other workers
    /// share).
    pipe: bool,
    buf: Vec<u8>,
    /// When the oldest buffered record was added.
    oldest: Option<Instant>,
    /// The reader took nothing at the last try: when to try again.
    stalled_until: Option<Instant>,
    /// Records dropped since the last warning about them.
    dropped: u64,
    /// Records dropped or lost to a failed write (the reader closed its
    /// end), not yet counted in the metrics ([`AccessLog::take_lost`]).
    lost: u64,
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
        let out = Output::open(target)?;
        Ok(AccessLog {
            target: target.clone(),
            format,
            pipe: out.as_ref().is_some_and(Output::shared_stream),
            out,
            buf: Vec::new(),
            oldest: None,
            stalled_until: None,
            dropped: 0,
            lost: 0,
            stamps: StampCache::default(),
            warned_at: None,
        })
    }

    /// `time` as the records write it (RFC 3339, milliseconds), into `out`.
    pub(crate) fn stamp<'a>(&mut self, time: Option<SystemTime>, out: &'a mut [u8; 24]) -> &'a str {
        self.stamps.stamp(time, out)
    }

    /// Records go somewhere (not `off`).
    pub(crate) fn is_on(&self) -> bool {
        self.out.is_some()
    }

    /// The record format.
    pub(crate) fn format(&self) -> AccessLogFormat {
        self.format
    }

    /// Records must fit in `PIPE_BUF` bytes (a pipe or socket shared with
    /// the other workers): `conn/access.rs` shortens a longer one.
    pub(crate) fn records_fit_pipe_buf(&self) -> bool {
        self.pipe
    }

    /// The buffer to append one record to (`None` when the log is off, or
    /// when a stalled reader left [`MAX_PENDING`] bytes unwritten: the
    /// record is dropped and counted). `now` dates the record for the
    /// flush deadline; a full buffer is written out first.
    pub(crate) fn line_buffer(&mut self, now: Instant) -> Option<&mut Vec<u8>> {
        self.out.as_ref()?;
        if self.buf.len() >= FLUSH_AT && self.stalled_until.is_none_or(|t| t <= now) {
            self.flush();
        }
        if self.buf.len() >= MAX_PENDING {
            self.dropped = self.dropped.saturating_add(1);
            self.lost = self.lost.saturating_add(1);
            return None;
        }
        self.oldest.get_or_insert(now);
        Some(&mut self.buf)
    }

    /// When the buffer must be written at the latest (`None` if empty):
    /// the oldest record's deadline, or the next try at a stalled reader.
    pub(crate) fn next_flush(&self) -> Option<Instant> {
        self.stalled_until
            .or_else(|| self.oldest.map(|t| t + FLUSH_EVERY))
    }

    /// Writes the buffer if it is due at `now` (full, or its oldest record
    /// waited [`FLUSH_EVERY`], or a stalled reader's next try). Called
    /// once per loop turn.
    pub(crate) fn flush_if_due(&mut self, now: Instant) {
        let due = match self.stalled_until {
            Some(t) => t <= now,
            None => self.buf.len() >= FLUSH_AT || self.next_flush().is_some_and(|t| t <= now),
        };
        if due {
            self.flush();
        }
    }

    /// Writes every buffered record the destination takes now; what a
    /// stalled reader leaves stays buffered for the next try.
    pub(crate) fn flush(&mut self) {
        self.oldest = None;
        if self.buf.is_empty() {
            self.stalled_until = None;
            return;
        }
        let result = match self.out.as_mut() {
            None => Ok(self.buf.len()),
            Some(out) => write_out(out, &self.buf, self.pipe),
        };
        let now = Instant::now();
        match result {
            Ok(n) if n >= self.buf.len() => {
                self.buf.clear();
                if self.buf.capacity() > 4 * FLUSH_AT {
                    self.buf.shrink_to(FLUSH_AT);
                }
                self.stalled_until = None;
                self.report_dropped();
            }
            Ok(n) => {
                // Still behind: no warning yet. Standard error often
                // shares the reader's pipe (`2>&1`, a container's log),
                // so a warning now would find it full again and be lost.
                self.buf.drain(..n);
                self.oldest = Some(now);
                self.stalled_until = Some(now + RETRY_EVERY);
            }
            Err(e) => {
                let lines = memchr::memchr_iter(b'\n', &self.buf).count() as u64;
                self.lost = self.lost.saturating_add(lines);
                self.buf.clear();
                self.stalled_until = None;
                if self
                    .warned_at
                    .is_none_or(|t| now.saturating_duration_since(t) >= WARN_EVERY)
                {
                    self.warned_at = Some(now);
                    warn!("access log {}: write failed: {e}", self.target);
                }
            }
        }
    }

    /// Writes every buffered record before the loop ends, waiting for a
    /// stalled reader until `deadline` at most, and sooner if `stop_now`
    /// turns true (a second stop signal). What is still unwritten then is
    /// dropped, with a warning that counts it (and in
    /// [`AccessLog::take_lost`]).
    pub(crate) fn finish(&mut self, deadline: Instant, stop_now: &dyn Fn() -> bool) {
        loop {
            self.flush();
            if self.buf.is_empty() {
                return;
            }
            let waited = self
                .out
                .as_ref()
                .is_some_and(|o| o.wait_writable(deadline, Duration::from_millis(50)));
            if !waited || stop_now() {
                break;
            }
        }
        let lost = memchr::memchr_iter(b'\n', &self.buf).count() as u64;
        self.lost = self.lost.saturating_add(lost);
        self.buf.clear();
        warn!(
            "access log {}: the reader took no more bytes before the stop; \
             {} records not written",
            self.target,
            self.dropped.saturating_add(lost)
        );
        self.dropped = 0;
    }

    /// Records dropped or lost since the last call (for the
    /// dropped-records counter).
    pub(crate) fn take_lost(&mut self) -> u64 {
        std::mem::take(&mut self.lost)
    }

    /// One warning for the records dropped while the reader stalled, said
    /// once it took every record held for it: not stuck behind the same
    /// reader when standard error shares its pipe.
    fn report_dropped(&mut self) {
        if self.dropped > 0 {
            warn!(
                "access log {}: the reader did not keep up; {} records dropped \
                 (at most {} MiB are held for it)",
                self.target,
                self.dropped,
                MAX_PENDING / (1024 * 1024)
            );
            self.dropped = 0;
        }
    }

    /// Writes what is buffered, then reopens a file target (logrotate moved
    /// the old one). On failure the old file stays in use. Records a
    /// stalled FIFO reader has not taken are written to the new file.
    pub(crate) fn reopen(&mut self) {
        self.flush();
        if !matches!(self.target, AccessLogTarget::File(_)) {
            return;
        }
        match Output::open(&self.target) {
            Ok(out) => {
                self.pipe = out.as_ref().is_some_and(Output::shared_stream);
                self.out = out;
                log::info!("access log {} reopened", self.target);
            }
            Err(e) => warn!("access log: cannot reopen: {e}; still writing the old file"),
        }
    }
}

/// Writes from the front of `bytes` what the destination takes now and
/// returns how much that was (all of it for a blocking destination). Into
/// a pipe or socket, in pieces of at most `PIPE_BUF` cut after a newline:
/// a non-blocking pipe takes such a piece whole or not at all, so a record
/// is never split (a record longer than `PIPE_BUF` goes alone).
fn write_out(out: &mut Output, bytes: &[u8], pipe: bool) -> io::Result<usize> {
    if !pipe && !out.can_stall() {
        return out.write_some(bytes);
    }
    let mut done = 0;
    while let Some(rest) = bytes.get(done..).filter(|r| !r.is_empty()) {
        let piece = if pipe { pipe_piece(rest) } else { rest.len() };
        let n = out.write_some(rest.get(..piece).unwrap_or(rest))?;
        done += n;
        if n < piece {
            break;
        }
    }
    Ok(done)
}

/// The length of the next piece of `rest` for a pipe: whole records up to
/// `PIPE_BUF` bytes, or one record alone if it is longer.
fn pipe_piece(rest: &[u8]) -> usize {
    let window = rest.get(..rest.len().min(libc::PIPE_BUF)).unwrap_or(rest);
    if window.len() == rest.len() {
        return rest.len();
    }
    match memchr::memrchr(b'\n', window) {
        Some(i) => i + 1,
        None => memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1),
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};

    use super::*;

    /// An access log writing into a pipe nobody reads yet (its write end
    /// non-blocking, as `output.rs` opens a stream), and the read end.
    fn log_on_a_pipe() -> (AccessLog, File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 returns.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        // SAFETY: both descriptors were just created and are owned here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut log = AccessLog::open(&AccessLogTarget::Off, AccessLogFormat::Text).unwrap();
        log.out = Some(Output::Stream(File::from(write)));
        log.pipe = true;
        (log, File::from(read))
    }

    /// Appends record `i` (about 100 bytes) unless it is dropped.
    fn add(log: &mut AccessLog, i: usize) -> bool {
        let Some(buf) = log.line_buffer(Instant::now()) else {
            return false;
        };
        buf.extend_from_slice(format!("record {i:08} {}\n", "x".repeat(80)).as_bytes());
        true
    }

    /// Reads what the pipe holds now.
    fn drain_pipe(r: &mut File, into: &mut Vec<u8>) {
        let mut chunk = [0u8; 65536];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            into.extend_from_slice(&chunk[..n]);
        }
    }

    #[test]
    fn a_stalled_reader_holds_at_most_max_pending_and_the_rest_is_counted_as_dropped() {
        let (mut log, mut r) = log_on_a_pipe();
        let total = MAX_PENDING / 100 + 5000;
        let kept = (0..total).filter(|&i| add(&mut log, i)).count();
        assert!(kept < total, "nothing was dropped");
        assert!(log.buf.len() <= MAX_PENDING + 200);
        assert_eq!(log.dropped as usize, total - kept);
        assert!(
            log.next_flush().is_some(),
            "a stalled reader is tried again"
        );
        // The reader comes back: every kept record arrives whole, in order.
        let mut got = Vec::new();
        let dropped = log.dropped;
        for _ in 0..10_000 {
            drain_pipe(&mut r, &mut got);
            log.flush();
            if log.buf.is_empty() {
                break;
            }
            // Still behind: the warning waits (standard error may share
            // this pipe, and would find it full).
            assert_eq!(log.dropped, dropped, "reported before the backlog went");
        }
        drain_pipe(&mut r, &mut got);
        let text = String::from_utf8(got).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), kept);
        for (i, line) in lines.iter().enumerate() {
            assert!(line.starts_with(&format!("record {i:08} ")), "{line}");
            assert_eq!(line.len(), 96);
        }
        assert_eq!(
            log.dropped, 0,
            "the drop was reported once the reader came back"
        );
        assert_eq!(log.next_flush(), None);
    }

    /// Runs `finish` on 2,000 records a reader never takes; how long it
    /// waited.
    fn finish_unread(wait: Duration, stop_now: bool) -> Duration {
        let (mut log, _r) = log_on_a_pipe();
        for i in 0..2000 {
            assert!(add(&mut log, i));
        }
        let started = Instant::now();
        log.finish(started + wait, &|| stop_now);
        assert!(log.take_lost() > 0);
        assert!(log.buf.is_empty());
        started.elapsed()
    }

    #[test]
    fn finish_gives_up_at_its_deadline_when_the_reader_never_comes_back() {
        assert!(finish_unread(Duration::from_millis(100), false) < Duration::from_secs(5));
    }

    #[test]
    fn finish_stops_waiting_when_told_to_stop_now() {
        assert!(finish_unread(Duration::from_secs(60), true) < Duration::from_secs(5));
    }

    #[test]
    fn records_lost_to_a_reader_that_closed_are_counted() {
        let (mut log, r) = log_on_a_pipe();
        drop(r);
        for i in 0..10 {
            assert!(add(&mut log, i));
        }
        log.flush();
        assert_eq!(log.take_lost(), 10);
        assert_eq!(log.take_lost(), 0);
    }

    #[test]
    fn pipe_pieces_are_whole_records_of_at_most_pipe_buf_or_one_longer_record() {
        let records: Vec<u8> = (0..100)
            .flat_map(|_| b"0123456789abcdef\n".to_vec())
            .collect();
        let n = pipe_piece(&records);
        assert!(n <= libc::PIPE_BUF && n.is_multiple_of(17), "{n}");
        let long = [vec![b'a'; libc::PIPE_BUF + 10], b"\nnext\n".to_vec()].concat();
        assert_eq!(pipe_piece(&long), libc::PIPE_BUF + 11);
        assert_eq!(pipe_piece(b"short\n"), 6);
        assert_eq!(
            pipe_piece(&vec![b'z'; libc::PIPE_BUF * 2]),
            libc::PIPE_BUF * 2
        );
    }
}

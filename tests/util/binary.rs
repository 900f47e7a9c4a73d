//! The proxy under test as the built binary (`CARGO_BIN_EXE_sluice`): a
//! child process whose log lines (stderr) are collected, that can be
//! signalled and waited for, and that is killed when its guard drops;
//! running it to completion for command-line checks; and what to give it:
//! free ports and temporary configuration files.
//!
//! Every wait has a bound. A process that outlives its test is a bug: each
//! one started here is killed on drop, with the workers it was told about.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::wait_until;

/// The binary under test.
pub const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
/// Longest a started process may take to log that it is listening.
pub const STARTUP: Duration = Duration::from_secs(5);
/// Longest a [`run_sluice`] may take to exit.
pub const RUN_LIMIT: Duration = Duration::from_secs(5);

/// Ports [`free_port`] hands out: below Linux's ephemeral range
/// (32768–60999 by default), which every `127.0.0.1:0` bind and every
/// outgoing connect draws from. A port from `:0` that a test drops and
/// gives to the binary could be taken in the meantime by another test's
/// in-process proxy or upstream, and sluice's listeners use
/// `SO_REUSEPORT`: the binary and that proxy then shared the port and a
/// client reached the wrong one (a CI flake). Below the range, only
/// another `free_port` call could pick it, and those never repeat a port
/// within a test binary (test binaries run one at a time).
const FREE_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// The next port [`free_port`] tries (an offset into `FREE_PORTS`).
static NEXT_PORT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// A free port on 127.0.0.1 (nothing listens on it right now), outside
/// the ephemeral range (see `FREE_PORTS`), never the same twice in one
/// test binary.
pub fn free_port() -> u16 {
    let span = usize::from(FREE_PORTS.end - FREE_PORTS.start);
    // A start that differs between runs and processes.
    let seed = std::process::id() as usize
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as usize);
    let _ = NEXT_PORT.compare_exchange(usize::MAX, seed % span, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..span {
        let offset = NEXT_PORT.fetch_add(1, Ordering::SeqCst) % span;
        let port = FREE_PORTS.start + u16::try_from(offset).unwrap_or(0);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FREE_PORTS:?}");
}

/// 127.0.0.1:`port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Sends `sig` to `pid`.
pub fn send_signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) };
}

/// Whether a process `pid` exists (signal 0).
pub fn alive(pid: i32) -> bool {
    // SAFETY: as in `send_signal`; signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// The decimal number right after `marker` in a log line (a pid, a port).
#[track_caller]
pub fn pid_after(line: &str, marker: &str) -> i32 {
    let rest = &line[line.find(marker).expect("marker") + marker.len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().expect("pid")
}

/// A running `sluice` (`RUST_LOG=info`) whose stderr lines are collected;
/// killed on drop, together with every pid it [adopted](Self::adopt).
pub struct SluiceProcess {
    pub child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The stderr reader reached EOF: every line is in `lines`.
    eof: Arc<std::sync::atomic::AtomicBool>,
    /// Other pids to kill on drop (a supervisor's workers).
    adopted: Vec<i32>,
}

impl SluiceProcess {
    /// Starts the binary with `args`.
    #[track_caller]
    pub fn start(args: &[&str]) -> SluiceProcess {
        SluiceProcess::start_with_env(args, &[("RUST_LOG", "info")])
    }

    /// Starts the binary with `args`, `RUST_LOG=info`, and the variables
    /// `env` set (they may override `RUST_LOG`).
    #[track_caller]
    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> SluiceProcess {
        let mut all = vec![("RUST_LOG", "info")];
        all.extend_from_slice(env);
        SluiceProcess::start_with_env(args, &all)
    }

    /// Starts the binary with `args` and the environment variables `env`.
    #[track_caller]
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> SluiceProcess {
        SluiceProcess::start_full(SLUICE, args, env, None, 0, Stdio::null())
    }

    /// Starts `exe` (a link to the binary under test elsewhere) with
    /// `args` and `RUST_LOG=info`.
    #[track_caller]
    pub fn start_exe(exe: &str, args: &[&str]) -> SluiceProcess {
        SluiceProcess::start_full(exe, args, &[("RUST_LOG", "info")], None, 0, Stdio::null())
    }

    /// Starts the binary with `args` (`RUST_LOG=info`) and, if given, its
    /// `RLIMIT_NOFILE` (soft and hard) set to `nofile` before it runs, with
    /// `eaten` extra descriptors (`/dev/null`) open in it that it does not
    /// know about.
    #[track_caller]
    pub fn start_with_nofile(args: &[&str], nofile: Option<u64>, eaten: usize) -> SluiceProcess {
        SluiceProcess::start_full(
            SLUICE,
            args,
            &[("RUST_LOG", "info")],
            nofile,
            eaten,
            Stdio::null(),
        )
    }

    /// Starts the binary with `args`, its standard output a pipe the
    /// caller reads (or leaves unread) through [`SluiceProcess::stdout`].
    #[track_caller]
    pub fn start_stdout_piped(args: &[&str]) -> SluiceProcess {
        SluiceProcess::start_full(
            SLUICE,
            args,
            &[("RUST_LOG", "info")],
            None,
            0,
            Stdio::piped(),
        )
    }

    /// The read end of standard output (once; `None` unless started with
    /// [`SluiceProcess::start_stdout_piped`]).
    pub fn stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    #[track_caller]
    fn start_full(
        exe: &str,
        args: &[&str],
        env: &[(&str, &str)],
        nofile: Option<u64>,
        eaten: usize,
        stdout: Stdio,
    ) -> SluiceProcess {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .envs(env.iter().copied())
            .env_remove("SLUICE_WORKER")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped());
        if let Some(n) = nofile {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit is async-signal-safe; only the child runs it.
            unsafe {
                cmd.pre_exec(move || {
                    // The limit bounds descriptor numbers, not counts: the
                    // eaten ones take the highest numbers under it (a CLOEXEC
                    // descriptor of the parent there is replaced).
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                    for k in 0..eaten as i32 {
                        libc::dup2(null, n as i32 - 1 - k);
                    }
                    if null >= 0 && null < n as i32 - eaten as i32 {
                        libc::close(null);
                    }
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn().expect("start sluice");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = lines.clone();
        // Keeps the pipe drained to the end.
        let eof = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = eof.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        SluiceProcess {
            child,
            lines,
            eof,
            adopted: Vec::new(),
        }
    }

    /// Starts the binary with `args` and waits (up to [`STARTUP`]) until it
    /// logs `listening on`.
    #[track_caller]
    pub fn start_listening(args: &[&str]) -> SluiceProcess {
        let p = SluiceProcess::start(args);
        p.wait_line(STARTUP, |l| l.contains("listening on"));
        p
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Kills `pid` too when this guard drops (a supervisor's worker).
    pub fn adopt(&mut self, pid: i32) {
        self.adopted.push(pid);
    }

    /// Adopts every worker a `worker N started pid=P` line named so far;
    /// returns their pids in order.
    pub fn adopt_workers(&mut self) -> Vec<i32> {
        let pids: Vec<i32> = self
            .log()
            .lines()
            .filter(|l| l.contains("started pid="))
            .map(|l| pid_after(l, "pid="))
            .collect();
        for &pid in &pids {
            if !self.adopted.contains(&pid) {
                self.adopted.push(pid);
            }
        }
        pids
    }

    /// Every log line so far.
    pub fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// How many log lines so far match `pred`.
    pub fn count(&self, pred: impl Fn(&str) -> bool) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| pred(l))
            .count()
    }

    /// The first log line that matches `pred`, waiting up to `within`.
    #[track_caller]
    pub fn wait_line(&self, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let mut found = None;
        wait_until(within, || {
            found = self.lines.lock().unwrap().iter().find(|l| pred(l)).cloned();
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "no matching log line within {within:?}; log:\n{}",
                self.log()
            )
        })
    }

    /// After a SIGHUP: waits for `SIGHUP: reloaded`, then until `loops`
    /// loops in all logged `drained` (the old side of a first reload: one
    /// per worker).
    #[track_caller]
    pub fn wait_reloaded_and_drained(&self, loops: usize) {
        self.wait_line(STARTUP, |l| l.contains("SIGHUP: reloaded"));
        assert!(
            wait_until(STARTUP, || self.count(|l| l.contains("drained")) >= loops),
            "{}",
            self.log()
        );
    }

    /// Sends `sig` to the process.
    pub fn signal(&self, sig: i32) {
        send_signal(self.pid(), sig);
    }

    /// Waits up to `within` for the process to exit.
    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let mut status = None;
        wait_until(within, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        let status = status.unwrap_or_else(|| {
            panic!(
                "sluice still running after {within:?}; log:\n{}",
                self.log()
            )
        });
        // Its last lines may still be in the pipe: wait (bounded) until the
        // reader saw EOF, so `log()` and `count()` see them. (A worker that
        // outlives it keeps the pipe open: then the bound ends the wait.)
        wait_until(Duration::from_secs(2), || {
            self.eof.load(std::sync::atomic::Ordering::SeqCst)
        });
        status
    }
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        for &pid in &self.adopted {
            send_signal(pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a [`run_sluice`] ended.
#[derive(Debug)]
pub struct Exited {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Reads `pipe` to its end on a thread of its own, lossily as text.
fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs the binary with `args` to completion; it must exit within
/// [`RUN_LIMIT`] (else it is killed and the test fails).
#[track_caller]
pub fn run_sluice(args: &[&str]) -> Exited {
    let mut child = Command::new(SLUICE)
        .args(args)
        .env_remove("SLUICE_WORKER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    let mut status = None;
    wait_until(RUN_LIMIT, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("sluice {args:?} still running after {RUN_LIMIT:?}");
    };
    Exited {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// A file in the temporary directory holding `text` (a configuration file
/// for `--config`), removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    pub fn new(text: &str) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "sluice-config-test-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The lines of the access log file at `path` so far.
pub fn access_lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits (bounded, 5 s) for `n` lines in the access log at `path` and
/// returns them; fails unless exactly `n` came.
#[track_caller]
pub fn wait_access_lines(path: &str, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    super::wait_until(std::time::Duration::from_secs(5), || {
        lines = access_lines(path);
        lines.len() >= n
    });
    assert_eq!(lines.len(), n, "{lines:#?}");
    lines
}

/// [`wait_access_lines`] of a JSON access log, each line parsed.
#[track_caller]
pub fn wait_access_json(path: &str, n: usize) -> Vec<serde_json::Value> {
    wait_access_lines(path, n)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `GET path` on `addr` with `Connection: close`: status and body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    http_request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"),
    )
}

/// `POST path` with `body` on `addr`: status and body.
pub fn http_post(addr: SocketAddr, path: &str, body: &str) -> (u16, Vec<u8>) {
    http_request(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: admin\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Sends `request` on a new connection to `addr` and reads the answer
/// until the close: status and body.
pub fn http_request(addr: SocketAddr, request: String) -> (u16, Vec<u8>) {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = std::io::Read::read_to_end(&mut s, &mut all);
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(all.len(), |i| i + 4);
    let status = std::str::from_utf8(all.get(9..12).unwrap_or(b"0"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (status, all.get(split..).unwrap_or(&[]).to_vec())
}

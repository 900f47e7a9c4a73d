//! The command line (lexopt): every flag fills one field of a
//! [`Settings`], which is laid over the config file's.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use super::file::{Addr, Dur, Settings, Workers, parse_addr, parse_duration, parse_workers};

pub const USAGE: &str = "\
usage: sluice --listen ADDR --upstream ADDR [options]
       sluice --config FILE [options]
       sluice --check-config FILE [options]

  --listen ADDR                 address to accept clients on (127.0.0.1:8080)
  --upstream ADDR               upstream peer for every request (127.0.0.1:8000)
  --keepalive-timeout DUR       idle time between requests (60s)
  --request-head-timeout DUR    time for a whole request head (10s)
  --client-body-timeout DUR     longest gap between request body reads (60s)
  --client-send-timeout DUR     longest time the client may accept nothing (60s)
  --upstream-connect-timeout DUR  upstream connect, then 504 (3s)
  --upstream-read-timeout DUR   response head wait / body read gap (60s)
  --upstream-write-timeout DUR  longest time the upstream may accept nothing (60s)
  --pool-idle-timeout DUR       idle pooled upstream connection lifetime (60s)
  --max-head-size BYTES         largest request/response head (65536)
  --max-header-count N          most fields in a head (100)
  --high-watermark BYTES        pending bytes that pause the source (65536)
  --low-watermark BYTES         pending bytes that resume it (16384)
  --pool-max-idle-per-peer N    idle upstream connections per peer (128)
  --pool-max-idle-total N       idle upstream connections in all (4096)
  --max-retries N               resends of a failed request (1)
  --max-connections N           open client connections (10000)
  --drain-timeout DUR           longest graceful drain after SIGTERM (30s)
  --workers N|auto              worker processes; auto = one per CPU (1)
  --no-via                      do not add Via: 1.1 sluice
  --no-x-forwarded-for          do not add X-Forwarded-For
  --no-x-forwarded-proto        do not set X-Forwarded-Proto
  --config FILE                 read settings from a TOML file; flags override it
  --check-config FILE           validate FILE (with the flags), print the
                                effective configuration, exit 0 (2 if invalid)
  -h, --help                    this text
  -V, --version                 the version

DUR is a number with a unit: 500ms, 10s, 2m. Logging: RUST_LOG (default info).
With --workers N > 1 the process supervises N worker processes on the same
port (SO_REUSEPORT) and restarts any that dies. SIGTERM or SIGINT: graceful
drain, then exit 0; a second one: stop at once.
";

/// What the command line asks for.
pub enum Cli {
    /// Run (or, with `check`, only validate and print) with these settings.
    Run(Box<Parsed>),
    /// `--help` or `--version` was answered: exit with this status.
    Exit(ExitCode),
}

/// A parsed command line.
#[derive(Default)]
pub struct Parsed {
    /// The flags' settings; they override the file's.
    pub settings: Settings,
    /// `--config FILE` or `--check-config FILE`.
    pub config_file: Option<PathBuf>,
    /// `--check-config` was given.
    pub check: bool,
}

/// Parses `args` (without the program name). Errors name the flag.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, String> {
    use lexopt::Arg::{Long, Short, Value};
    let mut p = Parsed::default();
    let s = &mut p.settings;
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let flag = match arg {
            Long(name) => format!("--{name}"),
            Short(ch) => format!("-{ch}"),
            Value(v) => return Err(format!("unexpected argument {v:?}")),
        };
        let mut value = || value_of(&mut parser, &flag);
        let f = flag.as_str();
        match f {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(Cli::Exit(ExitCode::SUCCESS));
            }
            "-V" | "--version" => {
                println!("sluice {}", env!("CARGO_PKG_VERSION"));
                return Ok(Cli::Exit(ExitCode::SUCCESS));
            }
            "--listen" => s.listen = Some(addr(f, &value()?)?),
            "--upstream" => s.upstream = Some(addr(f, &value()?)?),
            "--keepalive-timeout" => s.keepalive_timeout = Some(dur(f, &value()?)?),
            "--request-head-timeout" => s.request_head_timeout = Some(dur(f, &value()?)?),
            "--client-body-timeout" => s.client_body_timeout = Some(dur(f, &value()?)?),
            "--client-send-timeout" => s.client_send_timeout = Some(dur(f, &value()?)?),
            "--upstream-connect-timeout" => s.upstream_connect_timeout = Some(dur(f, &value()?)?),
            "--upstream-read-timeout" => s.upstream_read_timeout = Some(dur(f, &value()?)?),
            "--upstream-write-timeout" => s.upstream_write_timeout = Some(dur(f, &value()?)?),
            "--pool-idle-timeout" => s.pool_idle_timeout = Some(dur(f, &value()?)?),
            "--drain-timeout" => s.drain_timeout = Some(dur(f, &value()?)?),
            "--max-head-size" => s.max_head_size = Some(num(f, &value()?)?),
            "--max-header-count" => s.max_header_count = Some(num(f, &value()?)?),
            "--high-watermark" => s.high_watermark = Some(num(f, &value()?)?),
            "--low-watermark" => s.low_watermark = Some(num(f, &value()?)?),
            "--pool-max-idle-per-peer" => s.pool_max_idle_per_peer = Some(num(f, &value()?)?),
            "--pool-max-idle-total" => s.pool_max_idle_total = Some(num(f, &value()?)?),
            "--max-retries" => s.max_retries = Some(num(f, &value()?)?),
            "--max-connections" => s.max_connections = Some(num(f, &value()?)?),
            "--workers" => {
                let v = value()?;
                let n = parse_workers(&v).map_err(|e| format!("{f}: {e}"))?;
                s.workers = Some(Workers(n));
            }
            "--no-via" => s.add_via = Some(false),
            "--no-x-forwarded-for" => s.add_x_forwarded_for = Some(false),
            "--no-x-forwarded-proto" => s.add_x_forwarded_proto = Some(false),
            "--config" | "--check-config" => {
                let path = PathBuf::from(parser.value().map_err(|e| e.to_string())?);
                if p.config_file.as_ref().is_some_and(|old| *old != path) {
                    return Err(format!("{f}: a second config file ({})", path.display()));
                }
                p.config_file = Some(path);
                p.check |= f == "--check-config";
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(Cli::Run(Box::new(p)))
}

fn value_of(parser: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    parser
        .value()
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|_| format!("{flag}: value is not UTF-8"))
}

fn addr(flag: &str, v: &str) -> Result<Addr, String> {
    parse_addr(v).map(Addr).map_err(|e| format!("{flag}: {e}"))
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a whole number"))
}

fn dur(flag: &str, v: &str) -> Result<Dur, String> {
    parse_duration(v)
        .map(Dur)
        .map_err(|e| format!("{flag}: {e}"))
}

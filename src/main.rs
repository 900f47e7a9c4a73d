//! The `sluice` binary: command line → `Config`, logging, and one loop on
//! this thread.
//!
//! Exit status: 0 after a clean stop, 1 if the loop failed to start or
//! failed, 2 for an invalid command line or configuration.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use sluice::{Config, Forward, Server};

const USAGE: &str = "\
usage: sluice --listen ADDR --upstream ADDR [options]

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
  --no-via                      do not add Via: 1.1 sluice
  --no-x-forwarded-for          do not add X-Forwarded-For
  --no-x-forwarded-proto        do not set X-Forwarded-Proto
  -h, --help                    this text
  -V, --version                 the version

DUR is a number with a unit: 500ms, 10s, 2m. Logging: RUST_LOG (default info).
";

enum Cli {
    Run(Config),
    Exit(ExitCode),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    let config = match parse_args() {
        Ok(Cli::Run(c)) => c,
        Ok(Cli::Exit(code)) => return code,
        Err(msg) => {
            eprintln!("sluice: {msg}\n(see sluice --help)");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = config.validate() {
        eprintln!("sluice: {e}");
        return ExitCode::from(2);
    }
    let upstream = config.upstream;
    let server = match Server::bind(config, Forward::new(upstream)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    log::info!("sluice {} → upstream {upstream}", env!("CARGO_PKG_VERSION"));
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: event loop failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn parse_args() -> Result<Cli, String> {
    use lexopt::Arg::{Long, Short, Value};
    let mut c = Config::default();
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let flag = match arg {
            Long(name) => format!("--{name}"),
            Short(ch) => format!("-{ch}"),
            Value(v) => return Err(format!("unexpected argument {v:?}")),
        };
        let mut value = || value_of(&mut parser, &flag);
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(Cli::Exit(ExitCode::SUCCESS));
            }
            "-V" | "--version" => {
                println!("sluice {}", env!("CARGO_PKG_VERSION"));
                return Ok(Cli::Exit(ExitCode::SUCCESS));
            }
            "--listen" => c.listen = addr(&flag, &value()?)?,
            "--upstream" => c.upstream = addr(&flag, &value()?)?,
            "--keepalive-timeout" => c.keepalive_timeout = dur(&flag, &value()?)?,
            "--request-head-timeout" => c.request_head_timeout = dur(&flag, &value()?)?,
            "--client-body-timeout" => c.client_body_timeout = dur(&flag, &value()?)?,
            "--client-send-timeout" => c.client_send_timeout = dur(&flag, &value()?)?,
            "--upstream-connect-timeout" => c.upstream_connect_timeout = dur(&flag, &value()?)?,
            "--upstream-read-timeout" => c.upstream_read_timeout = dur(&flag, &value()?)?,
            "--upstream-write-timeout" => c.upstream_write_timeout = dur(&flag, &value()?)?,
            "--pool-idle-timeout" => c.pool_idle_timeout = dur(&flag, &value()?)?,
            "--max-head-size" => c.max_head_size = num(&flag, &value()?)?,
            "--max-header-count" => c.max_header_count = num(&flag, &value()?)?,
            "--high-watermark" => c.high_watermark = num(&flag, &value()?)?,
            "--low-watermark" => c.low_watermark = num(&flag, &value()?)?,
            "--pool-max-idle-per-peer" => c.pool_max_idle_per_peer = num(&flag, &value()?)?,
            "--pool-max-idle-total" => c.pool_max_idle_total = num(&flag, &value()?)?,
            "--max-retries" => c.max_retries = num(&flag, &value()?)?,
            "--max-connections" => c.max_connections = num(&flag, &value()?)?,
            "--no-via" => c.add_via = false,
            "--no-x-forwarded-for" => c.add_x_forwarded_for = false,
            "--no-x-forwarded-proto" => c.add_x_forwarded_proto = false,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(Cli::Run(c))
}

fn value_of(parser: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    parser
        .value()
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|_| format!("{flag}: value is not UTF-8"))
}

fn addr(flag: &str, v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not an address like 127.0.0.1:8080"))
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a whole number"))
}

/// Parses `500ms`, `10s`, `2m` (a bare number is seconds).
fn dur(flag: &str, v: &str) -> Result<Duration, String> {
    let bad = || format!("{flag}: {v:?} is not a duration like 500ms, 10s or 2m");
    let split = v.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" | "" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        _ => None,
    };
    ms.map(Duration::from_millis).ok_or_else(bad)
}

//! `sluice status`: the admin endpoint's `/status` as a table for a
//! terminal (issue 27 item 3), and `--drain`, `--maintenance`, `--ready
//! GROUP ADDR` through `POST /servers/GROUP/ADDR/state` (item 5).
//!
//! The admin address comes from `--admin ADDR`, else `SLUICE_ADMIN`, else
//! the `admin` of `--config FILE`. A write sends the token of
//! `--token-file FILE` (or the file's `admin_token_file`) when given.
//!
//! What it must not know: the loop; it is an HTTP client of the admin
//! endpoint, std only (one request, `Connection: close`, 5 s bound).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Arg, ArgAction, Command};
use serde_json::Value;

/// Longest wait for the admin endpoint's answer.
const TIMEOUT: Duration = Duration::from_secs(5);

fn command() -> Command {
    let pair = |name: &'static str, help: &'static str| {
        Arg::new(name)
            .long(name)
            .num_args(2)
            .value_names(["GROUP", "ADDR"])
            .help(help)
    };
    Command::new("sluice status")
        .about("Show the upstream groups' servers, or set a server's state")
        .arg(
            Arg::new("admin")
                .long("admin")
                .value_name("ADDR")
                .help("Admin address (else SLUICE_ADMIN, else --config's admin)"),
        )
        .arg(
            Arg::new("config")
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Read admin and admin_token_file from this config file"),
        )
        .arg(
            Arg::new("token-file")
                .long("token-file")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Bearer token for a write from a non-loopback address"),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("Print /status as it came"),
        )
        .arg(
            pair(
                "drain",
                "No new requests to the server; in-flight ones finish",
            )
            .conflicts_with_all(["maintenance", "ready", "json"]),
        )
        .arg(
            pair("maintenance", "Take the server out until --ready")
                .conflicts_with_all(["ready", "json"]),
        )
        .arg(pair("ready", "Let the server take requests again").conflicts_with("json"))
}

/// Runs `sluice status ARGS…`: exit 0 on success, 1 if the endpoint
/// refused or could not be reached, 2 for a bad command line.
pub fn run(args: Vec<std::ffi::OsString>) -> ExitCode {
    let m = match command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let file = m
        .get_one::<PathBuf>("config")
        .map(|p| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display())))
        .transpose()
        .and_then(|t| t.map(|t| super::file::parse(&t)).transpose());
    let file = match file {
        Ok(f) => f,
        Err(e) => return fail(2, &e),
    };
    let admin = m
        .get_one::<String>("admin")
        .cloned()
        .or_else(|| std::env::var("SLUICE_ADMIN").ok())
        .or_else(|| file.as_ref().and_then(|c| c.admin).map(|a| a.to_string()));
    let Some(admin) = admin else {
        return fail(2, "no admin address: give --admin ADDR (or --config FILE)");
    };
    let Ok(admin) = admin.parse::<SocketAddr>() else {
        return fail(
            2,
            &format!("{admin:?} is not an address like 127.0.0.1:9000"),
        );
    };
    for mode in ["drain", "maintenance", "ready"] {
        let Some(mut v) = m.get_many::<String>(mode) else {
            continue;
        };
        let (Some(group), Some(addr)) = (v.next(), v.next()) else {
            return fail(2, "give GROUP ADDR");
        };
        let token_file = m
            .get_one::<PathBuf>("token-file")
            .cloned()
            .or_else(|| file.as_ref().and_then(|c| c.admin_token_file.clone()));
        let token = match token_file.map(std::fs::read_to_string).transpose() {
            Ok(t) => t.and_then(|t| t.lines().next().map(|l| l.trim().to_string())),
            Err(e) => return fail(1, &format!("token file: {e}")),
        };
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let req = format!(
            "POST /servers/{group}/{addr}/state HTTP/1.1\r\nHost: sluice\r\n{auth}\
             Content-Length: {}\r\nConnection: close\r\n\r\n{mode}",
            mode.len()
        );
        return match ask(admin, &req) {
            Ok((200, body)) => {
                print!("{body}");
                ExitCode::SUCCESS
            }
            Ok((code, body)) => fail(1, &format!("{code}: {}", body.trim_end())),
            Err(e) => fail(1, &format!("{admin}: {}", said(&e))),
        };
    }
    let req = "GET /status HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n";
    match ask(admin, req) {
        Ok((200, body)) if m.get_flag("json") => {
            print!("{body}");
            ExitCode::SUCCESS
        }
        Ok((200, body)) => match serde_json::from_str::<Value>(&body) {
            // A sluice /status names its version and its workers; any other
            // JSON is another server's (an address mistyped).
            Ok(v) if v["version"].is_string() && v["groups"].is_array() => {
                print!("{}", table(&v));
                ExitCode::SUCCESS
            }
            Ok(_) => fail(
                1,
                &format!(
                    "{admin} answered JSON that is not a sluice /status (is it the admin address?)"
                ),
            ),
            Err(e) => fail(
                1,
                &format!("{admin} answered /status with no JSON ({e}): is it the admin address?"),
            ),
        },
        Ok((code, body)) => fail(1, &not_status(admin, code, &body)),
        Err(e) => fail(1, &format!("{admin}: {}", said(&e))),
    }
}

/// A `GET /status` answered `code` (not 200) with `body`: the code and the
/// body's first line; sluice's admin listener answers /status with 200
/// unless its token is wanted (401, 403), so any other code is another
/// listener (a proxy port's redirect or 404: an address mistyped).
fn not_status(admin: SocketAddr, code: u16, body: &str) -> String {
    let first = body.lines().next().unwrap_or("").trim();
    if code == 401 || code == 403 {
        format!("{code}: {first}")
    } else {
        format!(
            "{admin} answered GET /status with {code} ({first}), where sluice's admin listener answers 200: is it the `admin` address of the configuration?"
        )
    }
}

/// An I/O error of [`ask`] in words: a read or write past [`TIMEOUT`]
/// says so (the OS calls it `EAGAIN`).
fn said(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no whole answer within {} s", TIMEOUT.as_secs())
        }
        _ => e.to_string(),
    }
}

fn fail(code: u8, msg: &str) -> ExitCode {
    eprintln!("sluice status: {msg}");
    ExitCode::from(code)
}

/// Sends `req` to `admin` and reads the answer to its close: status and
/// body.
fn ask(admin: SocketAddr, req: &str) -> std::io::Result<(u16, String)> {
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut s = TcpStream::connect_timeout(&admin, TIMEOUT)?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.write_all(req.as_bytes())?;
    // To the close, or to the end of a Content-Length body (a server that
    // keeps the connection despite `Connection: close`); all of it within
    // TIMEOUT, however slowly the bytes come.
    let mut all = Vec::new();
    let mut buf = [0_u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut buf)?;
        all.extend_from_slice(buf.get(..n).unwrap_or_default());
        if n == 0 || complete(&all) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&all);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// Whether `all` holds a whole answer with a `Content-Length` body.
fn complete(all: &[u8]) -> bool {
    let Some(end) = all.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(all.get(..end).unwrap_or_default());
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())
            .flatten()
    });
    length.is_some_and(|n| all.len().saturating_sub(end + 4) >= n)
}

/// The `/status` JSON `v` as a table: one line per server, the groups in
/// order (the group-wide view: a state the workers do not all give the
/// server is marked `*`), then the workers that disagree, one line per
/// worker and server, then a line on who answered.
pub fn table(v: &Value) -> String {
    const HEAD: [&str; 6] = ["STATE", "INFLIGHT", "IDLE", "REQ/1m", "ERR/1m", "WHY"];
    let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let mut rows: Vec<Vec<String>> = vec![
        ["GROUP", "SERVER"]
            .iter()
            .chain(HEAD.iter())
            .map(|s| s.to_string())
            .collect(),
    ];
    let mut split = false;
    for g in v["groups"].as_array().into_iter().flatten() {
        for s in g["servers"].as_array().into_iter().flatten() {
            let mut row = vec![text(&g["name"])];
            row.extend(server_cells(s));
            if s["agreed"] == false {
                split = true;
                if let Some(state) = row.get_mut(2) {
                    state.push('*');
                }
            }
            rows.push(row);
        }
    }
    let mut out = render(&rows);
    let per = v["per_worker"].as_array().map_or(&[][..], Vec::as_slice);
    if split && !per.is_empty() {
        out.push_str("\n* the workers disagree:\n");
        let mut rows: Vec<Vec<String>> = vec![
            ["WORKER", "PID", "GROUP", "SERVER"]
                .iter()
                .chain(HEAD.iter())
                .map(|s| s.to_string())
                .collect(),
        ];
        for w in per {
            for s in w["servers"].as_array().into_iter().flatten() {
                let mut row = vec![num(&w["worker"]), num(&w["pid"]), text(&s["group"])];
                row.extend(server_cells(s));
                rows.push(row);
            }
        }
        out.push_str(&render(&rows));
    }
    let workers = v["workers"]
        .as_array()
        .map_or(0, |w| w.iter().filter(|w| w["draining"] != true).count());
    out.push_str(&format!(
        "({workers} worker(s) serving; answered by worker {}, version {})\n",
        num(&v["answered_by_worker"]),
        text(&v["version"])
    ));
    out
}

/// A JSON number as text (`-` if it is none).
fn num(v: &Value) -> String {
    v.as_u64().map_or("-".into(), |n| n.to_string())
}

/// One server's cells: address, state, in flight, idle, requests and
/// errors of the last minute, and why (the ejection's time left and
/// cause, the last check, or the last error).
fn server_cells(s: &Value) -> Vec<String> {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let state = text(&s["state"]);
    let why = match state.as_str() {
        "ejected" => format!(
            "for {:.1}s: {}",
            s["ejected_for_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            text(&s["ejected_because"])
        ),
        "checked_down" => format!("last check: {}", text(&s["last_check"])),
        _ => match s["last_error"].as_object() {
            Some(e) => format!(
                "last error {}: {}",
                e.get("at").map_or("-".into(), text),
                e.get("reason").map_or("-".into(), text)
            ),
            None => String::new(),
        },
    };
    let backup = if s["backup"] == true && state != "backup" {
        " (backup)"
    } else {
        ""
    };
    vec![
        text(&s["addr"]),
        format!("{state}{backup}"),
        num(&s["in_flight"]),
        num(&s["idle"]),
        num(&s["requests_last_minute"]),
        num(&s["errors_last_minute"]),
        why,
    ]
}

/// `rows` as aligned columns, two spaces apart, the last one unpadded.
fn render(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

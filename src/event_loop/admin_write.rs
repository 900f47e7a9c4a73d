//! The admin side's view of the upstream tier and its one write (issue 27
//! items 3 and 5): [`Tier`] gives `/status` and `/metrics` every server's
//! state, and `POST /servers/GROUP/ADDR/state` sets a server's mode —
//! `drain` (no new requests, in-flight ones finish, idle pooled
//! connections close), `maintenance` (the same, shown apart), `ready`.
//!
//! The write is off unless `admin_write = true`, and then allowed only to
//! a peer on loopback or one that sends `Authorization: Bearer TOKEN` with
//! the first line of `admin_token_file` (compared in constant time). Each
//! change is logged with the peer that asked. The body is the state's
//! word (`drain`, optionally `state=drain`), at most [`MAX_BODY`] bytes.
//!
//! What it must not know: how requests pick servers, the admin's sockets.

use std::net::{IpAddr, SocketAddr};

use log::{info, warn};

use std::time::Duration;

use crate::conn::Shared;
use crate::metrics::tier::WorkerStates;
use crate::upstreams::ServerState;
use crate::upstreams::health::Mode;

/// Longest body of a write request (bytes).
pub(super) const MAX_BODY: usize = 64;

/// What the admin side may ask of the loop's upstream tier.
pub(crate) trait Tier {
    /// Every server's state at the loop's time, idle pooled connections
    /// counted.
    fn states(&self) -> Vec<ServerState>;
    /// Every running worker's view of the tier, this loop's first unless
    /// it drains while another serves its index (`--workers N`: the
    /// others' from the tier board, aged to the loop's time); this
    /// loop's alone in a single process. `index`: this loop's worker
    /// index.
    fn workers(&self, index: usize) -> Vec<WorkerStates> {
        vec![WorkerStates {
            index,
            pid: std::process::id(),
            states: self.states(),
        }]
    }
    /// Posts this loop's view on the tier board now (nothing without a
    /// board), before a scrape that shows every worker's counters is
    /// answered: this loop's own then match what the others read.
    fn post_view(&mut self, _draining: bool) {}
    /// Sets server `addr` of group `group` to `mode`: its old mode, or
    /// `None` if there is no such server.
    fn set_mode(&mut self, group: &str, addr: SocketAddr, mode: Mode) -> Option<Mode>;
    /// The TLS listeners' certificates (none without TLS).
    fn certificates(&self) -> Vec<crate::metrics::certs::CertView> {
        Vec::new()
    }
}

impl Tier for Shared {
    fn certificates(&self) -> Vec<crate::metrics::certs::CertView> {
        let now = crate::tls::now_unix();
        let certs = self.cert_store.as_ref().map_or(&[][..], |s| s.certs());
        certs
            .iter()
            .map(|c| crate::metrics::certs::CertView {
                file: c.cert_file.display().to_string(),
                names: c.names.clone(),
                not_after: c.not_after_text.clone(),
                seconds_left: c.seconds_left(now),
                warning: c.expiry_warning(now),
            })
            .collect()
    }

    fn states(&self) -> Vec<ServerState> {
        let now = self.now;
        self.groups
            .snapshot(now, |a| self.idle_at(a))
            .iter()
            .map(|c| ServerState::of(c, Duration::ZERO, now))
            .collect()
    }

    fn workers(&self, index: usize) -> Vec<WorkerStates> {
        let own = || WorkerStates {
            index,
            pid: std::process::id(),
            states: self.states(),
        };
        let Some(board) = self.board.as_ref() else {
            return vec![own()];
        };
        let (others, mine) = board.workers();
        let mut all: Vec<WorkerStates> = others
            .into_iter()
            .map(|v| WorkerStates {
                index: v.index,
                pid: v.pid,
                states: v
                    .snapshot
                    .servers
                    .iter()
                    .map(|c| ServerState::of(c, v.age, self.now))
                    .collect(),
            })
            .collect();
        if mine || all.is_empty() {
            all.insert(0, own());
        }
        all
    }

    fn post_view(&mut self, draining: bool) {
        super::board::post_when(self, draining, true);
    }

    fn set_mode(&mut self, group: &str, addr: SocketAddr, mode: Mode) -> Option<Mode> {
        let old = self.groups.set_mode(group, addr, mode)?;
        if mode != Mode::Ready {
            // Drain: idle pooled connections close; in-flight ones finish.
            self.server_out(addr);
        }
        // Every worker takes the mode from the board's table (and a
        // reload's new generation with it).
        if let Some(board) = self.board.as_ref()
            && let Err(e) = board.write_mode(group, addr, mode)
        {
            warn!("admin: {group} {addr}: {e}: the other workers keep their mode");
        }
        Some(old)
    }
}

/// Who may write, from the configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteAccess {
    /// `admin_write = true`.
    pub on: bool,
    /// The token of `admin_token_file`, if one is set.
    pub token: Option<String>,
}

/// Whether `admin_token_file` can be used as the start will use it (read,
/// first line not empty), for `--check-config`.
///
/// Errors: as the start would give them, naming the file: the file cannot
/// be read (its I/O error), or its first line is empty (`InvalidInput`,
/// an invalid configuration: the start exits 2 for it, 1 for the other).
pub fn check_token_file(cfg: &crate::config::Config) -> std::io::Result<()> {
    WriteAccess::from_config(cfg).map(|_| ())
}

impl WriteAccess {
    /// From `admin_write` and `admin_token_file` (its first line, trimmed).
    ///
    /// Errors: the token file cannot be read or its first line is empty.
    pub(crate) fn from_config(cfg: &crate::config::Config) -> std::io::Result<WriteAccess> {
        let token = match &cfg.admin_token_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("admin_token_file {}: {e}", path.display()),
                    )
                })?;
                let line = text.lines().next().unwrap_or("").trim().to_string();
                if line.is_empty() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("admin_token_file {}: empty", path.display()),
                    ));
                }
                Some(line)
            }
        };
        Ok(WriteAccess {
            on: cfg.admin_write,
            token,
        })
    }
}

/// The answer to `POST target` with `body` from `peer`, whose
/// `Authorization` field is `auth`: status and body text.
pub(super) fn post(
    target: &str,
    body: &[u8],
    peer: Option<SocketAddr>,
    auth: Option<&[u8]>,
    access: &WriteAccess,
    tier: &mut dyn Tier,
) -> (u16, String) {
    let Some((group, addr)) = parse_target(target) else {
        return (404, not_a_server(target));
    };
    if !access.on {
        return (403, "admin writes are off (admin_write = false)\n".into());
    }
    let loopback = peer.is_some_and(|p| is_loopback(p.ip()));
    let bearer = auth.and_then(|a| a.strip_prefix(b"Bearer ".as_slice()));
    let token_ok = match (&access.token, bearer) {
        (Some(t), Some(b)) => same(t.as_bytes(), trim(b)),
        _ => false,
    };
    if !loopback && !token_ok {
        let who = peer.map_or("-".to_string(), |p| p.to_string());
        warn!("admin: write refused to {who}: not loopback and no valid bearer token");
        return (
            401,
            "a bearer token (admin_token_file) is needed from this peer\n".into(),
        );
    }
    let word = std::str::from_utf8(trim(body)).unwrap_or("");
    let word = word.strip_prefix("state=").unwrap_or(word);
    let Some(mode) = Mode::parse(word) else {
        return (400, "body: drain, maintenance or ready\n".into());
    };
    match tier.set_mode(group, addr, mode) {
        None => (404, format!("no server {addr} in group {group:?}\n")),
        Some(old) => {
            let who = peer.map_or("-".to_string(), |p| p.to_string());
            info!(
                "admin: {group} {addr}: {} -> {} (asked by {who})",
                old.name(),
                mode.name()
            );
            (200, format!("{group} {addr}: {}\n", mode.name()))
        }
    }
}

/// `/servers/GROUP/ADDR/state` → group and address.
/// The 404 text for a POST `target` that names no server: a server is
/// named by its address as `/status` shows it (a server declared by host
/// name too: `localhost:8000` is `127.0.0.1:8000`).
fn not_a_server(target: &str) -> String {
    let path = target.split('?').next().unwrap_or(target);
    match path
        .strip_prefix("/servers/")
        .and_then(|r| r.strip_suffix("/state"))
        .and_then(|r| r.split_once('/'))
    {
        Some((group, addr)) => format!(
            "no server {addr:?} in group {group:?}: name a server by its address, IP:port, as /status shows it\n"
        ),
        None => "not found: POST /servers/GROUP/ADDR/state\n".into(),
    }
}

fn parse_target(target: &str) -> Option<(&str, SocketAddr)> {
    let path = target.split('?').next()?;
    let rest = path.strip_prefix("/servers/")?.strip_suffix("/state")?;
    let (group, addr) = rest.split_once('/')?;
    let addr = addr
        .replace("%5B", "[")
        .replace("%5D", "]")
        .replace("%3A", ":");
    Some((group, addr.parse().ok()?))
}

/// A loopback address, IPv4-mapped ones included.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// `a == b` in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `b` without leading and trailing ASCII whitespace.
fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why, peer, `Authorization`, access, status wanted.
    type Row<'a> = (
        &'a str,
        Option<SocketAddr>,
        Option<&'a [u8]>,
        &'a WriteAccess,
        u16,
    );

    /// A tier of one server `app 10.0.0.1:80`.
    struct One(Mode);

    impl Tier for One {
        fn states(&self) -> Vec<ServerState> {
            Vec::new()
        }
        fn set_mode(&mut self, group: &str, addr: SocketAddr, mode: Mode) -> Option<Mode> {
            let known = group == "app" && addr == SocketAddr::from(([10, 0, 0, 1], 80));
            known.then(|| std::mem::replace(&mut self.0, mode))
        }
    }

    #[test]
    fn writes_need_admin_write_and_loopback_or_the_token() {
        let on = WriteAccess {
            on: true,
            token: Some("s3cret".into()),
        };
        let off = WriteAccess::default();
        let (local, remote) = (
            Some(SocketAddr::from(([127, 0, 0, 1], 5000))),
            Some(SocketAddr::from(([192, 0, 2, 7], 5000))),
        );
        let target = "/servers/app/10.0.0.1:80/state";
        let mut t = One(Mode::Ready);
        let rows: [Row<'_>; 7] = [
            ("admin_write off", local, None, &off, 403),
            ("remote without a token", remote, None, &on, 401),
            (
                "remote with a wrong token",
                remote,
                Some(b"Bearer nope"),
                &on,
                401,
            ),
            (
                "remote with the token",
                remote,
                Some(b"Bearer s3cret"),
                &on,
                200,
            ),
            ("loopback", local, None, &on, 200),
            (
                "IPv4-mapped loopback",
                Some("[::ffff:127.0.0.1]:1".parse().unwrap()),
                None,
                &on,
                200,
            ),
            (
                "remote, no token file",
                remote,
                Some(b"Bearer s3cret"),
                &WriteAccess {
                    on: true,
                    token: None,
                },
                401,
            ),
        ];
        for (why, peer, auth, access, want) in rows {
            let (got, _) = post(target, b"drain", peer, auth, access, &mut t);
            assert_eq!(got, want, "{why}");
        }
        assert_eq!(t.0, Mode::Drain);
        let unknown = post(
            "/servers/app/10.0.0.2:80/state",
            b"ready",
            local,
            None,
            &on,
            &mut t,
        );
        assert_eq!(unknown.0, 404);
        assert_eq!(post(target, b"sleep", local, None, &on, &mut t).0, 400);
        assert_eq!(
            post("/servers/app/state", b"ready", local, None, &on, &mut t).0,
            404
        );
        // A host name: the answer says how servers are named.
        let (code, text) = post(
            "/servers/app/localhost:8000/state",
            b"ready",
            local,
            None,
            &on,
            &mut t,
        );
        assert_eq!(code, 404);
        assert!(text.contains("by its address, IP:port"), "{text}");
    }
}

//! The upstream tier in `/status` (issue 27 item 3): one entry per group,
//! each server with its state and the facts behind it, as the answering
//! worker sees it (every worker checks on its own, ARCHITECTURE.md §13).
//!
//! Shape: `groups: [{ name, servers_up, servers, servers: [{ addr, state,
//! backup, mode, in_flight, idle, ejected_for_ms, ejected_because,
//! last_check, last_error: { reason, at }, requests_last_minute,
//! errors_last_minute }] }]`. `state` is one of `up`, `ejected`,
//! `checked_down`, `draining`, `maintenance`, `backup`.
//!
//! What it must not know: how the states are worked out.

use serde::Serialize;

use crate::conn::access::rfc3339_ms;
use crate::upstreams::ServerState;

/// One group.
#[derive(Serialize)]
pub(crate) struct GroupView {
    name: String,
    /// Servers that may take a request now.
    servers_up: usize,
    servers: Vec<ServerView>,
}

/// One server.
#[derive(Serialize)]
struct ServerView {
    addr: String,
    state: &'static str,
    backup: bool,
    mode: &'static str,
    in_flight: u32,
    idle: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejected_for_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejected_because: Option<String>,
    last_check: Option<String>,
    last_error: Option<ErrorView>,
    requests_last_minute: u64,
    errors_last_minute: u64,
}

/// A failure and when (RFC 3339, UTC).
#[derive(Serialize)]
struct ErrorView {
    reason: String,
    at: String,
}

/// `states` (group by group, as `Groups::server_states` lists them) as
/// one entry per group.
pub(crate) fn groups(states: &[ServerState]) -> Vec<GroupView> {
    let mut out: Vec<GroupView> = Vec::new();
    for s in states {
        let view = ServerView {
            addr: s.server.to_string(),
            state: s.state,
            backup: s.backup,
            mode: s.mode,
            in_flight: s.in_flight,
            idle: s.idle,
            ejected_for_ms: s.ejected_ms,
            ejected_because: s.eject_cause.clone(),
            last_check: s.last_check.clone(),
            last_error: s.last_error.as_ref().map(|f| ErrorView {
                reason: f.reason.clone(),
                at: rfc3339_ms(Some(f.at)),
            }),
            requests_last_minute: s.minute.0,
            errors_last_minute: s.minute.1,
        };
        match out.last_mut().filter(|g| g.name == s.group) {
            Some(g) => {
                g.servers_up += usize::from(s.available);
                g.servers.push(view);
            }
            None => out.push(GroupView {
                name: s.group.clone(),
                servers_up: usize::from(s.available),
                servers: vec![view],
            }),
        }
    }
    out
}

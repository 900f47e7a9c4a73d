//! The upstream tier in `/status` (issue 27 item 3): the group-wide view
//! first — one entry per group, each server with its state and the facts
//! behind it, over every running worker — then, per worker, the servers
//! the workers disagree on (every worker checks and counts on its own,
//! ARCHITECTURE.md §13; the others' views come from the tier board).
//!
//! Shape: `groups: [{ name, servers_up, servers: [{ addr, state,
//! agreed, backup, mode, in_flight, idle, ejected_for_ms,
//! ejected_because, last_check, last_error: { reason, at },
//! requests_last_minute, errors_last_minute }] }]`, then `per_worker:
//! [{ worker, pid, servers: [{ group, addr, state, … }] }]` with only the
//! servers whose state is not the same in every worker (empty when they
//! all agree, and always with one worker).
//!
//! Group-wide, per server: `state` is the state most workers give it (a
//! tie goes to the less available state, in [`STATES`] order), `agreed`
//! says whether every worker gives it that state; `in_flight`, `idle`
//! and the last minute's counts are summed over the workers;
//! `ejected_for_ms` is the longest time left of its ejections (until
//! every worker may send to it again), with that ejection's cause;
//! `last_error` is the latest of the workers'; `last_check` is the
//! answering worker's (else the first that has one).
//!
//! What it must not know: how the states are worked out.

use serde::Serialize;

use crate::conn::access::rfc3339_ms;
use crate::upstreams::{STATES, ServerState};

/// One worker's view of every server.
#[derive(Debug, Clone)]
pub(crate) struct WorkerStates {
    /// Its worker index.
    pub index: usize,
    /// Its process.
    pub pid: u32,
    /// Its servers, group by group.
    pub states: Vec<ServerState>,
}

/// The tier as `/status` shows it.
#[derive(Serialize)]
pub(crate) struct TierView {
    /// The group-wide view.
    pub groups: Vec<GroupView>,
    /// Per worker, the servers the workers disagree on.
    pub per_worker: Vec<WorkerView>,
}

/// One group.
#[derive(Serialize)]
pub(crate) struct GroupView {
    name: String,
    /// Servers that may take a request now (group-wide state `up` or
    /// `backup`).
    servers_up: usize,
    servers: Vec<ServerView>,
}

/// One server.
#[derive(Serialize, Clone)]
struct ServerView {
    addr: String,
    state: &'static str,
    /// Every worker gives it this state.
    agreed: bool,
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

/// One worker's servers that the workers disagree on.
#[derive(Serialize)]
pub(crate) struct WorkerView {
    worker: usize,
    pid: u32,
    servers: Vec<WorkerServer>,
}

/// A server as one worker sees it.
#[derive(Serialize)]
struct WorkerServer {
    group: String,
    #[serde(flatten)]
    server: ServerView,
}

/// A failure and when (RFC 3339, UTC).
#[derive(Serialize, Clone)]
struct ErrorView {
    reason: String,
    at: String,
}

/// One worker's view of one server.
fn one(s: &ServerState) -> ServerView {
    ServerView {
        addr: s.name.clone(),
        state: s.state,
        agreed: true,
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
    }
}

/// The rank of a state in [`STATES`] (an unknown one last).
fn rank(state: &str) -> usize {
    STATES
        .iter()
        .position(|&s| s == state)
        .unwrap_or(STATES.len())
}

/// The group-wide view of one server from each worker's (`views`, the
/// answering worker's first), out of `workers` running.
fn combine(views: &[&ServerState], workers: usize) -> ServerView {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for v in views {
        match counts.iter_mut().find(|(s, _)| *s == v.state) {
            Some((_, n)) => *n += 1,
            None => counts.push((v.state, 1)),
        }
    }
    let state = counts
        .iter()
        .max_by_key(|(s, n)| (*n, rank(s)))
        .map_or("up", |(s, _)| *s);
    let longest = views
        .iter()
        .filter(|v| v.ejected_ms.is_some())
        .max_by_key(|v| v.ejected_ms);
    let latest = views
        .iter()
        .filter_map(|v| v.last_error.as_ref())
        .max_by_key(|f| f.at);
    let first = views.first().map(|v| one(v));
    ServerView {
        addr: first.as_ref().map_or_else(String::new, |f| f.addr.clone()),
        state,
        agreed: counts.len() == 1 && views.len() == workers,
        backup: views.iter().any(|v| v.backup),
        mode: first.as_ref().map_or("ready", |f| f.mode),
        in_flight: views.iter().map(|v| v.in_flight).sum(),
        idle: views.iter().map(|v| v.idle).sum(),
        ejected_for_ms: longest.and_then(|v| v.ejected_ms),
        ejected_because: longest.and_then(|v| v.eject_cause.clone()),
        last_check: views.iter().find_map(|v| v.last_check.clone()),
        last_error: latest.map(|f| ErrorView {
            reason: f.reason.clone(),
            at: rfc3339_ms(Some(f.at)),
        }),
        requests_last_minute: views.iter().map(|v| v.minute.0).sum(),
        errors_last_minute: views.iter().map(|v| v.minute.1).sum(),
    }
}

/// The tier over `workers` (the answering worker's view first).
pub(crate) fn view(workers: &[WorkerStates]) -> TierView {
    // Every server once, in the answering worker's order, then any only
    // others have (their names resolved to other addresses).
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for w in workers {
        for s in &w.states {
            let k = (s.group.as_str(), s.name.as_str());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut groups: Vec<GroupView> = Vec::new();
    let mut per_worker: Vec<WorkerView> = Vec::new();
    for (group, name) in keys {
        let views: Vec<(&WorkerStates, &ServerState)> = workers
            .iter()
            .filter_map(|w| {
                let s = w
                    .states
                    .iter()
                    .find(|s| s.group == group && s.name == name)?;
                Some((w, s))
            })
            .collect();
        let states: Vec<&ServerState> = views.iter().map(|(_, s)| *s).collect();
        let server = combine(&states, workers.len());
        if !server.agreed {
            for (w, s) in &views {
                let entry = WorkerServer {
                    group: group.to_string(),
                    server: one(s),
                };
                match per_worker
                    .iter_mut()
                    .find(|v| v.worker == w.index && v.pid == w.pid)
                {
                    Some(v) => v.servers.push(entry),
                    None => per_worker.push(WorkerView {
                        worker: w.index,
                        pid: w.pid,
                        servers: vec![entry],
                    }),
                }
            }
        }
        let up = usize::from(matches!(server.state, "up" | "backup"));
        match groups.iter_mut().find(|g| g.name == group) {
            Some(g) => {
                g.servers_up += up;
                g.servers.push(server);
            }
            None => groups.push(GroupView {
                name: group.to_string(),
                servers_up: up,
                servers: vec![server],
            }),
        }
    }
    per_worker.sort_by_key(|v| v.worker);
    TierView { groups, per_worker }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstreams::health::{Failure, Traffic};

    fn state(name: &str, state: &'static str, ejected_ms: Option<u64>) -> ServerState {
        ServerState {
            group: "app".into(),
            addr: name.parse().ok(),
            name: name.into(),
            available: state == "up",
            ejected: state == "ejected",
            down: state == "checked_down",
            state,
            backup: false,
            mode: "ready",
            in_flight: 1,
            idle: 2,
            ejected_ms,
            eject_cause: ejected_ms.map(|ms| format!("cause {ms}")),
            last_check: None,
            last_error: ejected_ms.map(|ms| Failure {
                reason: format!("at {ms}"),
                at: std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            }),
            minute: (3, 1),
            traffic: Traffic::default(),
        }
    }

    #[test]
    fn workers_that_agree_give_one_view_and_those_that_do_not_are_listed() {
        let (a, b) = ("127.0.0.1:1", "127.0.0.1:2");
        let workers = [
            WorkerStates {
                index: 0,
                pid: 10,
                states: vec![state(a, "up", None), state(b, "ejected", Some(500))],
            },
            WorkerStates {
                index: 1,
                pid: 11,
                states: vec![state(a, "up", None), state(b, "up", None)],
            },
            WorkerStates {
                index: 2,
                pid: 12,
                states: vec![state(a, "up", None), state(b, "ejected", Some(900))],
            },
        ];
        let v = view(&workers);
        let j = serde_json::to_value(&v).unwrap();
        let servers = &j["groups"][0]["servers"];
        assert_eq!(servers[0]["state"], "up");
        assert_eq!(servers[0]["agreed"], true);
        assert_eq!(servers[0]["in_flight"], 3);
        assert_eq!(servers[0]["idle"], 6);
        assert_eq!(servers[0]["requests_last_minute"], 9);
        // Two of three eject b: ejected, the longest time left, its cause.
        assert_eq!(servers[1]["state"], "ejected");
        assert_eq!(servers[1]["agreed"], false);
        assert_eq!(servers[1]["ejected_for_ms"], 900);
        assert_eq!(servers[1]["ejected_because"], "cause 900");
        assert_eq!(servers[1]["last_error"]["reason"], "at 900");
        assert_eq!(j["groups"][0]["servers_up"], 1);
        // Per worker: only b, in every worker.
        let per = j["per_worker"].as_array().unwrap();
        assert_eq!(per.len(), 3);
        assert_eq!(per[1]["worker"], 1);
        assert_eq!(per[1]["servers"][0]["addr"], b);
        assert_eq!(per[1]["servers"][0]["group"], "app");
        assert_eq!(per[1]["servers"][0]["state"], "up");
        assert_eq!(per[1]["servers"].as_array().unwrap().len(), 1);
        // A tie goes to the less available state.
        let tie = view(&workers[..2]);
        let j = serde_json::to_value(&tie).unwrap();
        assert_eq!(j["groups"][0]["servers"][1]["state"], "ejected");
        // One worker: it always agrees with itself.
        let alone = serde_json::to_value(view(&workers[..1])).unwrap();
        assert_eq!(alone["per_worker"].as_array().unwrap().len(), 0);
        assert_eq!(alone["groups"][0]["servers"][1]["agreed"], true);
    }
}

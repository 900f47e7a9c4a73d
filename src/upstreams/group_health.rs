//! What happens to the groups' servers, counted into their health
//! (ARCHITECTURE.md §13): a request's end (no longer in flight, its
//! verdict and status counted, an ejection logged), a failure's reason,
//! an active check's result (rise/fall, logged), and the operator's modes
//! (`drain`, `maintenance`: of one server, or the workers' whole table).
//! Each change moves the counts the loop posts a new snapshot by
//! (`Groups::changes`). The rules themselves are `health.rs`'s, for one
//! server.
//!
//! What it must not know: sockets, the checks' connections, the pool, the
//! loop.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use super::Groups;
use super::health::{Change, Mode, Verdict};

impl Groups {
    /// Server `addr` of group `g` failed for `reason` (`traffic: connect
    /// refused`): kept as its last failure, shown in `/status` and in the
    /// ejection line.
    pub(crate) fn note_failure(&mut self, g: usize, addr: SocketAddr, reason: String) {
        self.changes += 1;
        if let Some(group) = self.groups.get_mut(g)
            && let Some(i) = group.index(addr)
            && let Some(h) = group.health.get_mut(i)
        {
            h.note_failure(reason, SystemTime::now());
        }
    }

    /// A request to `addr` of group `g` ended with `verdict`: no longer in
    /// flight, its health counted. `Some(Change::Out)`: it was ejected.
    /// `status` is the upstream's (0: none came), `first_byte` the time
    /// to its first byte.
    pub(crate) fn release(
        &mut self,
        g: usize,
        addr: SocketAddr,
        verdict: Verdict,
        (status, first_byte): (u16, Option<Duration>),
        now: Instant,
    ) -> Option<Change> {
        self.changes += 1;
        let group = self.groups.get_mut(g)?;
        let i = group.index(addr)?;
        if let Some(s) = group.slots.get_mut(i) {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        let (max_fails, timeout) = (group.spec.max_fails, group.spec.fail_timeout);
        let old = group.state_of(i, now);
        let h = group.health.get_mut(i)?;
        let error = matches!(verdict, Verdict::Failure | Verdict::Flawed);
        h.minute.count(now, error || status >= 500);
        if verdict != Verdict::Neutral || status != 0 {
            h.traffic.count(status, first_byte);
        }
        let change = h.passive(verdict, max_fails, timeout, now);
        if change.is_some() {
            let left = h
                .ejected_until
                .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
            let cause = h.eject_cause.clone().unwrap_or_default();
            log::warn!(
                "{}: {old} -> ejected for {}s: {cause}",
                group.who(addr),
                left.as_secs_f64().ceil() as u64
            );
        }
        if change.is_some() {
            self.states += 1;
        }
        change
    }

    /// Whether `status` from a server of group `g` counts as a failure.
    pub(crate) fn fails_on(&self, g: usize, status: u16) -> bool {
        self.groups
            .get(g)
            .is_some_and(|gr| gr.spec.fail_on_status.contains(&status))
    }

    /// The active check of `addr` in group `g` passed (`ok`) or not;
    /// `result` says what it saw (`status 200`, `timeout after 500ms`).
    pub(crate) fn check_result(
        &mut self,
        g: usize,
        addr: SocketAddr,
        ok: bool,
        result: &str,
        now: Instant,
    ) -> Option<Change> {
        self.changed_state();
        let group = self.groups.get_mut(g)?;
        let hc = group.spec.health_check.clone()?;
        let i = group.index(addr)?;
        let old = group.state_of(i, now);
        let h = group.health.get_mut(i)?;
        h.last_check = Some(result.to_string());
        if !ok {
            h.note_failure(format!("check: {result}"), SystemTime::now());
        }
        let change = h.check(ok, hc.rise, hc.fall);
        let new = group.state_of(i, now);
        match change {
            Some(Change::Out) => log::warn!(
                "{}: {old} -> {new}: {} failed check{}, last: {result}",
                group.who(addr),
                hc.fall,
                if hc.fall == 1 { "" } else { "s" }
            ),
            Some(Change::Up) => log::info!(
                "{}: {old} -> {new}: {} passed check{}, last: {result}",
                group.who(addr),
                hc.rise,
                if hc.rise == 1 { "" } else { "s" }
            ),
            None => {}
        }
        change
    }

    /// Sets every server's mode to the one `table` gives it (`ready` if it
    /// gives none): the servers whose mode changed, with their new mode.
    pub(crate) fn apply_modes(
        &mut self,
        table: &[(String, SocketAddr, Mode)],
    ) -> Vec<(SocketAddr, Mode, Mode)> {
        let mut changed = Vec::new();
        for g in &mut self.groups {
            let name = g.spec.name.get_ref();
            for (s, h) in g.slots.iter().zip(&mut g.health) {
                let want = table
                    .iter()
                    .find(|(tg, ta, _)| tg == name && *ta == s.addr)
                    .map_or(Mode::Ready, |e| e.2);
                if h.mode != want {
                    changed.push((s.addr, h.mode, want));
                    h.mode = want;
                }
            }
        }
        if !changed.is_empty() {
            self.changed_state();
        }
        changed
    }

    /// Sets the operator's `mode` of server `addr` in group `name`.
    /// Returns its old mode, or `None` if no such server.
    pub(crate) fn set_mode(&mut self, name: &str, addr: SocketAddr, mode: Mode) -> Option<Mode> {
        self.changed_state();
        let g = self.find(name)?;
        let group = self.groups.get_mut(g)?;
        let i = group.index(addr)?;
        let h = group.health.get_mut(i)?;
        Some(std::mem::replace(&mut h.mode, mode))
    }
}

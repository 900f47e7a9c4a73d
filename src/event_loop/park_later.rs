//! `ParkLater`: client connections that went idle with their machine
//! live, parked together a moment later (ARCHITECTURE.md §4, "What an idle
//! connection holds").
//!
//! Why: a keep-alive client under load sends its next request within a
//! millisecond or two of its last response. Parking the machine (456
//! bytes) at every response and rebuilding it at every request cost an
//! allocation, a free and two copies per request, on memory no longer in
//! cache: about 4.5% of the loop's instructions at S1. A connection listed
//! here stays live until the list is due (`PARK_AFTER` after the first
//! entry, or at once when `MAX_LISTED` are waiting), then is parked if it
//! still waits: a busy connection is parked a few times a second instead
//! of at every request, and an idle one holds its machine no longer than
//! `PARK_AFTER`.
//!
//! What it must not know: what parking drops (`conn::client::park`).

use std::time::{Duration, Instant};

use super::token::ConnId;

/// How long after the first listed connection went idle the list is
/// parked: 50 ms, short against any idle timeout, long against the gap
/// between a busy client's requests.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(50);

/// Listed connections that make the list due at once: at most this many
/// idle machines (456 bytes each) wait to be parked.
pub(crate) const MAX_LISTED: usize = 1024;

/// Connections to park when [`ParkLater::due`] comes; an id whose slot was
/// freed (or refilled: a new generation) meanwhile is skipped by the loop.
#[derive(Debug, Default)]
pub(crate) struct ParkLater {
    ids: Vec<ConnId>,
    due: Option<Instant>,
}

impl ParkLater {
    /// Lists `id`, which went idle live at `now` (the loop lists a slot
    /// once until it is parked).
    pub(crate) fn add(&mut self, id: ConnId, now: Instant) {
        if self.ids.is_empty() {
            self.due = Some(now + PARK_AFTER);
        }
        self.ids.push(id);
        if self.ids.len() >= MAX_LISTED {
            self.due = Some(now);
        }
    }

    /// When the list must be parked; `None` while it is empty.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The listed ids if the list is due at `now` (the list is then
    /// empty): the caller parks each that still waits.
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<Vec<ConnId>> {
        if self.due.is_none_or(|t| t > now) {
            return None;
        }
        self.due = None;
        Some(std::mem::take(&mut self.ids))
    }

    /// Gives back the list `take_due` returned, emptied, to keep its
    /// storage.
    pub(crate) fn give_back(&mut self, mut ids: Vec<ConnId>) {
        ids.clear();
        if self.ids.is_empty() {
            self.ids = ids;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_LISTED, PARK_AFTER, ParkLater};
    use crate::event_loop::token::ConnId;
    use std::time::Instant;

    #[test]
    fn the_list_is_due_park_after_its_first_entry() {
        let t0 = Instant::now();
        let mut l = ParkLater::default();
        assert_eq!(l.due(), None);
        assert!(l.take_due(t0).is_none());
        l.add(ConnId::new(1, 1), t0);
        l.add(ConnId::new(2, 1), t0 + PARK_AFTER / 2);
        assert_eq!(l.due(), Some(t0 + PARK_AFTER));
        assert!(l.take_due(t0 + PARK_AFTER / 2).is_none());
        let ids = l.take_due(t0 + PARK_AFTER).unwrap_or_default();
        assert_eq!(ids, vec![ConnId::new(1, 1), ConnId::new(2, 1)]);
        assert_eq!(l.due(), None);
        l.give_back(ids);
        l.add(ConnId::new(3, 1), t0 + PARK_AFTER * 2);
        assert_eq!(l.due(), Some(t0 + PARK_AFTER * 3));
    }

    /// The flag that lists a slot fits in the entry's padding: the loop's
    /// bookkeeping stays 24 bytes beside the connection (ARCHITECTURE.md §4).
    #[test]
    fn the_slab_entry_stays_the_same_size() {
        let rest = std::mem::size_of::<crate::event_loop::Entry>()
            - std::mem::size_of::<crate::conn::client::Client>();
        assert!(rest <= 24, "{rest} bytes of bookkeeping");
    }

    #[test]
    fn a_full_list_is_due_at_once() {
        let t0 = Instant::now();
        let mut l = ParkLater::default();
        for k in 0..MAX_LISTED {
            l.add(ConnId::new(k, 1), t0);
        }
        assert_eq!(l.due(), Some(t0));
        assert_eq!(l.take_due(t0).map(|v| v.len()), Some(MAX_LISTED));
    }
}

//! Health across a reload in one process (issue 27 item 4): the new loop
//! asks the old one for its servers' health and takes it over for the
//! servers both configurations have — ejection with its remaining time,
//! check counters and state, the operator's mode, the last failure. A
//! server only the new configuration has starts fresh (up until its
//! checks prove it down); one only the old has stays with the old loop,
//! which drains it.
//!
//! The hand-over is a request and an answer, so the old loop pays
//! nothing until a reload asks: [`CarrySlot::request`] (the reloading
//! thread) sets a flag and wakes the old loop; the old loop's turn sees
//! the flag ([`CarrySlot::wanted`]) and answers with a snapshot
//! ([`CarrySlot::answer`]). `Instant`s stay valid: both loops are in one
//! process.
//!
//! What it must not know: sockets, the loop, how health is judged.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::health::Health;

/// One server's health, named by its group and address.
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    /// The group's name.
    pub group: String,
    /// The server's address.
    pub addr: SocketAddr,
    /// Its health in the old loop.
    pub health: Health,
}

/// Where a loop hands its health to its successor.
#[derive(Debug, Default)]
pub(crate) struct CarrySlot {
    want: AtomicBool,
    data: Mutex<Option<Vec<Carried>>>,
    ready: Condvar,
}

impl CarrySlot {
    /// A successor asked for the health (checked by the loop each turn).
    pub(crate) fn wanted(&self) -> bool {
        self.want.load(Ordering::Relaxed)
    }

    /// The loop's answer: `snapshot` of every server's health.
    pub(crate) fn answer(&self, snapshot: Vec<Carried>) {
        self.want.store(false, Ordering::Relaxed);
        if let Ok(mut d) = self.data.lock() {
            *d = Some(snapshot);
            self.ready.notify_all();
        }
    }

    /// Asks for the health (`wake` wakes the loop) and waits at most
    /// `within` for it; `None` if the loop did not answer in time (it
    /// ended, or is stuck): the successor then starts fresh.
    pub(crate) fn request(&self, wake: impl Fn(), within: Duration) -> Option<Vec<Carried>> {
        let deadline = Instant::now() + within;
        let mut d = self.data.lock().ok()?;
        *d = None;
        self.want.store(true, Ordering::Relaxed);
        wake();
        while d.is_none() {
            let left = deadline.checked_duration_since(Instant::now())?;
            d = self.ready.wait_timeout(d, left).ok()?.0;
        }
        d.take()
    }
}

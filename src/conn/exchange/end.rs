//! How an [`Exchange`] ends: its upstream side let go (the connection
//! closed if still attached, the try reported to its group once, the
//! upstream-side buffers returned), then its one access record written
//! and the exchange kept for reuse (ARCHITECTURE.md §1, §8).
//!
//! What it must not know: the client socket, how the loop schedules.

use super::Exchange;
use crate::conn::Shared;
use crate::conn::access::{Access, Downstream, Termination};
use crate::http::known::Known;
use crate::upstreams::health::Verdict;

impl Exchange {
    /// Lets the upstream side go: closes the upstream connection if one
    /// is still attached, reports the try's end to its group once
    /// (`status`: the proxy's own answer, if it answered instead) and
    /// returns the buffers of the upstream side. [`Exchange::end`] begins
    /// with it; an HTTP/2 stream whose upstream closed in the middle of
    /// the body calls it at once and goes on sending the bytes it holds
    /// (ARCHITECTURE.md §14).
    pub(crate) fn let_go_upstream(&mut self, status: Option<u16>, sh: &mut Shared) {
        if let Some(k) = self.upstream.take() {
            sh.ups.close(k, &sh.stats);
        }
        self.report_try(status, sh);
        for b in [self.to_upstream.take(), self.upin.take()]
            .into_iter()
            .flatten()
        {
            sh.bufs.put_buffer(b);
        }
    }

    /// Reports the end of the try in flight to its group, once: the
    /// server's status says success or failure; the proxy's own answer
    /// (`status`: a timeout, the client gone) says nothing.
    fn report_try(&mut self, status: Option<u16>, sh: &mut Shared) {
        if let Some(g) = self.group.filter(|_| self.in_flight) {
            self.in_flight = false;
            // The proxy's own answer (a timeout, the client gone) says
            // nothing about the server; its status does.
            let verdict = match status {
                None if self.status != 0 && sh.groups.fails_on(g, self.status) => {
                    let why = format!("traffic: status {}", self.status);
                    sh.groups.note_failure(g, self.peer.addr, why);
                    Verdict::Failure
                }
                None if self.status != 0 => Verdict::Success,
                _ => Verdict::Neutral,
            };
            sh.report(g, self.peer.addr, verdict, (self.status, self.first_byte));
        }
    }

    /// The one teardown: lets the upstream side go
    /// ([`Exchange::let_go_upstream`]), writes the access record (with
    /// `status` if the proxy answered instead, `extra_out` more body bytes
    /// queued toward the client, and how it ended), and keeps the exchange
    /// for reuse.
    pub(crate) fn end(
        mut self: Box<Self>,
        client: Downstream<'_>,
        status: Option<u16>,
        extra_out: u64,
        termination: Termination,
        sh: &mut Shared,
    ) {
        self.let_go_upstream(status, sh);
        self.resp_body_bytes += extra_out;
        let attached = self.up_port != 0 || self.status != 0;
        if attached && self.attempts.len() < self.tried.len() {
            // The last try, ended here: its answer, or the proxy's status
            // for a cut one.
            let outcome = if self.status != 0 {
                "ok"
            } else {
                termination.name()
            };
            self.note_attempt(outcome, status.unwrap_or(0));
        }
        let status = status.unwrap_or(self.status);
        Access {
            client: client.addr,
            tls: client.tls,
            stream: client.stream,
            method: &self.req.method,
            target: self.req.target.as_bytes(),
            version: Some(self.req.version),
            host: self.req.headers.get_known(Known::Host),
            // Looked up by name only when a record is written.
            request_id: sh
                .access
                .is_on()
                .then(|| crate::request_id::of(&self.req.headers))
                .flatten(),
            status,
            bytes_in: self.req_body_bytes,
            bytes_out: self.resp_body_bytes,
            started: self.started,
            upstream: Some(self.peer.addr),
            connect: self.connect_time,
            first_byte: self.first_byte,
            reused: attached.then_some(self.reused),
            retries: self.retries,
            attempts: &self.attempts,
            termination,
        }
        .record(&sh.stats, &mut sh.access);
        sh.recycle_exchange(self);
    }
}

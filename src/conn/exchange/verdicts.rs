//! The verdicts where the two halves of an [`Exchange`] meet: may its
//! upstream connection be parked ([`Exchange::reusable`], ARCHITECTURE.md
//! §6), may a failed request be sent again ([`Exchange::may_retry`],
//! ARCHITECTURE.md §7); and a retry's bookkeeping: the try that ended
//! noted for the access record, the head put back in front of the bytes
//! not yet written.
//!
//! What it must not know: the client socket, the pool's choice, which
//! server the retry goes to (`conn/choose.rs`).

use super::Exchange;

impl Exchange {
    /// May the upstream connection go back to the pool (ARCHITECTURE.md
    /// §6)? Only after a complete, delimited HTTP/1.1 response without
    /// `Connection: close`, to a request sent whole, with nothing extra.
    pub(crate) fn reusable(&self) -> bool {
        self.response_done()
            && self.request_sent()
            && self.resp_keep_alive
            && !self.extra_bytes
            && !self.tunnel
    }

    /// May the request be sent again on a new connection after its
    /// upstream failed (ARCHITECTURE.md §7)? No response byte may have
    /// arrived; then either no request byte was written, or the method is
    /// idempotent (RFC 9110 §9.2.2), no body byte was written, and the
    /// connection was reused or `other_server` (the group has a server
    /// this request has not tried: nginx's `proxy_next_upstream error`).
    pub(crate) fn may_retry(&self, max_retries: u32, other_server: bool) -> bool {
        let no_response_byte = self.no_response_byte();
        let head_len = self.head_bytes.len() as u64;
        let nothing_written = self.nothing_written();
        let body_streamed = self.up_written > head_len;
        self.retries < max_retries
            && no_response_byte
            && !self.request_abandoned()
            && (nothing_written
                || (self.idempotent && !body_streamed && (self.reused || other_server)))
    }

    /// No byte of the request was written to the current upstream
    /// connection.
    pub(crate) fn nothing_written(&self) -> bool {
        self.up_written == 0
    }

    /// Records the current try (to `peer`) as ended with `outcome`: its
    /// upstream status (else `fallback`, what the failure would answer:
    /// nginx's `$upstream_status` shows 502 or 504 for a failed try), its
    /// connect time (or the time spent connecting, for a connect that
    /// failed).
    pub(crate) fn note_attempt(&mut self, outcome: &'static str, fallback: u16) {
        let connect = self
            .connect_time
            .or_else(|| self.connect_began.map(|b| b.elapsed()));
        self.attempts.push(crate::conn::access::Attempt {
            addr: self.peer.addr,
            status: if self.status != 0 {
                self.status
            } else {
                fallback
            },
            connect,
            outcome,
        });
    }

    /// Upstream connections this request was sent on (1 + retries): the
    /// access log's tries.
    pub(crate) fn tries(&self) -> u32 {
        self.retries + 1
    }

    /// Puts the head back in front of the request bytes not yet written, for
    /// a retry on a new connection.
    pub(crate) fn rewind(&mut self) {
        let head_len = self.head_bytes.len() as u64;
        let head_left = head_len.saturating_sub(self.up_written) as usize;
        if let Some(buf) = self.to_upstream.as_mut() {
            let body: Vec<u8> = buf.as_slice().get(head_left..).unwrap_or(&[]).to_vec();
            buf.clear();
            buf.extend_from_slice(&self.head_bytes);
            buf.extend_from_slice(&body);
        }
        self.up_written = 0;
    }
}

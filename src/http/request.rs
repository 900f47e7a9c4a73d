//! `RequestPlan`: what the proxy does with a parsed request head, decided
//! from the head alone (ARCHITECTURE.md §5, §6, §8).
//!
//! Why it exists: every rule a request head must pass before it reaches the
//! user's hooks or an upstream — target form, `Host`, body framing,
//! hop-by-hop removal, the proxy's own fields, keep-alive, upgrade, retry
//! class — is one plain function here, tested with byte strings alone. The
//! connection machines only carry the verdict out.
//!
//! What it must not know: sockets, buffers, the clock, the configuration
//! (the caller passes the switches in [`Forwarding`]), upstream peers.
//!
//! Invariant: a refused head is never rewritten half-way into something the
//! upstream sees: refusals come before any change to the head.

use super::known::Known;
use std::net::{IpAddr, SocketAddr};

use super::error::ParseError;
use super::framing::BodyKind;
use super::head::RequestHead;
use super::headers::Headers;
use super::hop::{
    add_forwarding_fields, drop_h2c_offer, drop_managed_lookalikes, is_upgrade_request,
    remove_hop_by_hop, request_keep_alive, via_names,
};
use super::syntax::list_elements;
use super::target::{check_authority, check_origin_form, normalize_absolute_form};

/// Which of the proxy's own fields go on requests sent upstream
/// (ARCHITECTURE.md §6); each can be switched off in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarding<'a> {
    /// Append `Via: <received-protocol> <via_name>` (RFC 9110 §7.6.3):
    /// `1.1`, `1.0`, or `2` for a request that came over HTTP/2 (`h2`).
    pub via: bool,
    /// The proxy's pseudonym in `Via` (`--via-name`); a request whose `Via`
    /// already names it went round a loop (508, RFC 5842 §7.2).
    pub via_name: &'a str,
    /// Append the client's address to `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Set `X-Forwarded-Proto` to the client's scheme.
    pub x_forwarded_proto: bool,
    /// The client came over TLS: the scheme is `https`, else `http`.
    pub tls: bool,
    /// The request came over HTTP/2: `Via` says `2` (its head is mapped
    /// to an HTTP/1.1 one, whose version says `1.1`).
    pub h2: bool,
    /// The `X-Forwarded-Client-Cert` value for the client's verified
    /// certificate (`tls::client_cert`), if it presented one. The field
    /// is removed from every request whatever this says, so a client
    /// cannot forge it.
    pub client_cert: Option<&'a str>,
}

impl Default for Forwarding<'_> {
    /// All three fields on, pseudonym `sluice`.
    fn default() -> Self {
        Forwarding {
            via: true,
            via_name: "sluice",
            x_forwarded_for: true,
            x_forwarded_proto: true,
            tls: false,
            h2: false,
            client_cert: None,
        }
    }
}

/// Why a request head is answered by the proxy instead of forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The head or its framing is invalid: the status is
    /// [`ParseError::request_status`] (400, 414, 431 or 501).
    Invalid(ParseError),
    /// `CONNECT`: a reverse proxy opens no tunnels to arbitrary hosts
    /// (501, RFC 9110 §15.6.2).
    NotImplemented,
    /// `OPTIONS` or `TRACE` with `Max-Forwards: 0`: the proxy is the final
    /// recipient (RFC 9110 §7.6.2) and answers itself with `status`, with
    /// an `Allow` field of [`ALLOW`]: 200 to `OPTIONS`, 405 to `TRACE`
    /// (which proxies commonly disable). The connection stays open unless
    /// the request says otherwise.
    MaxForwards {
        /// 200 or 405.
        status: u16,
        /// The request allows keep-alive (its version and `Connection`,
        /// RFC 9112 §9.3).
        keep_alive: bool,
    },
    /// The request's `Via` already names this proxy's pseudonym: it went
    /// round a loop (508 Loop Detected, RFC 5842 §7.2), then close.
    LoopDetected,
}

/// The methods the proxy says it allows when it answers `Max-Forwards: 0`
/// itself (every method it forwards; not `CONNECT`, not `TRACE`).
pub const ALLOW: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH";

impl Refusal {
    /// The status code the client gets (ARCHITECTURE.md §8).
    #[cfg(test)]
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Invalid(e) => e.request_status(),
            Refusal::NotImplemented => 501,
            Refusal::MaxForwards { status, .. } => *status,
            Refusal::LoopDetected => 508,
        }
    }
}

/// The verdict on one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPlan {
    /// How the request body is delimited (RFC 9112 §6.3).
    pub framing: BodyKind,
    /// The client connection may carry another request after this one, as
    /// far as this head says (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// The request asks for a protocol upgrade (RFC 9110 §7.8); its
    /// `Upgrade` field and `Connection: upgrade` go upstream.
    pub upgrade: bool,
    /// Retry class: the method is idempotent (RFC 9110 §9.2.2), so the
    /// request may be sent again after a reused connection failed before
    /// any response byte (ARCHITECTURE.md §7).
    pub idempotent: bool,
    /// An HTTP/1.1 request with a body whose `Expect` lists `100-continue`
    /// (RFC 9110 §10.1.1): the client may wait for a `100 Continue` before
    /// it sends the body, so until a body byte or a response byte comes,
    /// the wait is the upstream's, not the client's (docs/configuration.md, "Timeouts").
    pub expect_continue: bool,
}

impl RequestPlan {
    /// The request carries body bytes. A reply the proxy makes without
    /// reading them must close the connection afterwards: the body must
    /// never be parsed as a next request.
    pub fn has_body(&self) -> bool {
        !matches!(self.framing, BodyKind::Empty | BodyKind::Length(0))
    }
}

/// `Via`'s received-protocol for a request of HTTP/1.`minor`, or of
/// HTTP/2 (`h2`): the version the client spoke (RFC 9110 §7.6.3; the
/// protocol name `HTTP/` is omitted).
fn received_protocol(minor: u8, h2: bool) -> &'static [u8] {
    match (h2, minor) {
        (true, _) => b"2",
        (false, 0) => b"1.0",
        _ => b"1.1",
    }
}

/// Checks `req` and rewrites it for the upstream, in this order:
/// 1. body framing (RFC 9112 §6.3, §6.1: no `Transfer-Encoding` in 1.0);
/// 2. exactly one valid `Host` for HTTP/1.1, and a target form the method
///    allows ([`check_target_and_host`]);
/// 3. an absolute-form target becomes origin form and sets `Host`
///    (RFC 9112 §3.2.2);
/// 4. `CONNECT` is refused; a `Via` naming `fwd.via_name` is a loop;
///    `OPTIONS`/`TRACE` with `Max-Forwards: 0` are answered here, and a
///    larger `Max-Forwards` goes on decremented (RFC 9110 §7.6.2);
/// 5. keep-alive and upgrade are read from `Connection` (an HTTP/1.0
///    `Upgrade` is ignored, RFC 9110 §7.8), then the
///    hop-by-hop fields are removed (RFC 9110 §7.6.1) and the proxy's own
///    fields appended (`fwd`, with `client_ip` for `X-Forwarded-For`).
///
/// Errors: a [`Refusal`]; the head may then have been partly normalised
/// (step 3) but nothing of it goes anywhere.
pub fn plan_request(
    req: &mut RequestHead,
    client_ip: IpAddr,
    fwd: Forwarding<'_>,
) -> Result<RequestPlan, Refusal> {
    let framing = req.body_kind().map_err(Refusal::Invalid)?;
    check_target_and_host(req).map_err(Refusal::Invalid)?;
    normalize_absolute_form(req).map_err(Refusal::Invalid)?;
    if req.is_method("CONNECT") {
        return Err(Refusal::NotImplemented);
    }
    if via_names(&req.headers, fwd.via_name) {
        return Err(Refusal::LoopDetected);
    }
    if (req.is_method("OPTIONS") || req.is_method("TRACE")) && !decrement_max_forwards(req) {
        let status = if req.is_method("OPTIONS") { 200 } else { 405 };
        let keep_alive = request_keep_alive(req.version, &req.headers);
        return Err(Refusal::MaxForwards { status, keep_alive });
    }
    normalize_framing_fields(&mut req.headers, framing);
    let keep_alive = request_keep_alive(req.version, &req.headers);
    // Never offered upstream (h2c smuggling; `drop_h2c_offer`).
    drop_h2c_offer(&mut req.headers);
    // RFC 9110 §7.8: a server MUST ignore Upgrade in an HTTP/1.0 request.
    let upgrade = req.version >= 1 && is_upgrade_request(&req.headers);
    remove_hop_by_hop(&mut req.headers, upgrade);
    drop_managed_lookalikes(&mut req.headers);
    add_forwarding_fields(
        &mut req.headers,
        client_ip,
        fwd.via
            .then_some((received_protocol(req.version, fwd.h2), fwd.via_name)),
        fwd.x_forwarded_for,
        fwd.x_forwarded_proto
            .then_some(if fwd.tls { &b"https"[..] } else { &b"http"[..] }),
    );
    // One bit test when absent (`Known`).
    req.headers.remove_known(Known::XForwardedClientCert);
    if let Some(value) = fwd.client_cert {
        req.headers
            .append_known(Known::XForwardedClientCert, value.as_bytes());
    }
    let plan = RequestPlan {
        framing,
        keep_alive,
        upgrade,
        idempotent: is_idempotent(&req.method),
        expect_continue: false,
    };
    // Looked up by name only for a request with a body (rare on the hot
    // path); an HTTP/1.0 server ignores the expectation (RFC 9110 §10.1.1).
    let expect_continue = plan.has_body() && req.version >= 1 && expects_continue(&req.headers);
    Ok(RequestPlan {
        expect_continue,
        ..plan
    })
}

/// True if an `Expect` field lists `100-continue`, compared ignoring ASCII
/// case (RFC 9110 §10.1.1).
fn expects_continue(headers: &Headers) -> bool {
    headers
        .get_all("expect")
        .flat_map(list_elements)
        .any(|e| e.eq_ignore_ascii_case(b"100-continue"))
}

/// Rewrites the framing field the upstream will read into the one
/// spelling no parser reads differently (RFC 9112 §6.1, §6.3 steps 4–6):
/// a chunked request's `Transfer-Encoding` fields become one field listing
/// its codings in lower case, `", "`-separated, empty list elements
/// dropped (`,chunked`, `CHUNKED`, `gzip` + `chunked` on two lines →
/// `chunked`, `gzip, chunked`); a `Content-Length` becomes its value in
/// decimal without leading zeros (`0003` → `3`). A field already in that
/// form is left where it is (the usual case: nothing is allocated); a
/// rewritten one goes to the end of the head.
pub fn normalize_framing_fields(headers: &mut Headers, framing: BodyKind) {
    match framing {
        BodyKind::Chunked => {
            let canonical = {
                let mut fields = headers.get_all_known(Known::TransferEncoding);
                fields.next().is_some_and(|v| v == b"chunked") && fields.next().is_none()
            };
            if canonical {
                return;
            }
            let codings: Vec<Vec<u8>> = headers
                .get_all_known(Known::TransferEncoding)
                .flat_map(list_elements)
                .map(<[u8]>::to_ascii_lowercase)
                .collect();
            headers.remove_known(Known::TransferEncoding);
            headers.append_known(Known::TransferEncoding, &codings.join(&b", "[..]));
        }
        BodyKind::Length(n) => {
            let mut digits = [0u8; 20];
            let text = decimal(n, &mut digits);
            let canonical = {
                let mut fields = headers.get_all_known(Known::ContentLength);
                fields.next() == Some(text) && fields.next().is_none()
            };
            if !canonical {
                let text = text.to_vec();
                headers.remove_known(Known::ContentLength);
                headers.append_known(Known::ContentLength, &text);
            }
        }
        BodyKind::Empty | BodyKind::UntilClose => {}
    }
}

/// `n` in decimal, written into the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i = i.saturating_sub(1);
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or_default()
}

/// Gives an HTTP/1.0 request without `Host` one naming `authority` (the
/// upstream peer): the request goes upstream as HTTP/1.1, which requires
/// it (RFC 9112 §3.2). A request that has `Host` is left alone, and
/// nothing is formatted for it (this runs for every request). Returns
/// true if it added the field.
pub fn ensure_host(req: &mut RequestHead, authority: SocketAddr) -> bool {
    if req.headers.has_known(Known::Host) {
        return false;
    }
    let mut text = Vec::with_capacity(48);
    crate::text::push_socket_addr(&mut text, authority);
    req.headers.append_known(Known::Host, &text);
    true
}

/// RFC 9110 §7.6.2 for `OPTIONS` and `TRACE`: a `Max-Forwards` of 0
/// returns false (the proxy must answer itself); a larger one is replaced
/// by its value minus one (one field). A request without the field, or
/// with a value that is not `1*DIGIT`, goes on unchanged (true).
fn decrement_max_forwards(req: &mut RequestHead) -> bool {
    let Some(value) = req.headers.get_known(Known::MaxForwards) else {
        return true;
    };
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return true;
    }
    let n = value.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    if n == 0 {
        return false;
    }
    req.headers.remove_known(Known::MaxForwards);
    req.headers
        .append_known(Known::MaxForwards, (n - 1).to_string().as_bytes());
    true
}

/// Methods that may be repeated with the same effect (RFC 9110 §9.2.2).
pub fn is_idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

/// RFC 9112 §3.2: an HTTP/1.1 request must carry exactly one `Host`; no
/// request may carry several; its value must be a URI authority (host and
/// optional port, RFC 3986 §3.2, [`check_authority`]), or empty. The
/// request-target must have a form the method allows (RFC 9112
/// §3.2.1-§3.2.4): origin form (`/...`, checked by [`check_origin_form`]),
/// absolute form (`http://` or `https://`), `*` only for OPTIONS, and the
/// authority form only for CONNECT (which then gets its 501).
///
/// Errors: `Malformed`, naming the rule broken.
pub fn check_target_and_host(req: &RequestHead) -> Result<(), ParseError> {
    let mut hosts = req.headers.get_all_known(Known::Host);
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(ParseError::Malformed("several Host fields"));
    }
    match first {
        None if req.version >= 1 => {
            return Err(ParseError::Malformed("HTTP/1.1 request without Host"));
        }
        Some(v) => check_authority(v)?,
        None => {}
    }
    let t = req.target.as_bytes();
    let lower = |n: usize| t.get(..n).map(|p| p.to_ascii_lowercase());
    let ok = match t.first() {
        Some(b'/') => {
            check_origin_form(t)?;
            true
        }
        Some(b'*') => t.len() == 1 && req.is_method("OPTIONS"),
        Some(_) if req.is_method("CONNECT") => true,
        Some(_) => {
            lower(7).as_deref() == Some(b"http://") || lower(8).as_deref() == Some(b"https://")
        }
        None => false,
    };
    if !ok {
        return Err(ParseError::Malformed(
            "request-target form not allowed here",
        ));
    }
    Ok(())
}

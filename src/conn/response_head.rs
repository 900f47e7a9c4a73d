//! Taking a response head off the upstream connection: find its end in the
//! head buffer, parse it, plan it ([`plan_response`]), run the user's
//! `response_filter`, and queue it toward the client followed by any body
//! bytes that came with it (ARCHITECTURE.md §1, §5, §6).
//!
//! What it must not know: sockets (the relay read the bytes), the pool.

use super::KeepAlive;
use super::client::ClientSide;
use super::exchange::{Exchange, Resp};
use super::relay::Env;
use super::response_body::{BodyScratch, hold_last_chunk, move_body_after_head};
use crate::error::{ErrorKind, ProxyError};
use crate::filter::Filter;
use crate::http::chunked::remove_runs;
use crate::http::date::add_date_if_missing;
use crate::http::hop::keep_alive_timeout;
use crate::http::known::Known;
use crate::http::{
    BodyDecoder, BodyKind, ParseError, ParseHead, ResponseContext, ResponsePlan, ResponseRefusal,
    finish_response_head, plan_response,
};

type Result<T> = std::result::Result<T, ProxyError>;

fn upstream_parse(e: ParseError) -> ProxyError {
    ProxyError::upstream(ErrorKind::Parse(e))
}

/// A response head taken off the upstream connection ([`take_head`]):
/// parsed into `ex.resp_head`, planned, filtered; what the client's
/// protocol must do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// An interim (1xx) head, to go to the client if `forward` (RFC 9110
    /// §15.2; a 100 the client did not ask for is dropped).
    Interim {
        /// The client gets it.
        forward: bool,
    },
    /// The final head: the exchange's response half now reads its body
    /// (or is done).
    Final {
        /// The client connection must close after this response (an
        /// HTTP/1 plan: until-close body, tunnel, de-chunking).
        close_client: bool,
        /// A 101: both directions are a byte tunnel from now on.
        tunnel: bool,
    },
}

/// Takes one complete response head from `ex.upin`, if there is one:
/// parses it into `ex.resp_head`, plans it ([`plan_response`]) and, for a
/// final head, adds `Date`, runs the user's `response_filter` and the
/// route's response rules, and starts the body's decoder (or ends the
/// response). Returns the raw head's length in `ex.upin` (not consumed
/// yet) and what it is.
///
/// Errors (upstream side, 502): a malformed head, a refused plan
/// ([`ResponseRefusal`]).
pub(crate) fn take_head(
    ex: &mut Exchange,
    env: &mut Env<'_>,
    filter: &dyn Filter,
) -> Result<Option<(usize, Taken)>> {
    if !matches!(ex.resp, Resp::AwaitHead) {
        return Ok(None);
    }
    let Some(upin) = ex.upin.as_mut().filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    let Some(len) = ex.resp_scanner.find_end(upin.as_slice()) else {
        return Ok(None);
    };
    if len > env.cfg.max_response_head_size {
        return Err(upstream_parse(ParseError::HeadTooLarge));
    }
    // Parsed into the exchange's own head: it keeps its storage from one
    // exchange to the next.
    let mut head = std::mem::take(&mut ex.resp_head);
    let parsed = head
        .parse_into(
            upin.as_slice().get(..len).unwrap_or(&[]),
            env.cfg.max_response_header_count,
        )
        .map_err(upstream_parse)
        .and_then(|used| {
            used.ok_or_else(|| upstream_parse(ParseError::Malformed("incomplete response head")))
        });
    let used = match parsed {
        Ok(used) => used,
        Err(e) => {
            ex.resp_head = head;
            return Err(e);
        }
    };
    ex.resp_scanner.reset();
    if (100..200).contains(&head.status) {
        ex.interim_bytes = ex.interim_bytes.saturating_add(used);
    }
    if let Some(secs) = keep_alive_timeout(&head.headers) {
        ex.idle_hint = Some(secs);
    }
    let cx = ResponseContext {
        method: &ex.req.method,
        request_version: ex.req.version,
        upgrade_requested: ex.upgrade,
        upgrade_offer: ex.req.headers.get_known(Known::Upgrade).unwrap_or_default(),
        request_body_done: ex.request_body_done(),
        request_write_failed: ex.write_failed.is_some(),
        interim_bytes: ex.interim_bytes,
        interim_budget: env.cfg.max_response_head_size,
        // An HTTP/2 stream's exchange keeps its trailers (it is the only
        // one that does): its body ends with END_STREAM, not a last chunk.
        http1_client: !ex.keep_trailers,
    };
    let plan = match plan_response(&mut head, &cx) {
        Ok(plan) => plan,
        Err(r) => {
            ex.resp_head = head;
            return Err(match r {
                ResponseRefusal::Invalid(e) => upstream_parse(e),
                ResponseRefusal::UnexpectedUpgrade => {
                    ProxyError::upstream(ErrorKind::UnexpectedUpgrade)
                }
            });
        }
    };
    let taken = match plan {
        ResponsePlan::Interim { forward } => {
            filter.response_filter(&ex.req, &mut head);
            if forward {
                ex.interim_sent = true;
            }
            Taken::Interim { forward }
        }
        ResponsePlan::Final(p) => {
            if p.tunnel {
                ex.tunnel = true;
                ex.set_request_body(BodyDecoder::new(BodyKind::UntilClose));
                if ex.to_upstream.is_none() {
                    ex.to_upstream = Some(env.body_buffer());
                }
            }
            if p.abandon_request {
                ex.abandon_request();
            }
            ex.resp_keep_alive = p.upstream_keep_alive;
            // An HTTP/2 client (`keep_trailers`) gets chunk data as DATA
            // frames: every chunked body is de-chunked for it.
            ex.dechunk = p.dechunk || (ex.keep_trailers && p.framing == BodyKind::Chunked);
            ex.enchunk = p.enchunk;
            add_date_if_missing(&mut head, env.date);
            filter.response_filter(&ex.req, &mut head);
            if let Some((i, tls, client)) = ex.resp_rules
                && let Some(r) = env.cfg.route.get(i)
            {
                let mut addr = [0u8; 64];
                let mut vars = crate::header_rules::request_vars(&ex.req, tls, client, &mut addr);
                if ex.host_added {
                    vars.host = b"";
                }
                r.response_rules().apply(&mut head.headers, &vars);
            }
            ex.status = head.status;
            ex.resp_head_sent = true;
            let decoder = BodyDecoder::new(p.framing);
            ex.resp = if decoder.is_done() {
                Resp::Done
            } else {
                Resp::Body(decoder)
            };
            Taken::Final {
                close_client: p.close_client,
                tunnel: p.tunnel,
            }
        }
    };
    ex.resp_head = head;
    Ok(Some((used, taken)))
}

/// Takes one complete response head from `ex.upin`, if there is one
/// ([`take_head`]), encodes it as HTTP/1 and queues it (and the body
/// bytes behind it) in the client's buffer. An interim head leaves the
/// exchange waiting for the next head; a final one starts the body (or
/// ends the response). Returns true if a head was taken.
///
/// Errors (upstream side, 502): a malformed head, a refused plan
/// ([`ResponseRefusal`]), invalid chunked framing right after the head.
pub(crate) fn take_response_head(
    side: &mut ClientSide,
    ex: &mut Exchange,
    env: &mut Env<'_>,
    filter: &dyn Filter,
    keep_alive: &mut KeepAlive,
) -> Result<bool> {
    let Some((used, taken)) = take_head(ex, env, filter)? else {
        return Ok(false);
    };
    let mut encoded = std::mem::take(&mut ex.scratch);
    encoded.clear();
    match taken {
        Taken::Interim { forward } => {
            if forward {
                ex.resp_head.encode(&mut encoded);
            }
        }
        Taken::Final {
            close_client,
            tunnel,
        } => {
            if close_client {
                keep_alive.clear("response plan");
            }
            let version = ex.req.version;
            finish_response_head(&mut ex.resp_head, tunnel, version, keep_alive.get());
            ex.resp_head.encode(&mut encoded);
        }
    }
    if ex.resp_head_sent
        && !ex.dechunk
        && !ex.enchunk
        && lend_to_client(side, ex, env, used, &encoded)?
    {
        ex.scratch = encoded;
        return Ok(true);
    }
    if let Some(upin) = ex.upin.as_mut() {
        upin.consume(used);
    }
    let out = side.out.get_or_insert_with(|| env.body_buffer());
    out.extend_from_slice(&encoded);
    if out.pending() == encoded.len() {
        side.write_at = env.now;
    }
    ex.scratch = encoded;
    move_body_after_taken_head(ex, out, env)?;
    Ok(true)
}

/// After a head was taken and consumed from `ex.upin`: the bytes behind
/// it are body bytes (or the next head); a final head's body bytes move
/// to `out` (only chunk data with `ex.dechunk`), and once the response
/// half left `AwaitHead` the head buffer goes back (bytes past the body
/// mark the upstream not reusable).
///
/// Errors: invalid chunked framing (upstream side).
pub(crate) fn move_body_after_taken_head(
    ex: &mut Exchange,
    out: &mut crate::buffer::WatermarkBuffer,
    env: &mut Env<'_>,
) -> Result<()> {
    let recode = ex.recode();
    if let Resp::Body(decoder) = &mut ex.resp
        && let Some(upin) = ex.upin.as_mut()
    {
        let before = decoder.data_bytes();
        let scratch = BodyScratch {
            ranges: &mut ex.ranges,
            pieces: &mut ex.pieces,
            trailers: ex.keep_trailers.then_some(&mut ex.trailers),
            held: &mut ex.held,
        };
        let body = move_body_after_head(upin.as_slice(), out, decoder, recode, scratch)?;
        ex.resp_body_bytes += decoder.data_bytes().saturating_sub(before);
        upin.consume(body);
        if decoder.is_done() {
            ex.resp = Resp::Done;
        }
    }
    if !matches!(ex.resp, Resp::AwaitHead) {
        if ex.upin.as_ref().is_some_and(|b| !b.is_empty()) {
            ex.extra_bytes = true;
        }
        if let Some(b) = ex.upin.take() {
            env.bufs.put_buffer(b);
        }
    }
    Ok(())
}

/// The final head was just planned and encoded (`encoded`) from the first
/// `raw` bytes of `ex.upin`: if nothing waits for the client and the head
/// buffer is a response-start buffer with room in front, the encoded head
/// takes the raw one's place and the buffer becomes the client's, body
/// bytes and all, with no copy (issue 22: head and body in one write).
/// Bytes behind the body's end are dropped (`extra_bytes`). Returns false,
/// changing nothing, when that cannot be done (the caller copies).
///
/// Errors: invalid chunked framing right after the head (upstream side).
fn lend_to_client(
    side: &mut ClientSide,
    ex: &mut Exchange,
    env: &mut Env<'_>,
    raw: usize,
    encoded: &[u8],
) -> Result<bool> {
    if side.out.as_ref().is_some_and(|b| !b.is_empty()) {
        return Ok(false);
    }
    let Some(buf) = ex.upin.as_mut().filter(|b| b.is_lent()) else {
        return Ok(false);
    };
    let avail = buf.pending().saturating_sub(raw);
    if !buf.replace_front(raw, encoded) {
        return Ok(false);
    }
    ex.ranges.clear();
    let mut tail = 0;
    let scanned = match &mut ex.resp {
        Resp::Body(decoder) => {
            let before = decoder.data_bytes();
            let fresh = buf.as_slice().get(encoded.len()..).unwrap_or(&[]);
            let r = decoder.scan_forward(fresh, &mut ex.ranges);
            if r.is_ok() {
                // A refused read goes nowhere, so it is not counted.
                ex.resp_body_bytes += decoder.data_bytes().saturating_sub(before);
            }
            tail = decoder.last_chunk_bytes();
            if decoder.is_done() {
                ex.resp = Resp::Done;
            }
            r
        }
        _ => Ok(0),
    };
    // Invalid framing: the head still goes out (as on the copying path),
    // none of the body bytes do, and the error cuts the response.
    let body = *scanned.as_ref().unwrap_or(&0);
    // A chunk size's leading zeros do not go on (`scan_forward`).
    let removed = match scanned.is_ok() && !ex.ranges.is_empty() {
        true => remove_runs(
            buf.tail_mut(avail).get_mut(..body).unwrap_or_default(),
            &ex.ranges,
        ),
        false => 0,
    };
    if body < avail {
        ex.extra_bytes = true;
    }
    if body < avail || removed > 0 {
        buf.unfill(avail - body + removed);
    }
    if scanned.is_ok() {
        // The start of a last chunk waits for the body's end.
        hold_last_chunk(buf, body.saturating_sub(removed), tail, &mut ex.held);
    }
    let Some(mut buf) = ex.upin.take() else {
        return Ok(false);
    };
    let (high, low) = env.body_marks();
    buf.lent_into_body(high, low);
    if let Some(old) = side.out.replace(buf) {
        env.bufs.put_buffer(old);
    }
    side.write_at = env.now;
    scanned.map(|_| true).map_err(upstream_parse)
}

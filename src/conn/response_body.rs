//! A response body's bytes on their way to the client's buffer: what a
//! read from the upstream (or the bytes behind a response head) keeps.
//! The body is measured by its decoder; bytes past its end are dropped;
//! a chunk size's leading zeros are left out; and the framing changes
//! where the client needs another one ([`Recode`]): chunk data only for
//! an HTTP/1.0 or HTTP/2 client, chunk framing added for an HTTP/1.1
//! client of a body the upstream delimits by closing.
//!
//! What it must not know: sockets, the loop, how heads are planned.

use super::relay::Result;
use crate::buffer::WatermarkBuffer;
use crate::error::{ErrorKind, ProxyError};
use crate::http::BodyDecoder;
use crate::http::chunk_encode::{MAX_SIZE_LINE, chunk_size_line};
use crate::http::chunked::{kept_parts, remove_runs};

/// What happens to a response body's framing on the way to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recode {
    /// Forwarded as it came (a chunk size's leading zeros aside).
    Keep,
    /// Only chunk data goes on (`FinalPlan::dechunk`, an HTTP/2 client).
    Dechunk,
    /// The bytes go on as chunks (`FinalPlan::enchunk`).
    Enchunk,
}

/// The scratch vectors and the trailer sink a response body read uses
/// (the exchange's own, kept for reuse).
pub(crate) struct BodyScratch<'a> {
    /// Bytes the forwarded body leaves out (`BodyDecoder::scan_forward`).
    pub ranges: &'a mut Vec<std::ops::Range<usize>>,
    /// De-chunking's pieces: chunk data, or (`true`) a trailer line.
    pub pieces: &'a mut Vec<(std::ops::Range<usize>, bool)>,
    /// Where trailer field lines go, if kept (an HTTP/2 client).
    pub trailers: Option<&'a mut Vec<u8>>,
    /// The start of a chunked body's last chunk held back from the
    /// client until the body is whole ([`hold_last_chunk`]).
    pub held: &'a mut Vec<u8>,
}

/// Measures the `n` bytes just read into `out` with `decoder`: bytes past
/// the body's end are dropped from the buffer, and with
/// [`Recode::Dechunk`] only the chunk data stays (moved to the front of
/// what was read; the trailer section's field lines go to
/// `scratch.trailers` when it is given); otherwise the bytes the
/// forwarded body leaves out (a chunk size's leading zeros) are removed,
/// and with [`Recode::Enchunk`] what is left becomes one chunk. Returns
/// the bytes of the read that belong to the body (framing included,
/// removed bytes too).
///
/// Errors: invalid chunked framing (upstream side); the read's bytes are
/// then dropped from `out`, none of them goes on.
pub(crate) fn keep_body(
    out: &mut WatermarkBuffer,
    n: usize,
    decoder: &mut BodyDecoder,
    recode: Recode,
    scratch: BodyScratch<'_>,
) -> Result<usize> {
    let dechunk = recode == Recode::Dechunk;
    let start = out.pending().saturating_sub(n);
    let fresh = out.as_slice().get(start..).unwrap_or(&[]);
    let BodyScratch {
        ranges,
        pieces,
        trailers,
        held,
    } = scratch;
    let body = match scan(fresh, decoder, dechunk, ranges, pieces) {
        Ok(body) => body,
        Err(e) => {
            // The read is in the client's buffer already: bytes the
            // scanner refuses must not reach the client (a lenient one
            // would read them as framing, or as a second response).
            out.unfill(n);
            return Err(e);
        }
    };
    let kept = if dechunk {
        if let Some(t) = trailers {
            for (r, _) in pieces.iter().filter(|(_, t)| *t) {
                t.extend_from_slice(fresh.get(r.clone()).unwrap_or(&[]));
            }
        }
        let tail = out.tail_mut(n);
        let mut w = 0;
        for (r, _) in pieces.iter().filter(|(_, t)| !*t) {
            let len = r.len();
            if r.end <= tail.len() {
                tail.copy_within(r.clone(), w);
                w += len;
            }
        }
        w
    } else if ranges.is_empty() {
        body
    } else {
        // Bytes past the body go too: only the body is compacted.
        let tail = out.tail_mut(n);
        let removed = remove_runs(tail.get_mut(..body).unwrap_or_default(), ranges);
        body - removed
    };
    out.unfill(n - kept);
    match recode {
        Recode::Enchunk => frame_tail_as_chunk(out, kept),
        Recode::Keep => hold_last_chunk(out, kept, decoder.last_chunk_bytes(), held),
        Recode::Dechunk => {}
    }
    Ok(body)
}

/// Moves body bytes that arrived behind a response head (in the head
/// buffer `upin`) to the client's buffer — all of it, past the watermark
/// if need be: it is at most one head's worth. With [`Recode::Dechunk`]
/// only chunk data moves (trailer field lines go to `trailers` when
/// given); with [`Recode::Enchunk`] the bytes move as one chunk. Returns
/// the body bytes of `avail` consumed (framing included); the decoder
/// counts the data.
///
/// Errors: invalid chunked framing (upstream side).
pub(crate) fn move_body_after_head(
    avail: &[u8],
    out: &mut WatermarkBuffer,
    decoder: &mut BodyDecoder,
    recode: Recode,
    scratch: BodyScratch<'_>,
) -> Result<usize> {
    let dechunk = recode == Recode::Dechunk;
    let BodyScratch {
        ranges,
        pieces,
        trailers,
        held,
    } = scratch;
    let body = scan(avail, decoder, dechunk, ranges, pieces)?;
    if dechunk {
        let mut trailers = trailers;
        for (r, t) in pieces.iter() {
            let bytes = avail.get(r.clone()).unwrap_or(&[]);
            match (t, trailers.as_deref_mut()) {
                (false, _) => {
                    out.extend_from_slice(bytes);
                }
                (true, Some(sink)) => sink.extend_from_slice(bytes),
                (true, None) => {}
            }
        }
    } else {
        let start = out.pending();
        for part in kept_parts(avail.get(..body).unwrap_or(&[]), ranges) {
            out.extend_from_slice(part);
        }
        let kept = out.pending().saturating_sub(start);
        match recode {
            Recode::Enchunk => frame_tail_as_chunk(out, kept),
            Recode::Keep => hold_last_chunk(out, kept, decoder.last_chunk_bytes(), held),
            Recode::Dechunk => {}
        }
    }
    Ok(body)
}

/// A chunked body forwarded as it came: of the `kept` newest pending
/// bytes of `out` (this read's), with the bytes `held` back before them,
/// the last `tail` (the ones that may start the last chunk,
/// [`BodyDecoder::last_chunk_bytes`]: a zero chunk-size line, the
/// last-chunk line, the trailer section) move to `held`, and the rest goes
/// on in order. The last chunk reaches the client only once the body is
/// whole (its final CRLF came): cut before that, the client gets no `0`
/// line, so even a lenient one (Python's `http.client` takes `0\r\n` and a
/// close for the end) sees the cut (DESIGN.md §8). Costs nothing while
/// nothing is held and the read does not end in a zero size line.
#[inline]
pub(crate) fn hold_last_chunk(
    out: &mut WatermarkBuffer,
    kept: usize,
    tail: usize,
    held: &mut Vec<u8>,
) {
    if tail != 0 || !held.is_empty() {
        move_last_chunk_bytes(out, kept, tail, held);
    }
}

/// [`hold_last_chunk`] when something is held or to be held.
fn move_last_chunk_bytes(out: &mut WatermarkBuffer, kept: usize, tail: usize, held: &mut Vec<u8>) {
    let kept = kept.min(out.pending());
    let from = out.pending() - kept;
    held.extend_from_slice(out.as_slice().get(from..).unwrap_or(&[]));
    out.unfill(kept);
    let go = held.len().saturating_sub(tail);
    out.extend_from_slice(held.get(..go).unwrap_or(&[]));
    held.drain(..go);
}

/// Scans `bytes` with `decoder`: with `dechunk` its pieces (chunk data,
/// or a trailer line) go to `pieces`, else the bytes the forwarded body
/// leaves out go to `ranges` (both emptied first). Returns the bytes of
/// `bytes` that belong to the body.
///
/// Errors: invalid chunked framing (upstream side).
fn scan(
    bytes: &[u8],
    decoder: &mut BodyDecoder,
    dechunk: bool,
    ranges: &mut Vec<std::ops::Range<usize>>,
    pieces: &mut Vec<(std::ops::Range<usize>, bool)>,
) -> Result<usize> {
    ranges.clear();
    pieces.clear();
    if dechunk {
        decoder.scan_pieces(bytes, |r, t| pieces.push((r, t)))
    } else {
        decoder.scan_forward(bytes, ranges)
    }
    .map_err(|e| ProxyError::upstream(ErrorKind::Parse(e)))
}

/// Frames the `len` newest pending bytes of `out` as one chunk (RFC 9112
/// §7.1): its size line in front of them, CRLF behind. Nothing for 0
/// bytes (a chunk of 0 would be the last).
fn frame_tail_as_chunk(out: &mut WatermarkBuffer, len: usize) {
    if len == 0 {
        return;
    }
    let mut line = [0u8; MAX_SIZE_LINE];
    let size = chunk_size_line(len, &mut line);
    let l = size.len();
    // Room for the size line behind the data, then the data moves up.
    out.extend_from_slice(size);
    let tail = out.tail_mut(len + l);
    if tail.len() == len + l {
        tail.copy_within(..len, l);
        if let Some(front) = tail.get_mut(..l) {
            front.copy_from_slice(size);
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::{BodyScratch, Recode, keep_body, move_body_after_head};
    use crate::buffer::WatermarkBuffer;
    use crate::http::chunk_encode::LAST_CHUNK;
    use crate::http::{BodyDecoder, BodyKind};

    type Ranges = Vec<std::ops::Range<usize>>;
    type Pieces = Vec<(std::ops::Range<usize>, bool)>;

    /// Scratch over `ranges` and `pieces`, keeping no trailers.
    fn scratch<'a>(
        ranges: &'a mut Ranges,
        pieces: &'a mut Pieces,
        held: &'a mut Vec<u8>,
    ) -> BodyScratch<'a> {
        BodyScratch {
            ranges,
            pieces,
            trailers: None,
            held,
        }
    }

    /// The chunk data of the chunked body `wire`, which must be whole.
    fn data_of(wire: &[u8]) -> Vec<u8> {
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let mut data = Vec::new();
        let used = d
            .scan_pieces(wire, |r, trailer| {
                if !trailer {
                    data.extend_from_slice(&wire[r]);
                }
            })
            .unwrap();
        assert_eq!(used, wire.len(), "nothing after the last chunk");
        assert!(d.is_done(), "the last chunk came");
        data
    }

    #[test]
    fn a_body_delimited_by_close_becomes_chunks_split_at_every_byte() {
        let body: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
        for behind_head in [0, 1, 17, 300] {
            for split in behind_head..=body.len() {
                let mut out = WatermarkBuffer::new(vec![0; 64], 1 << 20, 1 << 19);
                let mut d = BodyDecoder::new(BodyKind::UntilClose);
                let (mut ranges, mut pieces, mut held) = (Vec::new(), Vec::new(), Vec::new());
                // The bytes that came behind the head, then two reads.
                let first = &body[..behind_head];
                let n = move_body_after_head(
                    first,
                    &mut out,
                    &mut d,
                    Recode::Enchunk,
                    scratch(&mut ranges, &mut pieces, &mut held),
                )
                .unwrap();
                assert_eq!(n, first.len());
                for read in [&body[behind_head..split], &body[split..]] {
                    out.extend_from_slice(read);
                    let n = keep_body(
                        &mut out,
                        read.len(),
                        &mut d,
                        Recode::Enchunk,
                        scratch(&mut ranges, &mut pieces, &mut held),
                    )
                    .unwrap();
                    assert_eq!(n, read.len());
                }
                out.extend_from_slice(LAST_CHUNK);
                assert_eq!(data_of(out.as_slice()), body, "{behind_head} {split}");
                assert_eq!(d.data_bytes(), body.len() as u64);
            }
        }
    }

    #[test]
    fn kept_as_it_came_without_recoding() {
        let mut out = WatermarkBuffer::new(vec![0; 64], 1 << 20, 1 << 19);
        let mut d = BodyDecoder::new(BodyKind::UntilClose);
        let (mut ranges, mut pieces, mut held) = (Vec::new(), Vec::new(), Vec::new());
        out.extend_from_slice(b"plain bytes");
        let n = keep_body(
            &mut out,
            11,
            &mut d,
            Recode::Keep,
            scratch(&mut ranges, &mut pieces, &mut held),
        )
        .unwrap();
        assert_eq!((n, out.as_slice()), (11, &b"plain bytes"[..]));
    }

    #[test]
    fn the_last_chunk_goes_on_only_once_the_body_is_whole_split_at_every_byte() {
        // What an HTTP/1.1 client gets of a chunked body kept as it came,
        // whatever the reads: the whole body (a size's leading zeros as one
        // zero) once it is whole, and before that never a `0` size line.
        let wire = b"5\r\nhello\r\n000a;x=1\r\n0123456789\r\n00;e\r\nX-Sum: 4\r\n\r\n";
        let forwarded = b"5\r\nhello\r\n0a;x=1\r\n0123456789\r\n0;e\r\nX-Sum: 4\r\n\r\n";
        let whole_before_last = b"5\r\nhello\r\n0a;x=1\r\n0123456789\r\n";
        for behind_head in [0, 3, 20, wire.len()] {
            for split in behind_head..=wire.len() {
                let mut out = WatermarkBuffer::new(vec![0; 64], 1 << 20, 1 << 19);
                let mut d = BodyDecoder::new(BodyKind::Chunked);
                let (mut ranges, mut pieces, mut held) = (Vec::new(), Vec::new(), Vec::new());
                move_body_after_head(
                    &wire[..behind_head],
                    &mut out,
                    &mut d,
                    Recode::Keep,
                    scratch(&mut ranges, &mut pieces, &mut held),
                )
                .unwrap();
                for (i, read) in [&wire[behind_head..split], &wire[split..]]
                    .iter()
                    .enumerate()
                {
                    out.extend_from_slice(read);
                    keep_body(
                        &mut out,
                        read.len(),
                        &mut d,
                        Recode::Keep,
                        scratch(&mut ranges, &mut pieces, &mut held),
                    )
                    .unwrap();
                    let sent = out.as_slice();
                    if i == 0 && split < wire.len() {
                        // Cut here: what went is a prefix of the body that
                        // never reaches its last chunk.
                        assert!(forwarded.starts_with(sent), "{behind_head} {split}");
                        assert!(
                            sent.len() <= whole_before_last.len(),
                            "{behind_head} {split}"
                        );
                    }
                }
                assert_eq!(out.as_slice(), &forwarded[..], "{behind_head} {split}");
                assert!(held.is_empty() && d.is_done());
            }
        }
    }
}

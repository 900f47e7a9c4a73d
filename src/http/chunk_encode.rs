//! Chunk encoding (RFC 9112 §7.1): the framing the proxy writes itself, for
//! a body that came without it — an HTTP/2 request body going to an
//! HTTP/1.1 upstream, a response the upstream delimited by closing going
//! to an HTTP/1.1 client.
//!
//! What it must not know: buffers, sockets; bodies it frames come to it
//! as lengths.

/// The last chunk and an empty trailer section: the end of a chunked body
/// (RFC 9112 §7.1).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Bytes of the longest chunk-size line [`chunk_size_line`] writes: 16
/// hex digits and CRLF (18).
pub const MAX_SIZE_LINE: usize = 18;

/// The chunk-size line of a chunk of `len` bytes (RFC 9112 §7.1:
/// lower-case hex, no leading zeros, no extension, CRLF), written into
/// `line`; returns the line's bytes.
pub fn chunk_size_line(len: usize, line: &mut [u8; MAX_SIZE_LINE]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut n = len;
    let mut i = digits.len();
    loop {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = HEX.get(n & 0xf).copied().unwrap_or(b'0');
        }
        n >>= 4;
        if n == 0 || i == 0 {
            break;
        }
    }
    let used = digits.get(i..).unwrap_or_default();
    let total = used.len() + 2;
    if let Some(dst) = line.get_mut(..used.len()) {
        dst.copy_from_slice(used);
    }
    if let Some(dst) = line.get_mut(used.len()..total) {
        dst.copy_from_slice(b"\r\n");
    }
    line.get(..total).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{LAST_CHUNK, MAX_SIZE_LINE, chunk_size_line};
    use crate::http::{BodyDecoder, BodyKind};

    #[test]
    fn chunk_size_lines_are_lower_case_hex() {
        let mut line = [0u8; MAX_SIZE_LINE];
        assert_eq!(chunk_size_line(0, &mut line), b"0\r\n");
        assert_eq!(chunk_size_line(255, &mut line), b"ff\r\n");
        assert_eq!(chunk_size_line(16_384, &mut line), b"4000\r\n");
        assert_eq!(
            chunk_size_line(usize::MAX, &mut line),
            b"ffffffffffffffff\r\n"
        );
    }

    #[test]
    fn what_it_writes_is_read_back_whole_by_the_chunked_decoder() {
        let mut body = Vec::new();
        let mut line = [0u8; MAX_SIZE_LINE];
        for len in [1usize, 15, 16, 4096, 70_000] {
            body.extend_from_slice(chunk_size_line(len, &mut line));
            body.extend(std::iter::repeat_n(b'x', len));
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(LAST_CHUNK);
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let mut ranges = Vec::new();
        let used = d.scan_forward(&body, &mut ranges).unwrap();
        assert_eq!(used, body.len());
        assert!(d.is_done());
        assert!(ranges.is_empty(), "no leading zeros to leave out");
        assert_eq!(d.data_bytes(), 1 + 15 + 16 + 4096 + 70_000);
    }
}

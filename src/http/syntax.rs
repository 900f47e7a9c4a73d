//! The token, list and field-value rules of RFC 9110 §5 that the codec
//! applies to bytes: `tchar` and `token` (§5.6.2), OWS (§5.6.3), list
//! elements (§5.6.1), and the cleaning of values the proxy writes (§5.5).
//!
//! Why it exists: [`super::Headers`], framing, chunk extensions and the
//! HTTP/2 sniff all need the same character rules; here they are byte
//! functions with no state.
//!
//! What it must not know: fields, heads, sockets.

/// A CTL other than HTAB: what [`push_sanitized`] replaces with SP.
fn is_ctl_but_htab(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// `tchar` (RFC 9110 §5.6.2), as a table of the 256 byte values (one
/// load per byte: every field name the proxy appends is checked).
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR.get(usize::from(b)).copied().unwrap_or(false)
}

/// [`is_tchar`] for every byte value, built at compile time.
static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

/// `token = 1*tchar` (RFC 9110 §5.6.2).
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// `bytes` without leading and trailing OWS (SP / HTAB, RFC 9110 §5.6.3).
pub(crate) fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i.saturating_add(1));
    bytes.get(start..end).unwrap_or_default()
}

/// The non-empty elements of a comma-separated list field value, without
/// OWS (RFC 9110 §5.6.1: a recipient ignores empty elements). Quoted strings
/// are not special: no list this codec reads needs commas inside quotes.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Appends `bytes` with every CTL except HTAB replaced by SP
/// (RFC 9110 §5.5: CR, LF and NUL MUST be rejected or replaced with SP).
pub(crate) fn push_sanitized(out: &mut Vec<u8>, bytes: &[u8]) {
    // Clean values (all of them on the hot path) are copied in one go.
    if !bytes.iter().any(|&b| is_ctl_but_htab(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    out.extend(
        bytes
            .iter()
            .map(|&b| if is_ctl_but_htab(b) { b' ' } else { b }),
    );
}

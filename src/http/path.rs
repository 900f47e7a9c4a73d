//! The path a route matches: an origin-form target's path normalized the
//! way a server behind the proxy may read it, so that `/%61dmin`,
//! `/./admin`, `/x/../admin` and `//admin` all match a route for `/admin`
//! (nginx normalizes its URI the same way before matching a `location`).
//! Sans-IO over bytes.
//!
//! The steps, in order:
//! 1. Every `%XX` (two hex digits) is decoded, `%2F` and `%2E` included: a
//!    server that decodes them sees the decoded path, and for matching the
//!    decoded form is the one that cannot be used to slip past a prefix
//!    (`/public%2F..%2Fadmin` is `/admin`). A `%` not followed by two hex
//!    digits stays as it is.
//! 2. Empty segments are dropped (`//` is `/`).
//! 3. Dot segments are removed (RFC 3986 §5.2.4): `.` goes, `..` takes the
//!    segment before it (never above the root); a path that ended in `/`,
//!    `/.` or `/..` keeps its final `/`.
//!
//! The query (from the first `?`) follows unchanged. Only the match uses
//! this form: the request goes upstream with its target as the client
//! sent it (as nginx's `proxy_pass` without a URI does). Letter case is
//! kept: prefixes match case-sensitively, as nginx's `location` does.
//!
//! What it must not know: routes, sockets.

/// True if `target`'s path (before any `?`) may change under
/// [`normalize`]: it has a `%`, an empty segment or a dot segment. The
/// common path has none, and costs one pass over its bytes.
pub fn needs_normalizing(target: &[u8]) -> bool {
    let path = path_of(target);
    if path.first() != Some(&b'/') {
        return false;
    }
    let mut seg_start = 0;
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'%' => return true,
            b'/' => {
                if is_dot_segment(path.get(seg_start..i).unwrap_or(&[]))
                    || (i > 0 && i == seg_start)
                {
                    return true;
                }
                seg_start = i + 1;
            }
            _ => {}
        }
    }
    is_dot_segment(path.get(seg_start..).unwrap_or(&[]))
}

/// Writes `target`'s normalized form (module doc) into `out` (cleared
/// first): the normalized path, then the query unchanged. A target that
/// is not origin-form (`*`, an authority) is copied as it is.
pub fn normalize(target: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let path = path_of(target);
    let query = target.get(path.len()..).unwrap_or(&[]);
    if path.first() != Some(&b'/') {
        out.extend_from_slice(target);
        return;
    }
    let decoded = percent_decode(path);
    // Segment bounds in `out`: where each kept segment starts.
    let mut starts: Vec<usize> = Vec::new();
    let mut trailing_slash = false;
    let segments = decoded.split(|&b| b == b'/').skip(1);
    for seg in segments {
        trailing_slash = false;
        match seg {
            b"" => trailing_slash = true,
            b"." => trailing_slash = true,
            b".." => {
                if let Some(start) = starts.pop() {
                    out.truncate(start);
                }
                trailing_slash = true;
            }
            _ => {
                starts.push(out.len());
                out.push(b'/');
                out.extend_from_slice(seg);
            }
        }
    }
    if trailing_slash || out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(query);
}

/// The path of an origin-form target: up to its first `?` (a `#` is
/// refused before routing).
fn path_of(target: &[u8]) -> &[u8] {
    match target.iter().position(|&b| b == b'?') {
        Some(q) => target.get(..q).unwrap_or(target),
        None => target,
    }
}

fn is_dot_segment(seg: &[u8]) -> bool {
    seg == b"." || seg == b".."
}

/// `%XX` decoded wherever XX are two hex digits; other bytes as they are.
fn percent_decode(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while let Some(&b) = path.get(i) {
        if b == b'%'
            && let (Some(h), Some(l)) = (
                path.get(i + 1).and_then(|&c| hex(c)),
                path.get(i + 2).and_then(|&c| hex(c)),
            )
        {
            out.push((h << 4) | l);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

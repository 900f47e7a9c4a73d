//! The bytes a scanned body leaves out (a chunk size's leading zeros,
//! `ChunkedScanner::scan_forward`'s ranges), taken out of a buffer in
//! place or skipped while copying it. Pure code over bytes; tested in
//! `http/tests/chunked_zeros.rs`.

/// Removes `runs` (sorted, disjoint ranges inside `bytes`) from `bytes`,
/// moving the bytes after each run forward; returns how many bytes were
/// removed (the last that many bytes of `bytes` are then left over).
pub fn remove_runs(bytes: &mut [u8], runs: &[std::ops::Range<usize>]) -> usize {
    let mut write = 0;
    let mut read = 0;
    for r in runs {
        let (start, end) = (r.start.min(bytes.len()), r.end.min(bytes.len()));
        if start < read {
            continue;
        }
        bytes.copy_within(read..start, write);
        write += start - read;
        read = end;
    }
    bytes.copy_within(read.., write);
    write += bytes.len() - read;
    bytes.len() - write
}

/// The parts of `bytes` outside `runs` (sorted, disjoint ranges inside
/// `bytes`), in order: what is forwarded when the bytes are copied.
pub fn kept_parts<'a>(
    bytes: &'a [u8],
    runs: &'a [std::ops::Range<usize>],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let starts = std::iter::once(0).chain(runs.iter().map(|r| r.end));
    let ends = runs
        .iter()
        .map(|r| r.start)
        .chain(std::iter::once(bytes.len()));
    starts
        .zip(ends)
        .filter_map(move |(a, b)| bytes.get(a..b))
        .filter(|p| !p.is_empty())
}

//! The HPACK tables (RFC 7541 §2.3): the static table of Appendix A and
//! the decoder's dynamic table, with its size rule (§4).
//!
//! Why it exists: an indexed field names an entry of one index space
//! (1..=61 static, 62.. dynamic, newest first); the dynamic table holds
//! the fields a peer asked to index, bounded by a size in bytes.
//!
//! What it must not know: the wire format of representations, frames.
//!
//! Invariant: the dynamic table's size (the sum of name + value + 32 per
//! entry, RFC 7541 §4.1) never exceeds its maximum; the storage of an
//! entry is one allocation, so the memory held is about the size.

use std::collections::VecDeque;

/// The static table (RFC 7541 Appendix A): index 1 is the first entry.
pub(crate) const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The number of static entries: dynamic indices start after it.
pub(crate) const STATIC_LEN: usize = STATIC.len();

/// The overhead of an entry in the size of a table (RFC 7541 §4.1), and
/// of a field line in a header list's size (RFC 9113 §6.5.2), in bytes.
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The size an entry with this name and value counts (RFC 7541 §4.1).
pub(crate) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len()
        .saturating_add(value.len())
        .saturating_add(ENTRY_OVERHEAD)
}

/// One dynamic entry: name and value in one allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    /// An entry holding copies of `name` and `value`.
    pub(crate) fn new(name: &[u8], value: &[u8]) -> Entry {
        let mut bytes = Vec::with_capacity(name.len().saturating_add(value.len()));
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        }
    }

    /// The name.
    pub(crate) fn name(&self) -> &[u8] {
        self.bytes.get(..self.name_len).unwrap_or_default()
    }

    /// The value.
    pub(crate) fn value(&self) -> &[u8] {
        self.bytes.get(self.name_len..).unwrap_or_default()
    }

    /// Its size in the table (RFC 7541 §4.1).
    pub(crate) fn size(&self) -> usize {
        self.bytes.len().saturating_add(ENTRY_OVERHEAD)
    }
}

/// The dynamic table (RFC 7541 §2.3.2, §4): newest entry first.
#[derive(Debug, Default)]
pub(crate) struct DynamicTable {
    entries: VecDeque<Entry>,
    /// The sum of the entries' sizes, in bytes.
    size: usize,
    /// The maximum size in bytes, set by the last size update (or the
    /// initial 4,096 of the setting).
    max_size: usize,
}

impl DynamicTable {
    /// An empty table with this maximum size.
    pub(crate) fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The current size in bytes (RFC 7541 §4.1).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The maximum size in bytes.
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry at dynamic index `i` (0 = newest).
    pub(crate) fn get(&self, i: usize) -> Option<&Entry> {
        self.entries.get(i)
    }

    /// A new maximum size: entries are evicted, oldest first, until the
    /// size fits (RFC 7541 §4.3).
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// Adds `entry` as the newest (RFC 7541 §4.4): the oldest entries are
    /// evicted until it fits; an entry larger than the maximum empties the
    /// table and is not added (not an error).
    pub(crate) fn insert(&mut self, entry: Entry) {
        let need = entry.size();
        if need > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size.saturating_sub(need));
        self.size = self.size.saturating_add(need);
        self.entries.push_front(entry);
    }

    /// Evicts the oldest entries until the size is at most `limit`.
    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some(old) = self.entries.pop_back() else {
                self.size = 0;
                break;
            };
            self.size = self.size.saturating_sub(old.size());
        }
        if self.entries.is_empty() {
            // Give the ring's storage back once empty.
            self.entries = VecDeque::new();
        }
    }
}

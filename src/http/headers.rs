//! [`Headers`]: the fields of one head, in arrival order (the token, list
//! and value rules they obey are in [`super::syntax`]).
//!
//! What it must not know: start lines, sockets, framing and hop-by-hop
//! policy.
//!
//! Invariants:
//! - fields keep arrival order and names the spelling they arrived with
//!   (RFC 9110 §5.3: order of same-name fields is meaningful); every lookup
//!   ignores ASCII case (RFC 9110 §5.1);
//! - every stored name is a `token` and no stored value holds a CTL other
//!   than HTAB, so encoding can never inject a line (RFC 9110 §5.5).

use std::fmt;

use super::error::ParseError;
use super::known::Known;
use super::syntax::{is_token, push_sanitized};

/// One field's position in the arena of [`Headers`]: byte offsets,
/// `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    name_start: usize,
    name_end: usize,
    value_start: usize,
    value_end: usize,
    /// The name's tag, from [`Known::of`] when the field was stored.
    known: Known,
    /// The arena holds this field as one line, `name: value\r\n`, from
    /// `name_start` to `value_end + 2`: encoding may copy it (and the
    /// lines next to it) as it is.
    line: bool,
}

impl Field {
    /// Where the field's line ends in the arena (meaningful if `line`).
    fn line_end(&self) -> usize {
        self.value_end.saturating_add(2)
    }
}

/// The header (or trailer) fields of one head, in arrival order.
///
/// Names keep the spelling they arrived with; every lookup compares names
/// ignoring ASCII case (RFC 9110 §5.1). Storage is one arena of bytes plus
/// one vector of offsets, so [`Headers::clear`] keeps both allocations for
/// the next head. A parsed head's field lines are copied into the arena in
/// one piece, and a field the proxy adds is written there as a line too, so
/// [`Headers::encode`] copies runs of unchanged lines at once. Removing a
/// field or growing a value in place leaves unreachable bytes in the arena
/// until the next `clear`.
///
/// Each field's name is recognised once, when it is stored (its `Known` tag, `http/known.rs`),
/// and a bit per known name records whether one is present: a lookup of a
/// name the proxy knows compares a byte per field, or nothing at all when
/// the bit is clear.
///
/// Equality compares the fields (names byte for byte, values, order), not
/// the arenas.
#[derive(Clone, Default)]
pub struct Headers {
    /// Names and values of all fields (names are tokens: ASCII), mostly
    /// as `name: value\r\n` lines.
    bytes: Vec<u8>,
    /// One entry per field, in arrival order.
    fields: Vec<Field>,
    /// [`Known::bit`] of every known name among `fields`: set if and only
    /// if at least one field has that tag.
    present: u32,
}

/// Which stored fields a lookup by name matches: by tag for a known name
/// (and none at all if its bit is clear), by comparing names otherwise.
#[derive(Clone, Copy)]
struct Lookup<'n> {
    name: &'n str,
    known: Known,
}

impl<'n> Lookup<'n> {
    fn new(name: &'n str) -> Self {
        Lookup {
            name,
            known: Known::of(name.as_bytes()),
        }
    }

    /// A lookup by tag alone (the codec's own lookups: no name to compare).
    fn tag(known: Known) -> Self {
        debug_assert!(known != Known::Other, "a tag lookup needs a known name");
        Lookup { name: "", known }
    }

    /// True if `f` is named like this lookup (ASCII case-insensitive,
    /// RFC 9110 §5.1). A known name's fields all carry its tag, and a field
    /// tagged with another known name cannot match an unknown one.
    fn matches(self, names: &[u8], f: &Field) -> bool {
        match self.known {
            Known::Other => f.known == Known::Other && is_named(names, f, self.name),
            k => f.known == k,
        }
    }
}

impl Headers {
    /// An empty set of fields; allocates nothing until the first append.
    pub fn new() -> Self {
        Headers::default()
    }

    /// Removes every field and keeps the storage for reuse.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
        self.present = 0;
    }

    /// Number of fields (a name that appears twice counts twice).
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True if there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Adds the field `name: value` after all others.
    ///
    /// `name` must be a `token` (RFC 9110 §5.1); a name that is not is
    /// dropped (and trips a `debug_assert!`): use [`Headers::try_append`] to
    /// see the error. In `value`, every CTL other than HTAB (CR, LF and NUL
    /// included) is replaced with SP, as RFC 9110 §5.5 lets a recipient do,
    /// so no value can inject a line.
    pub fn append(&mut self, name: &str, value: &[u8]) {
        let added = self.try_append(name, value);
        debug_assert!(added.is_ok(), "invalid field name {name:?}");
    }

    /// Like [`Headers::append`], but a `name` that is not a `token`
    /// (RFC 9110 §5.1) returns `Err(ParseError::Malformed)` and adds nothing.
    pub fn try_append(&mut self, name: &str, value: &[u8]) -> Result<(), ParseError> {
        if !is_token(name.as_bytes()) {
            return Err(ParseError::Malformed("invalid field name"));
        }
        self.push_line(name, &[value], Known::of(name.as_bytes()));
        Ok(())
    }

    /// [`Headers::append`] of a field the codec knows, spelled as
    /// [`Known::spelling`] (a token: nothing to check but the value).
    pub(crate) fn append_known(&mut self, known: Known, value: &[u8]) {
        debug_assert!(known != Known::Other, "append_known needs a known name");
        self.push_line(known.spelling(), &[value], known);
    }

    /// [`Headers::append_known`] of a value (in `parts`, written one after
    /// the other) the proxy made itself
    /// from bytes that cannot hold a CTL (an IP address, hex digits, a
    /// token, `1.1 ` and a pseudonym): written as it is, without the scan
    /// for CTLs (the forwarding fields and the request id of every request).
    pub(crate) fn append_known_made(&mut self, known: Known, parts: &[&[u8]]) {
        debug_assert!(known != Known::Other, "append_known needs a known name");
        debug_assert!(
            parts
                .iter()
                .all(|p| p.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))),
            "a made value with a CTL"
        );
        self.push_line_as(known.spelling(), parts, known, false);
    }

    /// Writes `name: value\r\n` at the end of the arena, the value from
    /// its `parts` (cleaned, RFC 9110 §5.5), and records the field.
    fn push_line(&mut self, name: &str, parts: &[&[u8]], known: Known) {
        self.push_line_as(name, parts, known, true);
    }

    /// [`Headers::push_line`], the value's CTLs replaced only if `clean`.
    fn push_line_as(&mut self, name: &str, parts: &[&[u8]], known: Known, clean: bool) {
        let value_len: usize = parts.iter().map(|p| p.len()).sum();
        self.bytes.reserve(name.len() + value_len + 4);
        let name_start = self.bytes.len();
        self.bytes.extend_from_slice(name.as_bytes());
        let name_end = self.bytes.len();
        self.bytes.extend_from_slice(b": ");
        let value_start = self.bytes.len();
        for part in parts {
            if clean {
                push_sanitized(&mut self.bytes, part);
            } else {
                self.bytes.extend_from_slice(part);
            }
        }
        let value_end = self.bytes.len();
        self.bytes.extend_from_slice(b"\r\n");
        self.push_field(Field {
            name_start,
            name_end,
            value_start,
            value_end,
            known,
            line: true,
        });
    }

    /// Replaces every field with those httparse found in `head` (the bytes
    /// it parsed), in their order, keeping this storage's capacity. httparse
    /// validated them: token names, values of HTAB / SP / VCHAR / obs-text,
    /// no obs-fold. The field lines are copied in one piece; a field whose
    /// line is not exactly `name: value\r\n` (OWS around the value, a bare
    /// LF) is marked so and encoded afresh.
    pub(crate) fn refill(&mut self, parsed: &[httparse::Header<'_>], head: &[u8]) {
        self.clear();
        if !self.refill_in_one_piece(parsed, head) {
            // The slices were not where expected (never with httparse):
            // copy field by field.
            self.clear();
            for h in parsed {
                let name_start = self.bytes.len();
                self.bytes.extend_from_slice(h.name.as_bytes());
                let name_end = self.bytes.len();
                self.bytes.extend_from_slice(h.value);
                self.push_field(Field {
                    name_start,
                    name_end,
                    value_start: name_end,
                    value_end: self.bytes.len(),
                    known: Known::of(h.name.as_bytes()),
                    line: false,
                });
            }
        }
    }

    /// [`Headers::refill`] by copying the bytes from the first field's
    /// name to the end of the last field's line; false (with fields maybe
    /// half recorded) if a slice is not inside `head`.
    fn refill_in_one_piece(&mut self, parsed: &[httparse::Header<'_>], head: &[u8]) -> bool {
        let (Some(first), Some(last)) = (parsed.first(), parsed.last()) else {
            return true;
        };
        let base = head.as_ptr() as usize;
        // Offset of `part` in `head`, if it lies inside.
        let offset = |part: &[u8]| {
            let at = (part.as_ptr() as usize).checked_sub(base)?;
            (at.checked_add(part.len())? <= head.len()).then_some(at)
        };
        let (Some(start), Some(last_value)) = (offset(first.name.as_bytes()), offset(last.value))
        else {
            return false;
        };
        let end = last_value
            .saturating_add(last.value.len())
            .saturating_add(2)
            .min(head.len());
        let Some(region) = head.get(start..end) else {
            return false;
        };
        self.bytes.extend_from_slice(region);
        for h in parsed {
            let (Some(name_at), Some(value_at)) = (offset(h.name.as_bytes()), offset(h.value))
            else {
                return false;
            };
            let (Some(name_start), Some(value_start)) =
                (name_at.checked_sub(start), value_at.checked_sub(start))
            else {
                return false;
            };
            let name_end = name_start.saturating_add(h.name.len());
            let value_end = value_start.saturating_add(h.value.len());
            if name_end > value_start || value_end > self.bytes.len() {
                return false;
            }
            let at = |i: usize| self.bytes.get(i).copied();
            let line = value_start == name_end.saturating_add(2)
                && at(name_end) == Some(b':')
                && at(name_end.saturating_add(1)) == Some(b' ')
                && at(value_end) == Some(b'\r')
                && at(value_end.saturating_add(1)) == Some(b'\n');
            self.push_field(Field {
                name_start,
                name_end,
                value_start,
                value_end,
                known: Known::of(h.name.as_bytes()),
                line,
            });
        }
        true
    }

    /// Records a field whose bytes are in the arena.
    fn push_field(&mut self, field: Field) {
        self.present |= field.known.bit();
        self.fields.push(field);
    }

    /// The fields a lookup can match: none if it names a known field whose
    /// bit is clear, else all of them.
    fn candidates(&self, lookup: Lookup<'_>) -> &[Field] {
        let bit = lookup.known.bit();
        if bit != 0 && self.present & bit == 0 {
            &[]
        } else {
            &self.fields
        }
    }

    /// Recomputes the presence bits from the fields (after a removal).
    fn recount(&mut self) {
        self.present = self.fields.iter().fold(0, |m, f| m | f.known.bit());
    }

    /// True if a field tagged `known` is present (one test of a bit).
    pub(crate) fn has_known(&self, known: Known) -> bool {
        self.present & known.bit() != 0
    }

    /// True if `f` holds for the name bytes (as they arrived) of a field
    /// whose name is not one of the [`Known`] names: a scan that neither
    /// checks UTF-8 nor looks at the known fields.
    pub(crate) fn any_other_name(&self, f: impl Fn(&[u8]) -> bool) -> bool {
        self.fields.iter().any(|field| {
            field.known == Known::Other
                && f(self
                    .bytes
                    .get(field.name_start..field.name_end)
                    .unwrap_or_default())
        })
    }

    /// Removes every field whose tag's bit is in `mask` (an OR of
    /// [`Known::bit`]s); the others keep their order.
    pub(crate) fn remove_known_set(&mut self, mask: u32) {
        if self.present & mask == 0 {
            return;
        }
        self.fields.retain(|f| f.known.bit() & mask == 0);
        self.present &= !mask;
    }

    /// Keeps only the fields for which `f(tag, name, value)` is true, like
    /// [`Headers::retain`], passing each field's [`Known`] tag so the caller
    /// need not compare names.
    pub(crate) fn retain_tagged(&mut self, mut f: impl FnMut(Known, &str, &[u8]) -> bool) {
        let bytes = &self.bytes;
        self.fields.retain(|field| {
            f(
                field.known,
                field_name(bytes, field),
                field_value(bytes, field),
            )
        });
        self.recount();
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.first(Lookup::new(name))
    }

    /// [`Headers::get`] for a name the codec knows, without comparing names.
    pub(crate) fn get_known(&self, known: Known) -> Option<&[u8]> {
        self.first(Lookup::tag(known))
    }

    fn first(&self, lookup: Lookup<'_>) -> Option<&[u8]> {
        let bytes = &self.bytes;
        self.candidates(lookup)
            .iter()
            .find(|f| lookup.matches(bytes, f))
            .map(|f| field_value(bytes, f))
    }

    /// The values of every field named `name` (ASCII case-insensitive), in
    /// arrival order: together they form one list (RFC 9110 §5.3).
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.all(Lookup::new(name))
    }

    /// [`Headers::get_all`] for a name the codec knows.
    pub(crate) fn get_all_known(&self, known: Known) -> impl Iterator<Item = &[u8]> {
        self.all(Lookup::tag(known))
    }

    fn all<'a>(&'a self, lookup: Lookup<'a>) -> impl Iterator<Item = &'a [u8]> + 'a {
        let bytes = &self.bytes;
        self.candidates(lookup)
            .iter()
            .filter(move |f| lookup.matches(bytes, f))
            .map(|f| field_value(bytes, f))
    }

    /// True if a field named `name` (ASCII case-insensitive) is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Removes every field named `name` (ASCII case-insensitive); returns how
    /// many were removed. The other fields keep their order.
    pub fn remove_all(&mut self, name: &str) -> usize {
        self.remove(Lookup::new(name))
    }

    /// [`Headers::remove_all`] for a name the codec knows.
    pub(crate) fn remove_known(&mut self, known: Known) -> usize {
        self.remove(Lookup::tag(known))
    }

    fn remove(&mut self, lookup: Lookup<'_>) -> usize {
        if self.candidates(lookup).is_empty() {
            return 0;
        }
        let before = self.fields.len();
        let bytes = &self.bytes;
        self.fields.retain(|f| !lookup.matches(bytes, f));
        self.present &= !lookup.known.bit();
        before.saturating_sub(self.fields.len())
    }

    /// Keeps only the fields for which `f(name, value)` is true; the kept
    /// fields keep their order.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &[u8]) -> bool) {
        let bytes = &self.bytes;
        self.fields
            .retain(|field| f(field_name(bytes, field), field_value(bytes, field)));
        self.recount();
    }

    /// `(name, value)` of every field in arrival order, names as they arrived.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields
            .iter()
            .map(|f| (field_name(&self.bytes, f), field_value(&self.bytes, f)))
    }

    /// Appends `suffix` to the value of the *last* field named `name` (ASCII
    /// case-insensitive); the field keeps its position. Returns false (and
    /// changes nothing) if there is no such field. `suffix` is cleaned like a
    /// value given to [`Headers::append`] (RFC 9110 §5.5).
    pub fn append_to_last(&mut self, name: &str, suffix: &[u8]) -> bool {
        self.append_to_last_of(Lookup::new(name), suffix)
    }

    /// [`Headers::append_to_last`] for a name the codec knows.
    pub(crate) fn append_to_last_known(&mut self, known: Known, suffix: &[u8]) -> bool {
        self.append_to_last_of(Lookup::tag(known), suffix)
    }

    fn append_to_last_of(&mut self, lookup: Lookup<'_>, suffix: &[u8]) -> bool {
        if self.candidates(lookup).is_empty() {
            return false;
        }
        let bytes = &self.bytes;
        let Some(field) = self
            .fields
            .iter_mut()
            .rev()
            .find(|f| lookup.matches(bytes, f))
        else {
            return false;
        };
        let (start, end) = (field.value_start, field.value_end);
        if start > end || end > self.bytes.len() {
            debug_assert!(false, "field value out of its arena");
            return false;
        }
        if end != self.bytes.len() {
            // Not the last bytes in the arena: move the value to the end so
            // it can grow; the old bytes stay unreachable until `clear`,
            // and the field is no longer one line there.
            let new_start = self.bytes.len();
            self.bytes.extend_from_within(start..end);
            field.value_start = new_start;
            field.line = false;
        }
        push_sanitized(&mut self.bytes, suffix);
        field.value_end = self.bytes.len();
        true
    }

    /// Writes every field as `Name: value\r\n`, in arrival order, names as
    /// they arrived (RFC 9112 §5).
    ///
    /// Fields that are lines in the arena, one after the other, are copied
    /// in one piece (a parsed head with its hop-by-hop fields removed is
    /// two or three copies); the others are written part by part.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let bytes = &self.bytes;
        // The run of adjacent lines not yet written: `start..end`.
        let mut run = 0..0;
        for f in &self.fields {
            if f.line && run.end == f.name_start && !run.is_empty() {
                run.end = f.line_end();
                continue;
            }
            out.extend_from_slice(bytes.get(run.clone()).unwrap_or_default());
            if f.line {
                run = f.name_start..f.line_end();
            } else {
                run = 0..0;
                out.extend_from_slice(bytes.get(f.name_start..f.name_end).unwrap_or_default());
                out.extend_from_slice(b": ");
                out.extend_from_slice(field_value(bytes, f));
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(bytes.get(run).unwrap_or_default());
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Headers {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (n, String::from_utf8_lossy(v).into_owned())),
            )
            .finish()
    }
}

/// True if `f` is named `name` (ASCII case-insensitive, RFC 9110 §5.1).
/// The lengths are compared first, from the offsets alone: on the hot path
/// most fields differ in length from the name looked for.
fn is_named(bytes: &[u8], f: &Field, name: &str) -> bool {
    f.name_end.wrapping_sub(f.name_start) == name.len()
        && bytes
            .get(f.name_start..f.name_end)
            .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
}

/// The name of `f`; "" if the offsets are broken (they never are; names
/// are tokens, so ASCII).
fn field_name<'a>(bytes: &'a [u8], f: &Field) -> &'a str {
    bytes
        .get(f.name_start..f.name_end)
        .and_then(|n| std::str::from_utf8(n).ok())
        .unwrap_or_default()
}

/// The value of `f`; empty if the offsets are broken (they never are).
fn field_value<'a>(bytes: &'a [u8], f: &Field) -> &'a [u8] {
    bytes.get(f.value_start..f.value_end).unwrap_or_default()
}

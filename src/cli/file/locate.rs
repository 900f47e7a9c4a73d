//! Where things are in a config file's text: the line of a key path
//! (`upstream[0].health_check.rise`) and the key path at a byte offset
//! (where serde's error points), from the `toml` crate's spanned parse
//! of the document (`toml::de::DeTable`: every key and value with its
//! byte range).
//!
//! Key paths are the file's names joined as TOML writes them: `.` between
//! keys, `[i]` for the i-th element of an array (of tables or of values),
//! 0-based in document order.
//!
//! What it must not know: what the keys mean, `Config`.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'p> {
    /// A key of a table.
    Key(&'p str),
    /// The element at this index of an array.
    Index(usize),
}

/// Splits a key path into its steps (`upstream[0].servers[1]` is
/// `upstream`, `0`, `servers`, `1`). A key with `.` or `[` in it cannot
/// be named; no key of sluice's tables has one.
pub fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some((n, after)) = rest.split_once(']') {
            if let Ok(i) = n.parse() {
                out.push(Step::Index(i));
            }
            rest = after.trim_start_matches('[');
        }
    }
    out
}

/// A config file's text with its spanned parse.
pub struct Doc<'t> {
    text: &'t str,
    root: Spanned<DeTable<'t>>,
}

impl<'t> Doc<'t> {
    /// Parses `text` as a TOML document.
    ///
    /// Errors: the `toml` crate's syntax error (with its span).
    pub fn parse(text: &'t str) -> Result<Doc<'t>, toml::de::Error> {
        let root = DeTable::parse(text)?;
        Ok(Doc { text, root })
    }

    /// The top-level table.
    pub fn root(&self) -> &DeTable<'t> {
        self.root.get_ref()
    }

    /// The 1-based line of byte offset `at` of the text.
    pub fn line_at(&self, at: usize) -> usize {
        line_at(self.text, at)
    }

    /// Where key path `path` is: the byte range of its last key (for a
    /// key) or element (for an index; a `[[table]]` element's is its
    /// header), and whether the whole path was found. When only a prefix
    /// is in the file (a key left at its default), the range is the
    /// deepest one found; `None` when not even the first step is.
    pub fn find(&self, path: &str) -> Option<(Range<usize>, bool)> {
        let steps = steps(path);
        let mut value: &DeValue<'t> = &DeValue::Boolean(false);
        let mut table = Some(self.root());
        let mut found: Option<Range<usize>> = None;
        for (n, step) in steps.iter().enumerate() {
            let next = match (step, table) {
                (Step::Key(k), Some(t)) => t.get_key_value(*k).map(|(key, v)| (key.span(), v)),
                (Step::Index(i), None) => match value {
                    DeValue::Array(a) => a.get(*i).map(|v| (v.span(), v)),
                    _ => None,
                },
                _ => None,
            };
            let Some((span, v)) = next else {
                return found.map(|s| (s, false));
            };
            found = Some(span);
            value = v.get_ref();
            table = value.as_table();
            if n + 1 == steps.len() {
                return found.map(|s| (s, true));
            }
        }
        found.map(|s| (s, true))
    }

    /// The 1-based line of key path `path`: see [`Doc::find`].
    pub fn line_of(&self, path: &str) -> Option<usize> {
        self.find(path).map(|(span, _)| self.line_at(span.start))
    }

    /// The key path of the deepest key whose key or value holds byte
    /// offset `at` (where a serde error points); `None` outside every key.
    pub fn path_at(&self, at: usize) -> Option<String> {
        let mut path = String::new();
        in_table(self.root(), at, &mut path).then_some(path)
    }
}

/// The 1-based line of byte offset `at` of `text`.
pub fn line_at(text: &str, at: usize) -> usize {
    let end = at.min(text.len());
    text.as_bytes()
        .get(..end)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        + 1
}

/// Searches `t`'s entries for offset `at`, appending the keys of the path
/// to `path`; true when found.
fn in_table(t: &DeTable<'_>, at: usize, path: &mut String) -> bool {
    let len = path.len();
    for (k, v) in t.iter() {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k.get_ref());
        if k.span().contains(&at) {
            return true;
        }
        let holds = v.span().contains(&at);
        // A `[table]`'s or `[[table]]`'s span is its header alone: its
        // keys lie after it, so look inside whatever the span says.
        if in_value(v.get_ref(), at, path) || holds {
            return true;
        }
        path.truncate(len);
    }
    false
}

/// Searches a value (a table's or an array's elements) for offset `at`.
fn in_value(v: &DeValue<'_>, at: usize, path: &mut String) -> bool {
    match v {
        DeValue::Table(t) => in_table(t, at, path),
        DeValue::Array(a) => {
            let len = path.len();
            for (i, item) in a.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                let holds = item.span().contains(&at);
                if in_value(item.get_ref(), at, path) || holds {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "listen = \"127.0.0.1:1\"\n\
                        \n\
                        [[upstream]]\n\
                        name = \"app\"\n\
                        servers = [\n  \"127.0.0.1:1\",\n  \"127.0.0.1:2\",\n]\n\
                        [upstream.health_check]\n\
                        path = \"/h\"\n\
                        rise = 0\n\
                        \n\
                        [[route]]\n\
                        upstream = \"app\"\n";

    #[test]
    fn steps_split_keys_and_indexes() {
        assert_eq!(
            steps("upstream[0].servers[1]"),
            [
                Step::Key("upstream"),
                Step::Index(0),
                Step::Key("servers"),
                Step::Index(1)
            ]
        );
        assert_eq!(steps("listen"), [Step::Key("listen")]);
    }

    #[test]
    fn a_key_path_has_the_line_of_its_key_or_element() {
        let doc = Doc::parse(TEXT).unwrap();
        assert_eq!(doc.line_of("listen"), Some(1));
        assert_eq!(doc.line_of("upstream[0]"), Some(3));
        assert_eq!(doc.line_of("upstream[0].name"), Some(4));
        assert_eq!(doc.line_of("upstream[0].servers[1]"), Some(7));
        assert_eq!(doc.line_of("upstream[0].health_check.rise"), Some(11));
        assert_eq!(doc.line_of("route[0].upstream"), Some(14));
        // Absent: the deepest key found.
        assert_eq!(
            doc.find("upstream[0].health_check.fall").map(|f| f.1),
            Some(false)
        );
        assert_eq!(doc.line_of("upstream[0].health_check.fall"), Some(9));
        assert_eq!(doc.line_of("low_watermark"), None);
    }

    #[test]
    fn an_offset_has_the_path_of_its_key() {
        let doc = Doc::parse(TEXT).unwrap();
        let at = |needle: &str| TEXT.find(needle).unwrap();
        assert_eq!(
            doc.path_at(at("0\n\n[[route")).as_deref(),
            Some("upstream[0].health_check.rise")
        );
        assert_eq!(
            doc.path_at(at("\"127.0.0.1:2\"")).as_deref(),
            Some("upstream[0].servers[1]")
        );
        assert_eq!(
            doc.path_at(at("\"app\"\n")).as_deref(),
            Some("upstream[0].name")
        );
        assert_eq!(
            doc.path_at(at("upstream = \"app\"")).as_deref(),
            Some("route[0].upstream")
        );
        assert_eq!(doc.path_at(0).as_deref(), Some("listen"));
    }
}

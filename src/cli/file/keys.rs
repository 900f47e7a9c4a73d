//! The keys each table of the config file may hold, and the check that
//! finds the first key the file gives that none of them is, with a hint
//! that says what was probably meant.
//!
//! The lists are not written here: each is the field list serde's derive
//! declares for the table's struct (`Config`, `GroupSpec`, `HealthCheck`,
//! `RouteSpec`, …), read by asking the struct to deserialize itself from
//! [`FieldNames`]. A new knob is known here the day it is declared.
//!
//! The hints, in order:
//! - a top-level key found inside a table (`admin = …` written after a
//!   `[[route]]` header): TOML put it in that table; top-level keys go
//!   before the first table;
//! - `upstream = …` inside `[[upstream]]` (or beside it, which TOML calls
//!   a duplicate key): the two forms of `upstream`, and which to keep;
//! - a known key of the same table within a small edit distance: "did you
//!   mean `max_fails`?" (Damerau–Levenshtein from `strsim`, as clap's own
//!   suggestions; HAProxy suggests the nearest keyword the same way);
//! - a key of another table (`rise` directly in `[[upstream]]`): the table
//!   it belongs to.
//!
//! A key that holds one table (`health_check`, `respond`, `rate_limit`)
//! given an array is reported here too: serde would read the array as
//! the table's fields in order.
//!
//! What it must not know: what the keys mean beyond their names, values.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::de::{DeTable, DeValue};

use sluice::{
    CertificateSpec, Config, GroupSpec, HealthCheck, RateLimitSpec, RespondSpec, RouteSpec,
};

use super::locate::Doc;

/// The keys of a server written as an inline table (`{ address, weight,
/// backup }`); `ServerSpec`'s `Deserialize` is written by hand, so its
/// list is too.
const SERVER_KEYS: &[&str] = &["address", "weight", "backup"];

/// A key the file gives that its table does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// Its key path (`route[0].admin`).
    pub path: String,
    /// Byte offset of the key in the text.
    pub at: usize,
    /// What is wrong, with the hint.
    pub reason: String,
}

/// The first key (in the text's order) that its table does not have, if
/// any. Tables whose keys are free (header maps) are not looked into.
pub fn first_unknown(doc: &Doc<'_>) -> Option<Unknown> {
    let mut found: Vec<Found> = Vec::new();
    walk(doc.root(), &mut Vec::new(), &mut found);
    let first = found.into_iter().min_by_key(|f| f.at)?;
    Some(Unknown {
        reason: hint(&first, doc),
        path: first.path,
        at: first.at,
    })
}

/// The message for `upstream = …` beside `[[upstream]]` tables (which
/// TOML reports as a duplicate key at the second one), or `None` when the
/// duplicate key at byte offset `at` of `text` is another one.
pub fn upstream_forms(text: &str, at: usize) -> Option<&'static str> {
    let key_is_upstream = text.get(at..).is_some_and(|r| r.starts_with("upstream"));
    let has_tables = text
        .lines()
        .any(|l| l.trim_start().starts_with("[[upstream]]"));
    (key_is_upstream && has_tables).then_some(UPSTREAM_FORMS)
}

/// Why the two forms of `upstream` cannot be mixed, and which to keep.
const UPSTREAM_FORMS: &str = "`upstream = \"ADDR\"` (or an array of addresses) and \
     `[[upstream]]` tables are two forms of the same key, and a file gives one of them: \
     keep the `[[upstream]]` tables (groups with a name, balancing and health checks) and \
     move the addresses into a group's `servers = [...]`, or keep `upstream = [...]` (one \
     group named \"default\") and drop the tables";

/// One unknown key as found by [`walk`].
struct Found {
    path: String,
    at: usize,
    key: String,
    /// The table it is in: its shape and where that table starts.
    table: Table,
    table_at: usize,
    /// The key is known but holds one table (`health_check`, `respond`,
    /// `rate_limit`) and the file gives it an array: serde would read the
    /// array as the table's fields in order (`health_check = []` turned
    /// checks on with every default).
    array_for: Option<Table>,
}

/// The tables of the file whose keys are fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Top,
    Upstream,
    HealthCheck,
    Server,
    Route,
    Respond,
    RateLimit,
    Certificate,
}

impl Table {
    /// Every table, for "it is a key of …".
    const ALL: [Table; 8] = [
        Table::Top,
        Table::Upstream,
        Table::HealthCheck,
        Table::Server,
        Table::Route,
        Table::Respond,
        Table::RateLimit,
        Table::Certificate,
    ];

    /// The table at key path `steps` (keys, with `None` for an index).
    fn at(steps: &[Option<&str>]) -> Option<Table> {
        Some(match steps {
            [] => Table::Top,
            [Some("upstream"), None] => Table::Upstream,
            [Some("upstream"), None, Some("health_check")] => Table::HealthCheck,
            [Some("upstream"), None, Some("servers"), None] => Table::Server,
            [Some("route"), None] => Table::Route,
            [Some("route"), None, Some("respond")] => Table::Respond,
            [Some("route"), None, Some("rate_limit")] => Table::RateLimit,
            [Some("certificate"), None] => Table::Certificate,
            _ => return None,
        })
    }

    /// Its keys, as serde declares them.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Table::Top => fields::<Config>(),
            Table::Upstream => fields::<GroupSpec>(),
            Table::HealthCheck => fields::<HealthCheck>(),
            Table::Server => SERVER_KEYS,
            Table::Route => fields::<RouteSpec>(),
            Table::Respond => fields::<RespondSpec>(),
            Table::RateLimit => fields::<RateLimitSpec>(),
            Table::Certificate => fields::<CertificateSpec>(),
        }
    }

    /// How the table is written in the file.
    fn name(self) -> &'static str {
        match self {
            Table::Top => "the top level",
            Table::Upstream => "[[upstream]]",
            Table::HealthCheck => "[upstream.health_check]",
            Table::Server => "a server's inline table",
            Table::Route => "[[route]]",
            Table::Respond => "a route's respond table",
            Table::RateLimit => "a route's rate_limit table",
            Table::Certificate => "[[certificate]]",
        }
    }
}

/// Collects every key of `t` (at key path `steps`) and of the tables
/// inside it that its table does not have.
fn walk<'a>(t: &'a DeTable<'a>, steps: &mut Vec<Step<'a>>, found: &mut Vec<Found>) {
    let shape: Vec<Option<&str>> = steps.iter().map(|s| s.key).collect();
    let table = Table::at(&shape);
    let table_at = steps.last().map_or(0, |s| s.at);
    for (k, v) in t.iter() {
        let key: &str = k.get_ref();
        // An unknown key (None), or a one-table key given an array.
        let wrong = table.and_then(|table| {
            if !table.keys().contains(&key) {
                return Some((table, None));
            }
            let DeValue::Array(_) = v.get_ref() else {
                return None;
            };
            Table::at(&[shape.as_slice(), &[Some(key)]].concat())
                .filter(|one| matches!(one, Table::HealthCheck | Table::Respond | Table::RateLimit))
                .map(|one| (table, Some(one)))
        });
        if let Some((table, array_for)) = wrong {
            found.push(Found {
                path: path_of(steps, key),
                at: k.span().start,
                key: key.to_string(),
                table,
                table_at,
                array_for,
            });
            continue;
        }
        steps.push(Step {
            key: Some(key),
            text: key.to_string(),
            at: k.span().start,
        });
        inside(v.get_ref(), steps, found);
        steps.pop();
    }
}

/// Walks the tables inside a value.
fn inside<'a>(v: &'a DeValue<'a>, steps: &mut Vec<Step<'a>>, found: &mut Vec<Found>) {
    match v {
        DeValue::Table(t) => walk(t, steps, found),
        DeValue::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                steps.push(Step {
                    key: None,
                    text: format!("[{i}]"),
                    at: item.span().start,
                });
                inside(item.get_ref(), steps, found);
                steps.pop();
            }
        }
        _ => {}
    }
}

/// One step of the path [`walk`] is at.
struct Step<'a> {
    /// The key, or `None` for an array index.
    key: Option<&'a str>,
    /// How it is written in a key path (`servers`, `[1]`).
    text: String,
    /// Where it starts in the text (a `[[table]]` element: its header).
    at: usize,
}

/// The key path of `key` inside the table at `steps`.
fn path_of(steps: &[Step<'_>], key: &str) -> String {
    let mut p = String::new();
    for s in steps {
        if s.key.is_some() && !p.is_empty() {
            p.push('.');
        }
        p.push_str(&s.text);
    }
    if !p.is_empty() {
        p.push('.');
    }
    p.push_str(key);
    p
}

/// nginx directives written as keys, and what sluice calls them
/// (docs/configuration.md's nginx column), for a file written by someone
/// who knows nginx's names.
const NGINX: [(&str, &str); 22] = [
    (
        "client_max_body_size",
        "`max_body_size` (bytes: 1m is 1048576)",
    ),
    ("worker_processes", "`workers`"),
    ("worker_connections", "`max_connections`"),
    ("ssl_certificate", "`cert` in a [[certificate]] table"),
    ("ssl_certificate_key", "`key` in a [[certificate]] table"),
    ("ssl_protocols", "`tls_min_version` (\"1.2\" or \"1.3\")"),
    ("proxy_connect_timeout", "`upstream_connect_timeout`"),
    ("proxy_read_timeout", "`upstream_read_timeout`"),
    ("proxy_send_timeout", "`upstream_write_timeout`"),
    ("client_header_timeout", "`request_head_timeout`"),
    ("send_timeout", "`client_send_timeout`"),
    ("keepalive_requests", "`max_requests_per_connection`"),
    ("large_client_header_buffers", "`max_head_size`"),
    ("proxy_next_upstream_tries", "`max_retries`"),
    ("set_real_ip_from", "`trusted_proxies`"),
    ("pid", "`pid_file`"),
    (
        "error_log",
        "standard error, at the level of RUST_LOG (not a key)",
    ),
    ("server_name", "`host` in a [[route]] table"),
    (
        "proxy_pass",
        "`upstream` in a [[route]] table (a group's name)",
    ),
    ("limit_req", "`rate_limit` in a [[route]] table"),
    (
        "proxy_set_header",
        "`set_request_headers` in a [[route]] table",
    ),
    ("add_header", "`add_response_headers` in a [[route]] table"),
];

/// The reason for an unknown key, with the most useful hint.
fn hint(f: &Found, doc: &Doc<'_>) -> String {
    let key = f.key.as_str();
    let table = f.table.name();
    if let Some(one) = f.array_for {
        return format!(
            "`{key}` is one table ({}), not an array: write `{key} = {{ … }}` or leave it out",
            one.name()
        );
    }
    if f.table == Table::Upstream && key == "upstream" {
        return format!("`upstream = …` inside an [[upstream]] table: {UPSTREAM_FORMS}");
    }
    if f.table != Table::Top && Table::Top.keys().contains(&key) {
        return format!(
            "`{key}` is a top-level key, but it comes after the {table} header on line {} and \
             TOML puts every key after a table's header into that table; move `{key} = …` \
             above the first table (top-level keys go before the first [table] or [[table]])",
            doc.line_at(f.table_at)
        );
    }
    // The words of nginx and HAProxy for what a route matches on: before
    // "it is a key of [upstream.health_check]" (a check's `path`), which
    // would send the user the wrong way.
    if f.table == Table::Route && ["path", "prefix", "location", "uri"].contains(&key) {
        return format!(
            "unknown key `{key}` in {table}; did you mean `path_prefix`? (a route matches on \
             `host`, `path_prefix` and `scheme`)"
        );
    }
    if let Some(near) = nearest(key, f.table.keys()) {
        return format!("unknown key `{key}` in {table}; did you mean `{near}`?");
    }
    if let Some((_, here)) = NGINX.iter().find(|(nginx, _)| *nginx == key) {
        return format!("unknown key `{key}` in {table}: nginx's `{key}` is {here} here");
    }
    if let Some(other) = Table::ALL
        .into_iter()
        .find(|t| *t != f.table && t.keys().contains(&key))
    {
        return format!(
            "unknown key `{key}` in {table}: it is a key of {}",
            other.name()
        );
    }
    format!(
        "unknown key `{key}` in {table} (every key is listed in examples/sluice.toml and \
         docs/configuration.md)"
    )
}

/// The known key closest to `key`, if it is within a small edit distance:
/// 1 for keys of up to 4 characters, 2 up to 8, 3 beyond (a typo, a
/// missing or doubled letter, two letters swapped, `-` for `_`).
pub fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let folded = key.to_ascii_lowercase().replace('-', "_");
    let limit = match key.chars().count() {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&folded, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The field names `T`'s derived `Deserialize` declares (serde hands them
/// to `deserialize_struct`, where [`FieldNames`] keeps them).
fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that only records the field list of the struct asked of
/// it, then stops with an error.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

/// [`FieldNames`]'s error: it never gives a value.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names only")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_its_declared_keys() {
        let top = Table::Top.keys();
        for k in [
            "listen",
            "admin",
            "upstream",
            "route",
            "certificate",
            "max_connections",
        ] {
            assert!(top.contains(&k), "{k}");
        }
        assert!(Table::Upstream.keys().contains(&"max_fails"));
        assert!(Table::HealthCheck.keys().contains(&"rise"));
        assert!(Table::Route.keys().contains(&"path_prefix"));
        assert!(Table::Respond.keys().contains(&"status"));
        assert!(Table::RateLimit.keys().contains(&"burst"));
        assert!(Table::Certificate.keys().contains(&"key"));
    }

    #[test]
    fn nearest_suggests_within_a_small_distance() {
        let keys = Table::Upstream.keys();
        assert_eq!(nearest("max_fail", keys), Some("max_fails"));
        assert_eq!(nearest("max-fails", keys), Some("max_fails"));
        assert_eq!(nearest("blance", keys), Some("balance"));
        assert_eq!(nearest("fail_timout", keys), Some("fail_timeout"));
        assert_eq!(nearest("weight", keys), None);
        assert_eq!(nearest("xyz", keys), None);
        assert_eq!(nearest("rize", Table::HealthCheck.keys()), Some("rise"));
    }

    fn unknown(text: &str) -> Unknown {
        first_unknown(&Doc::parse(text).unwrap()).unwrap()
    }

    #[test]
    fn the_first_unknown_key_in_the_text_is_reported() {
        // (text, key path, a piece of the reason)
        let rows = [
            (
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:1\"]\nmax_fail = 2\nzzz = 1\n",
                "upstream[0].max_fail",
                "did you mean `max_fails`?",
            ),
            (
                "listen = \"127.0.0.1:1\"\n[[route]]\nupstream = \"a\"\nadmin = \"127.0.0.1:9\"\n",
                "route[0].admin",
                "top-level key, but it comes after the [[route]] header on line 2",
            ),
            (
                "[[upstream]]\nname = \"a\"\nservers = [{ address = \"127.0.0.1:1\", wieght = 2 }]\n",
                "upstream[0].servers[0].wieght",
                "did you mean `weight`?",
            ),
            // A key that holds one table, given an array (serde read it as
            // the fields in order: `health_check = []` was checks on).
            (
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:1\"]\nhealth_check = []\n",
                "upstream[0].health_check",
                "is one table ([upstream.health_check]), not an array",
            ),
            (
                "[[route]]\nupstream = \"a\"\nrate_limit = [10, 20]\n",
                "route[0].rate_limit",
                "not an array",
            ),
            (
                "[[route]]\nupstream = \"a\"\n[[route.respond]]\nstatus = 200\n",
                "route[0].respond",
                "not an array",
            ),
            (
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:1\"]\nexpect_status = 200\n",
                "upstream[0].expect_status",
                "a key of [upstream.health_check]",
            ),
        ];
        for (text, path, needle) in rows {
            let u = unknown(text);
            assert_eq!(u.path, path);
            assert!(u.reason.contains(needle), "{}", u.reason);
        }
    }

    #[test]
    fn free_tables_are_not_checked() {
        let text = "[[route]]\nupstream = \"a\"\nset_request_headers = { X-Any = \"1\" }\n";
        assert_eq!(first_unknown(&Doc::parse(text).unwrap()), None);
    }
}

//! The syntax of values, one rule each for the command line's parsers and
//! the config file's codecs: addresses, durations (a unit is always
//! required), worker counts, whole numbers.
//!
//! What it must not know: the knobs (`Config` names which rule each uses).

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Parses an address like `127.0.0.1:8080`.
pub(super) fn parse_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not an address like 127.0.0.1:8080"))
}

/// Parses `500ms`, `10s`, `2m`, `1h`. The unit is required, on the command
/// line as in the file: a bare `10` is refused, not read as seconds.
pub(super) fn parse_duration(v: &str) -> Result<Duration, String> {
    let bad = || format!("{v:?} is not a duration like 500ms, 10s or 2m (a unit is required)");
    let too_long = || format!("{v:?} is too long a duration (at most {} ms)", u64::MAX);
    let split = v.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let factor: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    // All digits: parsing fails only by overflow.
    let n: u64 = digits.parse().map_err(|_| too_long())?;
    n.checked_mul(factor)
        .map(Duration::from_millis)
        .ok_or_else(too_long)
}

/// Writes a duration the way [`parse_duration`] reads it back: whole
/// hours as `1h`, whole seconds as `60s`, anything else in milliseconds.
pub(super) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 3_600_000 && ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Parses a worker count: a whole number from 1, or `auto` (stored as 0:
/// one per CPU). A literal 0 is refused rather than read as `auto`.
pub(super) fn parse_workers(v: &str) -> Result<usize, String> {
    if v == "auto" {
        return Ok(0);
    }
    match v.parse() {
        Ok(0) | Err(_) => Err(format!(
            "{v:?} is not a number of workers (1, 2, … or \"auto\")"
        )),
        Ok(n) => Ok(n),
    }
}

/// Parses a whole number (a size or a count).
pub(super) fn whole<T: FromStr>(v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

/// Addresses in the file: one string, or an array of them (`listen`,
/// `listen_tls`); written back as a string when there is one.
pub(super) mod addrs {
    use std::net::SocketAddr;

    use serde::de::{Deserialize, Deserializer, Error};
    use serde::ser::{Serialize, Serializer};

    pub fn serialize<S: Serializer>(a: &[SocketAddr], s: S) -> Result<S::Ok, S::Error> {
        match a {
            [one] => s.collect_str(one),
            many => many
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SocketAddr>, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        let v = OneOrMany::deserialize(d).map_err(|_| {
            D::Error::custom(
                "expected an address string like \"127.0.0.1:8080\" or an array of them",
            )
        })?;
        let list = match v {
            OneOrMany::One(a) => vec![a],
            OneOrMany::Many(v) => v,
        };
        list.iter()
            .map(|a| super::parse_addr(a).map_err(D::Error::custom))
            .collect()
    }
}

/// A duration in the file: a string with a unit (`"500ms"`, `"10s"`).
pub(crate) mod duration {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string like \"500ms\", \"10s\" or \"2m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                super::parse_duration(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// An optional duration in the file (a route's own timeouts): absent, or
/// a string with a unit as [`duration`].
pub(crate) mod opt_duration {
    use std::time::Duration;

    use serde::de::Deserializer;
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration::deserialize(d).map(Some)
    }
}

/// A worker count in the file: an integer, or `"auto"` (stored as 0).
pub(super) mod workers {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(n: &usize, s: S) -> Result<S::Ok, S::Error> {
        match *n {
            0 => s.serialize_str("auto"),
            n => s.serialize_u64(n as u64),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of workers or \"auto\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
                super::parse_workers(&v.to_string()).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
                super::parse_workers(&v.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
                super::parse_workers(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_syntax() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(
            parse_duration("7")
                .unwrap_err()
                .contains("unit is required")
        );
        assert!(parse_duration("10 s").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\""));
        assert!(parse_duration("99999999999999999999h").is_err());
        assert_eq!(format_duration(Duration::from_secs(120)), "120s");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::from_secs(5400)), "5400s");
        assert_eq!(parse_workers("auto"), Ok(0));
        assert!(parse_workers("-2").is_err());
        assert!(parse_workers("0").is_err());
        assert_eq!(parse_workers("3"), Ok(3));
        assert_eq!(whole::<u32>("3"), Ok(3));
        assert!(whole::<usize>("-1").is_err());
    }
}

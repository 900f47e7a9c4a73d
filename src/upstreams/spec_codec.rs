//! The text forms of the upstream declarations (`spec.rs`): the string
//! syntax of a server (`"app.internal:8080 weight=3 backup"`, or an inline
//! table), of a hash key (`header:NAME`) and of a status range
//! (`"200-399"`), read with `FromStr` and written back with `Display`; the
//! serde codecs built on them; and the `upstream` field's short forms
//! (`groups_codec`: one address, or an array of them, for a group
//! `default`). A value that reads well here may still be refused by
//! `spec_check.rs` (a weight of 0, a route to an unknown group).
//!
//! What it must not know: sockets, the loop, how a server is chosen.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::spec::{DEFAULT_GROUP, GroupSpec, HashKey, ServerSpec, StatusRange};

impl FromStr for HashKey {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        match v {
            "client_ip" => Ok(HashKey::ClientIp),
            "path" => Ok(HashKey::Path),
            _ => match v.strip_prefix("header:") {
                // A field name is a token (RFC 9110 §5.1): any other name
                // could never match, and every request would hash alike.
                Some(name) if crate::http::syntax::is_token(name.as_bytes()) => {
                    Ok(HashKey::Header(name.to_string()))
                }
                _ => Err(format!(
                    "{v:?} is not a hash key (client_ip, path or header:NAME, NAME a field name)"
                )),
            },
        }
    }
}

impl fmt::Display for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HashKey::ClientIp => f.write_str("client_ip"),
            HashKey::Path => f.write_str("path"),
            HashKey::Header(n) => write!(f, "header:{n}"),
        }
    }
}

impl FromStr for ServerSpec {
    type Err = String;
    /// `host:port`, `[v6]:port` or `IP:port`, optionally followed by
    /// ` weight=N` and ` backup`.
    fn from_str(v: &str) -> Result<Self, String> {
        let mut words = v.split_whitespace();
        let addr = words.next().unwrap_or("");
        let (mut weight, mut backup) = (None, false);
        for w in words {
            if w == "backup" {
                if backup {
                    return Err(format!("{v:?}: backup given twice"));
                }
                backup = true;
                continue;
            }
            if weight.is_some() {
                return Err(format!("{v:?}: weight given twice"));
            }
            weight = Some(
                w.strip_prefix("weight=")
                    .and_then(|n| n.parse::<u32>().ok())
                    .ok_or_else(|| format!("{v:?}: {w:?} is not weight=N"))?,
            );
        }
        let weight = weight.unwrap_or(1);
        let bad = || format!("{v:?} is not a server like 127.0.0.1:8080 or app.internal:8080");
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let valid_name = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
        if host.parse::<std::net::IpAddr>().is_err() && !valid_name {
            return Err(bad());
        }
        Ok(ServerSpec {
            host: host.to_string(),
            port,
            weight,
            backup,
        })
    }
}

impl fmt::Display for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)?;
        } else {
            write!(f, "{}:{}", self.host, self.port)?;
        }
        if self.weight != 1 {
            write!(f, " weight={}", self.weight)?;
        }
        if self.backup {
            f.write_str(" backup")?;
        }
        Ok(())
    }
}

impl Serialize for ServerSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ServerSpec {
    /// A string (`"127.0.0.1:8001 weight=3 backup"`) or an inline table
    /// (`{ address = "127.0.0.1:8001", weight = 3, backup = true }`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ServerSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a server like \"127.0.0.1:8001 weight=3\" or { address, weight }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ServerSpec, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ServerSpec, A::Error> {
                let (mut address, mut weight) = (None::<String>, None::<u32>);
                let mut backup = None::<bool>;
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "address" => address = Some(map.next_value()?),
                        "weight" => weight = Some(map.next_value()?),
                        "backup" => backup = Some(map.next_value()?),
                        _ => {
                            return Err(de::Error::unknown_field(
                                &k,
                                &["address", "weight", "backup"],
                            ));
                        }
                    }
                }
                let address = address.ok_or_else(|| de::Error::missing_field("address"))?;
                let mut s: ServerSpec = address.parse().map_err(de::Error::custom)?;
                if let Some(w) = weight {
                    s.weight = w;
                }
                if let Some(b) = backup {
                    s.backup = b;
                }
                Ok(s)
            }
        }
        d.deserialize_any(V)
    }
}

impl FromStr for StatusRange {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        let bad = || format!("{v:?} is not a status range like \"200-399\"");
        let (lo, hi) = v.split_once('-').unwrap_or((v, v));
        let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
        if !(100..=599).contains(&lo) || !(lo..=599).contains(&hi) {
            return Err(bad());
        }
        Ok(StatusRange { lo, hi })
    }
}

/// Serde through `FromStr`/`Display` for the string-shaped values.
macro_rules! string_codec {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = String::deserialize(d)?;
                v.parse().map_err(de::Error::custom)
            }
        }
    };
}
string_codec!(HashKey);
string_codec!(StatusRange);

impl fmt::Display for StatusRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// The `upstream` field of the file: a plain address string or an array
/// of them (one group named `default`), or `[[upstream]]` tables.
pub(crate) mod groups_codec {
    use super::*;

    /// The short form when it says it all: one group `default` with
    /// every setting at its default is written as `upstream = "ADDR"` (or
    /// an array of them), anything else as `[[upstream]]` tables.
    pub fn serialize<S: Serializer>(g: &[GroupSpec], s: S) -> Result<S::Ok, S::Error> {
        if let [only] = g {
            let servers = only.servers.get_ref();
            if *only == GroupSpec::new(DEFAULT_GROUP, servers.clone()) {
                return match servers.as_slice() {
                    [one] => one.serialize(s),
                    many => many.serialize(s),
                };
            }
        }
        g.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<GroupSpec>, D::Error> {
        /// One element: a server string or a group table.
        enum Item {
            Server(ServerSpec),
            Group(Box<GroupSpec>),
        }
        impl<'de> Deserialize<'de> for Item {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct IV;
                impl<'de> Visitor<'de> for IV {
                    type Value = Item;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a server string or an [[upstream]] table")
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<Item, E> {
                        v.parse().map(Item::Server).map_err(E::custom)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Item, A::Error> {
                        let d = de::value::MapAccessDeserializer::new(map);
                        GroupSpec::deserialize(d).map(|g| Item::Group(Box::new(g)))
                    }
                }
                d.deserialize_any(IV)
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<GroupSpec>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a server like \"127.0.0.1:8000\", an array of them, or [[upstream]] tables",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                let s: ServerSpec = v.parse().map_err(E::custom)?;
                Ok(vec![GroupSpec::new(DEFAULT_GROUP, vec![s])])
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let (mut servers, mut groups) = (Vec::new(), Vec::new());
                while let Some(item) = seq.next_element::<Item>()? {
                    match item {
                        Item::Server(s) => servers.push(s),
                        Item::Group(g) => groups.push(*g),
                    }
                }
                if !servers.is_empty() {
                    if !groups.is_empty() {
                        return Err(de::Error::custom(
                            "mixes plain servers and [[upstream]] tables",
                        ));
                    }
                    groups.push(GroupSpec::new(DEFAULT_GROUP, servers));
                }
                Ok(groups)
            }
        }
        d.deserialize_any(V)
    }
}

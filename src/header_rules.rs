//! A route's header rules (`set_request_headers`, `add_request_headers`,
//! `remove_request_headers` and the same three for responses; docs/configuration.md,
//! "Edge rules"): which names a rule may touch, and applying the rules to
//! a head's fields. Order: remove, then set (replaces every line of the
//! name), then add (appends one line).
//!
//! A rule never touches framing (`Content-Length`, `Transfer-Encoding`,
//! RFC 9112 §6) or hop-by-hop fields (`Connection`, `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Upgrade`, RFC 9110 §7.6.1): the proxy owns
//! those, and a rule on them would desynchronise the body or the
//! connection. `--check-config` refuses them ([`check_name`]).
//!
//! What it must not know: sockets, routes, where the values come from.

use std::collections::BTreeMap;

use std::net::IpAddr;

use crate::http::{Headers, RequestHead};
use crate::template::{Vars, expand};

/// Names no rule may set, add or remove (lowercase).
const REFUSED: [&str; 7] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
];

/// Checks a rule's field name: a token (RFC 9110 §5.1), not framing nor
/// hop-by-hop.
///
/// Errors: the reason.
pub fn check_name(name: &str) -> Result<(), String> {
    if !crate::http::syntax::is_token(name.as_bytes()) {
        return Err(format!("{name:?} is not a field name"));
    }
    if REFUSED.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "{name:?} is a framing or hop-by-hop field, which only the proxy sets"
        ));
    }
    Ok(())
}

/// One direction's rules.
pub struct Rules<'a> {
    /// Fields replaced (every line of the name removed, one appended).
    pub set: &'a BTreeMap<String, String>,
    /// Fields appended.
    pub add: &'a BTreeMap<String, String>,
    /// Fields removed.
    pub remove: &'a [String],
}

/// The variables of `req` (`tls`: it came over TLS; `client`: its client
/// address, written into `addr`).
pub(crate) fn request_vars<'a>(
    req: &'a RequestHead,
    tls: bool,
    client: IpAddr,
    addr: &'a mut [u8; 64],
) -> Vars<'a> {
    Vars {
        host: crate::upstreams::route::request_host(req),
        request_uri: req.target.as_bytes(),
        scheme: if tls { b"https" } else { b"http" },
        remote_addr: crate::text::ip_text(client.to_canonical(), addr).as_bytes(),
        request_id: crate::request_id::of(&req.headers).unwrap_or(b""),
    }
}

impl Rules<'_> {
    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Applies the rules to `headers` with the variables of `req` (`tls`:
    /// it came over TLS; `client`: its client address).
    pub fn apply_for(&self, headers: &mut Headers, req: &RequestHead, tls: bool, client: IpAddr) {
        let mut addr = [0u8; 64];
        let vars = request_vars(req, tls, client, &mut addr);
        self.apply(headers, &vars);
    }

    /// Applies the rules to the fields of `req` itself, with its
    /// variables (copied first: the rules may change `Host`).
    pub fn apply_to_request(&self, req: &mut RequestHead, tls: bool, client: IpAddr) {
        if self.is_empty() {
            return;
        }
        let host = crate::upstreams::route::request_host(req).to_vec();
        let uri = req.target.clone().into_bytes();
        let id = crate::request_id::of(&req.headers)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let mut addr = [0u8; 64];
        let vars = Vars {
            host: &host,
            request_uri: &uri,
            scheme: if tls { b"https" } else { b"http" },
            remote_addr: crate::text::ip_text(client.to_canonical(), &mut addr).as_bytes(),
            request_id: &id,
        };
        self.apply(&mut req.headers, &vars);
    }

    /// Applies the rules to `headers`, values expanded with `vars`.
    pub fn apply(&self, headers: &mut Headers, vars: &Vars<'_>) {
        for name in self.remove {
            headers.remove_all(name);
        }
        let mut value = Vec::new();
        for (name, template) in self.set {
            headers.remove_all(name);
            value.clear();
            expand(template, vars, &mut value);
            headers.append(name, &value);
        }
        for (name, template) in self.add {
            value.clear();
            expand(template, vars, &mut value);
            headers.append(name, &value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_and_hop_by_hop_names_are_refused() {
        for bad in [
            "Content-Length",
            "transfer-encoding",
            "Connection",
            "TE",
            "Upgrade",
            "a b",
            "",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for ok in ["X-Env", "Strict-Transport-Security", "Server", "Trailer"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn remove_then_set_then_add() {
        let mut h = Headers::new();
        h.append("Server", b"up");
        h.append("X-Env", b"a");
        h.append("X-Env", b"b");
        h.append("X-Keep", b"k");
        let set = BTreeMap::from([("X-Env".to_string(), "prod-$host".to_string())]);
        let add = BTreeMap::from([("X-Keep".to_string(), "two".to_string())]);
        let remove = vec!["server".to_string()];
        let rules = Rules {
            set: &set,
            add: &add,
            remove: &remove,
        };
        let vars = Vars {
            host: b"h",
            request_uri: b"/",
            scheme: b"http",
            remote_addr: b"1.2.3.4",
            request_id: b"",
        };
        rules.apply(&mut h, &vars);
        assert!(!h.contains("Server"));
        assert_eq!(h.get_all("x-env").collect::<Vec<_>>(), [b"prod-h"]);
        assert_eq!(h.get_all("x-keep").collect::<Vec<_>>(), [&b"k"[..], b"two"]);
    }
}

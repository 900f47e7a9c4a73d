//! Values with variables, as a route's `redirect` (and later its header
//! rules) writes them: `https://$host$request_uri`. Checked once when the
//! configuration is validated ([`check`]), expanded per request
//! ([`expand`]) from the string, without a compiled form.
//!
//! Variables (nginx's names): `$host` (the `Host` field without its
//! port), `$request_uri` (the request target, query included), `$scheme`
//! (`http` or `https`), `$remote_addr` (the client address after the
//! PROXY header and `trusted_proxies`), `$request_id` (the request's
//! `X-Request-Id`, `request_id`; empty without one). Any other `$` is refused by
//! [`check`]; [`expand`] copies it as it is.
//!
//! What it must not know: sockets, where the values come from.

/// The values of a request's variables, as bytes.
pub struct Vars<'a> {
    /// `$host`.
    pub host: &'a [u8],
    /// `$request_uri`.
    pub request_uri: &'a [u8],
    /// `$scheme`.
    pub scheme: &'a [u8],
    /// `$remote_addr`.
    pub remote_addr: &'a [u8],
    /// `$request_id`.
    pub request_id: &'a [u8],
}

/// The variable names, longest first where one is a prefix of another.
const NAMES: [&str; 5] = ["request_uri", "request_id", "remote_addr", "scheme", "host"];

impl Vars<'_> {
    fn get(&self, name: &str) -> &[u8] {
        match name {
            "host" => self.host,
            "request_uri" => self.request_uri,
            "scheme" => self.scheme,
            "request_id" => self.request_id,
            _ => self.remote_addr,
        }
    }
}

/// The variable named at the start of `rest` (the bytes after a `$`).
fn name_at(rest: &str) -> Option<&'static str> {
    NAMES.into_iter().find(|n| rest.starts_with(n))
}

/// Checks `template`: every `$` starts a known variable, and no byte is a
/// control character (the expansion goes into a field value, RFC 9110
/// §5.5).
///
/// Errors: the reason, naming the offending text.
pub fn check(template: &str) -> Result<(), String> {
    if template.bytes().any(|b| b.is_ascii_control()) {
        return Err(format!("{template:?} holds a control character"));
    }
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        let after = rest.get(at + 1..).unwrap_or("");
        let Some(name) = name_at(after) else {
            return Err(format!(
                "{template:?}: unknown variable at {:?} (known: $host, $request_uri, \
                 $scheme, $remote_addr, $request_id)",
                rest.get(at..).unwrap_or("")
            ));
        };
        rest = after.get(name.len()..).unwrap_or("");
    }
    Ok(())
}

/// `template` with each variable replaced by its value from `vars`,
/// appended to `out`.
pub fn expand(template: &str, vars: &Vars<'_>, out: &mut Vec<u8>) {
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.extend_from_slice(rest.get(..at).unwrap_or("").as_bytes());
        let after = rest.get(at + 1..).unwrap_or("");
        match name_at(after) {
            Some(name) => {
                out.extend_from_slice(vars.get(name));
                rest = after.get(name.len()..).unwrap_or("");
            }
            None => {
                out.push(b'$');
                rest = after;
            }
        }
    }
    out.extend_from_slice(rest.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars<'static> {
        Vars {
            host: b"example.com",
            request_uri: b"/a/b?x=1&y=2",
            scheme: b"http",
            remote_addr: b"192.0.2.7",
            request_id: b"4f1c",
        }
    }

    #[test]
    fn expands_each_variable() {
        let mut out = Vec::new();
        expand("https://$host$request_uri", &vars(), &mut out);
        assert_eq!(out, b"https://example.com/a/b?x=1&y=2");
        out.clear();
        expand(
            "$scheme|$remote_addr|$hostname|$ x|$request_id",
            &vars(),
            &mut out,
        );
        assert_eq!(out, b"http|192.0.2.7|example.comname|$ x|4f1c");
    }

    #[test]
    fn check_refuses_unknown_variables_and_controls() {
        assert!(check("https://$host$request_uri").is_ok());
        assert!(check("plain").is_ok());
        assert!(check("$request_id").is_ok());
        assert!(check("$request").is_err());
        assert!(check("cost: 5$").is_err());
        assert!(check("a\r\nSet-Cookie: x").is_err());
    }
}

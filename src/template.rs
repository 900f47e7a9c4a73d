//! Values with variables, as a route's `redirect` and its header rules
//! write them: `https://$host$request_uri`. Checked once when the
//! configuration is validated ([`check`]), expanded per request
//! ([`expand`]) from the string, without a compiled form.
//!
//! Variables (nginx's names): `$host` (the `Host` field without its
//! port, lowercased, without a trailing dot, as nginx's), `$request_uri`
//! (the request target, query included), `$scheme` (`http` or `https`),
//! `$remote_addr` (the client address after the PROXY header and
//! `trusted_proxies`), `$request_id` (the request's `X-Request-Id`,
//! `request_id`; empty without one). A name is the longest
//! run of letters, digits and `_` after the `$`, as in nginx (`$hostname`
//! is not `$host` and `name`); `${host}` ends it at the brace; `$$` is a
//! literal `$`. Any other `$` is refused by [`check`]; [`expand`] copies
//! it as it is.
//!
//! What it must not know: sockets, where the values come from.

/// The values of a request's variables, as bytes.
pub struct Vars<'a> {
    /// `$host`: the host as the request wrote it, without its port;
    /// [`expand`] writes it lowercased and without a trailing dot.
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

/// The variable names.
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

/// What a `$` starts, read from the bytes after it.
enum Dollar<'t> {
    /// A known variable, and the bytes after its name.
    Var(&'static str, &'t str),
    /// `$$`: a literal `$`, and the bytes after it.
    Literal(&'t str),
    /// No known variable: the text that was read as a name.
    Unknown(&'t str),
}

/// Reads what follows a `$` (nginx's rules): `$name` takes the longest
/// run of letters, digits and `_` (so `$hostname` is the unknown
/// `hostname`, not `$host` then `name`); `${name}` ends at the brace
/// (`${host}name`); `$$` is a literal `$` (sluice's own: nginx has no way
/// to write one).
fn read_dollar(after: &str) -> Dollar<'_> {
    if let Some(rest) = after.strip_prefix('$') {
        return Dollar::Literal(rest);
    }
    let (name, rest) = match after.strip_prefix('{') {
        Some(inner) => match inner.find('}') {
            Some(close) => (
                inner.get(..close).unwrap_or(""),
                inner.get(close + 1..).unwrap_or(""),
            ),
            None => return Dollar::Unknown(after),
        },
        None => {
            let len = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            (
                after.get(..len).unwrap_or(""),
                after.get(len..).unwrap_or(""),
            )
        }
    };
    match NAMES.into_iter().find(|n| *n == name) {
        Some(known) => Dollar::Var(known, rest),
        None => Dollar::Unknown(name),
    }
}

/// Checks `template`: every `$` starts a known variable (`$name` or
/// `${name}`) or is `$$`, and no byte is a control character (the
/// expansion goes into a field value, RFC 9110 §5.5).
///
/// Errors: the reason, naming the offending text.
pub fn check(template: &str) -> Result<(), String> {
    if template.bytes().any(|b| b.is_ascii_control()) {
        return Err(format!("{template:?} holds a control character"));
    }
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        rest = match read_dollar(rest.get(at + 1..).unwrap_or("")) {
            Dollar::Var(_, after) | Dollar::Literal(after) => after,
            Dollar::Unknown(name) => {
                return Err(format!(
                    "{template:?}: unknown variable ${name} (known: $host, $request_uri, \
                     $scheme, $remote_addr, $request_id; ${{host}} ends a name before \
                     letters, $$ is a literal $)"
                ));
            }
        };
    }
    Ok(())
}

/// Whether `template` uses the variable `name` (`"host"` for `$host` or
/// `${host}`); `$$host` is a literal, not a use.
pub fn uses(template: &str, name: &str) -> bool {
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        let after = rest.get(at + 1..).unwrap_or("");
        rest = match read_dollar(after) {
            Dollar::Var(found, _) if found == name => return true,
            Dollar::Var(_, tail) | Dollar::Literal(tail) => tail,
            Dollar::Unknown(_) => after,
        };
    }
    false
}

/// `template` with each variable replaced by its value from `vars` and
/// each `$$` by `$`, appended to `out`. A `$` that starts no known
/// variable ([`check`] refuses it) is copied as it is.
pub fn expand(template: &str, vars: &Vars<'_>, out: &mut Vec<u8>) {
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.extend_from_slice(rest.get(..at).unwrap_or("").as_bytes());
        let after = rest.get(at + 1..).unwrap_or("");
        rest = match read_dollar(after) {
            Dollar::Var("host", tail) => {
                push_host(vars.host, out);
                tail
            }
            Dollar::Var(name, tail) => {
                out.extend_from_slice(vars.get(name));
                tail
            }
            Dollar::Literal(tail) => {
                out.push(b'$');
                tail
            }
            Dollar::Unknown(_) => {
                out.push(b'$');
                after
            }
        };
    }
    out.extend_from_slice(rest.as_bytes());
}

/// `$host` as nginx writes it: ASCII lowercased and without one trailing
/// dot (`Example.COM.` is `example.com`: DNS names are case-insensitive
/// and a trailing dot names the same host, RFC 4343, RFC 1034 §3.1).
fn push_host(host: &[u8], out: &mut Vec<u8>) {
    let host = host.strip_suffix(b".").unwrap_or(host);
    out.extend(host.iter().map(u8::to_ascii_lowercase));
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
        assert_eq!(out, b"http|192.0.2.7|$hostname|$ x|4f1c");
        out.clear();
        expand("${host}name|$$5|${scheme}://$host:8443", &vars(), &mut out);
        assert_eq!(out, b"example.comname|$5|http://example.com:8443");
    }

    #[test]
    fn host_is_lowercased_without_its_trailing_dot() {
        let mut out = Vec::new();
        let upper = Vars {
            host: b"WWW.Example.COM.",
            ..vars()
        };
        expand("https://$host/|${host}x|$host", &upper, &mut out);
        assert_eq!(
            out,
            b"https://www.example.com/|www.example.comx|www.example.com"
        );
        out.clear();
        let v6 = Vars {
            host: b"[2001:DB8::1]",
            ..vars()
        };
        expand("$host", &v6, &mut out);
        assert_eq!(out, b"[2001:db8::1]");
    }

    #[test]
    fn uses_finds_a_variable_not_a_literal_nor_a_longer_name() {
        assert!(uses("https://$host$request_uri", "host"));
        assert!(uses("https://${host}x", "host"));
        assert!(uses("https://$host$request_uri", "request_uri"));
        assert!(!uses("https://$$host/", "host"));
        assert!(!uses("https://$hostname/", "host"));
        assert!(!uses("https://example.com/", "host"));
        assert!(!uses("$", "host"));
    }

    #[test]
    fn check_refuses_unknown_variables_and_controls() {
        assert!(check("https://$host$request_uri").is_ok());
        assert!(check("plain").is_ok());
        assert!(check("$request_id").is_ok());
        assert!(check("$request").is_err());
        // A name is the longest run of letters, digits and `_` (nginx).
        assert!(check("https://$hostname$request_uri").is_err());
        assert!(check("$request_uri_x").is_err());
        assert!(check("$scheme1").is_err());
        assert!(check("${host}name and $$5").is_ok());
        assert!(check("${hostname}").is_err());
        assert!(check("${host").is_err());
        assert!(check("$host.example:$scheme/").is_ok());
        assert!(check("cost: 5$").is_err());
        assert!(check("a\r\nSet-Cookie: x").is_err());
    }
}

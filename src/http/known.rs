//! [`Known`]: the field names the proxy itself looks up on every message,
//! recognised once when a field is stored.
//!
//! Why it exists: the request and response plans ask a head for
//! `Content-Length`, `Transfer-Encoding`, `Connection`, `Host`, `Date` and
//! the hop-by-hop fields a dozen times per message. Comparing names ignoring
//! case on every lookup walked every field each time (about 15 % of the
//! proxy's user-space instructions on a small keep-alive request). With
//! each stored field tagged and a bit per name present, a lookup of a name
//! that is absent costs one test, and one that is present compares a byte
//! per field.
//!
//! What it must not know: values, order, policy (which fields are
//! hop-by-hop is [`super::hop`]'s business; this only names them).
//!
//! Invariant: [`Known::of`] is exact: a name is tagged `K` if and only if it
//! equals `K`'s name ignoring ASCII case (RFC 9110 §5.1), so a lookup by tag
//! finds exactly the fields a lookup by name would.

/// A field name the proxy looks up, or [`Known::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum Known {
    /// Any name not listed below.
    #[default]
    Other = 0,
    /// `Content-Length` (RFC 9110 §8.6).
    ContentLength,
    /// `Transfer-Encoding` (RFC 9112 §6.1).
    TransferEncoding,
    /// `Connection` (RFC 9110 §7.6.1).
    Connection,
    /// `Keep-Alive` (RFC 2068 §19.7.1.1).
    KeepAlive,
    /// `Proxy-Connection` (pre-standard).
    ProxyConnection,
    /// `TE` (RFC 9110 §10.1.4).
    Te,
    /// `Upgrade` (RFC 9110 §7.8).
    Upgrade,
    /// `Trailer` (RFC 9110 §6.6.2).
    Trailer,
    /// `Host` (RFC 9110 §7.2).
    Host,
    /// `Date` (RFC 9110 §6.6.1).
    Date,
    /// `Max-Forwards` (RFC 9110 §7.6.2).
    MaxForwards,
    /// `Via` (RFC 9110 §7.6.3).
    Via,
    /// `X-Forwarded-For` (de facto).
    XForwardedFor,
    /// `X-Forwarded-Proto` (de facto).
    XForwardedProto,
    /// `X-Forwarded-Client-Cert` (Envoy's): always removed from what
    /// clients send.
    XForwardedClientCert,
    /// `X-Request-Id` (`request_id`: read and set on every request).
    XRequestId,
}

impl Known {
    /// The tag of the field name `name` (ASCII case-insensitive); `Other`
    /// for a name the proxy never looks up. The length picks at most two
    /// candidates, so most names cost one comparison of lengths.
    pub(crate) fn of(name: &[u8]) -> Known {
        let candidates: &[(Known, &str)] = match name.len() {
            2 => &[(Known::Te, "te")],
            3 => &[(Known::Via, "via")],
            4 => &[(Known::Host, "host"), (Known::Date, "date")],
            7 => &[(Known::Upgrade, "upgrade"), (Known::Trailer, "trailer")],
            10 => &[
                (Known::Connection, "connection"),
                (Known::KeepAlive, "keep-alive"),
            ],
            12 => &[
                (Known::MaxForwards, "max-forwards"),
                (Known::XRequestId, "x-request-id"),
            ],
            14 => &[(Known::ContentLength, "content-length")],
            15 => &[(Known::XForwardedFor, "x-forwarded-for")],
            16 => &[(Known::ProxyConnection, "proxy-connection")],
            17 => &[
                (Known::TransferEncoding, "transfer-encoding"),
                (Known::XForwardedProto, "x-forwarded-proto"),
            ],
            23 => &[(Known::XForwardedClientCert, "x-forwarded-client-cert")],
            _ => return Known::Other,
        };
        candidates
            .iter()
            .find(|(_, lower)| is_lower_case_of(name, lower.as_bytes()))
            .map_or(Known::Other, |&(k, _)| k)
    }

    /// The name as the proxy writes it when it adds such a field (the
    /// spelling of the RFCs); "" for `Other`.
    pub(crate) fn spelling(self) -> &'static str {
        match self {
            Known::Other => "",
            Known::ContentLength => "Content-Length",
            Known::TransferEncoding => "Transfer-Encoding",
            Known::Connection => "Connection",
            Known::KeepAlive => "Keep-Alive",
            Known::ProxyConnection => "Proxy-Connection",
            Known::Te => "TE",
            Known::Upgrade => "Upgrade",
            Known::Trailer => "Trailer",
            Known::Host => "Host",
            Known::Date => "Date",
            Known::MaxForwards => "Max-Forwards",
            Known::Via => "Via",
            Known::XForwardedFor => "X-Forwarded-For",
            Known::XForwardedProto => "X-Forwarded-Proto",
            Known::XForwardedClientCert => "X-Forwarded-Client-Cert",
            Known::XRequestId => "X-Request-Id",
        }
    }

    /// This name's bit in a presence mask ([`super::Headers`] keeps one);
    /// 0 for `Other`, which has no bit.
    pub(crate) const fn bit(self) -> u32 {
        match self {
            Known::Other => 0,
            k => 1 << (k as u8),
        }
    }
}

/// True if `name` equals `lower` (all lower case) ignoring ASCII case.
/// Stops at the first byte that differs, which for most names of the same
/// length is the first.
fn is_lower_case_of(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len()
        && name
            .iter()
            .zip(lower)
            .all(|(a, b)| a.to_ascii_lowercase() == *b)
}

/// Every known name but [`Known::Other`], lower case, by tag.
#[cfg(test)]
pub(crate) const ALL: [(Known, &str); 16] = [
    (Known::ContentLength, "content-length"),
    (Known::TransferEncoding, "transfer-encoding"),
    (Known::Connection, "connection"),
    (Known::KeepAlive, "keep-alive"),
    (Known::ProxyConnection, "proxy-connection"),
    (Known::Te, "te"),
    (Known::Upgrade, "upgrade"),
    (Known::Trailer, "trailer"),
    (Known::Host, "host"),
    (Known::Date, "date"),
    (Known::MaxForwards, "max-forwards"),
    (Known::Via, "via"),
    (Known::XForwardedFor, "x-forwarded-for"),
    (Known::XForwardedProto, "x-forwarded-proto"),
    (Known::XForwardedClientCert, "x-forwarded-client-cert"),
    (Known::XRequestId, "x-request-id"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_name_is_found_in_any_case() {
        for (k, name) in ALL {
            assert_eq!(Known::of(name.as_bytes()), k, "{name}");
            assert_eq!(Known::of(name.to_ascii_uppercase().as_bytes()), k);
            assert_ne!(k.bit(), 0);
        }
    }

    #[test]
    fn spellings_are_tokens_of_their_own_tag() {
        for (k, _) in ALL {
            assert_eq!(Known::of(k.spelling().as_bytes()), k);
            assert!(crate::http::syntax::is_token(k.spelling().as_bytes()));
        }
    }

    #[test]
    fn bits_are_distinct() {
        let mut all = 0u32;
        for (k, _) in ALL {
            assert_eq!(all & k.bit(), 0, "{k:?}");
            all |= k.bit();
        }
        assert_eq!(Known::Other.bit(), 0);
    }

    #[test]
    fn other_names_are_other() {
        for name in [
            "",
            "t",
            "tee",
            "hosts",
            "dat",
            "content-lengt",
            "content-length2",
            "x-forwarded-fo",
            "connectio",
            "keep_alive",
            "server",
            "content-type",
            "upgrades",
        ] {
            assert_eq!(Known::of(name.as_bytes()), Known::Other, "{name}");
        }
    }
}

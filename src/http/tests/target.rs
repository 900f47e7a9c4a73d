use crate::http::{ParseError, RequestHead, target::normalize_absolute_form};

fn req(target: &str, host: Option<&str>) -> RequestHead {
    let mut r = RequestHead {
        method: "GET".into(),
        target: target.into(),
        version: 1,
        ..RequestHead::default()
    };
    if let Some(h) = host {
        r.headers.append("Host", h.as_bytes());
    }
    r
}

#[test]
fn absolute_form_becomes_origin_form_with_host_from_target() {
    // (target, Host sent, target after, Host after, why)
    type Row<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a str>, &'a str);
    let rows: &[Row] = &[
        (
            "/a?b",
            Some("h"),
            "/a?b",
            Some("h"),
            "origin form is left alone",
        ),
        (
            "*",
            Some("h"),
            "*",
            Some("h"),
            "asterisk form is left alone",
        ),
        (
            "http://ex.com/a?b",
            Some("other"),
            "/a?b",
            Some("ex.com"),
            "Host replaced (RFC 9112 §3.2.2)",
        ),
        (
            "HTTP://ex.com:8080",
            None,
            "/",
            Some("ex.com:8080"),
            "empty path becomes /, scheme any case",
        ),
        (
            "https://ex.com?q=1",
            None,
            "/?q=1",
            Some("ex.com"),
            "query without path",
        ),
    ];
    for (target, host, want_target, want_host, why) in rows {
        let mut r = req(target, *host);
        assert_eq!(normalize_absolute_form(&mut r), Ok(()), "{why}");
        assert_eq!(r.target, *want_target, "{why}");
        assert_eq!(r.headers.get("host"), want_host.map(str::as_bytes), "{why}");
        assert_eq!(r.headers.get_all("host").count(), 1, "{why}: one Host");
    }
}

#[test]
fn absolute_form_without_authority_or_with_userinfo_is_malformed() {
    for (target, why) in [
        ("http:///a", "empty authority"),
        ("http://u:p@ex.com/", "userinfo"),
    ] {
        let mut r = req(target, Some("h"));
        assert!(
            matches!(
                normalize_absolute_form(&mut r),
                Err(ParseError::Malformed(_))
            ),
            "{why}"
        );
    }
}

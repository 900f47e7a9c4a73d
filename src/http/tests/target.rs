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
            Some("EX.com"),
            "/a?b",
            Some("ex.com"),
            "Host replaced by the target's authority (RFC 9112 §3.2.2)",
        ),
        (
            "http://ex.com/",
            Some("ex.com:80"),
            "/",
            Some("ex.com"),
            "the scheme's default port is the same authority",
        ),
        (
            "https://ex.com:443/",
            Some("ex.com"),
            "/",
            Some("ex.com:443"),
            "https's default port",
        ),
        (
            "http://ex.com./p",
            Some("EX.com"),
            "/p",
            Some("ex.com."),
            "a trailing dot names the same host (RFC 1034 §3.1)",
        ),
        (
            "http://ex.com/p",
            Some("ex.com.:80"),
            "/p",
            Some("ex.com"),
            "the trailing dot on the Host side",
        ),
        (
            "http://[::1]:8080/",
            Some("[::1]:8080"),
            "/",
            Some("[::1]:8080"),
            "IPv6 literal",
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

#[test]
fn absolute_form_whose_host_is_another_authority_is_malformed() {
    // RFC 9112 §3.2: a client sends a Host identical to the target's
    // authority; one that differs comes from a broken or hostile client.
    // (target, Host, why)
    for (target, host, why) in [
        ("http://a.example/", "b.example", "another host"),
        ("http://a.example/", "", "empty Host"),
        ("http://a.example/", "a.example:81", "another port"),
        (
            "http://a.example:8080/",
            "a.example",
            "default port for 8080",
        ),
        (
            "https://a.example/",
            "a.example:80",
            "http's port for https",
        ),
        ("http://[::1]/", "[::2]", "another IPv6 literal"),
        (
            "http://a.example./",
            "b.example.",
            "another host, both dotted",
        ),
    ] {
        let mut r = req(target, Some(host));
        assert_eq!(
            normalize_absolute_form(&mut r),
            Err(ParseError::Malformed(
                "Host is not the absolute-form target's authority"
            )),
            "{why}"
        );
        assert_eq!(r.target, target, "{why}: nothing changed");
    }
}

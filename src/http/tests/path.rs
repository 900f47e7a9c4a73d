//! The path a route matches (`http::path`): decoded, slashes merged, dot
//! segments removed (RFC 3986 §5.2.4), the query kept.

use crate::http::path::{needs_normalizing, normalize};

fn norm(t: &str) -> String {
    let mut out = Vec::new();
    normalize(t.as_bytes(), &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn percent_escapes_slashes_and_dot_segments_are_normalized() {
    for (given, want) in [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/b/", "/a/b/"),
        ("/%61dmin", "/admin"),
        ("/%2E/admin", "/admin"),
        ("/%2e%2e/admin", "/admin"),
        ("/x/..%2fadmin", "/admin"),
        ("/public%2F..%2Fadmin", "/admin"),
        ("//admin//x", "/admin/x"),
        ("/./admin", "/admin"),
        ("/a/./b", "/a/b"),
        ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"),
        ("/a/b/../c", "/a/c"),
        ("/../../a", "/a"),
        ("/..", "/"),
        ("/.", "/"),
        ("/a/..?x=/../y", "/?x=/../y"),
        ("/%zz/%4", "/%zz/%4"),
        ("/%2561", "/%61"),
        ("/a.b/..c/...", "/a.b/..c/..."),
        ("*", "*"),
        ("example.com:443", "example.com:443"),
    ] {
        assert_eq!(norm(given), want, "{given}");
    }
}

#[test]
fn only_a_path_that_may_change_needs_normalizing() {
    for t in [
        "/",
        "/a/b",
        "/a/b/",
        "/a.b/..c",
        "/a?x=//..",
        "*",
        "/.well-known/x",
    ] {
        assert!(!needs_normalizing(t.as_bytes()), "{t}");
        assert_eq!(norm(t), t, "{t}");
    }
    for t in ["/%61", "//a", "/a//b", "/./a", "/a/.", "/a/..", "/../a"] {
        assert!(needs_normalizing(t.as_bytes()), "{t}");
    }
}

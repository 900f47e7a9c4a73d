//! `--config FILE` and `--check-config FILE`, with the built binary:
//! invalid values and unknown keys are rejected with the key named (exit
//! 2), the example file has every key, flags override the file, and a
//! server started from a file serves.

mod util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use util::*;

/// Every key of the configuration file (the fields of `sluice::Config`).
const KEYS: [&str; 26] = [
    "listen",
    "upstream",
    "keepalive_timeout",
    "request_head_timeout",
    "client_body_timeout",
    "client_send_timeout",
    "max_head_size",
    "max_header_count",
    "high_watermark",
    "low_watermark",
    "upstream_connect_timeout",
    "upstream_read_timeout",
    "upstream_write_timeout",
    "pool_idle_timeout",
    "pool_max_idle_per_peer",
    "pool_max_idle_total",
    "max_retries",
    "max_connections",
    "drain_timeout",
    "workers",
    "tunnel_idle_timeout",
    "takeover",
    "defer_accept",
    "add_via",
    "add_x_forwarded_for",
    "add_x_forwarded_proto",
];

// --- helpers of this file ----------------------------------------------------

/// Both `--config` and `--check-config` reject `text` with exit status 2
/// and a message on stderr that contains every one of `needles`.
fn rejected(text: &str, needles: &[&str]) {
    let f = TempFile::new(text);
    for flag in ["--check-config", "--config"] {
        let o = run_sluice(&[flag, f.path()]);
        let err = o.stderr;
        assert_eq!(o.status.code(), Some(2), "{flag} {text:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{flag} {text:?}: {n:?} missing in {err:?}");
        }
        assert!(o.stdout.is_empty(), "nothing on stdout when invalid");
    }
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sluice.toml")
}

/// The value of `key = value` in a rendered configuration.
fn value<'a>(rendered: &'a str, key: &str) -> &'a str {
    rendered
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix('='))
        .map(|v| v.split('#').next().unwrap_or("").trim())
        .unwrap_or_else(|| panic!("{key} missing in:\n{rendered}"))
}

// --- rejected files ----------------------------------------------------------

#[test]
fn invalid_duration_names_the_key() {
    rejected(
        "listen = \"127.0.0.1:1\"\nkeepalive_timeout = \"soon\"\n",
        &["keepalive_timeout", "soon", ":2:"],
    );
    rejected("drain_timeout = 30\n", &["drain_timeout"]);
    // A unit is required in the file as on the command line.
    rejected(
        "keepalive_timeout = \"10\"\n",
        &["keepalive_timeout", "unit is required"],
    );
    rejected(
        "upstream_read_timeout = \"10 parsecs\"\n",
        &["upstream_read_timeout"],
    );
}

#[test]
fn unknown_key_is_rejected_and_named() {
    rejected(
        "listen = \"127.0.0.1:1\"\nfrobnicate = 1\n",
        &["frobnicate", "unknown"],
    );
    // A flag's spelling is not a key.
    rejected("keepalive-timeout = \"5s\"\n", &["keepalive-timeout"]);
    rejected("[upstream_pool]\nsize = 3\n", &["upstream_pool"]);
}

#[test]
fn wrong_types_and_values_name_the_key() {
    rejected("max_retries = \"x\"\n", &["max_retries"]);
    rejected("max_head_size = -1\n", &["max_head_size"]);
    rejected("workers = -2\n", &["workers"]);
    rejected("workers = 0\n", &["workers", "\"auto\""]);
    rejected("upstream = \"127.0.0.1:0\"\n", &["upstream", "port 0"]);
    rejected("workers = \"many\"\n", &["workers"]);
    rejected("add_via = \"yes\"\n", &["add_via"]);
    rejected("listen = \"nowhere\"\n", &["listen", "nowhere"]);
    rejected("upstream = 8000\n", &["upstream"]);
}

#[test]
fn values_that_do_not_fit_together_name_the_key() {
    rejected(
        "high_watermark = 1024\nlow_watermark = 4096\n",
        &["low_watermark"],
    );
    rejected("request_head_timeout = \"0s\"\n", &["request_head_timeout"]);
    rejected("max_connections = 0\n", &["max_connections"]);
    rejected(
        "listen = \"127.0.0.1:18080\"\nadmin = \"127.0.0.1:18080\"\n",
        &[
            "admin",
            "overlaps the proxy's own listen address 127.0.0.1:18080",
        ],
    );
    rejected(
        "listen = \"0.0.0.0:18080\"\nadmin = \"127.0.0.1:18080\"\n",
        &["admin", "overlaps"],
    );
    rejected(
        "listen = \"127.0.0.1:18080\"\nadmin = \"[::ffff:127.0.0.1]:18080\"\nadmin_public = true\n",
        &["admin", "overlaps"],
    );
}

#[test]
fn syntax_error_and_missing_file_exit_2() {
    rejected("listen = \n", &[":1"]);
    rejected("listen = \"a\"\nlisten = \"b\"\n", &["listen"]);
    let o = run_sluice(&["--config", "/nonexistent/sluice.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stderr.contains("/nonexistent/sluice.toml"),
        "{}",
        o.stderr
    );
}

/// Both flags reject `text` (exit 2) naming the file and `line` as
/// `PATH:LINE:`, with every one of `needles` in the message.
fn rejected_at(text: &str, line: usize, needles: &[&str]) {
    let f = TempFile::new(text);
    let at = format!("{}:{line}:", f.path());
    for flag in ["--check-config", "--config"] {
        let o = run_sluice(&[flag, f.path()]);
        assert_eq!(o.status.code(), Some(2), "{flag} {text:?}: {}", o.stderr);
        for n in needles.iter().chain([&at.as_str()]) {
            assert!(
                o.stderr.contains(n),
                "{flag}: {n:?} missing in {:?}",
                o.stderr
            );
        }
        assert!(o.stdout.is_empty(), "nothing on stdout when invalid");
    }
}

#[test]
fn bad_groups_and_routes_name_the_file_and_line() {
    let unknown_group = "listen = \"127.0.0.1:1\"\n\n[[upstream]]\nname = \"app\"\n\
                         servers = [\"127.0.0.1:8001\"]\n\n[[route]]\nupstream = \"nope\"\n";
    rejected_at(unknown_group, 8, &["unknown upstream group", "nope"]);
    let no_servers = "listen = \"127.0.0.1:1\"\n\n[[upstream]]\nname = \"app\"\nservers = []\n";
    rejected_at(no_servers, 5, &["\"app\"", "no servers"]);
    let same_name = "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8001\"]\n\n\
                     [[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8002\"]\n";
    rejected_at(same_name, 6, &["\"app\"", "declared twice"]);
    let bad_duration =
        "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8001\"]\nfail_timeout = \"soon\"\n";
    rejected_at(bad_duration, 4, &["fail_timeout", "soon"]);
}

// --- --check-config ----------------------------------------------------------

#[test]
fn a_route_to_a_group_the_upstream_flag_replaced_says_so() {
    // Found by a new-user pass: "unknown upstream group" for a group the
    // file defines.
    let f = TempFile::new(
        "[[upstream]]\nname = \"web\"\nservers = [\"127.0.0.1:1\"]\n[[route]]\nupstream = \"web\"\n",
    );
    let o = run_sluice(&["--check-config", f.path(), "--upstream", "127.0.0.1:2"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "route to unknown upstream group \"web\" (--upstream on the command line replaces \
             the file's [[upstream]] groups"
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn check_config_resolves_host_names_as_the_start_would() {
    // `.invalid` never resolves (RFC 6761 §6.4).
    let group = "[[upstream]]\nname = \"app\"\nservers = [\"nowhere.invalid:80\"]\n";
    let f = TempFile::new(group);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("\"nowhere.invalid\" (group \"app\") does not resolve"),
        "{}",
        o.stderr
    );
    // Placed in the file: its line and key path.
    let at = format!("config file {}:3: upstream[0].servers[0]: ", f.path());
    assert!(o.stderr.contains(&at), "{}", o.stderr);
    // Resolved lazily: not the check's business.
    let f = TempFile::new(&format!("{group}resolve = \"lazy\"\n"));
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
}

#[test]
fn check_config_reads_the_admin_token_file_as_the_start_would() {
    // It passed --check-config, then the start exited 1 and a reload was
    // refused (found by a break-it pass).
    let missing = "/nonexistent-sluice-test/token";
    let f = TempFile::new(&format!(
        "admin = \"127.0.0.1:9\"\nadmin_token_file = \"{missing}\"\n"
    ));
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("admin_token_file {missing}")),
        "{}",
        o.stderr
    );
    let empty = TempFile::new("\n");
    let f = TempFile::new(&format!(
        "admin = \"127.0.0.1:9\"\nadmin_token_file = \"{}\"\n",
        empty.path()
    ));
    // Empty: invalid, exit 2, as the start (`--config`) exits.
    for flag in ["--check-config", "--config"] {
        let o = run_sluice(&[flag, f.path()]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", o.stderr);
        assert!(o.stderr.contains(": empty"), "{}", o.stderr);
    }
    let token = TempFile::new("s3cret\n");
    let f = TempFile::new(&format!(
        "admin = \"127.0.0.1:9\"\nadmin_token_file = \"{}\"\n",
        token.path()
    ));
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
}

#[test]
fn check_config_on_the_example_prints_every_key() {
    let text = std::fs::read_to_string(example()).unwrap();
    for key in KEYS {
        let set = text
            .lines()
            .any(|l| l.starts_with(key) && l[key.len()..].trim_start().starts_with('='));
        assert!(set, "examples/sluice.toml does not set {key}");
    }
    let o = run_sluice(&["--check-config", example().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    let out = o.stdout;
    for key in KEYS {
        value(&out, key);
    }
    // The example holds the defaults.
    assert_eq!(value(&out, "keepalive_timeout"), "\"60s\"");
    assert_eq!(value(&out, "drain_timeout"), "\"30s\"");
    assert_eq!(value(&out, "workers"), "1");
    assert_eq!(value(&out, "high_watermark"), "32768");
    assert_eq!(value(&out, "add_via"), "true");
    assert_eq!(value(&out, "defer_accept"), "true");
}

#[test]
fn check_config_output_reads_back_the_same() {
    let f = TempFile::new(
        "listen = \"127.0.0.1:9\"\nkeepalive_timeout = \"1500ms\"\n\
         pool_idle_timeout = \"2m\"\nworkers = \"auto\"\nadd_via = false\n",
    );
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    let out = o.stdout;
    assert_eq!(value(&out, "listen"), "\"127.0.0.1:9\"");
    assert_eq!(value(&out, "keepalive_timeout"), "\"1500ms\"");
    assert_eq!(value(&out, "pool_idle_timeout"), "\"120s\"");
    assert_eq!(value(&out, "workers"), "\"auto\"");
    assert_eq!(value(&out, "add_via"), "false");
    let again = TempFile::new(&out);
    let o2 = run_sluice(&["--check-config", again.path()]);
    assert_eq!(o2.status.code(), Some(0), "{}", o2.stderr);
    assert_eq!(o2.stdout, out);
}

#[test]
fn flags_override_the_file() {
    let f =
        TempFile::new("keepalive_timeout = \"5s\"\nworkers = 4\nmax_retries = 3\nadd_via = true\n");
    let o = run_sluice(&[
        "--keepalive-timeout",
        "7s",
        "--check-config",
        f.path(),
        "--workers",
        "2",
        "--no-via",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    let out = o.stdout;
    assert_eq!(value(&out, "keepalive_timeout"), "\"7s\"");
    assert_eq!(value(&out, "workers"), "2");
    assert_eq!(value(&out, "max_retries"), "3");
    assert_eq!(value(&out, "add_via"), "false");
    // A flag can also make a valid file invalid, and that is reported.
    let o = run_sluice(&["--check-config", f.path(), "--low-watermark", "999999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stderr.contains("low_watermark"), "{}", o.stderr);
}

// --- a server configured by a file -------------------------------------------

#[test]
fn server_started_from_a_file_serves() {
    let up = Upstream::start(respond_forever(ok_response("from-up\n")));
    let port = free_port();
    let f = TempFile::new(&format!(
        "listen = \"127.0.0.1:{port}\"\nupstream = \"{}\"\nadd_via = false\n\
         drain_timeout = \"2s\"\n",
        up.addr
    ));
    let guard = SluiceProcess::start_listening(&["--config", f.path()]);

    let mut s = Client::connect(loopback(port));
    s.send(get_close("/"));
    let resp = s.read_until_closed(Duration::from_secs(5));
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("from-up\n"), "{resp}");
    drop(guard);
}

#[test]
fn check_config_warns_of_settings_that_cannot_be_meant() {
    let text = "[[upstream]]\nname = \"app\"\n\
                servers = [\"127.0.0.1:8001\", \"127.0.0.1:8001\"]\n\
                [upstream.health_check]\npath = \"/h\"\ninterval = \"1s\"\ntimeout = \"2s\"\n\n\
                [[route]]\npath_prefix = \"api\"\nupstream = \"app\"\n\n\
                [[route]]\nupstream = \"app\"\n\n\
                [[route]]\nhost = \"x.example\"\nupstream = \"app\"\n";
    let f = TempFile::new(text);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    for needle in [
        "route[0].path_prefix: \"api\" does not start with \"/\"",
        "route[2]: this route is never reached: route[1] before it matches every request",
        "health_check.timeout: 2s is not shorter than the interval 1s",
        "server 127.0.0.1:8001 is listed twice",
    ] {
        assert!(
            o.stderr.contains(needle),
            "{needle:?} missing in {}",
            o.stderr
        );
    }
}

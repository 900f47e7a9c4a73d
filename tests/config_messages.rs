//! Every kind of config-file message, with the built binary: its text and
//! the line it names. An error or warning names the file, the line of
//! the key (or value) at fault and the key's path
//! (`F:14: upstream[0].health_check.rise: …`); unknown keys come with a
//! hint; `--check-config` ends with one line saying the file is valid.

mod util;

use util::*;

/// Both `--check-config` and `--config` reject `text` (exit 2) with
/// `FILE:LINE: PATH: ` on stderr and every one of `needles` after it.
#[track_caller]
fn rejected_at(text: &str, line: usize, path: &str, needles: &[&str]) {
    let f = TempFile::new(text);
    let at = format!("config file {}:{line}: {path}: ", f.path());
    for flag in ["--check-config", "--config"] {
        let o = run_sluice(&[flag, f.path()]);
        assert_eq!(o.status.code(), Some(2), "{flag} {text:?}: {}", o.stderr);
        let msg = o
            .stderr
            .split_once(&at)
            .map(|(_, m)| m)
            .unwrap_or_else(|| panic!("{flag}: {at:?} missing in {:?}", o.stderr));
        for n in needles {
            assert!(msg.contains(n), "{flag}: {n:?} missing in {msg:?}");
        }
        assert!(o.stdout.is_empty(), "nothing on stdout when invalid");
    }
}

/// `--check-config` accepts `text` (exit 0) and warns `FILE:LINE: PATH: `
/// with `needle` after it; the last line says the file is valid.
#[track_caller]
fn warned_at(text: &str, line: usize, path: &str, needle: &str) {
    let f = TempFile::new(text);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    let at = format!("sluice: warning: config file {}:{line}: {path}: ", f.path());
    let found = o
        .stderr
        .lines()
        .any(|l| l.strip_prefix(&at).is_some_and(|m| m.contains(needle)));
    assert!(found, "{at:?} then {needle:?} missing in {:?}", o.stderr);
    let last = o.stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!("sluice: config file {} is valid (", f.path())),
        "{last:?}"
    );
}

const GROUP: &str = "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8001\"]\n";

// --- unknown keys and their hints ------------------------------------------

#[test]
fn a_typo_in_a_table_gets_did_you_mean() {
    let text = format!("listen = \"127.0.0.1:1\"\n\n{GROUP}max_fail = 2\n");
    rejected_at(
        &text,
        6,
        "upstream[0].max_fail",
        &["unknown key `max_fail` in [[upstream]]; did you mean `max_fails`?"],
    );
    let check = format!("{GROUP}[upstream.health_check]\npath = \"/h\"\nrize = 2\n");
    rejected_at(
        &check,
        6,
        "upstream[0].health_check.rize",
        &["in [upstream.health_check]; did you mean `rise`?"],
    );
}

#[test]
fn a_typo_at_the_top_level_gets_did_you_mean() {
    rejected_at(
        "listen = \"127.0.0.1:1\"\nkeepalive_timout = \"5s\"\n",
        2,
        "keepalive_timout",
        &["unknown key `keepalive_timout` in the top level; did you mean `keepalive_timeout`?"],
    );
    // A flag's spelling is not a key, but close to one.
    rejected_at(
        "\n\nkeepalive-timeout = \"5s\"\n",
        3,
        "keepalive-timeout",
        &["did you mean `keepalive_timeout`?"],
    );
}

#[test]
fn a_repeated_table_written_with_single_brackets_gets_the_double_bracket_hint() {
    // `[route]` for `[[route]]`: alone, "expected a sequence"; twice, a
    // duplicate key (found by a new-user pass: neither said what to fix).
    for routes in [1, 2] {
        let text = format!("{GROUP}{}", "[route]\nupstream = \"app\"\n".repeat(routes));
        let f = TempFile::new(&text);
        let o = run_sluice(&["--check-config", f.path()]);
        assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
        assert!(
            o.stderr
                .contains("(write each route as a [[route]] table, with double brackets)"),
            "{routes}: {}",
            o.stderr
        );
    }
}

#[test]
fn an_nginx_directive_written_as_a_key_names_the_key_it_is_here() {
    rejected_at(
        "listen = \"127.0.0.1:1\"\nclient_max_body_size = 1048576\n",
        2,
        "client_max_body_size",
        &["nginx's `client_max_body_size` is `max_body_size` (bytes"],
    );
    let text = format!("{GROUP}\n[[route]]\nserver_name = \"a.example\"\nupstream = \"app\"\n");
    rejected_at(
        &text,
        6,
        "route[0].server_name",
        &["nginx's `server_name` is `host` in a [[route]] table"],
    );
}

#[test]
fn an_address_without_quotes_says_to_quote_it() {
    // toml's words were "invalid float, expected nothing" and "unexpected
    // key or value", which name neither quotes nor the address.
    rejected_at(
        "listen = 127.0.0.1:8080\n",
        1,
        "listen",
        &["(an address is a string in quotes: \"127.0.0.1:8080\")"],
    );
    rejected_at(
        "listen = \"127.0.0.1:1\"\nupstream = [::1]:8000   # the app\n",
        2,
        "upstream",
        &["(an address is a string in quotes: \"[::1]:8000\")"],
    );
}

#[test]
fn a_table_key_given_an_array_says_it_is_one_table() {
    // serde reads an array as a struct's fields in order: this file was
    // valid and turned health checks on with every default.
    rejected_at(
        "listen = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:2\"]\nhealth_check = []\n",
        5,
        "upstream[0].health_check",
        &["is one table ([upstream.health_check]), not an array"],
    );
    let text = format!("{GROUP}\n[[route]]\nupstream = \"app\"\nrate_limit = [10, 20]\n");
    rejected_at(&text, 7, "route[0].rate_limit", &["not an array"]);
}

#[test]
fn a_key_of_another_table_names_that_table() {
    let text = format!("{GROUP}rise = 2\n");
    rejected_at(
        &text,
        4,
        "upstream[0].rise",
        &["unknown key `rise` in [[upstream]]: it is a key of [upstream.health_check]"],
    );
    // Not for a route's `path` (a health check's key too): the user meant
    // path_prefix (found by a new-user pass).
    let route = format!("{GROUP}\n[[route]]\nupstream = \"app\"\npath = \"/old/\"\n");
    rejected_at(
        &route,
        7,
        "route[0].path",
        &["unknown key `path` in [[route]]; did you mean `path_prefix`?"],
    );
}

#[test]
fn an_unknown_key_without_a_near_one_points_to_the_list() {
    rejected_at(
        "listen = \"127.0.0.1:1\"\nfrobnicate = 1\n",
        2,
        "frobnicate",
        &["unknown key `frobnicate` in the top level (every key is listed in examples/sluice.toml"],
    );
    rejected_at(
        "[upstream_pool]\nsize = 3\n",
        1,
        "upstream_pool",
        &["unknown key `upstream_pool`"],
    );
}

#[test]
fn a_top_level_key_after_a_table_says_toml_put_it_there() {
    let text = format!(
        "listen = \"127.0.0.1:1\"\n\n{GROUP}\n[[route]]\nupstream = \"app\"\n\n\
         admin = \"127.0.0.1:9000\"\n"
    );
    rejected_at(
        &text,
        10,
        "route[0].admin",
        &[
            "`admin` is a top-level key, but it comes after the [[route]] header on line 7",
            "top-level keys go before the first [table] or [[table]]",
        ],
    );
    // After `[upstream.health_check]`: TOML put it in the check.
    let text = format!("{GROUP}[upstream.health_check]\npath = \"/h\"\nworkers = 2\n");
    rejected_at(
        &text,
        6,
        "upstream[0].health_check.workers",
        &["after the [upstream.health_check] header on line 4"],
    );
}

#[test]
fn upstream_beside_upstream_tables_says_which_form_to_keep() {
    let before = format!("upstream = \"127.0.0.1:8001\"\n\n{GROUP}");
    rejected_at(
        &before,
        3,
        "upstream",
        &[
            "two forms of the same key",
            "keep the `[[upstream]]` tables",
            "or keep `upstream = [...]`",
        ],
    );
    let after = format!("{GROUP}\nupstream = \"127.0.0.1:8001\"\n");
    rejected_at(
        &after,
        5,
        "upstream[0].upstream",
        &[
            "inside an [[upstream]] table",
            "keep the `[[upstream]]` tables",
        ],
    );
}

// --- values --------------------------------------------------------------------

#[test]
fn a_group_no_route_names_is_warned_about() {
    let text = "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n\n\
                [[upstream]]\nname = \"api\"\nservers = [\"127.0.0.1:9\"]\n\n\
                [[route]]\nupstream = \"app\"\n";
    warned_at(
        text,
        6,
        "upstream[1].name",
        "no route sends requests to group \"api\"",
    );
}

#[test]
fn more_workers_than_cpus_is_warned_about() {
    // The most allowed; no machine this runs on has 1024 CPUs.
    warned_at(
        "listen = \"127.0.0.1:0\"\nworkers = 1024\n",
        2,
        "workers",
        "1024 workers on the",
    );
}

#[test]
fn a_number_out_of_range_is_described_in_words() {
    // Was "expected usize" / "expected u32": Rust's type names.
    rejected_at(
        "max_connections = -1\n",
        1,
        "max_connections",
        &["expected a whole number, 0 or more"],
    );
    rejected_at(
        "listen = \"127.0.0.1:0\"\nmax_retries = 5000000000\n",
        2,
        "max_retries",
        &["expected a whole number from 0 to 4294967295"],
    );
}

#[test]
fn a_word_written_without_quotes_names_the_words() {
    // Was "wanted string or table": toml's words, naming neither what
    // was written nor what the key takes.
    rejected_at(
        "listen = \"127.0.0.1:0\"\ntls_min_version = 1.3\n",
        2,
        "tls_min_version",
        &["invalid type: 1.3, expected a string in quotes: `1.2` or `1.3`"],
    );
    let text = format!("{GROUP}balance = true\n");
    rejected_at(
        &text,
        4,
        "upstream[0].balance",
        &["invalid type: true, expected a string in quotes: one of `round_robin`"],
    );
}

#[test]
fn a_table_given_as_a_value_says_what_the_table_holds() {
    // Was "expected struct RateLimitSpec": a Rust type name.
    let text = format!("{GROUP}\n[[route]]\nupstream = \"app\"\nrate_limit = \"10r/s\"\n");
    rejected_at(
        &text,
        7,
        "route[0].rate_limit",
        &["invalid type: string \"10r/s\", expected a table like \
             { requests_per_second = 10, burst = 20 }"],
    );
    rejected_at(
        "[[upstream]]\nname = \"app\"\nservers = \"127.0.0.1:8001\"\n",
        3,
        "upstream[0].servers",
        &["expected an array: [\"127.0.0.1:8001\"]"],
    );
    let text = format!("{GROUP}health_check = \"/healthz\"\n");
    rejected_at(
        &text,
        4,
        "upstream[0].health_check",
        &["expected a table: [upstream.health_check] with path"],
    );
}

#[test]
fn a_bad_value_in_a_table_names_its_own_line() {
    // The group starts on line 1; `rise = 0` is on line 14.
    let text = format!(
        "{GROUP}[upstream.health_check]\npath = \"/h\"\n{}rise = 0\n",
        "\n".repeat(8)
    );
    rejected_at(
        &text,
        14,
        "upstream[0].health_check.rise",
        &["must be at least 1"],
    );
    let text = format!("{GROUP}[upstream.health_check]\npath = \"h\"\n");
    rejected_at(
        &text,
        5,
        "upstream[0].health_check.path",
        &["must start with /"],
    );
    let weights = "[[upstream]]\nname = \"app\"\nservers = [\n  \"127.0.0.1:1\",\n  \
                   \"127.0.0.1:2 weight=0\",\n]\n";
    rejected_at(
        weights,
        5,
        "upstream[0].servers[1]",
        &["weight must be 1..=1000"],
    );
    let tls = format!("{GROUP}\ntls_ca = \"/etc/ca.pem\"\n");
    rejected_at(
        &tls,
        5,
        "upstream[0].tls_ca",
        &["tls_* settings without tls = true"],
    );
}

#[test]
fn a_value_of_the_wrong_syntax_names_its_key_path() {
    let text = format!("{GROUP}\n\nfail_timeout = \"soon\"\n");
    rejected_at(
        &text,
        6,
        "upstream[0].fail_timeout",
        &["\"soon\" is not a duration"],
    );
    rejected_at(
        "listen = \"127.0.0.1:1\"\n\nmax_retries = \"x\"\n",
        3,
        "max_retries",
        &["invalid type"],
    );
    rejected_at(
        "\n[[upstream]]\nname = \"app\"\n",
        2,
        "upstream[0]",
        &["missing field `servers`"],
    );
}

#[test]
fn a_route_error_names_the_routes_key() {
    let unknown = format!("{GROUP}\n[[route]]\nhost = \"a.example\"\nupstream = \"nope\"\n");
    rejected_at(
        &unknown,
        7,
        "route[0].upstream",
        &["unknown upstream group \"nope\""],
    );
    let host = format!("{GROUP}\n[[route]]\nupstream = \"app\"\nhost = \"a.example:80\"\n");
    rejected_at(&host, 7, "route[0].host", &["is not a host name"]);
    let named = format!("{GROUP}\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:2\"]\n");
    rejected_at(
        &named,
        6,
        "upstream[1].name",
        &["group \"app\" is declared twice"],
    );
}

#[test]
fn a_top_level_value_that_does_not_fit_names_its_line() {
    rejected_at(
        "listen = \"127.0.0.1:1\"\nhigh_watermark = 1024\nlow_watermark = 4096\n",
        3,
        "low_watermark",
        &["must be below high-watermark"],
    );
    rejected_at(
        "listen = \"127.0.0.1:18080\"\n\nadmin = \"127.0.0.1:18080\"\n",
        3,
        "admin",
        &["overlaps the proxy's own listen address"],
    );
    // Two listeners that overlap: the later one's line, by its key path.
    rejected_at(
        "listen = [\"127.0.0.1:18080\"]\n\nlisten_tls = [\"127.0.0.1:9443\", \"127.0.0.1:18080\"]\n",
        3,
        "listen_tls[1]",
        &["127.0.0.1:18080 overlaps 127.0.0.1:18080, given before it"],
    );
    rejected_at(
        "listen = [\n  \"127.0.0.1:18080\",\n  \"0.0.0.0:18080\",\n]\n",
        3,
        "listen[1]",
        &["0.0.0.0:18080 overlaps 127.0.0.1:18080"],
    );
}

#[test]
fn a_value_from_a_flag_is_not_placed_in_the_file() {
    let f = TempFile::new("listen = \"127.0.0.1:1\"\nmax_connections = 5\n");
    let o = run_sluice(&["--check-config", f.path(), "--max-connections", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "invalid max_connections (--max-connections / max_connections in the config file): \
             must be at least 1"
        ),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains(":2:"), "{}", o.stderr);
}

// --- warnings --------------------------------------------------------------------

#[test]
fn routes_without_a_catch_all_are_warned_about() {
    let text = format!(
        "{GROUP}\n[[route]]\nhost = \"a.example\"\nupstream = \"app\"\n\n\
         [[route]]\npath_prefix = \"/api\"\nupstream = \"app\"\n"
    );
    warned_at(
        &text,
        9,
        "route[1]",
        "no route matches every request (one without host, path_prefix and scheme, \
         or one such route per scheme): a request that matches none gets 404",
    );
}

#[test]
fn a_catch_all_per_scheme_covers_every_request_and_a_scheme_without_listener_is_warned() {
    // http -> https redirect, then https to the group: every request has
    // a route (found by a break-it pass: "no route matches every
    // request" was printed for it).
    let cert = TestCert::new("schemes");
    let routes = "[[route]]\nscheme = \"http\"\nredirect = \"https://$host$request_uri\"\n\n\
                  [[route]]\nscheme = \"https\"\nupstream = \"app\"\n";
    let both = format!(
        "listen = \"127.0.0.1:0\"\nlisten_tls = \"127.0.0.1:0\"\n{}{GROUP}\n{routes}",
        cert.toml()
    );
    let f = TempFile::new(&both);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
    // Without a TLS listener the https route never matches.
    let plain = format!("listen = \"127.0.0.1:0\"\n{GROUP}\n{routes}");
    let line = plain
        .lines()
        .position(|l| l == "scheme = \"https\"")
        .unwrap()
        + 1;
    warned_at(
        &plain,
        line,
        "route[1].scheme",
        "no listen_tls address: no request comes over https, the route never matches",
    );
}

#[test]
fn a_route_that_answers_itself_and_names_an_upstream_is_warned_about() {
    // Found by a new-user pass: the upstream was silently ignored.
    let text = format!(
        "{GROUP}\n[[route]]\nredirect = \"/new$request_uri\"\nupstream = \"app\"\n\n\
         [[route]]\nupstream = \"app\"\n"
    );
    warned_at(
        &text,
        7,
        "route[0].upstream",
        "is not used: the route answers every request itself (redirect)",
    );
}

#[test]
fn accept_proxy_protocol_with_a_tls_listener_is_valid_without_a_warning() {
    // The TLS listeners read the header before the ClientHello
    // (tests/proxy_protocol_tls.rs); an earlier build warned that they did not.
    let cert = TestCert::new("pp-tls");
    let text = format!(
        "listen = \"127.0.0.1:0\"\nlisten_tls = \"127.0.0.1:0\"\n\
         accept_proxy_protocol = [\"127.0.0.1\"]\n{}",
        cert.toml()
    );
    let f = TempFile::new(&text);
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
}

#[test]
fn each_warning_names_its_line() {
    let text = format!(
        "{GROUP}[upstream.health_check]\npath = \"/h\"\ninterval = \"1s\"\ntimeout = \"2s\"\n\n\
         [[route]]\npath_prefix = \"api\"\nupstream = \"app\"\n\n\
         [[route]]\nupstream = \"app\"\n\n\
         [[route]]\nhost = \"x.example\"\nupstream = \"app\"\n"
    );
    warned_at(
        &text,
        10,
        "route[0].path_prefix",
        "\"api\" does not start with \"/\"",
    );
    warned_at(
        &text,
        16,
        "route[2]",
        "never reached: route[1] before it matches every request",
    );
    warned_at(
        &text,
        7,
        "upstream[0].health_check.timeout",
        "is not shorter than the interval",
    );
    // No timeout line: the warning says the 1 s is the default (found by
    // a break-it pass: it named a key the file does not set).
    let no_timeout = format!("{GROUP}[upstream.health_check]\ninterval = \"1s\"\n");
    warned_at(
        &no_timeout,
        4,
        "upstream[0].health_check.timeout",
        "1s (the default, if not set) is not shorter than the interval 1s",
    );
    // Certificates and no TLS listener: plain HTTP only (found by a
    // new-user pass: nothing said so).
    let cert = TestCert::new("cfg-no-listen-tls");
    let no_tls = format!(
        "{GROUP}[[certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.cert_path(),
        cert.key_path()
    );
    warned_at(&no_tls, 4, "certificate[0]", "no TLS listener");
    let twice = "[[upstream]]\nname = \"app\"\nservers = [\n  \"127.0.0.1:8001\",\n  \
                 \"127.0.0.1:8001\",\n]\n";
    warned_at(twice, 5, "upstream[0].servers[1]", "is listed twice");
}

#[test]
fn check_config_ends_saying_the_file_is_valid() {
    let f = TempFile::new("listen = \"127.0.0.1:1\"\nupstream = \"127.0.0.1:2\"\n");
    let o = run_sluice(&["--check-config", f.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(
        o.stderr.lines().last(),
        Some(format!("sluice: config file {} is valid", f.path()).as_str())
    );
    let o = run_sluice(&["--check-config", "/dev/null", "--upstream", "127.0.0.1:2"]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(
        o.stderr.lines().last(),
        Some("sluice: config file /dev/null is valid")
    );
}

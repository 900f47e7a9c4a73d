//! Unknown and misplaced keys: did-you-mean, the other table, nginx's
//! directive names, single brackets, keys that are not printable.

use super::*;

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
fn a_key_with_control_characters_is_shown_escaped_on_one_line() {
    // A quoted key holding a newline and an ESC sequence printed them raw:
    // a fake second line, and the terminal's colours changed (found by a
    // break-it pass). 100 KB values were echoed whole.
    let long = "x".repeat(100_000);
    for text in [
        "\"li\\nsten\\u001b[31m\" = \"127.0.0.1:8080\"\n".to_string(),
        format!("upstream = [\"{long}\"]\n"),
    ] {
        let f = TempFile::new(&text);
        let o = run_sluice(&["--check-config", f.path()]);
        assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
        let line = o
            .stderr
            .lines()
            .find(|l| l.contains("config file"))
            .unwrap_or_else(|| panic!("no message in {:?}", o.stderr));
        assert!(!o.stderr.contains('\u{1b}'), "raw ESC: {:?}", o.stderr);
        assert!(line.len() < 2_000, "{} bytes", line.len());
    }
}

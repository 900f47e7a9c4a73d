//! Values of the wrong type or syntax: what the key takes, in words,
//! on the value's own line.

use super::*;

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

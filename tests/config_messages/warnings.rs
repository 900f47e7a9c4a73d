//! Warnings (a file that is valid but likely wrong), each on its line,
//! and the closing line of `--check-config`.

use super::*;

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

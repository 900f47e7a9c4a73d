//! Every kind of config-file message, with the built binary: its text and
//! the line it names. An error or warning names the file, the line of
//! the key (or value) at fault and the key's path
//! (`F:14: upstream[0].health_check.rise: …`); unknown keys come with a
//! hint; `--check-config` ends with one line saying the file is valid.

#[path = "../util/mod.rs"]
mod util;

mod keys;
mod values;
mod warnings;

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

//! `sluice --print-man` and `sluice --print-completions SHELL`: the man page
//! sluice(8) and the bash, zsh and fish completion scripts, generated from
//! the one clap declaration of the command line (`cli::args::command`,
//! whose knobs come from `sluice::Config`), so they cannot drift from the
//! flags. `scripts/package.sh` writes them into the Debian package.
//!
//! The options come from `clap_mangen`, grouped by the same headings as
//! `--help`, each with its full doc comment and its default; the sections
//! clap knows nothing of (signals, exit status, environment, files, see
//! also) are written here in roff.
//!
//! What it must not know: the knobs one by one.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{ArgAction, Command};
use clap_complete::Shell;

use super::args::command;
use super::help::default_shown;

/// The sections after the options, in roff (man(7) macros). `\-` is a
/// minus sign, `\fB…\fR` bold, `\fI…\fR` italic.
const TAIL: &str = r#".SH "CONFIGURATION FILE"
\fB\-\-config\fR \fIFILE\fR reads a TOML file whose keys are the long flags' names
with underscores (\fBkeepalive_timeout = "60s"\fR); flags override it, a key at a time.
Upstream groups (\fB[[upstream]]\fR: servers with weights and backups, balancing,
passive ejection, active health checks, DNS), routes by host and path
(\fB[[route]]\fR: redirects, fixed answers, header rules, allow and deny lists,
body\-size limits) and TLS certificates (\fB[[certificate]]\fR) exist only there.
\fB\-\-check\-config\fR \fIFILE\fR validates a file and prints the effective
configuration. The example package file lists every key with its default.
.SH SIGNALS
The PID to signal is the supervisor's with \fB\-\-workers\fR \fIN\fR (\fB\-\-pid\-file\fR writes it).
.TP
\fBSIGTERM\fR, \fBSIGINT\fR, \fBSIGQUIT\fR
Graceful drain: stop accepting, let exchanges in flight finish within
\fB\-\-drain\-timeout\fR, then exit 0. A second one from the same sender stops at once.
.TP
\fBSIGHUP\fR
Reload the config file (with the command line's flags laid over it). An invalid
file, or one that changes \fBlisten\fR or \fBlisten_tls\fR, is refused with an ERROR line and the running
configuration stays. Run \fBsluice \-\-check\-config\fR first to see whether a reload will take.
.TP
\fBSIGUSR1\fR
Reopen the access log file (after logrotate renamed it).
.TP
\fBSIGUSR2\fR, \fBSIGALRM\fR, \fBSIGVTALRM\fR, \fBSIGPROF\fR, \fBSIGIO\fR, \fBSIGPWR\fR
Logged and ignored. \fBSIGPIPE\fR is ignored.
.SH "EXIT STATUS"
.TP
\fB0\fR
Stopped after a drain or a signal; \fB\-\-help\fR, \fB\-\-version\fR, \fB\-\-print\-man\fR,
\fB\-\-print\-completions\fR, a valid \fB\-\-check\-config\fR.
.TP
\fB1\fR
Runtime error: the address cannot be bound, the pid file or access log cannot be
written (\fB\-\-check\-config\fR too), the loop failed, a worker did not exit 0.
.TP
\fB2\fR
Usage or configuration error: an unknown flag, an invalid value, an invalid config
file (file, line and key named), an upstream host name that does not resolve at start.
The systemd unit does not restart on it (\fBRestartPreventExitStatus=2\fR).
.SH ENVIRONMENT
.TP
\fBRUST_LOG\fR
Level of the diagnostics on standard error: \fBerror\fR, \fBwarn\fR, \fBinfo\fR (the default),
\fBdebug\fR, \fBtrace\fR, or \fBmodule=level\fR lists. An invalid value falls back to \fBwarn\fR.
Access records do not depend on it.
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd for \fBType=notify\fR: sluice sends \fBREADY=1\fR once it listens,
\fBRELOADING=1\fR on SIGHUP and \fBSTOPPING=1\fR when a drain starts.
.TP
\fBSLUICE_ADMIN\fR
The admin address \fBsluice status\fR asks when neither \fB\-\-admin\fR nor \fB\-\-config\fR is given.
.SH FILES
.TP
\fI/etc/sluice/sluice.toml\fR
The configuration file of the packaged service.
.TP
\fI/var/log/sluice/access.log\fR
The packaged service's access log when the file says so (\fBaccess_log\fR); rotated
by \fI/etc/logrotate.d/sluice\fR (rename, then SIGUSR1).
.TP
\fI/run/sluice/sluice.pid\fR
The pid file when \fBpid_file\fR names it.
.TP
\fI/lib/systemd/system/sluice.service\fR
The systemd unit: \fBsystemctl reload sluice\fR checks the file, then sends SIGHUP.
.TP
\fI/usr/share/doc/sluice/\fR
The reference in docs/: configuration.md (every key and flag), operations.md,
observability.md, errors.md, performance.md; examples/groups.toml.
.SH "SEE ALSO"
\fBsystemctl\fR(1), \fBjournalctl\fR(1), \fBlogrotate\fR(8), \fBnginx\fR(8), \fBhaproxy\fR(1)
"#;

/// The man page sluice(8), roff.
pub fn man_page() -> Vec<u8> {
    let cmd = with_defaults_in_long_help(command());
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .title("SLUICE")
        .manual("System Administration");
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    out.extend_from_slice(SYNOPSIS.as_bytes());
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    out.extend_from_slice(TAIL.as_bytes());
    let _ = man.render_version_section(&mut out);
    out
}

/// The synopsis, by hand: clap's would list every flag on one line.
const SYNOPSIS: &str = r#".SH SYNOPSIS
\fBsluice\fR \fB\-\-listen\fR \fIADDR\fR \fB\-\-upstream\fR \fIADDR\fR [\fIoptions\fR]
.br
\fBsluice\fR \fB\-\-config\fR \fIFILE\fR [\fIoptions\fR]
.br
\fBsluice\fR \fB\-\-check\-config\fR \fIFILE\fR [\fIoptions\fR]
.br
\fBsluice status\fR [\fB\-\-admin\fR \fIADDR\fR | \fB\-\-config\fR \fIFILE\fR] [\fB\-\-json\fR] [\fB\-\-drain\fR|\fB\-\-maintenance\fR|\fB\-\-ready\fR \fIGROUP ADDR\fR]
.br
\fBsluice\fR \fB\-\-print\-man\fR | \fB\-\-print\-completions\fR \fBbash\fR|\fBzsh\fR|\fBfish\fR
"#;

/// Each knob's long help (its whole doc comment) followed by its default,
/// as `--help` shows it.
/// A `--no-…` flag (it turns a knob off) starts with its own help line:
/// the doc comment describes the knob it turns off.
fn with_defaults_in_long_help(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let short = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        let long = a.get_long_help().map(|h| h.to_string());
        let mut text = match (a.get_action(), long) {
            (ArgAction::SetFalse, Some(long)) => format!("{short}.\n\nWithout it: {long}"),
            (_, Some(long)) => long,
            (_, None) => short,
        };
        if let Some(d) = default_shown(&a) {
            text.push_str(&format!("\n\nDefault: {d}."));
        }
        a.long_help(text)
    })
}

/// The completion script for `shell` (`bash`, `zsh` or `fish`); `None`
/// for another name (the flag's parser allows only these three).
pub fn completions(shell: &str) -> Option<Vec<u8>> {
    let shell = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        _ => return None,
    };
    let mut cmd = command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sluice", &mut out);
    Some(out)
}

/// `--print-man`: the page on standard output.
pub fn print_man() -> ExitCode {
    emit(&man_page())
}

/// `--print-completions SHELL`: the script on standard output.
pub fn print_completions(shell: &str) -> ExitCode {
    match completions(shell) {
        Some(script) => emit(&script),
        None => {
            eprintln!("sluice: --print-completions: {shell:?} is not bash, zsh or fish");
            ExitCode::from(2)
        }
    }
}

/// Writes `bytes` to standard output; 1 if that fails (a closed pipe).
fn emit(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: cannot write to standard output: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn man() -> String {
        String::from_utf8(man_page()).unwrap()
    }

    #[test]
    fn the_man_page_has_every_flag_and_the_sections() {
        let page = man();
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH SIGNALS",
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH \"SEE ALSO\"",
            ".SH TIMEOUTS",
            ".SH LIMITS",
            ".SH POOL",
            ".SH ADMIN",
        ] {
            assert!(page.contains(section), "no {section}");
        }
        for arg in command().get_arguments() {
            let long = arg.get_long().unwrap().replace('-', "\\-");
            assert!(page.contains(&format!("\\-\\-{long}")), "no --{long}");
        }
        assert!(page.contains("Default: 60s."), "defaults shown");
        assert!(
            page.contains("Default: 1h."),
            "durations as the docs write them"
        );
    }

    #[test]
    fn completions_for_three_shells_name_the_flags() {
        for shell in ["bash", "zsh", "fish"] {
            let script = String::from_utf8(completions(shell).unwrap()).unwrap();
            assert!(script.contains("keepalive-timeout"), "{shell}");
            assert!(script.contains("check-config"), "{shell}");
        }
        assert!(completions("tcsh").is_none());
    }
}

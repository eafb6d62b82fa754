//! The man page `ptyd(1)`, rendered as roff from the command table in
//! `help/` (the same entries `--help` prints) plus the sections only a
//! manual has: files, environment, exit status, systemd. The shipped
//! `packaging/man/ptyd.1` is this output; a test keeps it current and
//! checks that `man -l` renders it.

use super::help::{COMMANDS, Command, EXIT_CODES, GLOBAL_OPTIONS, Opt, TAGLINE};

/// Escapes text for roff: backslashes, hyphens (so they stay ASCII hyphens
/// and options can be searched for), and a leading `.` or `'` that would
/// start a request.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|line| {
            if line.starts_with('.') || line.starts_with('\'') {
                format!("\\&{line}")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prose paragraphs; an indented block (an example) is kept verbatim.
fn paragraphs(out: &mut String, text: &str) {
    for para in text.split("\n\n") {
        if para.lines().all(|l| l.starts_with("  ")) {
            out.push_str(".PP\n.RS 4\n.nf\n");
            for line in para.lines() {
                out.push_str(&roff(line.trim_start()));
                out.push('\n');
            }
            out.push_str(".fi\n.RE\n");
        } else {
            out.push_str(".PP\n");
            out.push_str(&roff(para));
            out.push('\n');
        }
    }
}

fn option(out: &mut String, o: &Opt) {
    let mut label = match o.short {
        Some(c) => format!("\\fB\\-{c}\\fR, \\fB\\-\\-{}\\fR", roff(o.long)),
        None => format!("\\fB\\-\\-{}\\fR", roff(o.long)),
    };
    if let Some(v) = o.value {
        label.push_str(&format!(" \\fI{}\\fR", roff(v)));
    }
    out.push_str(&format!(".TP\n{label}\n{}\n", roff(o.help)));
}

fn command(out: &mut String, c: &Command) {
    out.push_str(&format!(".SS {}\n", roff(c.name)));
    out.push_str(".nf\n");
    for usage in c.usage {
        if usage.starts_with(' ') {
            out.push_str(&format!("        {}\n", roff(usage.trim_start())));
        } else {
            out.push_str(&format!("\\fBptyd\\fR {}\n", roff(usage)));
        }
    }
    out.push_str(".fi\n");
    paragraphs(out, c.about);
    for o in c.options {
        option(out, o);
    }
    if !c.aliases.is_empty() {
        out.push_str(&format!(
            ".PP\nAlso: {}.\n",
            c.aliases
                .iter()
                .map(|a| format!("\\fBptyd {}\\fR", roff(a)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The whole page.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str(&format!(
        ".\\\" ptyd(1), generated from src/cli/help/ by src/cli/manpage.rs; do not edit.\n\
         .TH PTYD 1 \"\" \"ptyd {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(&format!(".SH NAME\nptyd \\- {}\n", roff(TAGLINE)));
    out.push_str(
        ".SH SYNOPSIS\n\\fBptyd\\fR [\\fB\\-L\\fR \\fINAME\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n",
    );
    out.push_str(".SH DESCRIPTION\n");
    paragraphs(
        &mut out,
        "ptyd is a per-user daemon that keeps terminals alive. It owns programs
running in PTYs (shells, coding-agent CLIs, long jobs), lets people and
scripts drive them over a Unix socket, and survives upgrading its own
binary (a live upgrade: same processes, no hangup) and a reboot (panes
come back from a snapshot by their restore policy).

ptyd server is the daemon; every other command is a client of its socket.
Client commands start a server in the background when none runs. TARGET is
a pane id (p3) or a pane name. Every command has --help.",
    );
    out.push_str(".SH OPTIONS\n");
    for o in GLOBAL_OPTIONS {
        option(&mut out, o);
    }
    out.push_str(".SH COMMANDS\n");
    for c in COMMANDS {
        command(&mut out, c);
    }
    out.push_str(".SH SYSTEMD\n");
    paragraphs(
        &mut out,
        "ptyd service install --enable writes ptyd.service and ptyd.socket to
~/.config/systemd/user and starts them. The socket unit listens on the
namespace's socket and hands it to the server (socket activation).
systemctl --user reload ptyd is a live upgrade. Never use restart to
upgrade: stopping the service kills every process in its cgroup, which is
every pane. loginctl enable-linger keeps your user manager, and so ptyd,
running after you log out, and starts it at boot.",
    );
    out.push_str(".SH FILES\n");
    for (path, what) in [
        (
            "$XDG_RUNTIME_DIR/ptyd/NAMESPACE/ptyd.sock",
            "the socket (0600; its directories 0700). Without XDG_RUNTIME_DIR: /tmp/ptyd-UID/NAMESPACE/.",
        ),
        (
            "$XDG_RUNTIME_DIR/ptyd/NAMESPACE/ptyd.lock",
            "held by the serving server for its lifetime.",
        ),
        (
            "$XDG_RUNTIME_DIR/ptyd/NAMESPACE/shell/",
            "the shell-integration scripts (0700), written at server start and loaded into the bash, zsh and fish panes start (see ptyd shell-init).",
        ),
        (
            "$XDG_STATE_HOME/ptyd/NAMESPACE/session.json",
            "the snapshot restored at start (default ~/.local/state). Beside it: per-pane history, diagnostics.jsonl (rotated at 1 MiB) and server.stderr of a background server.",
        ),
        (
            "$XDG_CONFIG_HOME/ptyd/config.toml",
            "optional settings: scrollback limits, shell, TERM and restore policy of new panes, resume rules, autostart, save debounce, upgrade timeouts (default ~/.config; see ptyd config check and ptyd config reload). A config.json is read only while no config.toml exists, with a deprecation notice.",
        ),
    ] {
        out.push_str(&format!(".TP\n\\fI{}\\fR\n{}\n", roff(path), roff(what)));
    }
    out.push_str(".SH ENVIRONMENT\n");
    for (var, what) in [
        ("PTYD_NAMESPACE", "the namespace when -L is not given."),
        ("PTYD_PANE_ID", "set inside every pane to its id."),
        ("SHELL", "the login shell of new panes."),
        (
            "LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES",
            "socket activation by systemd: the server adopts the passed socket if it is the namespace's.",
        ),
        (
            "NOTIFY_SOCKET",
            "systemd's readiness protocol (Type=notify).",
        ),
    ] {
        out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(var), roff(what)));
    }
    out.push_str(".SH EXIT STATUS\n");
    paragraphs(&mut out, EXIT_CODES);
    out.push_str(".SH SEE ALSO\n\\fBtmux\\fR(1), \\fBsystemctl\\fR(1), \\fBloginctl\\fR(1), \\fBsystemd.socket\\fR(5)\n");
    out
}

#[cfg(test)]
mod tests {
    /// The shipped page is current.
    #[test]
    fn shipped_man_page_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/man/ptyd.1");
        let text = super::render();
        if std::env::var_os("PTYD_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let shipped = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            shipped == text,
            "packaging/man/ptyd.1 is stale; regenerate the shipped files with \
             `PTYD_BLESS=1 cargo test --lib`"
        );
    }

    #[test]
    fn escapes_roff() {
        assert_eq!(super::roff(".x -y \\z"), "\\&.x \\-y \\ez");
    }
}

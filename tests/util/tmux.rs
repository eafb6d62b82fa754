//! A private tmux server: the outer terminal for `ptyd attach` and
//! `ptyd new`, and the reference terminal the model is compared with.

use super::server::{Ptyd, run_bounded, stderr, stdout, unique_name};
use std::process::{Command, Stdio};

/// A private tmux server (its own socket and `TMUX_TMPDIR`), killed on drop.
pub struct Tmux {
    pub socket_name: String,
    pub tmpdir: tempfile::TempDir,
}

impl Tmux {
    pub fn new() -> Tmux {
        Tmux {
            socket_name: unique_name("ptyd-test"),
            tmpdir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env("TMUX_TMPDIR", self.tmpdir.path())
            .env_remove("TMUX")
            .args(["-L", &self.socket_name, "-f", "/dev/null"]);
        cmd
    }

    /// Starts the detached session `main`, `cols` x `rows`, running
    /// `command`.
    pub fn new_session(&self, cols: u16, rows: u16, command: &str) {
        let (cols, rows) = (cols.to_string(), rows.to_string());
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &cols,
            "-y",
            &rows,
            command,
        ]);
    }

    /// Runs a tmux command that must succeed; returns its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = self.command();
        cmd.args(args);
        let out = run_bounded(cmd, &format!("tmux {args:?}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {:?} {}",
            out.status,
            stderr(&out)
        );
        stdout(&out)
    }

    /// The visible screen of the session `main`.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "main"])
    }

    /// Polls the tmux screen (tmux has no event to wait on) until `check`.
    #[track_caller]
    pub fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        super::eventually(format!("tmux's screen to show {what}"), || {
            let screen = self.screen();
            if check(&screen) {
                Ok(screen)
            } else {
                Err(format!("the screen:\n{screen}"))
            }
        })
    }

    /// `send-keys -t main KEYS...`.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let mut cmd = self.command();
        cmd.arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = cmd.status();
    }
}

impl Tmux {
    /// A tmux whose session runs the outer shell ([`outer_shell`]) at
    /// `cols` x `rows`, once its prompt shows.
    pub fn outer_session(ptyd: &Ptyd, cols: u16, rows: u16) -> Tmux {
        let tmux = Tmux::new();
        tmux.new_session(cols, rows, &outer_shell(ptyd));
        tmux.wait_screen("the outer prompt", |s| s.contains("outer$"));
        tmux
    }

    /// Types `line` and Enter into the session's terminal.
    pub fn type_line(&self, line: &str) {
        self.keys(&["-l", line]);
        self.keys(&["Enter"]);
    }
}

/// The command for a shell (prompt `outer$ `) whose `ptyd` commands reach
/// `ptyd`'s server: the outer terminal of attach tests, run inside tmux.
pub fn outer_shell(ptyd: &Ptyd) -> String {
    format!(
        "env XDG_RUNTIME_DIR={} XDG_STATE_HOME={} PTYD_NAMESPACE={} PS1='outer$ ' /bin/sh",
        shell_quote(ptyd.dirs.runtime.to_str().unwrap()),
        shell_quote(ptyd.dirs.state.to_str().unwrap()),
        shell_quote(&ptyd.namespace),
    )
}

/// Quotes `s` for a POSIX shell command line.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

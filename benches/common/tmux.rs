//! A private tmux server for the comparisons: its own socket (`-S`) in the
//! bench's temporary directory and its own configuration file, so neither
//! the user's tmux nor their `~/.tmux.conf` takes part. Killed on drop.

use super::pty::PtyProc;
use super::{Res, output_within, path_str};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one tmux command may take (a `wait-for` included).
pub const TMUX_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Tmux {
    socket: PathBuf,
    config: PathBuf,
}

/// tmux's version (`tmux -V`), or why there is none.
pub fn version() -> Res<String> {
    let mut c = Command::new("tmux");
    c.arg("-V");
    let out = output_within(c, Duration::from_secs(10), "tmux -V")?;
    if !out.status.success() {
        return Err(format!("tmux -V exited with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Tmux {
    /// A server that will run with `options` (tmux `set -g` lines) from its
    /// first session on; nothing runs until [`Tmux::new_session`].
    pub fn new(tmp: &Path, tag: &str, options: &[&str]) -> Res<Tmux> {
        let dir = tmp.join("tmux");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let config = dir.join(format!("{tag}.conf"));
        let mut text = String::from("set -g status off\n");
        for o in options {
            text.push_str(&format!("set -g {o}\n"));
        }
        std::fs::write(&config, text).map_err(|e| format!("writing {}: {e}", config.display()))?;
        Ok(Tmux {
            socket: dir.join(format!("{tag}.sock")),
            config,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn cmd(&self) -> Res<Command> {
        let mut c = Command::new("tmux");
        c.env_remove("TMUX")
            .args(["-S", path_str(&self.socket)?, "-f", path_str(&self.config)?]);
        Ok(c)
    }

    /// Runs one tmux command (or several joined by `;`); its stdout.
    pub fn run(&self, args: &[&str]) -> Res<String> {
        let mut c = self.cmd()?;
        c.args(args);
        let what = format!("tmux {}", args.first().copied().unwrap_or(""));
        let out = output_within(c, TMUX_TIMEOUT, &what)?;
        if !out.status.success() {
            let shown = if args.len() > 8 {
                format!("{:?} and {} more arguments", &args[..8], args.len() - 8)
            } else {
                format!("{args:?}")
            };
            return Err(format!(
                "tmux {shown} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A detached session of `cols`x`rows` running `command`.
    pub fn new_session(&self, name: &str, command: &str, cols: u16, rows: u16) -> Res<()> {
        let (c, r) = (cols.to_string(), rows.to_string());
        self.run(&["new-session", "-d", "-s", name, "-x", &c, "-y", &r, command])
            .map(drop)
    }

    /// Adds `n` detached windows running `command` to `session`, a hundred
    /// per tmux invocation (a longer command line is refused).
    pub fn new_windows(&self, session: &str, command: &str, n: usize) -> Res<()> {
        let mut left = n;
        while left > 0 {
            let batch = left.min(100);
            let mut args: Vec<&str> = Vec::with_capacity(batch * 6);
            for i in 0..batch {
                if i > 0 {
                    args.push(";");
                }
                args.extend(["new-window", "-d", "-t", session, command]);
            }
            self.run(&args)?;
            left -= batch;
        }
        Ok(())
    }

    /// The tmux server's pid.
    pub fn server_pid(&self) -> Res<u32> {
        let out = self.run(&["display", "-p", "#{pid}"])?;
        out.trim()
            .parse()
            .map_err(|_| format!("tmux display #{{pid}} printed {out:?}"))
    }

    /// `tmux attach -t session` in a bare PTY of the given size, as a user
    /// would run it in their terminal (UTF-8 forced, TERM=xterm-256color).
    pub fn attach_client(&self, session: &str, cols: u16, rows: u16) -> Res<PtyProc> {
        let (socket, config) = (path_str(&self.socket)?, path_str(&self.config)?);
        PtyProc::spawn(
            &[
                "tmux", "-u", "-S", socket, "-f", config, "attach", "-t", session,
            ],
            &[("TERM", Path::new("xterm-256color"))],
            cols,
            rows,
        )
    }

    /// Polls until a client is attached. tmux has no way to wait for that.
    pub fn wait_client(&self) -> Res<()> {
        let deadline = Instant::now() + TMUX_TIMEOUT;
        while self.run(&["list-clients"])?.trim().is_empty() {
            if Instant::now() > deadline {
                return Err("tmux client did not attach".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        if let Ok(mut c) = self.cmd() {
            c.arg("kill-server");
            let _ = output_within(c, Duration::from_secs(10), "tmux kill-server");
        }
    }
}

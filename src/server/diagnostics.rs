//! Notable events, as one line on stderr each and in a bounded
//! `diagnostics.jsonl` in the namespace's state dir. The file is rotated to
//! `diagnostics.jsonl.1` past [`MAX_BYTES`], so it never grows without bound.
//! On stderr each line carries the syslog priority of its tag when stderr
//! is the journal (`service::journal`).

use crate::service::journal::{self, Priority};
use serde_json::json;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

const MAX_BYTES: u64 = 1 << 20;
/// Longest message kept whole in a log line.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

pub struct Diagnostics {
    path: PathBuf,
    file: Option<File>,
    written: u64,
}

impl Diagnostics {
    /// Opens the log for appending; without it ptyd still logs to stderr.
    pub fn open(path: PathBuf) -> Diagnostics {
        let file = crate::persist::files::open_append(&path).ok();
        let written = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        Diagnostics {
            path,
            file,
            written,
        }
    }

    /// Logs one event. `what` is a short stable tag (`accept_refused`), the
    /// message is for people.
    pub fn log(&mut self, what: &str, message: &str) {
        // A message quoting a hostile value must not make a huge line.
        let message = &*crate::validate::excerpt(message, MAX_MESSAGE_BYTES);
        journal::write_line(&journal::line(
            priority(what),
            &format!("{what}: {message}"),
        ));
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut line = json!({ "ts_ms": ms, "event": what, "message": message }).to_string();
        line.push('\n');
        if self.written + line.len() as u64 > MAX_BYTES {
            self.rotate();
        }
        if let Some(file) = &mut self.file
            && file.write_all(line.as_bytes()).is_ok()
        {
            self.written += line.len() as u64;
        }
    }

    fn rotate(&mut self) {
        self.file = None;
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        let _ = std::fs::rename(&self.path, old);
        self.file = crate::persist::files::open_append(&self.path).ok();
        self.written = 0;
    }
}

/// The syslog priority of an event, by its tag: failures are errors,
/// refusals and repairs warnings, the server's life cycle notices, the rest
/// (a pane started) information.
fn priority(what: &str) -> Priority {
    match what {
        _ if what.ends_with("_failed") => Priority::Err,
        "snapshot_unusable" => Priority::Err,
        "accept_refused"
        | "client_too_slow"
        | "config_ignored"
        | "input_dropped"
        | "restore_repair"
        | "snapshot_set_aside"
        | "upgrade_refused"
        | "upgrade_taken_back"
        | "takeover"
        | "partial_lines_over_budget" => Priority::Warning,
        "started" | "stopping" | "stopped" | "restored" | "upgrade_started"
        | "upgrade_committed" | "upgraded" | "upgrade_restore" | "released"
        | "upgrade_released" => Priority::Notice,
        _ => Priority::Info,
    }
}

/// A pane's command for people: `sleep 1000`, `shell: make test`, `login
/// shell`. Words with spaces or quotes are single-quoted.
pub fn describe_command(command: &crate::model::CommandSpec) -> String {
    use crate::model::CommandSpec;
    match command {
        CommandSpec::Argv(argv) => argv
            .iter()
            .map(|w| {
                if !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
                {
                    w.clone()
                } else {
                    format!("'{}'", w.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        CommandSpec::Shell(s) => format!("shell: {s}"),
        CommandSpec::LoginShell => "login shell".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::CommandSpec;

    #[test]
    fn commands_read_as_command_lines() {
        let argv = CommandSpec::Argv(vec!["echo".into(), "a b".into(), "it's".into()]);
        assert_eq!(super::describe_command(&argv), "echo 'a b' 'it'\\''s'");
        assert_eq!(
            super::describe_command(&CommandSpec::LoginShell),
            "login shell"
        );
    }
}

//! Writing log lines for whoever reads our stderr.
//!
//! Under systemd, stderr is usually a stream to journald, which already
//! records the identifier and pid with every line and reads a `<N>` prefix
//! as the line's syslog priority (`sd-daemon(3)`), so `journalctl -p
//! warning` can filter. systemd says it is the journal by setting
//! `JOURNAL_STREAM=DEV:INO` to the stream's device and inode: only when our
//! fd 2 is that very file (a server that inherited the variable but writes
//! to a file must not emit prefixes) do lines get the prefix and lose the
//! `ptyd[PID]:` identifier that would otherwise be recorded twice.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Syslog priorities, as journald reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Err = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
}

/// Whether fd 2 is the journal stream systemd connected us to. Decided
/// once: stderr does not change under a running process.
pub fn stderr_is_journal() -> bool {
    static IS_JOURNAL: OnceLock<bool> = OnceLock::new();
    *IS_JOURNAL.get_or_init(|| {
        std::env::var("JOURNAL_STREAM")
            .ok()
            .and_then(|v| parse_stream(&v))
            .is_some_and(|want| crate::sys::stderr_dev_ino() == Some(want))
    })
}

/// `DEV:INO`, both decimal.
fn parse_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// One log line (without the newline) for stderr: `<N>text` for the
/// journal, `ptyd[PID]: text` for a file or terminal.
pub fn line(priority: Priority, text: &str) -> String {
    if stderr_is_journal() {
        format!("<{}>{text}", priority as u8)
    } else {
        format!("ptyd[{}]: {text}", std::process::id())
    }
}

/// Write errors on stderr since this process started, and the first one.
static FAILURES: AtomicU64 = AtomicU64::new(0);
static FIRST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Writes `text` and a newline to stderr, in one write where it can.
/// Never panics and never reports an error: `eprintln!` panics when the
/// write fails, and a reader gone (`ptyd server 2>&1 | head`: EPIPE), a
/// full disk (ENOSPC) or a file at `ulimit -f` (EFBIG) must not take the
/// server or the keeper, and every pane with them, down for a log line.
/// Failures are counted and the line dropped; `server.status` reports
/// them ([`write_failures`]).
pub fn write_line(text: &str) {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(b'\n');
    if let Err(e) = std::io::stderr().lock().write_all(&bytes) {
        if FAILURES.fetch_add(1, Ordering::Relaxed) == 0
            && let Ok(mut first) = FIRST_FAILURE.lock()
        {
            *first = Some(e.to_string());
        }
    }
}

/// How many stderr writes failed in this process, and how the first did.
pub fn write_failures() -> (u64, Option<String>) {
    let first = FIRST_FAILURE.lock().ok().and_then(|f| f.clone());
    (FAILURES.load(Ordering::Relaxed), first)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_journal_stream() {
        assert_eq!(super::parse_stream("8:12345"), Some((8, 12345)));
        assert_eq!(super::parse_stream("8"), None);
        assert_eq!(super::parse_stream("x:1"), None);
    }
}

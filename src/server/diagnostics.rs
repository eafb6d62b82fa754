//! Notable events, as one line on stderr each and in a bounded
//! `diagnostics.jsonl` in the namespace's state dir. The file is rotated to
//! `diagnostics.jsonl.1` past [`MAX_BYTES`], so it never grows without bound.

use serde_json::json;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

const MAX_BYTES: u64 = 1 << 20;

pub struct Diagnostics {
    path: PathBuf,
    file: Option<File>,
    written: u64,
}

impl Diagnostics {
    /// Opens the log for appending; without it ptyd still logs to stderr.
    pub fn open(path: PathBuf) -> Diagnostics {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .ok();
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
        eprintln!("ptyd[{}]: {what}: {message}", std::process::id());
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
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .ok();
        self.written = 0;
    }
}

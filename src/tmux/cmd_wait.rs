//! wait-for: tmux's channels between commands, `wait-for CH` blocking
//! until `wait-for -S CH` (a signal with no one waiting is kept, and the
//! next wait returns at once, as in tmux), and `-L` / `-U` a lock on the
//! channel. Each front command is its own process, so a channel lives in
//! the namespace's runtime directory: a waiter is a FIFO of its own that
//! the signaller writes a byte to (opened read-write by the waiter, so a
//! signaller never finds it without a reader while it waits, and a FIFO
//! whose waiter was killed has none and is cleared away).

use super::args::Args;
use super::{CmdResult, Ctx, Failure};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn channels_dir(ctx: &Ctx) -> Result<PathBuf, Failure> {
    let dir = ctx.paths.runtime_dir.join("tmux-wait");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

/// A channel's file names: its name in hex, so any name is a safe one.
fn key(channel: &str) -> String {
    channel.bytes().map(|b| format!("{b:02x}")).collect()
}

pub fn wait_for(ctx: &mut Ctx, a: &Args) -> CmdResult {
    // Windows has no FIFOs to park a waiter on.
    if !crate::sys::HAS_FIFOS {
        channels_dir(ctx)?;
        return Err(Failure::new(
            "wait-for: not supported by ptyd's tmux front on Windows (it needs FIFOs)",
        ));
    }
    let [channel] = a.positional.as_slice() else {
        return Err(Failure::new("usage: wait-for [-L|-S|-U] channel"));
    };
    // A channel belongs to a server: none running is tmux's error.
    ctx.client(false)?;
    let dir = channels_dir(ctx)?;
    let key = key(channel);
    if a.has('S') {
        if wake(&dir, &format!("{key}.wait.")) == 0 {
            touch(&dir.join(format!("{key}.woken")))?;
        }
        Ok(())
    } else if a.has('L') {
        lock(&dir, &key)
    } else if a.has('U') {
        if std::fs::remove_file(dir.join(format!("{key}.lock"))).is_err() {
            return Err(Failure::new(format!("channel {channel} not locked")));
        }
        wake(&dir, &format!("{key}.locker."));
        Ok(())
    } else {
        let woken = dir.join(format!("{key}.woken"));
        wait(&dir, &format!("{key}.wait."), false, || {
            std::fs::remove_file(&woken).is_ok()
        })
    }
}

fn touch(path: &Path) -> CmdResult {
    std::fs::write(path, b"").map_err(|e| Failure::new(format!("writing {}: {e}", path.display())))
}

/// Wakes the waiters whose FIFOs start with `prefix`; how many there were.
/// A FIFO no process holds open is a waiter that was killed: removed.
fn wake(dir: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut woken = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(prefix)) {
            continue;
        }
        let path = entry.path();
        match crate::sys::open_fifo_writer(&path) {
            Ok(mut fifo) => {
                if fifo.write_all(b"x").is_ok() {
                    woken += 1;
                }
            }
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    woken
}

/// Blocks on a FIFO of this process's until woken; `done` is checked once
/// the FIFO is in place (what happened before is not missed), and, when
/// `again`, after each wake too (a lock another waiter took first).
fn wait(dir: &Path, prefix: &str, again: bool, mut done: impl FnMut() -> bool) -> CmdResult {
    let path = dir.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    crate::sys::make_fifo(&path)
        .map_err(|e| Failure::new(format!("creating {}: {e}", path.display())))?;
    let result = (|| {
        let mut fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Failure::new(format!("opening {}: {e}", path.display())))?;
        let mut byte = [0u8; 1];
        while !done() {
            match fifo.read(&mut byte) {
                Ok(_) if !again => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::new(format!("waiting: {e}"))),
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// `-L`: takes the channel's lock, waiting while another holds it.
fn lock(dir: &Path, key: &str) -> CmdResult {
    let lock = dir.join(format!("{key}.lock"));
    let take = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
            .is_ok()
    };
    if take() {
        return Ok(());
    }
    wait(dir, &format!("{key}.locker."), true, take)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_keys_are_file_names_for_any_channel() {
        assert_eq!(key("a/b"), "612f62");
        assert_eq!(key(""), "");
    }
}

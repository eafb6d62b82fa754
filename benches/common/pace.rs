//! A program that prints a file's lines at a fixed rate, for loads two
//! servers must be given alike: a flood as fast as the pane takes it
//! measures how fast each server parses, while a paced one asks the same
//! work of both, so what they spend on it compares.
//!
//! The bench runs itself as the pacer (`PACE_ARG` first on its command
//! line) inside a pane. It prints only while its switch file exists, so
//! the loads of several servers set up at once can run one at a time, and
//! never catches up on ticks it missed (stopped, or held up by a full
//! PTY): what it prints per second is at most the rate asked.

use super::Res;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// The bench's first argument that makes it a pacer.
pub const PACE_ARG: &str = "--pace-child";
/// How often the pacer prints.
const TICK: Duration = Duration::from_millis(10);

/// The command line of a pacer printing `file` (in a loop) at
/// `bytes_per_s` while `switch` exists.
pub fn pacer_argv(file: &Path, switch: &Path, bytes_per_s: u64) -> Res<Vec<String>> {
    let me = std::env::current_exe().map_err(|e| format!("finding the bench binary: {e}"))?;
    Ok(vec![
        super::path_str(&me)?.to_string(),
        PACE_ARG.to_string(),
        bytes_per_s.to_string(),
        super::path_str(file)?.to_string(),
        super::path_str(switch)?.to_string(),
    ])
}

/// If this process was started as a pacer, runs it and exits.
pub fn run_if_pacer() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some(PACE_ARG) {
        return;
    }
    let Err(e) = pace(&args[1..]);
    eprintln!("pacer: {e}");
    std::process::exit(1);
}

fn pace(args: &[String]) -> Res<std::convert::Infallible> {
    let [rate, file, switch] = args else {
        return Err(format!(
            "usage: {PACE_ARG} BYTES_PER_S FILE SWITCH, not {args:?}"
        ));
    };
    let rate: u64 = rate.parse().map_err(|e| format!("rate {rate:?}: {e}"))?;
    let text = std::fs::read(file).map_err(|e| format!("reading {file}: {e}"))?;
    if text.is_empty() {
        return Err(format!("{file} is empty"));
    }
    let per_tick = (rate as f64 * TICK.as_secs_f64()) as usize;
    let switch = Path::new(switch);
    let mut out = io::stdout().lock();
    let mut at = 0usize;
    let mut next = Instant::now();
    loop {
        if switch.exists() {
            let mut left = per_tick;
            while left > 0 {
                let n = left.min(text.len() - at);
                out.write_all(&text[at..at + n])
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("writing: {e}"))?;
                at = (at + n) % text.len();
                left -= n;
            }
        }
        next += TICK;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // Late: start the ticks again from now, without a burst.
            next = now;
        }
    }
}

//! Recorded sessions of real programs (less, vim, top, a shell printing
//! colours; `fixtures/recorded/record.sh` made them with script(1)) are fed
//! to the terminal model and to a real tmux pane of the same size; the
//! visible text must be the same.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

use ptyd::term::{TermConfig, Terminal};
use std::path::Path;

mod rng;
mod util;
use std::time::Duration;

const COLS: u16 = 80;
const ROWS: u16 = 24;

/// The screen tmux shows after `cat`ing `file` raw (no output processing,
/// and no echo of the answers tmux sends to the queries in it)
/// into an 80x24 pane.
fn tmux_screen(file: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let script = format!(
        "stty -opost -echo; cat '{}'; touch '{}'; exec sleep 1000",
        file.display(),
        done.display()
    );
    let tmux = util::Tmux::new();
    tmux.new_session(COLS, ROWS, &script);
    // Nothing tells us when tmux has drawn the bytes: wait for the marker
    // file, then until two captures 100 ms apart agree.
    tmux.wait_screen(&format!("all of {}", file.display()), |_| done.exists());
    let mut last = String::new();
    let text = util::eventually("tmux's screen to settle", || {
        std::thread::sleep(Duration::from_millis(100));
        let now = tmux.screen();
        if now == last {
            Some(now)
        } else {
            last = now;
            None
        }
    });
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    lines.resize(ROWS as usize, String::new());
    lines
}

fn model_screen(bytes: &[u8]) -> Vec<String> {
    let mut term = Terminal::new(COLS, ROWS, TermConfig::default());
    let mut forward = Vec::new();
    term.feed(bytes, &mut forward);
    term.visible_text()
}

fn compare(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/recorded")
        .join(format!("{name}.bytes"));
    let bytes = std::fs::read(&path).unwrap();
    let ours = model_screen(&bytes);
    let theirs = tmux_screen(&path);
    let diffs: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(row, (a, b))| format!("row {row}:\n  ptyd: {a:?}\n  tmux: {b:?}"))
        .collect();
    assert!(
        diffs.is_empty(),
        "{name}: the model and tmux differ:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn less_matches_tmux() {
    compare("less");
}

#[test]
fn vim_matches_tmux() {
    compare("vim");
}

#[test]
fn top_matches_tmux() {
    compare("top");
}

#[test]
fn coloured_shell_output_matches_tmux() {
    compare("colors");
}

/// Serializing the model at any cut of a recorded session (inside escape
/// sequences and UTF-8 characters too) and going on from the copy gives the
/// same state, the same forwarded bytes and the same replies as never
/// stopping.
#[test]
fn recorded_sessions_round_trip_at_every_cut() {
    for name in ["less", "vim", "top", "colors"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/recorded")
            .join(format!("{name}.bytes"));
        let bytes = std::fs::read(&path).unwrap();
        let mut whole = Terminal::new(COLS, ROWS, TermConfig::default());
        let mut whole_forward = Vec::new();
        whole.feed(&bytes, &mut whole_forward);
        let whole_replies = whole.take_replies();
        // Every cut of the small sessions; a dense stride through top's.
        let step = (bytes.len() / 1500).max(1);
        for cut in (0..=bytes.len()).step_by(step) {
            let mut first = Terminal::new(COLS, ROWS, TermConfig::default());
            let mut forward = Vec::new();
            first.feed(&bytes[..cut], &mut forward);
            let mut replies = first.take_replies();
            let json = serde_json::to_string(&first).unwrap();
            let mut second: Terminal = serde_json::from_str(&json).unwrap();
            assert!(
                second == first,
                "{name}: state changed by the round trip at byte {cut}"
            );
            second.feed(&bytes[cut..], &mut forward);
            replies.extend(second.take_replies());
            assert!(
                second == whole,
                "{name}: state differs after a cut at byte {cut}"
            );
            assert_eq!(
                forward, whole_forward,
                "{name}: forwarded bytes differ after a cut at byte {cut}"
            );
            assert_eq!(
                replies, whole_replies,
                "{name}: replies differ after a cut at byte {cut}"
            );
        }
    }
}

/// Resizing reflows as tmux does: shell-like output (lines longer than the
/// pane, wide characters, blanks at the edges, a prompt with the cursor
/// after it) shown in a tmux pane and in the model, then both resized
/// through several widths: after each, the visible screens and the cursor
/// are the same.
#[test]
fn reflow_matches_tmux() {
    let mut rng = rng::Rng(0x5eed_1234_abcd_ef01);
    for round in 0..8 {
        let mut text = String::new();
        for _ in 0..14 {
            for _ in 0..rng.below(90) {
                text.push(match rng.below(10) {
                    0 | 1 => ' ',
                    2 => '中',
                    _ => (b'a' + rng.below(8) as u8) as char,
                });
            }
            text.push_str("\r\n");
        }
        text.push_str("$ ");
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, &text).unwrap();
        let done = dir.path().join("done");
        let tmux = util::Tmux::new();
        tmux.new_session(
            40,
            8,
            &format!(
                "stty -opost -echo; cat '{}'; touch '{}'; exec sleep 1000",
                input.display(),
                done.display()
            ),
        );
        let mut model = Terminal::new(40, 8, TermConfig::default());
        model.feed(text.as_bytes(), &mut Vec::new());
        tmux.wait_screen("the input", |_| done.exists());
        for width in [40u16, 17, 61, 23, 40] {
            tmux.run(&[
                "resize-window",
                "-t",
                "main",
                "-x",
                &width.to_string(),
                "-y",
                "8",
            ]);
            model.resize(width, 8);
            let want_width = width.to_string();
            tmux.wait_screen("the new width", |_| {
                tmux.run(&["display", "-p", "-t", "main", "#{pane_width}"])
                    .trim()
                    == want_width
            });
            let theirs: Vec<String> = tmux
                .screen()
                .lines()
                .map(|l| l.trim_end().to_string())
                .collect();
            let mut ours = model.visible_text();
            ours.truncate(
                theirs.len().max(
                    ours.iter()
                        .rposition(|l| !l.is_empty())
                        .map_or(0, |i| i + 1),
                ),
            );
            let cursor = tmux.run(&["display", "-p", "-t", "main", "#{cursor_x},#{cursor_y}"]);
            let (col, row, _) = model.cursor();
            assert_eq!(
                (ours, format!("{col},{row}")),
                (theirs, cursor.trim().to_string()),
                "round {round}, {width} columns, input {text:?}"
            );
        }
    }
}

/// A full-screen program sets a scroll region at one size while a second
/// client's size is in force, the pane goes back to the first size, the
/// program leaves the alternate screen and the shell prints 60 lines.
/// Whether the region comes before the resize back (ptyd feeds output
/// written for the old size at that size) or after it (bytes written for
/// 24 rows read on 40), the model shows what tmux shows.
#[test]
fn a_scroll_region_across_two_sizes_matches_tmux() {
    let mut shell = String::from("\x1b[?1049l\x1b[H\x1b[2J");
    for i in 1..=60 {
        shell.push_str(&format!("{i}\r\n"));
    }
    shell.push_str("$ ");
    for (at_small, after_back, top) in [("\x1b[1;24r", "", "22"), ("", "\x1b[1;24r", "38")] {
        let dir = tempfile::tempdir().unwrap();
        let parts = [
            "\x1b[?1049h\x1b[1;40rone".to_string(),
            format!("{at_small}two"),
            format!("{after_back}{shell}"),
        ];
        for (i, part) in parts.iter().enumerate() {
            std::fs::write(dir.path().join(format!("p{i}")), part).unwrap();
        }
        let d = dir.path().display();
        let script = format!(
            "stty -opost -echo; cat '{d}/p0'; \
             while [ ! -e '{d}/go1' ]; do sleep 0.05; done; cat '{d}/p1'; \
             while [ ! -e '{d}/go2' ]; do sleep 0.05; done; cat '{d}/p2'; \
             touch '{d}/done'; exec sleep 1000"
        );
        let tmux = util::Tmux::new();
        tmux.new_session(120, 40, &script);
        let mut model = Terminal::new(120, 40, TermConfig::default());
        model.feed(parts[0].as_bytes(), &mut Vec::new());
        tmux.wait_screen("the first part", |s| s.contains("one"));
        let resize = |cols: u16, rows: u16| {
            let (c, r) = (cols.to_string(), rows.to_string());
            tmux.run(&["resize-window", "-t", "main", "-x", &c, "-y", &r]);
            tmux.wait_screen("the new size", |_| {
                tmux.run(&[
                    "display",
                    "-p",
                    "-t",
                    "main",
                    "#{pane_width}x#{pane_height}",
                ])
                .trim()
                    == format!("{c}x{r}")
            });
        };
        resize(80, 24);
        model.resize(80, 24);
        std::fs::write(dir.path().join("go1"), "").unwrap();
        model.feed(parts[1].as_bytes(), &mut Vec::new());
        tmux.wait_screen("the second part", |s| s.contains("two"));
        resize(120, 40);
        model.resize(120, 40);
        std::fs::write(dir.path().join("go2"), "").unwrap();
        model.feed(parts[2].as_bytes(), &mut Vec::new());
        let done = dir.path().join("done");
        let theirs = tmux.wait_screen("the shell's lines", |s| {
            done.exists() && s.lines().any(|l| l.starts_with('$'))
        });
        let theirs: Vec<String> = theirs.lines().map(|l| l.trim_end().to_string()).collect();
        let ours = model.visible_text();
        assert_eq!(
            ours, theirs,
            "region {at_small:?} at 80x24, {after_back:?} at 120x40"
        );
        assert_eq!(ours[0], top, "{ours:?}");
    }
}

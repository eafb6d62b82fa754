//! Golden tests: every `fixtures/vt/<name>.in` is fed to a terminal and the
//! resulting screen is compared with `<name>.out`. See
//! `fixtures/vt/README.md` for the file formats.

use std::fmt::Write as _;
use std::path::Path;

use ptyd::term::{CaptureOptions, TermConfig, Terminal};

/// Decodes the `.in` escape convention; returns (cols, rows, bytes).
fn decode(src: &str) -> (u16, u16, Vec<u8>) {
    let (mut cols, mut rows) = (20, 6);
    let mut body = src;
    if let Some(rest) = src.strip_prefix("#!") {
        let (header, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        let mut it = header
            .split_whitespace()
            .map(|n| n.parse::<u16>().expect("size in #! line"));
        cols = it.next().unwrap_or(cols);
        rows = it.next().unwrap_or(rows);
        body = tail;
    }
    let bytes: Vec<u8> = body.bytes().filter(|&b| b != b'\n').collect();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 >= bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        i += 2;
        match bytes[i - 1] {
            b'e' => out.push(0x1b),
            b'a' => out.push(0x07),
            b'r' => out.push(b'\r'),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'\\' => out.push(b'\\'),
            b'x' => {
                let hex = std::str::from_utf8(&bytes[i..i + 2]).expect("hex");
                out.push(u8::from_str_radix(hex, 16).expect("hex byte"));
                i += 2;
            }
            other => panic!("unknown escape \\{}", other as char),
        }
    }
    (cols, rows, out)
}

fn dump(t: &mut Terminal) -> String {
    let mut out = String::new();
    let plain = t.visible_text();
    for row in &plain {
        out.push_str(row);
        out.push('\n');
    }
    out.push_str("--\n");
    let (col, row, visible) = t.cursor();
    let _ = writeln!(
        out,
        "cursor {row},{col}{}",
        if visible { "" } else { " hidden" }
    );
    if !t.title().is_empty() {
        let _ = writeln!(out, "title {}", t.title());
    }
    let styled = t
        .capture(&CaptureOptions {
            escapes: true,
            ..Default::default()
        })
        .lines;
    for (i, (s, p)) in styled.iter().zip(&plain).enumerate() {
        if s != p {
            let _ = writeln!(out, "sgr {i}: {}", s.replace('\x1b', "\\e"));
        }
    }
    let replies = t.take_replies();
    if !replies.is_empty() {
        let text = String::from_utf8_lossy(&replies)
            .replace('\x1b', "\\e")
            .replace('\x07', "\\a");
        let _ = writeln!(out, "replies {text}");
    }
    out
}

#[test]
fn golden_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/vt");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/vt")
        .filter_map(|e| {
            e.ok()?
                .path()
                .file_name()?
                .to_str()?
                .strip_suffix(".in")
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 20,
        "expected the fixture set, found {}",
        names.len()
    );
    let mut failures = Vec::new();
    for name in &names {
        let src = std::fs::read_to_string(dir.join(format!("{name}.in"))).expect("read .in");
        let (cols, rows, input) = decode(&src);
        let mut t = Terminal::new(cols, rows, TermConfig::default());
        let mut fwd = Vec::new();
        t.feed(&input, &mut fwd);
        let got = dump(&mut t);
        let out_path = dir.join(format!("{name}.out"));
        if update {
            std::fs::write(&out_path, &got).expect("write .out");
            continue;
        }
        let want = std::fs::read_to_string(&out_path).unwrap_or_default();
        if got != want {
            failures.push(format!("== {name}\n-- want\n{want}-- got\n{got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

//! `scrollback_total_bytes` through the real binary: with two panes over
//! the bound together, the one holding most history loses its oldest
//! lines (whole compressed blocks), the other (created first, holding
//! little) keeps every line; the pane that lost lines shows one marker
//! line at the top of its history counting exactly the lines that went,
//! and the lines after it are the newest ones, in order, none missing;
//! `ptyd status` and `ptyd ls --json` show the bytes held (stored below
//! raw: the history is compressed).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::{Conn, Dirs, Ptyd, eventually};

const LIMIT: u64 = 1 << 20;

/// A command printing `n` lines `TAG line K HEX HEX` (K from 1; the hex
/// pseudo-random, so they compress about as badly as log lines with ids
/// and hashes do), then `TAG-DONE`, then waiting.
fn printer(tag: &str, n: u32) -> Value {
    let script = format!(
        "awk 'BEGIN {{ srand(7); for (i = 1; i <= {n}; i++) \
         printf \"{tag} line %d %08x %08x\\n\", i, int(rand() * 4294967295), int(rand() * 4294967295) }}'; \
         echo {tag}-DONE; exec sleep 1000"
    );
    json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 10 })
}

/// Every line of the pane's history and screen, oldest first, a page of
/// `pane.history` at a time.
fn history(c: &mut Conn, pane: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut start = 0u64;
    loop {
        let page = c.ok(
            "pane.history",
            json!({ "target": pane, "start": start, "count": 1000 }),
        );
        let got = page["lines"].as_array().unwrap();
        lines.extend(got.iter().map(|l| l.as_str().unwrap().to_string()));
        start = page["first"].as_u64().unwrap() + got.len() as u64;
        if got.is_empty() || start >= page["end"].as_u64().unwrap() {
            return lines;
        }
    }
}

/// The K of each `TAG line K ...` line.
fn numbers(lines: &[String], tag: &str) -> Vec<u32> {
    lines
        .iter()
        .filter(|l| l.starts_with(&format!("{tag} line ")))
        .map(|l| number(l, tag))
        .collect()
}

/// The K of `TAG line K ...`.
fn number(line: &str, tag: &str) -> u32 {
    let rest = line
        .strip_prefix(&format!("{tag} line "))
        .unwrap_or_else(|| panic!("not a {tag} line: {line:?}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

fn pane_info(ptyd: &Ptyd, id: &str) -> Value {
    let out = ptyd.run_cli(&["ls", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let panes = all.as_array().or(all["panes"].as_array()).cloned();
    panes
        .unwrap_or_default()
        .into_iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in ls --json: {all}"))
}

#[test]
fn the_pane_holding_most_loses_its_oldest_lines_and_shows_how_many() {
    let dirs = Dirs::new();
    let dir = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "scrollback_total_bytes = {LIMIT}\nscrollback_lines = 1000000\n\
             scrollback_bytes = 1073741824\n"
        ),
    )
    .unwrap();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("budget"));
    let mut c = ptyd.connect();

    // The small pane first: its history is the older one, yet it holds
    // less, so it is not the one to lose lines.
    const SMALL: u32 = 3000;
    const BIG: u32 = 150_000;
    let small = c.create(printer("small", SMALL))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_text(&small, "small-DONE");
    let big = c.create(printer("big", BIG))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_text(&big, "big-DONE");

    let status = eventually("history back within scrollback_total_bytes", || {
        let s = ptyd.status_json();
        (s["history"]["stored_bytes"].as_u64().unwrap() <= LIMIT).then_some(s)
    });
    assert_eq!(status["history"]["total_bytes_limit"], LIMIT, "{status}");
    assert_eq!(status["config"]["scrollback_total_bytes"], LIMIT);
    let text = util::stdout(&ptyd.run_cli(&["status"]));
    assert!(
        text.contains("history:    ") && text.contains("MiB held"),
        "{text}"
    );

    // The small pane: every line, no marker.
    let lines = history(&mut c, &small);
    let want: Vec<u32> = (1..=SMALL).collect();
    assert!(!lines.iter().any(|l| l.contains("dropped here")));
    let got = numbers(&lines, "small");
    assert_eq!(got, want);

    // The big pane: the marker, then its newest lines without a gap.
    let lines = history(&mut c, &big);
    let marker = &lines[0];
    let dropped: u32 = marker
        .strip_prefix("[ptyd: ")
        .and_then(|m| {
            m.strip_suffix(
                " older history lines dropped here to keep within scrollback_total_bytes]",
            )
        })
        .unwrap_or_else(|| panic!("no marker at the top: {marker:?}"))
        .parse()
        .unwrap();
    let got = numbers(&lines[1..], "big");
    let first = got[0];
    assert_eq!(
        dropped,
        first - 1,
        "the marker counts the lines before the first kept"
    );
    let want: Vec<u32> = (first..=BIG).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "lines missing after {first}");
    assert!(dropped > BIG / 4, "{dropped}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("dropped here")).count(),
        1
    );

    // Per pane: stored and raw; compressed below raw.
    let info = pane_info(&ptyd, &big);
    let stored = info["history_bytes"]["stored"].as_u64().unwrap();
    let raw = info["history_bytes"]["raw"].as_u64().unwrap();
    assert!(stored > 0 && stored < raw, "{info}");
    let info = pane_info(&ptyd, &small);
    assert!(
        info["history_bytes"]["stored"].as_u64().unwrap() > 0,
        "{info}"
    );
    ptyd.stop();
}

//! esctest2 (George Nachman's terminal conformance suite, kept by xterm's
//! maintainer) run inside a real ptyd pane at 80x25, as xterm is measured:
//! the pane must answer every report from its own model. The suite is
//! GPL-2.0 and not part of this repository: set `PTYD_ESCTEST2` to a
//! checkout (the directory holding `esctest/esctest.py`); without it the
//! test says that it skipped and passes. Also here: a few of the golden
//! fixtures and a report, through a real pane.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

use ptyd::term::{TermConfig, Terminal};
use serde_json::json;
use std::path::{Path, PathBuf};

mod util;
use util::Ptyd;

/// The pass count reached; a run must pass at least this many.
const MIN_PASSED: usize = 485;

/// The tests ptyd fails on purpose, each with why. A run must fail no
/// other test (a new failure is a regression, or a cascade: esctest reads
/// replies in order, so one unanswered query can fail the tests after it).
const KEPT_FAILURES: &[(&str, &str)] = &[
    (
        "ChangeColorTests.test_ChangeColor_CIELab",
        "X colour-management spaces (CIE, TekHVC) are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_CIELuv",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_CIEXYZ",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_CIEuvY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_CIExyY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_TekHVC",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeColorTests.test_ChangeColor_RGBI",
        "rgbi: is read linearly; X applies the display's gamma",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_CIELab",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_CIELuv",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_CIEXYZ",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_CIEuvY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_CIExyY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_TekHVC",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeDynamicColorTests.test_ChangeDynamicColor_RGBI",
        "rgbi: is read linearly; X applies the display's gamma",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_CIELab",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_CIELuv",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_CIEXYZ",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_CIEuvY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_CIExyY",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_TekHVC",
        "X colour-management spaces are not parsed",
    ),
    (
        "ChangeSpecialColorTests.test_ChangeSpecialColor_RGBI",
        "rgbi: is read linearly; X applies the display's gamma",
    ),
    (
        "ResetSpecialColorTests.test_ResetSpecialColor_Dynamic",
        "OSC 110 resets to the configured foreground, not xterm's black",
    ),
    (
        "DATests.test_DA_0",
        "DA1 lists what ptyd implements: no printer, ReGIS, NRCS, user windows or locator",
    ),
    (
        "DATests.test_DA_NoParameter",
        "DA1 lists what ptyd implements: no printer, ReGIS, NRCS, user windows or locator",
    ),
    (
        "DA2Tests.test_DA2_0",
        "DA2's version is ptyd's, not an xterm patch level programs would key xterm features off",
    ),
    (
        "DA2Tests.test_DA2_NoParameter",
        "DA2's version is ptyd's, not an xterm patch level",
    ),
    (
        "DECRQSSTests.test_DECRQSS_DECSLPP",
        "the pane's height is its clients' to set: DECSLPP does not resize it",
    ),
    (
        "DECRQSSTests.test_DECRQSS_DECSNLS",
        "the pane's height is its clients' to set: DECSNLS does not resize it",
    ),
    (
        "DECSCLTests.test_DECSCL_Level5_SupportsDECNCSM",
        "DECNCSM needs 132-column switching, which a pane does not do",
    ),
    (
        "DECSETTests.test_DECSET_Allow80To132",
        "DECCOLM keeps the pane's width (it clears, as on a VT, but does not resize)",
    ),
    (
        "DECSETTests.test_DECSET_DECCOLM",
        "DECCOLM keeps the pane's width",
    ),
    (
        "DECSETTests.test_DECSET_MoreFix",
        "needs the window resized to 9 columns (XTWINOPS 8)",
    ),
    (
        "RISTests.test_RIS_ResetDECCOLM",
        "DECCOLM keeps the pane's width",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_DECSLPP",
        "window resizing (XTWINOPS 8, 24+) is the client's terminal's business",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_IconifyDeiconfiy",
        "a pane is never iconified",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_MoveToXY",
        "a pane has no window position",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_MoveToXY_Defaults",
        "a pane has no window position",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_ResizePixels_BothParameters",
        "pixel sizes are only known from an attached client",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_ResizePixels_OmittedHeight",
        "pixel sizes are only known from an attached client",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_ResizePixels_OmittedWidth",
        "pixel sizes are only known from an attached client",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_ResizePixels_ZeroHeight",
        "pixel sizes are only known from an attached client",
    ),
    (
        "XtermWinopsTests.test_XtermWinops_ResizePixels_ZeroWidth",
        "pixel sizes are only known from an attached client",
    ),
];

/// (passed, known bugs, failed, failing test names) from an esctest log.
fn summary(log: &str) -> Option<(usize, usize, usize, Vec<String>)> {
    let line = log.lines().rev().find(|l| l.contains(" passed, "))?;
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    let [passed, known, failed] = nums[..] else {
        return None;
    };
    let failing = match log.rsplit_once("Failing tests:\n") {
        Some((_, rest)) => rest
            .lines()
            .take_while(|l| l.contains("Tests."))
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    };
    Some((passed, known, failed, failing))
}

#[test]
fn esctest2_in_a_pane() {
    let Some(checkout) = std::env::var_os("PTYD_ESCTEST2") else {
        println!(
            "skipped: set PTYD_ESCTEST2 to an esctest2 checkout \
             (git clone https://github.com/ThomasDickey/esctest2) to run it"
        );
        return;
    };
    let dir = PathBuf::from(checkout).join("esctest");
    assert!(
        dir.join("esctest.py").is_file(),
        "PTYD_ESCTEST2 must be an esctest2 checkout: no {}",
        dir.join("esctest.py").display()
    );
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("esctest.log");
    let info = c.ok(
        "pane.create",
        json!({
            "name": "esctest",
            "argv": [
                "python3", "esctest.py", "--expected-terminal=xterm",
                "--xterm-checksum=411", "--xterm-reverse-wrap=411",
                "--max-vt-level=5", "--timeout=0.2",
                format!("--logfile={}", log.display()),
            ],
            "cwd": dir,
            "cols": 80,
            "rows": 25,
        }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    // The whole run takes seconds; each wait stays within the harness's
    // read timeout, and 15 minutes in all is the limit.
    let mut finished = false;
    for _ in 0..60 {
        let r = c.call(
            "pane.wait",
            json!({ "target": id, "exit": true, "timeout_ms": 15_000 }),
        );
        match r {
            Ok(r) => {
                assert_eq!(r["reason"], "exited", "{r}");
                finished = true;
                break;
            }
            Err(e) => assert_eq!(e.0, "timeout", "waiting for esctest: {e:?}"),
        }
    }
    assert!(finished, "esctest did not finish in 15 minutes");
    let text = std::fs::read(&log).unwrap_or_else(|e| panic!("reading {}: {e}", log.display()));
    let text = String::from_utf8_lossy(&text);
    let (passed, known, failed, failing) =
        summary(&text).unwrap_or_else(|| panic!("no summary in the esctest log:\n{text}"));
    println!("esctest2: {passed} passed, {known} known bugs, {failed} failed");
    let unexpected: Vec<&String> = failing
        .iter()
        .filter(|name| !KEPT_FAILURES.iter().any(|(kept, _)| kept == name))
        .collect();
    assert!(
        unexpected.is_empty(),
        "tests failing that are not kept failures: {unexpected:#?}"
    );
    assert!(
        passed >= MIN_PASSED,
        "{passed} passed, fewer than the {MIN_PASSED} reached; failing: {failing:#?}"
    );
    let now_passing: Vec<&str> = KEPT_FAILURES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !failing.iter().any(|f| f == name))
        .collect();
    if !now_passing.is_empty() {
        println!("kept failures that pass now (drop them from the list): {now_passing:#?}");
    }
}

/// A golden fixture's input (the `.in` escape convention of
/// `fixtures/vt/README.md`) and its size.
fn fixture(name: &str) -> (u16, u16, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/vt/{name}.in"));
    let src = std::fs::read_to_string(&path).unwrap();
    let (header, body) = src.split_once('\n').unwrap();
    let mut size = header.trim_start_matches("#!").split_whitespace();
    let cols = size.next().unwrap().parse().unwrap();
    let rows = size.next().unwrap().parse().unwrap();
    let body: Vec<u8> = body.bytes().filter(|&b| b != b'\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'\\' && i + 1 < body.len() {
            match body[i + 1] {
                b'e' => out.push(0x1b),
                b'a' => out.push(0x07),
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = std::str::from_utf8(&body[i + 2..i + 4]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 2;
                }
                other => panic!("unknown escape \\{}", other as char),
            }
            i += 2;
        } else {
            out.push(body[i]);
            i += 1;
        }
    }
    (cols, rows, out)
}

/// Margins, rectangle operations, reverse wrap and REP drawn by a program
/// in a real pane look as the model draws them from the same bytes (the
/// golden fixtures' screens).
#[test]
fn golden_fixtures_through_a_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let files = tempfile::tempdir().unwrap();
    for name in [
        "lr_margins_scroll",
        "rect_ops",
        "reverse_wrap",
        "rep_margins",
        "decbi_decfi",
    ] {
        let (cols, rows, bytes) = fixture(name);
        let file = files.path().join(name);
        std::fs::write(&file, &bytes).unwrap();
        let mut model = Terminal::new(cols, rows, TermConfig::default());
        model.feed(&bytes, &mut Vec::new());
        let want = model.visible_text().join("\n");
        let info = c.ok(
            "pane.create",
            json!({
                "name": name,
                "shell": format!("stty -opost; cat '{}'; exec sleep 1000", file.display()),
                "cols": cols,
                "rows": rows,
            }),
        );
        let id = info["id"].as_str().unwrap().to_string();
        // Nothing reports when `cat` is done: wait for the screen.
        util::eventually(format!("{name} drawn in a pane"), || {
            let got = c.capture(&id);
            let got: Vec<&str> = got.lines().map(str::trim_end).collect();
            let want: Vec<&str> = want.lines().map(str::trim_end).collect();
            (got == want).then_some(())
        });
    }
}

/// A program in a pane reads DECRQCRA's checksum of what it printed, from
/// the model, with no client attached.
#[test]
fn checksum_report_through_a_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let script = "stty raw -echo; printf 'abc\\r\\033[7;0;1;1;1;3*y'; \
                  r=$(dd bs=1 count=11 2>/dev/null | od -An -c | tr -s ' '); \
                  stty sane; printf '\\nreply:%s:\\n' \"$r\"; exec sleep 1000";
    let info = c.ok(
        "pane.create",
        json!({ "name": "sum", "shell": script, "cols": 40, "rows": 5 }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    // 'a' + 'b' + 'c' = 0x126, as DCS 7 ! ~ 0126 ST.
    c.wait_text(&id, "reply: 033 P 7 ! ~ 0 1 2 6 033 \\:");
}

/// The kept failures are named once each.
#[test]
fn kept_failures_are_listed_once() {
    let mut names: Vec<&str> = KEPT_FAILURES.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before);
    let parsed = summary(
        "x\n*** 3 tests passed, 1 known bug, 2 TESTS FAILED ***\nFailing tests:\nATests.test_a\nBTests.test_b\n",
    );
    assert_eq!(
        parsed,
        Some((
            3,
            1,
            2,
            vec!["ATests.test_a".to_owned(), "BTests.test_b".to_owned()]
        ))
    );
}

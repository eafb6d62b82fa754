//! Deep history: panes holding a million lines each, ptyd against tmux with
//! a matching `history-limit`. What it costs to hold (bytes per character
//! of text) and what a person waits for when reading it back: a
//! scroll-mode page at the top, a search through all of it, a capture of
//! all of it.

use crate::common::pty::PtyProc;
use crate::common::server::{PtydServer, STUCK, wait_all, write_history_config};
use crate::common::tmux::Tmux;
use crate::common::{Res, path_str, rss_bytes, shell_quote, stats};
use crate::memory::{typical_output, wait_settled};
use crate::table::{Cell, Goal, Section};
use crate::{COLS, ROWS, Scale};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first line of every pane's output, so the top of the history is
/// something a reader can see arrive. Upper case, which the output below
/// never holds: a terminal drawing only the cells that changed (both do)
/// writes all of it. Its middle is what the search looks for: the prompt
/// echoes what is typed, never the whole marker.
const TOP: &str = "PTYDBENCHTOPZQXJNEEDLEJXQZTOP";
const NEEDLE: &str = "ZQXJNEEDLEJXQZ";
/// What of the top line a search's reader waits for: the part before the
/// match, which tmux draws as it is (the match itself in its match style,
/// splitting the line's bytes).
const TOP_HEAD: &str = "PTYDBENCHTOP";
const END: &str = "ptyd-bench-depth-end";
/// Printing a million lines into tmux takes a while on a small machine.
const SLOW: Duration = Duration::from_secs(900);

/// One terminal's figures.
struct Depth {
    /// Bytes held for the history over the characters of text in it.
    per_char: f64,
    held: u64,
    /// Scroll-mode pages at the top and searches, in ms.
    read: Res<(Vec<f64>, Vec<f64>)>,
    /// Refused, for one: a capture whose reply would pass the protocol's
    /// reply limit.
    capture_ms: Res<Vec<f64>>,
}

pub fn history_depth(
    plan: &Scale,
    ptyd_bin: &Path,
    baseline: Option<&Path>,
    nofile: u64,
    tmp: &Path,
) -> (Section, Vec<Goal>) {
    let (panes, lines) = (plan.depth_panes, plan.depth_lines);
    let mut s = Section::new(
        "history",
        format!("Deep history: {panes} pane(s) x {lines} lines"),
        vec![
            "terminal",
            "bytes held per character",
            "MiB held",
            "page at the top p50 ms",
            "p99 ms",
            "search p50 ms",
            "capture all p50 ms",
        ],
    );
    s.note = format!(
        "Each of {panes} {COLS}x{ROWS} pane(s) prints {lines} lines of typical output (words, \
         every fifth line coloured), the first line a marker; ptyd with scrollback_lines = \
         {lines}, tmux with history-limit {lines}. Bytes held: ptyd's footprint (both processes' \
         PSS and every memfd, as in the memory section) or tmux's RSS, after the output minus \
         before it, over the characters of text the histories hold (escape sequences and line \
         ends not counted). The rest is read through a real client in a PTY the bench reads: \
         page at the top is scroll mode's `g` (tmux: copy mode, vi keys) from the bottom until \
         the top line is drawn, {} times; search is `?` and a word only the top line holds, \
         from the bottom, until the part of that line before the word is drawn ({} times); capture all is `ptyd capture -S \
         -{lines}` or `tmux capture-pane -p -S -{lines}` read to the end ({} times).{}",
        plan.depth_reps,
        plan.depth_search_reps,
        plan.depth_search_reps,
        baseline.map_or(String::new(), |b| format!(
            " The baseline row runs another ptyd binary, server and client: {}.",
            b.display()
        ))
    );
    let dir = tmp.join("depth");
    let file = dir.join("history.txt");
    let chars = match std::fs::create_dir_all(&dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))
        .and_then(|()| deep_output(&file, lines))
    {
        Ok(c) => c * panes as u64,
        Err(e) => {
            s.push("ptyd attach", Err(e.clone()));
            if baseline.is_some() {
                s.push("baseline ptyd attach", Err(e.clone()));
            }
            s.push("tmux attach", Err(e));
            return (s, Vec::new());
        }
    };
    let p = ptyd_depth(plan, ptyd_bin, nofile, &dir.join("ptyd"), &file, chars);
    let b =
        baseline.map(|bin| ptyd_depth(plan, bin, nofile, &dir.join("ptyd-baseline"), &file, chars));
    let t = tmux_depth(plan, &dir, &file, chars);
    let mut goals = Vec::new();
    if let Ok(d) = &p {
        goals.push(goal(
            "deep history: at most 1 byte held per character of text",
            d.per_char <= 1.0,
            format!(
                "{:.2} bytes per character ({} MiB for {} MiB of text){}",
                d.per_char,
                d.held >> 20,
                chars >> 20,
                t.as_ref()
                    .map(|t| format!("; tmux {:.2}", t.per_char))
                    .unwrap_or_default()
            ),
        ));
        if let Ok((page, search)) = &d.read {
            let page = stats(page.clone());
            goals.push(goal(
                "deep history: a scroll-mode page at the top in under 5 ms (p50 and p99)",
                page.p50 < 5.0 && page.p99 < 5.0,
                format!("p50 {:.2} ms, p99 {:.2} ms", page.p50, page.p99),
            ));
            let search = stats(search.clone());
            goals.push(goal(
                "deep history: a search through all of it in under 300 ms (p50)",
                search.p50 < 300.0,
                format!("p50 {:.1} ms, max {:.1} ms", search.p50, search.max),
            ));
        }
    }
    let rows = std::iter::once(("ptyd attach", p))
        .chain(b.map(|b| ("baseline ptyd attach", b)))
        .chain([("tmux attach", t)]);
    for (label, d) in rows {
        s.push(
            label,
            d.map(|d| {
                let mut cells = vec![
                    Cell::num(d.per_char, 2),
                    Cell::num(d.held as f64 / (1 << 20) as f64, 1),
                ];
                match d.read {
                    Ok((page, search)) => {
                        let page = stats(page);
                        cells.extend([
                            Cell::num(page.p50, 2),
                            Cell::num(page.p99, 2),
                            Cell::num(stats(search).p50, 1),
                        ]);
                    }
                    Err(e) => cells.extend([
                        Cell::text(format!("failed: {e}")),
                        Cell::text("-"),
                        Cell::text("-"),
                    ]),
                }
                cells.push(match d.capture_ms {
                    Ok(v) => Cell::num(stats(v).p50, 1),
                    Err(e) => Cell::text(format!("failed: {e}")),
                });
                cells
            }),
        );
    }
    (s, goals)
}

fn goal(name: &str, pass: bool, detail: String) -> Goal {
    Goal {
        name: name.into(),
        detail,
        pass: Some(pass),
    }
}

/// Writes the panes' output: the top marker, `lines - 1` lines of typical
/// output, the end marker. Returns the characters of text in it (what a
/// history holding all of it stores).
fn deep_output(path: &Path, lines: usize) -> Res<u64> {
    let body = path.with_extension("body");
    typical_output(&body, lines.saturating_sub(1), END)?;
    let text = std::fs::read(&body).map_err(|e| format!("reading {}: {e}", body.display()))?;
    let mut out = Vec::with_capacity(text.len() + TOP.len() + 1);
    out.extend_from_slice(TOP.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&text);
    std::fs::write(path, &out).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&body);
    Ok(text_chars(&out))
}

/// Characters of text: UTF-8 characters outside escape sequences, line
/// ends left out.
fn text_chars(bytes: &[u8]) -> u64 {
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => {
                // CSI: parameters, then a final byte in 0x40..=0x7e.
                i += 2;
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
            }
            b'\n' | b'\r' => {}
            b if b & 0xc0 == 0x80 => {}
            _ => n += 1,
        }
        i += 1;
    }
    n
}

fn ptyd_depth(
    plan: &Scale,
    bin: &Path,
    nofile: u64,
    run: &Path,
    file: &Path,
    chars: u64,
) -> Res<Depth> {
    let dir = run.parent().ok_or("the run directory has no parent")?;
    // Room for every line, in each pane and all together.
    write_history_config(run, plan.depth_lines, 1 << 30, plan.depth_panes)?;
    let mut server = PtydServer::start(bin, run, nofile)?;
    let mut ctl = server.connect()?;
    wait_settled(&server)?;
    let before = server.footprint()?.total();
    let ids = server.create_cat_panes(&mut ctl, plan.depth_panes, file, dir, (COLS, ROWS))?;
    wait_all(&mut ctl, &ids, END)?;
    let cap = ctl
        .call("pane.capture", json!({ "target": ids[0] }))
        .map_err(|e| format!("pane.capture: {e}"))?;
    let kept = cap["scrollback_lines"].as_u64().unwrap_or(0);
    if kept + 2 * u64::from(ROWS) < plan.depth_lines as u64 {
        return Err(format!(
            "pane {} holds {kept} lines of history, not about {}",
            ids[0], plan.depth_lines
        ));
    }
    wait_settled(&server)?;
    let held = server.footprint()?.total().saturating_sub(before);

    let bin_s = path_str(bin)?;
    let ns = server.paths.namespace.clone();
    let mut env = server.client_env()?;
    env.push(("TERM", Path::new("xterm-256color")));
    let mut client = PtyProc::spawn(&[bin_s, "-L", &ns, "attach", &ids[0]], &env, COLS, ROWS)?;
    client.read_until(END.as_bytes(), SLOW)?;
    // The prefix (C-\) and `[`: scroll mode.
    let read = read_back(plan, &mut client, |c| type_keys(c, b"\x1c["));
    drop(client);

    let capture_ms = (0..plan.depth_search_reps)
        .map(|_| {
            let mut cmd = Command::new(bin);
            cmd.args(["-L", &ns, "capture", &ids[0], "-S"])
                .arg(format!("-{}", plan.depth_lines));
            for (k, v) in &env {
                cmd.env(k, v);
            }
            time_capture(cmd, "ptyd capture")
        })
        .collect();
    drop(ctl);
    server.stop()?;
    Ok(Depth {
        per_char: held as f64 / chars as f64,
        held,
        read,
        capture_ms,
    })
}

fn tmux_depth(plan: &Scale, dir: &Path, file: &Path, chars: u64) -> Res<Depth> {
    let limit = format!("history-limit {}", plan.depth_lines);
    let tmux = Tmux::new(dir, "depth", &[&limit, "mode-keys vi"])?;
    tmux.new_session("depth", "exec sleep 100000", COLS, ROWS)?;
    let pid = tmux.server_pid()?;
    let before = rss_bytes(pid)?;
    let script = format!("cat {}; exec sleep 100000", shell_quote(path_str(file)?));
    tmux.new_windows("depth", &script, plan.depth_panes)?;
    let panes: Vec<String> = tmux
        .run(&["list-panes", "-s", "-t", "depth", "-F", "#{pane_id}"])?
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect();
    let deadline = Instant::now() + SLOW;
    for p in &panes {
        while !tmux.run(&["capture-pane", "-p", "-t", p])?.contains(END) {
            if Instant::now() > deadline {
                return Err(format!("tmux pane {p} never showed the end of its output"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let held = rss_bytes(pid)?.saturating_sub(before);
    let first = panes.first().ok_or("tmux made no pane")?.clone();
    tmux.run(&["select-window", "-t", &first])?;
    let mut client = tmux.attach_client("depth", COLS, ROWS)?;
    client.read_until(END.as_bytes(), SLOW)?;
    // Copy mode by command: the prefix typed into the bench's PTY did not
    // open it.
    let read = read_back(plan, &mut client, |_| {
        tmux.run(&["copy-mode", "-t", &first]).map(drop)
    });
    drop(client);
    let socket = path_str(tmux.socket())?;
    let capture_ms = (0..plan.depth_search_reps)
        .map(|_| {
            let mut cmd = Command::new("tmux");
            cmd.env_remove("TMUX")
                .args(["-S", socket, "capture-pane", "-p", "-S"])
                .arg(format!("-{}", plan.depth_lines))
                .args(["-t", &first]);
            time_capture(cmd, "tmux capture-pane")
        })
        .collect();
    Ok(Depth {
        per_char: held as f64 / chars as f64,
        held,
        read,
        capture_ms,
    })
}

fn type_keys(c: &mut PtyProc, keys: &[u8]) -> Res<()> {
    use std::io::Write;
    c.master
        .write_all(keys)
        .map_err(|e| format!("typing into the client: {e}"))
}

/// In a client showing the pane's live screen: opens scroll mode with
/// `enter`, then times `g` from the bottom until the top line is drawn,
/// and `?` + a word of the top line + Enter from the bottom until the
/// line's part before the word is.
fn read_back(
    plan: &Scale,
    client: &mut PtyProc,
    enter: impl FnOnce(&mut PtyProc) -> Res<()>,
) -> Res<(Vec<f64>, Vec<f64>)> {
    // Whatever a key draws is read before the next one is typed.
    let settle = |c: &mut PtyProc| c.drain_for(Duration::from_millis(150)).map(drop);
    enter(client)?;
    settle(client)?;
    let mut page = Vec::new();
    for _ in 0..plan.depth_reps {
        type_keys(client, b"G")?;
        settle(client)?;
        let t0 = Instant::now();
        type_keys(client, b"g")?;
        let (_, at) = client.read_until(TOP.as_bytes(), STUCK)?;
        page.push(crate::common::ms(at.duration_since(t0)));
    }
    let mut search = Vec::new();
    for _ in 0..plan.depth_search_reps {
        type_keys(client, b"G")?;
        settle(client)?;
        // The prompt first: tmux runs `?`'s command-prompt after the
        // keys read with it, which copy mode takes.
        type_keys(client, b"?")?;
        settle(client)?;
        type_keys(client, NEEDLE.as_bytes())?;
        settle(client)?;
        let t0 = Instant::now();
        type_keys(client, b"\r")?;
        let (_, at) = client.read_until(TOP_HEAD.as_bytes(), STUCK)?;
        search.push(crate::common::ms(at.duration_since(t0)));
    }
    Ok((page, search))
}

/// Runs a capture with its output read to the end; its wall time in ms.
fn time_capture(mut cmd: Command, what: &str) -> Res<f64> {
    cmd.stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let t0 = Instant::now();
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    let took = crate::common::ms(t0.elapsed());
    if !out.status.success() || !String::from_utf8_lossy(&out.stdout).contains(TOP) {
        return Err(format!(
            "{what} exited {} without the top line: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(took)
}

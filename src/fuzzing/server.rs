//! Entry points of the fuzz targets (`fuzz/`) for the parsers that live in
//! the server: request lines, the handoff messages and manifest, snapshot
//! loading with restore planning, and the config file. Each takes the raw
//! bytes a socket, a memfd or a file would carry and runs them through the
//! same functions the server calls, then checks what must hold for any
//! input (the assertions are the findings). `crate::fuzzing` re-exports
//! them; `tests/fuzz_corpus.rs` replays the corpus through them on stable.

use super::clients::connection::Connection;
use super::config;
use super::continuity::upgrade::convert;
use super::events::EventLog;
use super::persistence::restore::{Plan, plan};
use super::persistence::resume_rules::{ResumeRules, Rule};
use crate::handoff::manifest::{Control, Manifest, PrecopyHead, PrecopyPane};
use crate::model::PaneId;
use crate::persist::snapshot::{self, Counters, Snapshot};
use crate::persist::tree::{self, Repaired};
use crate::protocol::methods::Request;
use crate::protocol::{self, RpcError};
use crate::term::{CaptureOptions, TermConfig, Terminal};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Request lines as a client sends them (`\n`-separated): each parsed as
/// the server parses it, its params put through the checks the handlers
/// make before touching any state, and its answer line encoded. Checks:
/// every answer is one line of JSON a client can read back, and a parsed
/// request survives being built again by a client (`Request` serialized
/// and parsed once more is stable).
pub fn request_lines(data: &[u8]) {
    for line in data.split(|&b| b == b'\n').take(64) {
        let Some((id, request)) = protocol::parse_request_line(line) else {
            continue;
        };
        let outcome = request.and_then(|request| {
            let again = rebuilt(&request);
            assert_eq!(rebuilt(&again).method(), request.method());
            let first = serde_json::to_value(&again).expect("a request serializes");
            let second = serde_json::to_value(rebuilt(&again)).expect("a request serializes");
            assert_eq!(first, second, "a request rebuilt by a client changed");
            check_params(&request)
        });
        let answer = protocol::response_line(&id, outcome);
        let (body, newline) = answer.split_at(answer.len() - 1);
        assert_eq!(newline, b"\n");
        assert!(!body.contains(&b'\n'), "an answer is one line");
        let back: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "an answer line must parse back ({e}): {}",
                String::from_utf8_lossy(body)
            )
        });
        assert_eq!(back["id"], id, "an answer carries the request's id");
    }
}

/// A request as a client builds it from the parsed one: serialized, then
/// parsed by the server again.
fn rebuilt(request: &Request) -> Request {
    let value = serde_json::to_value(request).expect("a request serializes");
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    Request::parse(request.method(), params)
        .unwrap_or_else(|e| panic!("a parsed request must parse again: {e}"))
}

/// The checks the handlers make on params before looking at any pane
/// (the same functions), and the pure work some do with them.
fn check_params(request: &Request) -> Result<Value, RpcError> {
    let invalid = |msg: String| RpcError::new(protocol::ErrorCode::InvalidParams, msg);
    match request {
        Request::PaneCreate(req) => {
            if let Some(name) = &req.name {
                crate::validate::name(name).map_err(invalid)?;
            }
            let command = match (&req.argv, &req.shell) {
                (Some(argv), None) => crate::model::CommandSpec::Argv(argv.clone()),
                (None, Some(shell)) => crate::model::CommandSpec::Shell(shell.clone()),
                _ => crate::model::CommandSpec::LoginShell,
            };
            crate::validate::command(&command).map_err(invalid)?;
            if let Some(tab) = &req.tab_name {
                crate::validate::label(tab).map_err(invalid)?;
            }
            crate::validate::env(&req.env).map_err(invalid)?;
            if let Some(resume) = &req.resume {
                crate::validate::resume(resume).map_err(invalid)?;
            }
            let size = crate::pty::clamp_size(
                u32::from(req.cols.unwrap_or(80)),
                u32::from(req.rows.unwrap_or(24)),
            );
            Ok(json!({ "size": size }))
        }
        Request::PaneInput(req) => {
            let _ = target(&req.target);
            for modes in [
                crate::keys::KeyModes::default(),
                crate::keys::KeyModes {
                    app_cursor: true,
                    kitty_flags: 31,
                },
            ] {
                crate::keys::encode_all(&req.keys, modes).map_err(invalid)?;
            }
            let data = req.data.as_deref().unwrap_or_default();
            let pasted = crate::keys::bracketed_paste(data.as_bytes());
            Ok(json!({ "bytes": pasted.len() }))
        }
        Request::PaneKill(req) => {
            let signal = req.signal.as_deref().map(super::requests::parse_signal);
            Ok(json!({ "signal": signal.transpose()? }))
        }
        Request::PaneWait(req) => {
            if let (Some(text), true) = (&req.text, req.regex) {
                super::requests::wait_regex(text).map_err(|e| invalid(e.to_string()))?;
            }
            Ok(json!({}))
        }
        Request::PaneCapture(req) => {
            // On a small screen with scrollback, as `pane.capture` does on
            // the pane's.
            let mut term = Terminal::new(
                12,
                4,
                TermConfig {
                    scrollback_lines: 8,
                    ..TermConfig::default()
                },
            );
            term.feed(
                b"one\r\ntwo \x1b[31mred\x1b[m\r\nthree\r\nfour\r\nfive\r\nsix and more words",
                &mut Vec::new(),
            );
            let capture = term.capture(&CaptureOptions {
                start: req.start,
                end: req.end,
                escapes: req.ansi,
                join: req.join,
            });
            serde_json::to_value(&capture).map_err(|e| invalid(e.to_string()))
        }
        Request::PaneResize(req) => crate::pty::resize_size(req.cols, req.rows)
            .map(|size| json!(size))
            .map_err(invalid),
        Request::WorkspaceCreate(req) => {
            crate::validate::name(&req.name).map_err(invalid)?;
            Ok(json!({}))
        }
        Request::WorkspaceRename(req) => {
            crate::validate::name(&req.name).map_err(invalid)?;
            Ok(json!({}))
        }
        Request::TabRename(req) => {
            crate::validate::label(&req.name).map_err(invalid)?;
            Ok(json!({}))
        }
        Request::ServerUpgrade(req) => {
            crate::handoff::fault::accept(req.fault.clone()).map_err(invalid)?;
            Ok(json!({}))
        }
        Request::PaneFocus(f) => Ok(json!(target(&f.target))),
        Request::PaneRespawn(t) => Ok(json!(target(&t.target))),
        Request::Attach(req) => Ok(json!(target(&req.target))),
        _ => Ok(json!({})),
    }
}

/// A target as `resolve_target` reads it before looking it up.
fn target(text: &str) -> Option<u64> {
    text.parse::<PaneId>()
        .ok()
        .or_else(|| text.parse::<u64>().ok().map(PaneId::new))
        .map(PaneId::get)
}

/// A handoff message, pre-copy or manifest as the new server receives it
/// (one JSON document; whichever of the three it decodes as), then what
/// the import makes of it without fds: the event log, the strict tree,
/// every pane rebuilt from its record and runtime state, connections with
/// their output queues (on a socketpair), parked waits. Errors are fine;
/// panics are findings.
pub fn handoff(data: &[u8]) {
    if let Ok(msg) = serde_json::from_slice::<Control>(data) {
        // The size a pre-copy or manifest announces, against a memfd of
        // what the message itself is.
        if let Control::Precopy { bytes, .. } | Control::Manifest { bytes, .. } = msg
            && let Ok(memfd) = crate::sys::anonymous_file(c"ptyd-fuzz", data)
        {
            let read = super::continuity::upgrade::import::read_memfd(memfd, bytes);
            assert_eq!(read.is_ok(), bytes == data.len() as u64);
        }
        let text = serde_json::to_vec(&msg).expect("a control message serializes");
        let again: Control = serde_json::from_slice(&text).expect("a control message reads back");
        assert_eq!(
            serde_json::to_vec(&again).expect("a control message serializes"),
            text
        );
    }
    // A pre-copy (or delta) is JSON lines: a head, then one pane a line.
    let mut lines = data.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    if let Some(Ok(head)) = lines.next().map(serde_json::from_slice::<PrecopyHead>) {
        let _ = EventLog::from_parts(head.event_last_seq, head.event_ring);
    }
    let now = Instant::now();
    for (i, line) in lines.enumerate().take(16) {
        let Ok((rec, mut rt)) = serde_json::from_slice::<PrecopyPane>(line) else {
            continue;
        };
        let mut screens: HashMap<u64, (u64, Terminal)> = HashMap::new();
        if let Some(t) = rt.screen.take() {
            screens.insert(rt.id, (rt.screen_changes, t));
        }
        let token = mio::Token(i);
        if let Ok(pane) =
            convert::pane_from_runtime(rec, rt, token, now, &HashMap::new(), &mut screens)
        {
            let _ = pane.info(0);
            crate::fuzzing::exercise_terminal(&mut pane.into_screen());
        }
    }
    let Ok(mut m) = serde_json::from_slice::<Manifest>(data) else {
        return;
    };
    let _ = EventLog::from_parts(m.event_last_seq, std::mem::take(&mut m.event_ring));
    let _ = tree::strict(
        &m.snapshot,
        m.unchanged_panes.iter().map(|&p| PaneId::new(p)),
    );
    let now = Instant::now();
    let mut conn_map = HashMap::new();
    for (i, rt) in std::mem::take(&mut m.conns).into_iter().enumerate().take(8) {
        let Ok((ours, _peer)) = mio::net::UnixStream::pair() else {
            return;
        };
        let old_id = rt.id;
        let Ok(mut conn) = convert::conn_from_runtime(rt, mio::Token(i), ours, now) else {
            continue;
        };
        conn_map.insert(old_id, i);
        exercise_conn(&mut conn, data.len() as u8);
    }
    let mut screens = HashMap::new();
    if let Ok(mut records) = tree::pane_records_strict(std::mem::take(&mut m.snapshot.panes)) {
        for (i, rt) in std::mem::take(&mut m.panes)
            .into_iter()
            .enumerate()
            .take(16)
        {
            let Some(rec) = records.remove(&PaneId::new(rt.id)) else {
                continue;
            };
            let token = mio::Token(100 + i);
            if let Ok(pane) =
                convert::pane_from_runtime(rec, rt, token, now, &conn_map, &mut screens)
            {
                let _ = pane.info(0);
                crate::fuzzing::exercise_terminal(&mut pane.into_screen());
            }
        }
    }
    for w in m.waits.into_iter().take(16) {
        if let Ok((_wait, Some(timeout))) = convert::wait_from_runtime(w, 0) {
            // As `park_wait` arms it.
            let _ = Instant::now() + timeout;
        }
    }
}

/// What the new server may do first with a handed-over connection: write
/// its queue, queue a reply, or cut it off with a last message.
fn exercise_conn(conn: &mut Connection, first: u8) {
    let _ = conn.output_state();
    let _ = conn.queued();
    if first % 2 == 0 {
        let _ = conn.flush();
    }
    let _ = conn.queue(b"{\"event\":{}}\n");
    conn.replace_queue(b"{\"id\":null}\n");
    let _ = conn.queued();
    let _ = conn.flush();
    let _ = conn.output_state();
}

/// A `session.json` as start-up reads it: parsed (versions checked),
/// repaired, and every pane's restore planned as the server plans it, with
/// and without `hold_reruns`; also read strictly, as a manifest's snapshot
/// is. Checks: the repaired state is consistent (every kept pane in
/// exactly one tab, names and other fields valid as the API requires,
/// counters past every id in use), a plan never runs a command the API
/// would refuse, and the repaired state, saved and read again, needs no
/// more repair and passes the strict reading.
pub fn snapshot(data: &[u8]) {
    let Ok(snap) = snapshot::parse(data) else {
        return;
    };
    let _ = tree::strict(&snap, []);
    let _ = tree::pane_records_strict(snap.panes.clone());
    let (revision, generation) = (snap.revision, snap.generation);
    let Repaired {
        tree: repaired,
        panes,
        next_pane_id,
        fixes,
    } = tree::repair(snap);
    repaired
        .check(|p| panes.contains_key(&p))
        .unwrap_or_else(|e| panic!("a repaired tree must be consistent: {e}"));
    // Every kept pane in exactly one tab; only when the ids to open a tab
    // are used up may one be in none, and the repair says so.
    let mut placed: Vec<PaneId> = repaired
        .tabs
        .values()
        .flat_map(|t| t.layout.panes())
        .collect();
    placed.sort();
    let before = placed.len();
    placed.dedup();
    assert_eq!(placed.len(), before, "a pane placed twice");
    for id in panes.keys() {
        if placed.binary_search(id).is_err() {
            let note = format!("pane {id} was in no tab, and no tab could be opened");
            assert!(
                fixes.iter().any(|f| f.starts_with(&note)),
                "pane {id} is in no tab and no repair says why: {fixes:?}"
            );
        }
    }
    assert!(placed.iter().all(|p| panes.contains_key(p)));
    for ws in repaired.workspaces.values() {
        assert!(
            ws.id < repaired.next_workspace_id,
            "workspace counter past {}",
            ws.id
        );
        crate::validate::name(&ws.name).expect("a repaired workspace name is valid");
    }
    for tab in repaired.tabs.values() {
        assert!(tab.id < repaired.next_tab_id, "tab counter past {}", tab.id);
        crate::validate::label(&tab.name).expect("a repaired tab name is valid");
    }
    let rules = ResumeRules::new(vec![Rule {
        program: "vim".into(),
        resume: "vim -S".into(),
    }]);
    let mut names = std::collections::HashSet::new();
    for (id, rec) in &panes {
        assert!(
            *id < next_pane_id,
            "pane counter {next_pane_id} not past {id}"
        );
        if let Some(name) = &rec.name {
            crate::validate::name(name).expect("a restored pane name is valid");
            assert!(names.insert(name), "pane name {name:?} restored twice");
        }
        crate::validate::env(&rec.env).expect("restored env is valid");
        if let Some(resume) = &rec.resume {
            crate::validate::resume(resume).expect("a restored resume is valid");
        }
        if let Some(file) = &rec.history {
            assert!(
                !file.is_empty() && !file.contains('/') && !file.starts_with('.'),
                "history file name {file:?} leaves history/"
            );
        }
        for hold_reruns in [false, true] {
            if let Plan::Run(command) = plan(*id, rec, &rules, hold_reruns).0 {
                crate::validate::command(&command)
                    .unwrap_or_else(|e| panic!("pane {id} planned to run {command:?}: {e}"));
            }
        }
        let _ = crate::pty::clamp_size(u32::from(rec.cols), u32::from(rec.rows));
    }
    // Saved as the server saves it, and read back: the same state.
    let records = tree::to_records(&repaired);
    let saved = Snapshot {
        version: snapshot::SNAPSHOT_VERSION,
        server_version: protocol::SERVER_VERSION.to_string(),
        written_unix_ms: 0,
        revision,
        generation,
        counters: Counters {
            workspace: repaired.next_workspace_id.get(),
            tab: repaired.next_tab_id.get(),
            pane: next_pane_id.get(),
            event: 0,
        },
        active_workspace: records.active_workspace,
        workspaces: records.workspaces,
        tabs: records.tabs,
        panes: panes.values().cloned().collect(),
    };
    let bytes = snapshot::encode(&saved);
    let read = snapshot::parse(&bytes)
        .unwrap_or_else(|e| panic!("a snapshot the server saves must read back: {e}"));
    assert_eq!(read, saved, "a saved snapshot reads back as written");
    tree::strict(&read, [])
        .unwrap_or_else(|e| panic!("a repaired snapshot must pass the strict reading: {e}"));
    let again = tree::repair(read);
    let again_records = tree::to_records(&again.tree);
    assert_eq!(
        again_records.workspaces, saved.workspaces,
        "repair is idempotent"
    );
    assert_eq!(again_records.tabs, saved.tabs, "repair is idempotent");
    assert_eq!(
        again.panes.values().cloned().collect::<Vec<_>>(),
        saved.panes
    );
    assert_eq!(again.next_pane_id, next_pane_id);
}

/// A config file's text as the server reads it: `config.toml`, and the
/// deprecated `config.json`. Checks: every value taken is within its
/// documented range, every resume rule passes the API's rules for a
/// `resume`, and the reload report covers every key.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in ["config.toml", "config.json"] {
        let (cfg, problems) = config::parse(Path::new(name), text);
        for p in &problems {
            assert!(!p.is_empty());
        }
        assert!(cfg.term.scrollback_lines <= config::MAX_SCROLLBACK_LINES);
        assert!(cfg.term.scrollback_bytes <= config::MAX_SCROLLBACK_BYTES);
        assert!(cfg.upgrade_timeout.as_millis() >= 1000);
        for rule in cfg.resume_rules.user_rules() {
            crate::validate::resume(&rule.resume)
                .unwrap_or_else(|e| panic!("config took resume rule {rule:?}: {e}"));
        }
        let report = config::changes(&super::config::UserConfig::default(), &cfg);
        assert_eq!(report.len(), cfg.values().len());
    }
}

/// The output log fed through the terminal model as the server feeds it
/// (`Terminal::feed_logged`, in two reads cut at `cut`), against the log
/// reading the same bytes itself: the same state (text, marks, count).
/// Called by `crate::fuzzing::term_feed` on its input.
pub fn output_log_fold(input: &[u8], cut: usize, cols: u16, rows: u16) {
    use super::panes::output_log::OutputLog;
    let mut reference = OutputLog::default();
    reference.feed(input);
    let mut folded = OutputLog::default();
    let mut term = Terminal::new(cols, rows, TermConfig::default());
    let mut forward = Vec::new();
    let (a, b) = input.split_at(cut.min(input.len()));
    for read in [a, b] {
        term.feed_logged(read, &mut forward, &mut folded);
        folded.fed(read.len());
    }
    assert!(
        folded == reference,
        "the log fed through the model differs from the log fed itself"
    );
}

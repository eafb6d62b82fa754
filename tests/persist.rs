//! Snapshot and restore through the real binary: real servers, real
//! processes, real files (docs/snapshot.md is the specification).
//!
//! - `round_trip_*`: a full tree survives a stop and a cold start.
//! - `fixture_*`: hand-written files in `fixtures/session/` (valid, corrupt,
//!   newer, broken references, unmovable) and what start-up does with each.
//! - `deleted_cwd_*`, `restore_*`: restore details (policies, resume,
//!   history, the live cwd, a start that fails).
//! - `kill9_during_saves_*`, `failed_*`: durability of the writer (SIGKILL
//!   mid-save, EFBIG on session.json or on a history file).
//! - `automatic_save_*`, `sigterm_*`, `constant_churn_*`: when saves happen.
//! - `history_*`, `no_history_*`: history files, bounded or off.
//! - `namespaces_*`: two namespaces never share a file.
//!
//! Servers run with `SHELL=/bin/sh` and private XDG dirs (see
//! `util/server.rs`); every wait has a 20 s limit.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use ptyd::persist::snapshot::{self, LoadError};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use util::{Conn, Dirs, cmdline, eventually, files_under, temp_files};

/// Pane-info and snapshot fields that describe a process run, not the
/// state the user arranged: they may differ after a restore.
const RUNTIME_FIELDS: &[&str] = &[
    "pid",
    "sid",
    "start_token",
    "created_unix_ms",
    "title",
    "attached_clients",
    "exit",
    "held_reason",
    "state",
    "written_unix_ms",
    "generation",
    "prompts_seen",
    "commands_finished",
    "last_command_exit",
    "output_bytes",
    "shell_injected",
    "history_bytes",
];

/// `v` with every [`RUNTIME_FIELDS`] key (plus `extra`) removed, at any depth.
fn without(v: &Value, extra: &[&str]) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !RUNTIME_FIELDS.contains(&k.as_str()) && !extra.contains(&k.as_str())
                })
                .map(|(k, v)| (k.clone(), without(v, extra)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| without(i, extra)).collect()),
        other => other.clone(),
    }
}

#[track_caller]
fn assert_json_eq(left: &Value, right: &Value, what: &str) {
    if left != right {
        panic!(
            "{what} differ:\n--- before\n{}\n--- after\n{}",
            serde_json::to_string_pretty(left).unwrap(),
            serde_json::to_string_pretty(right).unwrap()
        );
    }
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn states(conn: &mut Conn) -> Vec<(String, String)> {
    conn.panes()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Waits until the pane's process runs `argv` (after a `sh -c "exec ..."`).
#[track_caller]
fn wait_cmdline(conn: &mut Conn, target: &str, argv: &[&str]) {
    eventually(format!("pane {target} to run {argv:?}"), || {
        let pane = conn.pane(target);
        let now = pane["pid"].as_i64().map(cmdline).unwrap_or_default();
        if now == argv {
            Ok(())
        } else {
            Err(format!("it runs {now:?}; info {pane}"))
        }
    })
}

fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// Puts a fixture (and its `.history/` dir, if any) in place as the
/// namespace's snapshot.
fn install_fixture(env: &Dirs, ns: &str, name: &str) -> Vec<u8> {
    let src = fixtures_dir().join(name);
    let bytes = std::fs::read(&src).unwrap();
    let dir = env.state_dir(ns);
    std::fs::create_dir_all(&dir).unwrap();
    util::set_mode(&env.state.join("ptyd"), 0o700);
    util::set_mode(&dir, 0o700);
    std::fs::write(dir.join("session.json"), &bytes).unwrap();
    let history = src.with_extension("history");
    if history.is_dir() {
        std::fs::create_dir_all(dir.join("history")).unwrap();
        for entry in std::fs::read_dir(&history).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join("history").join(entry.file_name())).unwrap();
        }
    }
    bytes
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/session")
}

// ---------------------------------------------------------------------------
// 1. Round trip

#[test]
fn round_trip_restores_tree_panes_and_snapshot() {
    let env = Dirs::new();
    let ns = "roundtrip";
    let dir_a = env.path("src/a");
    let dir_b = env.path("src/b");
    let dir_c = env.path("ops");
    let server = env.start(ns);
    let mut c = server.connect();

    let p1 = c.create(json!({
        "name": "editor", "argv": ["/bin/sh"], "cwd": dir_a, "env": {"FOO": "bar"},
        "cols": 120, "rows": 40, "tab_name": "dev",
    }));
    assert_eq!(p1["id"], "p1");
    c.create(json!({
        "name": "sleeper", "argv": ["sleep", "1000"], "cwd": dir_b, "cols": 60, "rows": 40,
        "restore": "rerun", "split": "editor", "direction": "horizontal", "ratio": 0.6,
    }));
    c.create(json!({
        "shell": "exec sleep 1001", "cwd": dir_b, "env": {"A": "1", "B": "two words"},
        "cols": 60, "rows": 10, "restore": "shell", "split": "p2", "direction": "vertical",
        "ratio": 0.25,
    }));
    c.create(json!({ "argv": ["sleep", "1002"], "cwd": dir_a, "tab_name": "logs" }));
    let ops = c.ok("workspace.create", json!({ "name": "ops" }));
    assert_eq!(ops["id"], "w2");
    c.create(json!({
        "name": "agent", "argv": ["sleep", "1003"], "cwd": dir_c, "cols": 200, "rows": 50,
        "resume": "exec sleep 1004", "workspace": "ops", "tab_name": "agent",
    }));
    c.create(json!({ "split": "agent", "direction": "vertical", "ratio": 0.7, "cwd": dir_c }));
    c.ok("workspace.create", json!({ "name": "scratch" }));
    c.ok(
        "pane.set_resume",
        json!({ "target": "p3", "resume": "exec sleep 1005" }),
    );
    c.ok(
        "tab.rename",
        json!({ "target": "logs", "name": "logs-renamed" }),
    );
    c.ok(
        "workspace.rename",
        json!({ "target": "ops", "name": "operations" }),
    );
    c.ok(
        "pane.resize",
        json!({ "target": "p4", "cols": 99, "rows": 33 }),
    );
    c.ok("pane.focus", json!({ "target": "p1" }));
    // The shell is up and has printed something worth keeping.
    c.type_line("p1", "echo $((2+3))ready");
    c.wait_text("p1", "5ready");

    let tree_before = c.ok("tree", json!({}));
    let panes_before = c.panes();
    c.save();
    drop(c);
    server.stop();
    let file_before = read_json(&env.session_path(ns));

    let server = env.start(ns);
    let mut c = server.connect();
    let status = c.ok("server.status", json!({}));
    let restore = &status["persistence"]["restore"];
    assert_eq!(restore["found"], true, "{status}");
    assert_eq!(restore["panes"], 6, "{status}");
    assert_eq!(restore["repairs"], json!([]), "{status}");

    let tree_after = c.ok("tree", json!({}));
    let panes_after = c.panes();
    assert_json_eq(
        &without(&tree_before, &[]),
        &without(&tree_after, &[]),
        "trees",
    );
    assert_json_eq(
        &without(&json!(panes_before), &[]),
        &without(&json!(panes_after), &[]),
        "pane lists",
    );
    let expected_states: Vec<(String, String)> = [
        ("p1", "running"), // a plain shell comes back as a shell
        ("p2", "running"), // rerun
        ("p3", "running"), // resume wins over `shell`
        ("p4", "held"),    // a command with the default `hold`
        ("p5", "running"), // resume
        ("p6", "running"), // login shell
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(states(&mut c), expected_states);
    wait_cmdline(&mut c, "p2", &["sleep", "1000"]);
    wait_cmdline(&mut c, "p3", &["sleep", "1005"]);
    wait_cmdline(&mut c, "p5", &["sleep", "1004"]);
    // What the new server writes equals what the old one wrote, apart from
    // run-time fields; the revision never goes backward.
    c.save();
    let file_after = read_json(&env.session_path(ns));
    assert!(
        file_after["revision"].as_u64() >= file_before["revision"].as_u64(),
        "revision went backward: {} -> {}",
        file_before["revision"],
        file_after["revision"]
    );
    assert!(
        file_after["generation"].as_u64() >= file_before["generation"].as_u64(),
        "generation went backward"
    );
    // Events go on being numbered: the counter only grows.
    assert!(
        file_after["counters"]["event"].as_u64() > file_before["counters"]["event"].as_u64(),
        "event numbers went backward"
    );
    let mut file_before = file_before;
    file_before["counters"]["event"] = file_after["counters"]["event"].clone();
    assert_json_eq(
        &without(&file_before, &["revision"]),
        &without(&file_after, &["revision"]),
        "session.json files",
    );
    // Counters carried over: ids are never reused.
    let p7 = c.create(json!({ "argv": ["sleep", "1006"] }));
    assert_eq!(p7["id"], "p7");
    server.stop();
}

// ---------------------------------------------------------------------------
// 2. Fixtures

#[test]
fn fixture_every_file_parses_as_its_name_says() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let parsed = snapshot::parse(&std::fs::read(&path).unwrap());
        seen += 1;
        if name.starts_with("corrupt-") {
            assert!(
                matches!(parsed, Err(LoadError::Corrupt(_))),
                "{name}: {parsed:?}"
            );
            continue;
        }
        let version: u32 = name
            .strip_prefix('v')
            .and_then(|r| r.split('-').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("fixture {name} must be named v<N>-... or corrupt-..."));
        if version > snapshot::SNAPSHOT_VERSION {
            assert_eq!(
                parsed,
                Err(LoadError::Newer {
                    found: version.into()
                }),
                "{name}"
            );
        } else {
            let snap = parsed.unwrap_or_else(|e| panic!("{name} no longer loads: {e}"));
            assert_eq!(
                snap.version,
                snapshot::SNAPSHOT_VERSION,
                "{name} not migrated"
            );
            // Encoding and parsing again gives the same snapshot.
            assert_eq!(
                snapshot::parse(&snapshot::encode(&snap)).unwrap(),
                snap,
                "{name}"
            );
        }
    }
    assert!(seen >= 4, "only {seen} fixtures found");
}

#[test]
fn event_numbers_go_on_from_the_snapshot_and_start_at_one_after_a_v1_file() {
    for (fixture, kept) in [("v2-workspaces.json", 317), ("v1-workspaces.json", 0)] {
        let env = Dirs::new();
        let ns = "fixture-events";
        install_fixture(&env, ns, fixture);
        let server = env.start(ns);
        let mut c = server.connect();
        let mut sub = server.connect();
        sub.ok("events.subscribe", json!({ "since": 0 }));
        let first = sub.next_event();
        if kept > 0 {
            // What the server that wrote the file logged is not here.
            assert_eq!(first["type"], "gap", "{fixture}: {first}");
            assert_eq!(first["to"], kept, "{fixture}: {first}");
        } else {
            assert_eq!(first["seq"], 1, "{fixture}: {first}");
        }
        let seq = c.ok("server.status", json!({}))["event_seq"]
            .as_u64()
            .unwrap();
        assert!(seq > kept, "{fixture}: {seq}");
    }
}

#[test]
fn fixture_valid_v1_restores_exactly() {
    let env = Dirs::new();
    let ns = "fixture-valid";
    let fixture = install_fixture(&env, ns, "v1-workspaces.json");
    let server = env.start(ns);
    let mut c = server.connect();
    let restore = c.ok("server.status", json!({}))["persistence"]["restore"].clone();
    assert_eq!(restore["panes"], 5, "{restore}");
    assert_eq!(restore["repairs"], json!([]), "{restore}");

    let tree = without(&c.ok("tree", json!({})), &[]);
    let pane = |id: &str,
                name: Value,
                cwd: &str,
                command: Value,
                env: Value,
                size: (u16, u16),
                restore: &str,
                resume: Value| {
        json!({
            "id": id, "name": name, "cwd": cwd, "command": command, "env": env,
            "cols": size.0, "rows": size.1, "restore": restore, "resume": resume,
            "shell_integration": true,
        })
    };
    let p1 = pane(
        "p1",
        Value::Null,
        "/",
        json!("login_shell"),
        json!({}),
        (120, 40),
        "hold",
        Value::Null,
    );
    let p2 = pane(
        "p2",
        json!("sleeper"),
        "/tmp",
        json!({"argv": ["sleep", "1000"]}),
        json!({"LC_ALL": "C"}),
        (72, 24),
        "rerun",
        Value::Null,
    );
    let p5 = pane(
        "p5",
        json!("build"),
        "/",
        json!({"argv": ["make", "-j4"]}),
        json!({}),
        (72, 16),
        "hold",
        Value::Null,
    );
    let p7 = pane(
        "p7",
        Value::Null,
        "/usr",
        json!({"shell": "tail -f /var/log/syslog | grep ptyd"}),
        json!({}),
        (200, 50),
        "shell",
        Value::Null,
    );
    let p8 = pane(
        "p8",
        json!("agent"),
        "/tmp",
        json!({"argv": ["claude"]}),
        json!({"FOO": "1"}),
        (120, 40),
        "hold",
        json!("exec sleep 1000 # stands in for: claude --resume 5c1d"),
    );
    let expected = json!({ "workspaces": [
        { "id": "w1", "name": "main", "active": true, "tabs": [
            { "id": "t1", "name": "dev", "active": false, "focus": "p2", "zoom": "p2",
              "layout": { "split": { "direction": "horizontal", "ratio": 0.6,
                  "first": { "pane": "p1" },
                  "second": { "split": { "direction": "vertical", "ratio": 0.3,
                      "first": { "pane": "p2" }, "second": { "pane": "p5" } } } } },
              "panes": [p1, p2, p5] },
            { "id": "t4", "name": "agent", "active": true, "focus": "p8", "zoom": null,
              "layout": { "pane": "p8" }, "panes": [p8] },
        ] },
        { "id": "w2", "name": "ops", "active": false, "tabs": [
            { "id": "t3", "name": "logs", "active": true, "focus": "p7", "zoom": null,
              "layout": { "pane": "p7" }, "panes": [p7] },
        ] },
    ] });
    // Ratios are f32 on the way: compare them rounded.
    assert_json_eq(&round_ratios(&expected), &round_ratios(&tree), "trees");

    let got: Vec<(String, String)> = states(&mut c);
    let want: Vec<(String, String)> = [
        ("p1", "running"),
        ("p2", "running"),
        ("p5", "held"),
        ("p7", "running"),
        ("p8", "running"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    wait_cmdline(&mut c, "p2", &["sleep", "1000"]);
    wait_cmdline(&mut c, "p7", &["/bin/sh", "-l"]);
    wait_cmdline(&mut c, "p8", &["sleep", "1000"]);
    // The history file is shown, followed by the restored marker (both
    // are in place before the server reports ready).
    let screen = c.capture_all("p1");
    let history = screen
        .find("all 212 checks passed")
        .unwrap_or_else(|| panic!("no history:\n{screen}"));
    assert!(
        history < screen.find("--- ptyd: restored").unwrap(),
        "{screen}"
    );
    // Counters as saved.
    assert_eq!(c.create(json!({ "argv": ["sleep", "1001"] }))["id"], "p9");
    assert_eq!(
        c.ok("workspace.create", json!({ "name": "new" }))["id"],
        "w3"
    );
    let tree = c.ok("tree", json!({}));
    assert_eq!(tree["workspaces"][0]["tabs"][2]["id"], "t5", "{tree}");
    c.ok("pane.remove", json!({ "target": "p9", "force": true }));
    c.ok("workspace.remove", json!({ "target": "new" }));

    // Re-saved, the file says what the fixture said (bar run-time fields and
    // history names, now written for every pane).
    c.save();
    let saved = read_json(&env.session_path(ns));
    let mut fixture: Value = serde_json::from_slice(&fixture).unwrap();
    fixture["counters"]["workspace"] = json!(4);
    fixture["counters"]["tab"] = json!(6);
    fixture["counters"]["pane"] = json!(10);
    // Written as the current version, with the events numbered meanwhile.
    fixture["version"] = saved["version"].clone();
    assert!(saved["counters"]["event"].as_u64() > Some(0), "{saved}");
    fixture["counters"]["event"] = saved["counters"]["event"].clone();
    assert_json_eq(
        &round_ratios(&without(&fixture, &["revision", "history"])),
        &round_ratios(&without(&saved, &["revision", "history"])),
        "fixture and re-saved snapshot",
    );
    server.stop();
}

fn round_ratios(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| match (k.as_str(), v.as_f64()) {
                    ("ratio", Some(r)) => (k.clone(), json!((r * 1000.0).round() / 1000.0)),
                    _ => (k.clone(), round_ratios(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(round_ratios).collect()),
        other => other.clone(),
    }
}

/// A file the server cannot use is moved to `backups/` intact, reported,
/// and never touched again; the server starts empty and saves normally.
fn check_set_aside(fixture: &str, tag: &str, reason_has: &str) {
    let env = Dirs::new();
    let ns = "setaside";
    let original = install_fixture(&env, ns, fixture);
    let server = env.start(ns);
    let mut c = server.connect();
    assert_eq!(c.panes(), Vec::<Value>::new());
    assert_eq!(c.ok("tree", json!({}))["workspaces"], json!([]));

    let backups = env.state_dir(ns).join("backups");
    let files = files_under(&backups);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].to_string_lossy().into_owned();
    assert!(
        name.starts_with("session.json.") && name.ends_with(&format!(".{tag}")),
        "{name}"
    );
    let backup = backups.join(&files[0]);
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        original,
        "backup bytes differ"
    );
    assert!(
        !env.session_path(ns).exists(),
        "the unusable file was left in place"
    );

    let status = server.status_json();
    let restore = &status["persistence"]["restore"];
    assert_eq!(restore["set_aside"], json!(backup), "{status}");
    let reason = restore["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(reason_has),
        "reason {reason:?} lacks {reason_has:?}"
    );
    assert_eq!(status["persistence"]["enabled"], true, "{status}");

    let mut events = server.connect();
    events.ok("events.subscribe", json!({ "since": 0 }));
    let event = events.wait_event_type("server.snapshot_set_aside");
    assert_eq!(event["backup"], json!(backup), "{event}");
    assert_eq!(event["reason"], json!(reason), "{event}");

    // The next save writes a fresh file and leaves the backup alone.
    let mtime = std::fs::metadata(&backup).unwrap().modified().unwrap();
    c.create(json!({ "argv": ["sleep", "1000"] }));
    c.save();
    server.stop();
    let snap = snapshot::parse(&std::fs::read(env.session_path(ns)).unwrap()).unwrap();
    assert_eq!(snap.panes.len(), 1);
    assert_eq!(files_under(&backups), files);
    assert_eq!(std::fs::read(&backup).unwrap(), original);
    assert_eq!(
        std::fs::metadata(&backup).unwrap().modified().unwrap(),
        mtime
    );
}

#[test]
fn fixture_corrupt_is_set_aside() {
    check_set_aside("corrupt-truncated.json", "corrupt", "corrupt");
}

#[test]
fn fixture_future_version_is_set_aside() {
    check_set_aside("v99-future.json", "newer", "newer");
}

#[test]
fn fixture_broken_references_are_repaired() {
    let env = Dirs::new();
    let ns = "broken";
    install_fixture(&env, ns, "v1-broken-refs.json");
    let server = env.start(ns);
    let mut c = server.connect();
    let status = server.status_json();
    let repairs: Vec<String> = status["persistence"]["restore"]["repairs"]
        .as_array()
        .unwrap_or_else(|| panic!("no repairs in {status}"))
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let has = |words: &[&str]| repairs.iter().any(|r| words.iter().all(|w| r.contains(w)));
    for (what, words) in [
        ("missing leaf p9", &["p9"][..]),
        ("ratio 1.5", &["1.5"]),
        ("p2 placed twice", &["duplicate", "p2"]),
        ("focus on a missing pane", &["focus", "t1"]),
        ("zoom on a missing pane", &["zoom", "t3"]),
        ("workspace counter", &["workspace counter"]),
        ("tab counter", &["tab counter"]),
        ("pane counter", &["pane counter"]),
        ("a second pane p3", &["duplicate pane p3"]),
        ("the name \"one\" used twice", &["p6", "name \"one\""]),
        ("a pane in no tab", &["p6", "no tab"]),
        ("a second workspace w2", &["duplicate workspace w2"]),
        ("tab t1 listed twice", &["w1", "t1 twice"]),
    ] {
        assert!(has(words), "no repair for {what} in {repairs:#?}");
    }
    let tree = round_ratios(&without(&c.ok("tree", json!({})), &["panes"]));
    let expected = json!({ "workspaces": [
        { "id": "w1", "name": "main", "active": false, "tabs": [
            { "id": "t1", "name": "dev", "active": false, "focus": "p1", "zoom": null,
              "layout": { "split": { "direction": "horizontal", "ratio": 0.5,
                  "first": { "pane": "p1" }, "second": { "pane": "p2" } } } },
            { "id": "t2", "name": "dup", "active": false, "focus": "p3", "zoom": null,
              "layout": { "pane": "p3" } },
            { "id": "t4", "name": "p6", "active": true, "focus": "p6", "zoom": null,
              "layout": { "pane": "p6" } },
        ] },
        { "id": "w2", "name": "ops", "active": true, "tabs": [
            { "id": "t3", "name": "ops", "active": true, "focus": "p5", "zoom": null,
              "layout": { "pane": "p5" } },
        ] },
    ] });
    assert_json_eq(&expected, &tree, "repaired trees");
    // The panes themselves are intact.
    let panes: Vec<Value> = c.panes().iter().map(|p| without(p, &[])).collect();
    let names: Vec<Value> = panes.iter().map(|p| p["name"].clone()).collect();
    assert_eq!(
        names,
        [
            json!("shell"),
            json!("one"),
            json!("two"),
            json!("three"),
            Value::Null
        ]
    );
    assert_eq!(panes[1]["env"], json!({"K": "v"}));
    assert_eq!(
        (panes[2]["cols"].as_u64(), panes[2]["rows"].as_u64()),
        (Some(81), Some(25))
    );
    wait_cmdline(&mut c, "two", &["sleep", "1001"]);
    wait_cmdline(&mut c, "p6", &["sleep", "1004"]);
    // Counters raised above the ids in use (the tab counter also past the
    // tab opened for p6).
    assert_eq!(c.create(json!({ "argv": ["sleep", "1003"] }))["id"], "p7");
    assert_eq!(c.ok("workspace.create", json!({ "name": "x" }))["id"], "w3");
    let tree = c.ok("tree", json!({}));
    let new_tab = tree["workspaces"][0]["tabs"][3]["id"].clone();
    assert_eq!(new_tab, "t5", "{tree}");
    server.stop();
}

// ---------------------------------------------------------------------------
// 3. Deleted cwd

#[test]
fn deleted_cwd_starts_in_nearest_ancestor_with_notice() {
    let env = Dirs::new();
    let ns = "cwd";
    let project = env.path("project");
    let deep = env.path("project/gone/deeper");
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "name": "sh", "argv": ["/bin/sh"], "cwd": deep }));
    c.type_line("sh", "echo $((2+3))ready");
    c.wait_text("sh", "5ready");
    c.save();
    server.stop();
    assert_eq!(
        read_json(&env.session_path(ns))["panes"][0]["cwd"],
        json!(deep),
        "the saved cwd"
    );
    std::fs::remove_dir_all(project.join("gone")).unwrap();

    let server = env.start(ns);
    let mut c = server.connect();
    let pane = c.pane("sh");
    assert_eq!(pane["state"], "running", "{pane}");
    assert_eq!(pane["cwd"], json!(project), "{pane}");
    let pid = pane["pid"].as_i64().unwrap();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        project
    );
    let notice = format!(
        "--- ptyd: {} no longer exists; starting in {} ---",
        deep.display(),
        project.display()
    );
    // In place before the server reports ready; it may wrap.
    let screen = c.capture_all("sh").replace('\n', "");
    assert!(
        screen.contains(&notice),
        "no notice {notice:?} in:\n{screen}"
    );
    let repairs = server.status_json()["persistence"]["restore"]["repairs"].to_string();
    assert!(repairs.contains("is gone"), "{repairs}");
    server.stop();
}

/// Ids and counters at the end of the u64 range (a hand-edited or damaged
/// file): the restore used to overflow computing the next id (a panic in
/// debug builds, a wrapped counter in release), and a pane counter at its
/// end overflowed on the next `pane.create`. Now the last value is no id,
/// the restore drops it as a repair, and a used-up counter refuses.
#[test]
fn ids_at_the_end_of_their_range_never_wrap() {
    let env = Dirs::new();
    let ns = "maxid";
    let max = u64::MAX;
    let pane = |id: String| {
        json!({ "id": id, "name": null, "cwd": "/", "command": { "argv": ["sleep", "1000"] },
                "env": {}, "cols": 80, "rows": 24, "restore": "rerun", "resume": null,
                "history": null, "pid": null, "start_token": null })
    };
    let snapshot = json!({
        "version": 1, "server_version": "0.1.0", "written_unix_ms": 0, "revision": 1,
        "generation": 1, "counters": { "workspace": 2, "tab": 2, "pane": max },
        "active_workspace": "w1",
        "workspaces": [{ "id": "w1", "name": "main", "tabs": ["t1"], "active_tab": "t1" }],
        "tabs": [{ "id": "t1", "name": "big", "workspace": "w1",
                   "layout": { "split": { "direction": "horizontal", "ratio": 0.5,
                       "first": { "pane": format!("p{}", max - 1) },
                       "second": { "pane": format!("p{max}") } } },
                   "focus": format!("p{}", max - 1), "zoom": null }],
        "panes": [pane(format!("p{}", max - 1)), pane(format!("p{max}"))],
    });
    let dir = env.state_dir(ns);
    std::fs::create_dir_all(&dir).unwrap();
    util::set_mode(&env.state.join("ptyd"), 0o700);
    util::set_mode(&dir, 0o700);
    std::fs::write(dir.join("session.json"), snapshot.to_string()).unwrap();

    let server = env.start(ns);
    let mut c = server.connect();
    let ids: Vec<Value> = c.panes().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(ids, vec![json!(format!("p{}", max - 1))]);
    let repairs = server.status_json()["persistence"]["restore"]["repairs"].to_string();
    assert!(
        repairs.contains(&format!("bad id \\\"p{max}\\\"")),
        "{repairs}"
    );
    let (code, message) = c
        .call("pane.create", json!({ "argv": ["sleep", "1000"] }))
        .expect_err("a pane with no id left");
    assert_eq!(code, "internal");
    assert!(message.contains("pane ids are used up"), "{message}");
    // The server is unharmed and saves the counter as it was.
    assert_eq!(c.panes().len(), 1);
    c.save();
    server.stop();
    assert_eq!(
        read_json(&env.session_path(ns))["counters"]["pane"],
        json!(max)
    );
}

/// Fuzzing finding (snapshot target): a workspace whose listed tabs were
/// all unknown got its tabs back as orphans but no active tab; `tree` showed
/// tabs none of which was active until a second restart repaired it.
#[test]
fn a_workspace_restored_from_orphan_tabs_has_an_active_tab() {
    let env = Dirs::new();
    let ns = "orphantabs";
    let pane = |id: &str| {
        json!({ "id": id, "name": null, "cwd": "/", "command": { "argv": ["sleep", "1000"] },
                "env": {}, "cols": 80, "rows": 24, "restore": "hold", "resume": null,
                "history": null, "pid": null, "start_token": null })
    };
    let tab = |id: &str, pane: &str| {
        json!({ "id": id, "name": id, "workspace": "w1", "layout": { "pane": pane },
                "focus": pane, "zoom": null })
    };
    let snapshot = json!({
        "version": 1, "server_version": "0.1.0", "written_unix_ms": 0, "revision": 1,
        "generation": 1, "counters": { "workspace": 2, "tab": 3, "pane": 3 },
        "active_workspace": "w1",
        "workspaces": [{ "id": "w1", "name": "main", "tabs": ["t7"], "active_tab": "t9" }],
        "tabs": [tab("t1", "p1"), tab("t2", "p2")],
        "panes": [pane("p1"), pane("p2")],
    });
    let dir = env.state_dir(ns);
    std::fs::create_dir_all(&dir).unwrap();
    util::set_mode(&env.state.join("ptyd"), 0o700);
    util::set_mode(&dir, 0o700);
    std::fs::write(dir.join("session.json"), snapshot.to_string()).unwrap();

    let server = env.start(ns);
    let mut c = server.connect();
    let tree = c.ok("tree", json!({}));
    let ws = &tree["workspaces"][0];
    assert_eq!(ws["tabs"].as_array().map(Vec::len), Some(2), "{tree}");
    let active: Vec<&Value> = ws["tabs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["active"] == json!(true))
        .map(|t| &t["id"])
        .collect();
    assert_eq!(active, vec![&json!("t1")], "{tree}");
    server.stop();
}

// ---------------------------------------------------------------------------
// 4. SIGKILL during saves

#[test]
fn kill9_during_saves_never_leaves_a_torn_or_missing_snapshot() {
    let env = Dirs::new();
    let ns = "crash";
    let session = env.session_path(ns);
    let state_dir = env.state_dir(ns);
    let mut saved_once = false;
    let mut kills_with_temp = 0;
    for i in 0..30u64 {
        let mut server = env.start(ns);
        let mut c = server.connect();
        let restore = c.ok("server.status", json!({}))["persistence"]["restore"].clone();
        assert!(
            restore.get("set_aside").is_none(),
            "iteration {i}: {restore}"
        );
        assert_eq!(
            restore["found"],
            json!(saved_once || session.exists()),
            "iteration {i}"
        );
        // Keep the pane count bounded across restores.
        for p in c.panes().iter().skip(4) {
            c.ok("pane.remove", json!({ "target": p["id"], "force": true }));
        }
        // A worker churns (create, resize, save) until the server dies
        // under it; panes print enough that history files take a while.
        let mut worker = server.connect();
        let saved = std::thread::spawn(move || {
            let mut saved = false;
            for n in 0u32.. {
                let created = worker.try_call(
                    "pane.create",
                    json!({ "shell": "seq -f '%06g some padding to make the history larger' 1 3000; exec sleep 1000",
                            "cols": 80 + n % 40, "rows": 24 }),
                );
                let id = match created {
                    Some(Ok(info)) => info["id"].clone(),
                    Some(Err(e)) => panic!("pane.create failed: {e:?}"),
                    None => break,
                };
                let resize = json!({ "target": id, "cols": 100 + n % 50, "rows": 30 });
                if worker.try_call("pane.resize", resize).is_none() {
                    break;
                }
                match worker.try_call("server.save", json!({})) {
                    Some(Ok(_)) => saved = true,
                    Some(Err(e)) => panic!("server.save failed: {e:?}"),
                    None => break,
                }
                if n % 3 == 2
                    && worker
                        .try_call("pane.remove", json!({ "target": id, "force": true }))
                        .is_none()
                {
                    break;
                }
            }
            saved
        });
        // Varying points: from right after start to well into the churn.
        std::thread::sleep(Duration::from_millis(i * 37 % 400));
        server.kill9();
        saved_once |= saved.join().expect("worker");

        if saved_once {
            assert!(session.exists(), "iteration {i}: session.json is missing");
        }
        if session.exists() {
            let bytes = std::fs::read(&session).unwrap();
            let snap = snapshot::parse(&bytes)
                .unwrap_or_else(|e| panic!("iteration {i}: torn session.json ({e})"));
            for pane in &snap.panes {
                if let Some(h) = &pane.history {
                    assert!(
                        state_dir.join("history").join(h).exists(),
                        "iteration {i}: session.json names {h}, which was not written"
                    );
                }
            }
        }
        let temps = temp_files(&state_dir);
        if !temps.is_empty() {
            kills_with_temp += 1;
        }
        assert!(
            temps.len() <= 1,
            "iteration {i}: stray temp files accumulate: {temps:?}"
        );
    }
    assert!(saved_once, "no save ever completed");
    // A last start cleans up and restores normally.
    let server = env.start(ns);
    let restore = server.status_json()["persistence"]["restore"].clone();
    assert_eq!(restore["found"], true, "{restore}");
    assert!(restore.get("set_aside").is_none(), "{restore}");
    assert!(!state_dir.join("backups").exists());
    server.stop();
    assert_eq!(temp_files(&state_dir), Vec::<PathBuf>::new());
    eprintln!("kill9: {kills_with_temp} of 30 kills left a temp file behind");
}

// ---------------------------------------------------------------------------
// 5. A failing write

#[test]
fn failed_write_keeps_old_snapshot_and_server() {
    const LIMIT: u64 = 32 * 1024;
    let env = Dirs::new();
    let ns = "efbig";
    let server = env.start_with(ns, &[], Some(LIMIT));
    let mut c = server.connect();
    let mut events = server.connect();
    events.ok("events.subscribe", json!({}));
    c.create(json!({ "name": "small", "argv": ["sleep", "1000"] }));
    c.save();
    let session = env.session_path(ns);
    let before = std::fs::read(&session).unwrap();
    assert!((before.len() as u64) < LIMIT);

    // One pane whose environment alone makes the snapshot pass the limit.
    let big = "x".repeat(LIMIT as usize + 1000);
    c.create(json!({ "name": "big", "argv": ["sleep", "1000"], "env": { "BIG": big } }));
    let (code, message) = c
        .call("server.save", json!({}))
        .expect_err("a save past RLIMIT_FSIZE succeeded");
    assert_eq!(code, "internal", "{message}");
    assert!(message.contains("File too large"), "{code}: {message}");
    let event = events.wait_event_type("server.save_failed");
    assert!(
        event["error"]
            .as_str()
            .unwrap_or_default()
            .contains("File too large"),
        "{event}"
    );
    // Retried once a second (SAVE_RETRY), not in a tight loop: count the
    // failures over a measured window.
    let window = Duration::from_millis(2500);
    let started = Instant::now();
    let mut conn_probe = server.connect();
    while started.elapsed() < window {
        conn_probe.ok("server.status", json!({}));
        std::thread::sleep(Duration::from_millis(100));
    }
    let failures = server.stderr().matches("save_failed").count();
    assert!(
        failures <= 5,
        "{failures} failed saves in {window:?}: retried in a tight loop"
    );

    let status = server.status_json();
    let last_error = status["persistence"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(last_error.contains("File too large"), "{status}");
    assert_eq!(
        std::fs::read(&session).unwrap(),
        before,
        "session.json changed"
    );
    assert_eq!(temp_files(&env.state_dir(ns)), Vec::<PathBuf>::new());
    // Still serving.
    assert_eq!(c.ok("server.status", json!({}))["panes"], 2);
    c.create(json!({ "argv": ["sleep", "1001"] }));

    // Once the snapshot fits again, saving works and the error clears.
    c.ok("pane.remove", json!({ "target": "big", "force": true }));
    c.save();
    let status = server.status_json();
    assert_eq!(status["persistence"]["last_error"], Value::Null, "{status}");
    let snap = snapshot::parse(&std::fs::read(&session).unwrap()).unwrap();
    assert_eq!(snap.panes.len(), 2);
    server.stop();
}

// ---------------------------------------------------------------------------
// 6. Namespaces

#[test]
fn namespaces_never_share_files() {
    let env = Dirs::new();
    let alpha = env.start("alpha");
    let beta = env.start("beta");
    for (server, word) in [(&alpha, "alpha"), (&beta, "beta")] {
        let mut c = server.connect();
        let name = format!("only-{word}");
        c.create(json!({ "name": name, "argv": ["/bin/sh"] }));
        c.type_line(&name, &format!("echo {word}-$((40+2))"));
        c.wait_text(&name, &format!("{word}-42"));
        c.save();
    }
    alpha.stop();
    beta.stop();
    let (a, b) = (env.state_dir("alpha"), env.state_dir("beta"));
    assert_ne!(a, b);
    let mut ns_dirs: Vec<_> = std::fs::read_dir(env.state.join("ptyd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    ns_dirs.sort();
    assert_eq!(ns_dirs, ["alpha", "beta"]);
    for (dir, mine, other) in [(&a, "alpha", "beta"), (&b, "beta", "alpha")] {
        let files = files_under(dir);
        assert!(files.contains(&PathBuf::from("session.json")), "{files:?}");
        assert!(
            files.contains(&PathBuf::from("history/p1.txt")),
            "{files:?}"
        );
        for f in &files {
            let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            assert!(
                !text.contains(&format!("only-{other}")),
                "{mine}/{} mentions {other}",
                f.display()
            );
            assert!(
                !text.contains(&format!("{other}-42")),
                "{mine}/{} has {other}'s output",
                f.display()
            );
        }
        let session = std::fs::read_to_string(dir.join("session.json")).unwrap();
        assert!(session.contains(&format!("only-{mine}")));
        let history = std::fs::read_to_string(dir.join("history/p1.txt")).unwrap();
        assert!(history.contains(&format!("{mine}-42")), "{history}");
    }
    // Runtime dirs are apart too.
    assert_ne!(
        env.runtime.join("ptyd/alpha"),
        env.runtime.join("ptyd/beta")
    );
    // Each namespace restores only its own panes.
    let alpha = env.start("alpha");
    let names: Vec<Value> = alpha
        .connect()
        .panes()
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(names, [json!("only-alpha")]);
    alpha.stop();
}

// ---------------------------------------------------------------------------
// 7. Restore policies, resume, history

#[test]
fn restore_policies_resume_and_history() {
    let env = Dirs::new();
    let ns = "policies";
    let dir = env.path("counts");
    let count = |name: &str| dir.join(name);
    let appends =
        |name: &str| format!("echo started >> {}; exec sleep 1000", count(name).display());
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(
        json!({ "name": "rerun", "argv": ["sh", "-c", appends("rerun")], "restore": "rerun" }),
    );
    c.create(
        json!({ "name": "shell", "argv": ["sh", "-c", appends("shell")], "restore": "shell" }),
    );
    c.create(json!({ "name": "hold", "argv": ["sh", "-c", appends("hold")] }));
    c.create(json!({
        "name": "resume", "argv": ["sh", "-c", appends("resume-cmd")], "restore": "rerun",
        "resume": appends("resume"),
    }));
    c.create(json!({ "name": "late-resume", "argv": ["sh", "-c", appends("late-cmd")] }));
    let info = c.ok(
        "pane.set_resume",
        json!({ "target": "late-resume", "resume": appends("late") }),
    );
    assert_eq!(info["resume"], json!(appends("late")));
    c.create(json!({ "name": "plain", "argv": ["/bin/sh"] }));
    c.type_line("plain", "echo $((100+23))before");
    c.wait_text("plain", "123before");
    for name in ["rerun", "shell", "hold", "resume-cmd", "late-cmd"] {
        eventually(format!("{name} started"), || line_count(&count(name)) == 1);
    }
    c.save();
    server.stop();

    let server = env.start(ns);
    let mut c = server.connect();
    // rerun: the same command again.
    eventually("rerun re-ran", || line_count(&count("rerun")) == 2);
    // shell: the user's login shell instead of the command.
    assert_eq!(c.pane("shell")["state"], "running");
    wait_cmdline(&mut c, "shell", &["/bin/sh", "-l"]);
    c.type_line("shell", "echo $((6*7))shell");
    c.wait_text("shell", "42shell");
    // hold: no process until `ptyd respawn`.
    let held = c.pane("hold");
    assert_eq!(held["state"], "held", "{held}");
    assert_eq!(held["pid"], Value::Null, "{held}");
    assert!(
        held["held_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("respawn"),
        "{held}"
    );
    let out = server.run_cli(&["respawn", "hold"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.pane("hold")["state"], "running");
    eventually("hold respawned", || line_count(&count("hold")) == 2);
    // resume, given at creation or set later, wins over the command.
    eventually("resume ran", || line_count(&count("resume")) == 1);
    eventually("late resume ran", || line_count(&count("late")) == 1);
    assert_eq!(c.pane("late-resume")["state"], "running");
    // A plain shell comes back as a shell, its history above the marker.
    let screen = c.capture_all("plain");
    let before = screen
        .find("123before")
        .unwrap_or_else(|| panic!("no history:\n{screen}"));
    assert!(
        before < screen.find("--- ptyd: restored").unwrap(),
        "{screen}"
    );
    // ... and on its visible screen, as if just printed, not out of sight
    // in the scrollback.
    let visible = c.capture("plain");
    assert!(
        visible.contains("123before") && visible.contains("--- ptyd: restored"),
        "{visible}"
    );
    c.type_line("plain", "echo $((6*7))after");
    c.wait_text("plain", "42after");
    // Nothing ran twice that should not have.
    for (name, lines) in [
        ("shell", 1),
        ("resume-cmd", 1),
        ("late-cmd", 1),
        ("rerun", 2),
        ("hold", 2),
    ] {
        assert_eq!(line_count(&count(name)), lines, "{name}");
    }
    server.stop();
}

// ---------------------------------------------------------------------------
// 8. --no-history

#[test]
fn no_history_writes_no_history_files() {
    let env = Dirs::new();
    let ns = "nohist";
    let history = env.state_dir(ns).join("history");
    let run = |args: &[&str]| {
        let server = env.start_with(ns, args, None);
        let mut c = server.connect();
        let name = format!("sh{}", c.panes().len());
        c.create(json!({ "name": name, "argv": ["/bin/sh"] }));
        c.type_line(&name, "echo $((40+2))printed");
        c.wait_text(&name, "42printed");
        c.save();
        let status = server.status_json();
        server.stop();
        status
    };
    let status = run(&["--no-history"]);
    assert_eq!(status["persistence"]["history"], false, "{status}");
    assert_eq!(files_under(&history), Vec::<PathBuf>::new());
    let snap = snapshot::parse(&std::fs::read(env.session_path(ns)).unwrap()).unwrap();
    assert!(snap.panes.iter().all(|p| p.history.is_none()), "{snap:?}");

    // With history it is written; turned off again, the old files go.
    run(&[]);
    assert!(!files_under(&history).is_empty());
    run(&["--no-history"]);
    assert_eq!(files_under(&history), Vec::<PathBuf>::new());
    let snap = snapshot::parse(&std::fs::read(env.session_path(ns)).unwrap()).unwrap();
    assert_eq!(snap.panes.len(), 3);
    assert!(snap.panes.iter().all(|p| p.history.is_none()), "{snap:?}");
}

// ---------------------------------------------------------------------------
// Saving without `server.save`: the debounce, SIGTERM, an empty state.

#[test]
fn automatic_save_names_only_written_history() {
    let env = Dirs::new();
    let ns = "auto";
    let session = env.session_path(ns);
    let server = env.start(ns);
    let mut c = server.connect();
    // A pane that never prints, and one that does.
    c.create(json!({ "name": "quiet", "argv": ["sleep", "1000"] }));
    c.create(json!({ "name": "talker", "argv": ["/bin/sh"] }));
    c.type_line("talker", "echo $((2+3))said");
    c.wait_text("talker", "5said");
    eventually("the debounced save", || {
        let p = &c.ok("server.status", json!({}))["persistence"];
        p["dirty"] == false && p["saved_revision"].as_u64() >= p["revision"].as_u64()
    });
    let snap = snapshot::parse(&std::fs::read(&session).unwrap()).unwrap();
    assert_eq!(snap.panes.len(), 2);
    for pane in &snap.panes {
        if let Some(h) = &pane.history {
            let path = env.state_dir(ns).join("history").join(h);
            assert!(
                path.exists(),
                "session.json names {h} for {}, which was never written",
                pane.id
            );
        }
    }
    // Terminal output may hold secrets: files are the owner's alone.
    let history = env.state_dir(ns).join("history");
    for f in [
        session.clone(),
        history.join("p1.txt"),
        history.join("p2.txt"),
    ] {
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&f).unwrap().permissions());
        assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", f.display());
    }
    // A removed pane's history file goes once the session file no longer
    // names it.
    c.ok("pane.remove", json!({ "target": "talker", "force": true }));
    c.save();
    assert!(history.join("p1.txt").exists());
    assert!(
        !history.join("p2.txt").exists(),
        "history of a removed pane kept"
    );
    server.stop();
}

#[test]
fn sigterm_saves_and_an_empty_state_is_still_a_file() {
    let env = Dirs::new();
    let ns = "sigterm";
    let session = env.session_path(ns);
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "name": "fresh", "argv": ["sleep", "1000"] }));
    // No server.save, well inside the debounce: the stop itself saves.
    let pid = server.pid();
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    c.read_until_eof();
    let mut server = server;
    eventually("server exits on SIGTERM", || !server.is_alive());
    let snap = snapshot::parse(&std::fs::read(&session).unwrap()).unwrap();
    assert_eq!(snap.panes.len(), 1);
    assert_eq!(snap.panes[0].name.as_deref(), Some("fresh"));
    drop(server);

    let server = env.start(ns);
    let mut c = server.connect();
    c.ok("pane.remove", json!({ "target": "fresh", "force": true }));
    c.save();
    server.stop();
    let snap = snapshot::parse(&std::fs::read(&session).unwrap()).unwrap();
    assert_eq!(snap.panes, Vec::new(), "the empty state was not written");
}

#[test]
fn fixture_unmovable_snapshot_disables_saving() {
    let env = Dirs::new();
    let ns = "unmovable";
    let original = install_fixture(&env, ns, "corrupt-truncated.json");
    // `backups` as a plain file: the corrupt snapshot cannot be moved aside.
    std::fs::write(env.state_dir(ns).join("backups"), b"in the way").unwrap();
    let server = env.start(ns);
    let mut c = server.connect();
    let status = server.status_json();
    assert_eq!(status["persistence"]["enabled"], false, "{status}");
    let unusable = status["persistence"]["restore"]["unusable"]
        .as_str()
        .unwrap_or_default();
    assert!(unusable.contains("corrupt"), "{status}");
    let (code, message) = c
        .call("server.save", json!({}))
        .expect_err("saving should be off");
    assert!(message.contains("disabled"), "{code}: {message}");
    c.create(json!({ "argv": ["sleep", "1000"] }));
    server.stop();
    assert_eq!(std::fs::read(env.session_path(ns)).unwrap(), original);
}

// ---------------------------------------------------------------------------
// History files are bounded

#[test]
fn history_is_bounded_and_cut_at_a_line() {
    let env = Dirs::new();
    let ns = "bounded";
    let server = env.start(ns);
    let mut c = server.connect();
    let done = env.path("marks").join("done");
    // 2100 lines of 333 box-drawing characters (999 bytes): about 2 MB of
    // multi-byte text, so the 1 MiB cut lands inside a character.
    let line = "─".repeat(333);
    let script = format!(
        "i=0; while [ $i -lt 2100 ]; do printf '%s\\n' {line}; i=$((i+1)); done; touch {}; exec sleep 1000",
        done.display()
    );
    c.create(json!({ "name": "wide", "argv": ["sh", "-c", script], "cols": 1000, "rows": 10 }));
    eventually("the output was written", || done.exists());
    c.ok(
        "pane.wait",
        json!({ "target": "wide", "idle_ms": 300, "timeout_ms": 20_000 }),
    );
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.save())).is_err() {
        panic!("server.save failed; server stderr:\n{}", server.stderr());
    }
    let history = std::fs::read(env.state_dir(ns).join("history/p1.txt")).unwrap();
    assert!(
        history.len() <= 1 << 20,
        "history is {} bytes",
        history.len()
    );
    assert!(
        history.len() > 1 << 19,
        "history is only {} bytes",
        history.len()
    );
    let text = String::from_utf8(history).expect("history is valid UTF-8");
    assert!(
        text.starts_with(&format!("{line}\n")),
        "not cut at a line start"
    );
    server.stop();
}

// ---------------------------------------------------------------------------
// Restore details: the live cwd, a start that fails

#[test]
fn restore_uses_the_live_cwd_of_the_shell() {
    let env = Dirs::new();
    let ns = "livecwd";
    let start = env.path("start");
    let moved = env.path("moved here");
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "name": "sh", "argv": ["/bin/sh"], "cwd": start }));
    c.type_line(
        "sh",
        &format!("cd '{}' && echo $((3+4))moved", moved.display()),
    );
    c.wait_text("sh", "7moved");
    c.save();
    server.stop();
    let server = env.start(ns);
    let mut c = server.connect();
    let pane = c.pane("sh");
    assert_eq!(pane["cwd"], json!(moved), "{pane}");
    let pid = pane["pid"].as_i64().unwrap();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        moved
    );
    server.stop();
}

#[test]
fn restore_start_failure_holds_that_pane_only() {
    let env = Dirs::new();
    let ns = "startfail";
    let bin = env.path("bin");
    let tool = bin.join("tool");
    std::fs::write(&tool, "#!/bin/sh\nexec sleep 1000\n").unwrap();
    util::set_mode(&tool, 0o755);
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "name": "before", "argv": ["sleep", "1000"], "restore": "rerun" }));
    c.create(json!({ "name": "tool", "argv": [tool], "restore": "rerun" }));
    c.create(json!({ "name": "after", "argv": ["sleep", "1001"], "restore": "rerun" }));
    c.save();
    server.stop();
    std::fs::remove_file(&tool).unwrap();

    let server = env.start(ns);
    let mut c = server.connect();
    let got: Vec<(Value, Value)> = c
        .panes()
        .iter()
        .map(|p| (p["name"].clone(), p["state"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!("before"), json!("running")),
            (json!("tool"), json!("held")),
            (json!("after"), json!("running")),
        ]
    );
    let held = c.pane("tool");
    let reason = held["held_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("failed to start"), "{held}");
    let repairs = server.status_json()["persistence"]["restore"]["repairs"].to_string();
    assert!(repairs.contains("p2 failed to start"), "{repairs}");
    // Once the program is back, respawn starts it.
    std::fs::write(&tool, "#!/bin/sh\nexec sleep 1000\n").unwrap();
    util::set_mode(&tool, 0o755);
    c.ok("pane.respawn", json!({ "target": "tool" }));
    assert_eq!(c.pane("tool")["state"], "running");
    server.stop();
}

#[test]
fn constant_churn_is_saved_within_the_max_delay() {
    let env = Dirs::new();
    let ns = "churn";
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "name": "a", "argv": ["sleep", "1000"] }));
    c.save();
    let saved_before = c.ok("server.status", json!({}))["persistence"]["saved_revision"]
        .as_u64()
        .unwrap();
    // A change every ~50 ms never leaves the 500 ms debounce quiet; the
    // 5 s maximum delay must still save.
    let started = Instant::now();
    let mut n = 0u32;
    // Each check is a change (the pace of `eventually` stays under 50 ms).
    let saved_after = util::eventually_within(Duration::from_secs(8), "a save under churn", || {
        n += 1;
        c.ok(
            "pane.resize",
            json!({ "target": "a", "cols": 80 + n % 2, "rows": 24 }),
        );
        let p = c.ok("server.status", json!({}))["persistence"].clone();
        let saved = p["saved_revision"].as_u64().unwrap();
        if saved > saved_before {
            Ok(started.elapsed())
        } else {
            Err(format!("persistence {p}"))
        }
    });
    assert!(
        saved_after >= Duration::from_secs(4),
        "saved after {saved_after:?}, inside the debounce"
    );
    server.stop();
}

#[test]
fn failed_history_write_does_not_block_the_session_file() {
    // History files are the optional class: one that cannot be written
    // (here: past RLIMIT_FSIZE) must not keep session.json from saving.
    const LIMIT: u64 = 64 * 1024;
    let env = Dirs::new();
    let ns = "histfail";
    let server = env.start_with(ns, &[], Some(LIMIT));
    let mut c = server.connect();
    let done = env.path("marks").join("done");
    let script = format!(
        "seq -f '%0100g' 1 2000; touch {}; exec sleep 1000",
        done.display()
    );
    c.create(json!({ "name": "loud", "argv": ["sh", "-c", script], "cols": 200 }));
    eventually("the output was written", || done.exists());
    c.ok(
        "pane.wait",
        json!({ "target": "loud", "idle_ms": 300, "timeout_ms": 20_000 }),
    );
    c.create(json!({ "name": "quiet", "argv": ["sleep", "1000"] }));
    let saved = c.call("server.save", json!({}));
    assert!(saved.is_ok(), "save failed: {saved:?}");
    let session = env.session_path(ns);
    let snap = snapshot::parse(&std::fs::read(&session).unwrap()).unwrap();
    let names: Vec<_> = snap.panes.iter().map(|p| p.name.clone().unwrap()).collect();
    assert_eq!(names, ["loud", "quiet"]);
    for pane in &snap.panes {
        if let Some(h) = &pane.history {
            let path = env.state_dir(ns).join("history").join(h);
            assert!(
                path.exists(),
                "session.json names {h}, which was not written"
            );
        }
    }
    assert!(
        server.stderr().contains("history"),
        "the history failure was not logged: {}",
        server.stderr()
    );
    assert_eq!(temp_files(&env.state_dir(ns)), Vec::<PathBuf>::new());
    server.stop();
}

/// An automatic save renders history files within a small loop-time budget
/// and leaves the rest to follow-up saves (so hundreds of busy panes never
/// stall the loop for all of them at once): every pane's file still
/// arrives, without any `server.save`, and no session file on the way names
/// a history file that is not there.
#[test]
fn budgeted_history_saves_reach_every_pane() {
    let env = Dirs::new();
    let ns = "budget";
    let session = env.session_path(ns);
    let history = env.state_dir(ns).join("history");
    let server = env.start(ns);
    let mut c = server.connect();
    let n = 24;
    for i in 0..n {
        c.create(json!({
            "name": format!("out{i}"),
            "shell": format!("seq -f '%06g pane {i} with padding to make history big' 1 3000; exec sleep 1000"),
        }));
    }
    for i in 0..n {
        c.wait_text(&format!("out{i}"), "003000");
    }
    // The output alone waits for the 30 s history tick; a structural
    // change makes a save due now, and it renders the dirty histories.
    c.ok("workspace.create", json!({ "name": "trigger" }));
    eventually("every history file with its pane's last line", || {
        if let Ok(bytes) = std::fs::read(&session)
            && let Ok(snap) = snapshot::parse(&bytes)
        {
            for pane in &snap.panes {
                if let Some(h) = &pane.history {
                    assert!(
                        history.join(h).exists(),
                        "session.json names {h}, which is not there"
                    );
                }
            }
        }
        (0..n).all(|i| {
            std::fs::read_to_string(history.join(format!("p{}.txt", i + 1)))
                .is_ok_and(|t| t.contains(&format!("003000 pane {i} ")))
        })
    });
    server.stop();
}

// ---------------------------------------------------------------------------
// Records from disk meet the API's rules

/// A snapshot whose records break the rules the API enforces: names with
/// escape sequences, like an id, 100,000 characters long, empty or with
/// NUL; env names with `=`; a history name leaving `history/`; an empty
/// argv under `rerun` (once a panic at every start) and under `shell`
/// (once a panic at `ptyd respawn`). Each is repaired and listed; nothing
/// panics; the panes that cannot run are held and refuse a respawn.
#[test]
fn records_breaking_the_api_rules_are_repaired_not_trusted() {
    let env = Dirs::new();
    let ns = "bad-records";
    let pane = |id: &str, name: Value, argv: Value, restore: &str| {
        json!({
            "id": id, "name": name, "cwd": "/", "command": { "argv": argv },
            "env": {}, "cols": 80, "rows": 24, "restore": restore,
            "resume": null, "history": null, "pid": null, "start_token": null,
        })
    };
    let mut panes = vec![
        pane("p1", json!("\u{1b}[31mred"), json!([]), "rerun"),
        pane("p2", json!("p7"), json!([]), "shell"),
        pane(
            "p3",
            json!("x".repeat(100_000)),
            json!(["sleep", "1000"]),
            "rerun",
        ),
        pane("p4", json!("fine"), json!(["sleep", "a\u{0}b"]), "rerun"),
    ];
    panes[2]["env"] = json!({ "A=B": "1", "": "2", "OK": "3" });
    panes[2]["history"] = json!("../../outside.txt");
    let tab = |id: &str, name: &str, pane: &str| {
        json!({ "id": id, "name": name, "workspace": "w1", "layout": { "pane": pane },
                "focus": pane, "zoom": null })
    };
    let snapshot = json!({
        "version": 1, "server_version": "0.1.0", "written_unix_ms": 0, "revision": 3,
        "generation": 1, "counters": { "workspace": 2, "tab": 5, "pane": 5 },
        "active_workspace": "w1",
        "workspaces": [{ "id": "w1", "name": "\u{1b}]0;evil\u{7}", "tabs": ["t1", "t2", "t3", "t4"],
                         "active_tab": "t1" }],
        "tabs": [tab("t1", "", "p1"), tab("t2", "a\u{0}b", "p2"), tab("t3", "ok", "p3"),
                 tab("t4", "p1", "p4")],
        "panes": panes,
    });
    std::fs::create_dir_all(env.state_dir(ns)).unwrap();
    std::fs::write(env.session_path(ns), serde_json::to_vec(&snapshot).unwrap()).unwrap();

    let server = env.start(ns);
    let mut c = server.connect();
    let report = server.status_json()["persistence"]["restore"].clone();
    let repairs = report["repairs"].to_string();
    for expected in [
        "pane p1: dropped its name",
        "pane p2: dropped its name \\\"p7\\\" looks like an id",
        "pane p3: dropped its name \\\"xxxx",
        "pane p3: dropped 2 environment entries",
        "pane p3: ignored history file name \\\"../../outside.txt\\\"",
        "pane p1: its command cannot be started: argv is empty",
        "pane p4: its command cannot be started: argv[1] contains NUL",
        "workspace w1: renamed \\\"workspace-1\\\"",
        "tab t1: renamed \\\"tab-1\\\"",
        "tab t2: renamed \\\"tab-2\\\"",
    ] {
        assert!(repairs.contains(expected), "no {expected:?} in {repairs}");
    }
    assert!(repairs.len() < 10_000, "a repair repeats a 100k name");
    let panes = c.panes();
    let by_id = |id: &str| panes.iter().find(|p| p["id"] == id).unwrap().clone();
    for id in ["p1", "p2", "p3"] {
        assert_eq!(by_id(id)["name"], Value::Null, "{id}");
    }
    assert_eq!(by_id("p3")["env"], json!({ "OK": "3" }));
    for id in ["p1", "p4"] {
        let held = by_id(id);
        assert_eq!(held["state"], "held", "{held}");
        assert!(
            held["held_reason"]
                .as_str()
                .unwrap()
                .contains("cannot be started"),
            "{held}"
        );
    }
    // p2's policy is `shell`: a login shell runs in its place.
    assert_eq!(by_id("p2")["state"], "running");
    assert_eq!(by_id("p3")["state"], "running");
    c.ok("pane.kill", json!({ "target": "p2", "signal": "KILL" }));
    c.wait_exit("p2");
    for id in ["p1", "p2", "p4"] {
        let message = c.err("pane.respawn", json!({ "target": id }), "spawn_failed");
        assert!(message.contains("cannot be respawned"), "{message}");
    }
    let tree = c.ok("tree", json!({}));
    assert!(!tree.to_string().contains("\\u001b"), "{tree}");
    // The server is alive and the file it saves is clean.
    c.save();
    let saved = std::fs::read_to_string(env.session_path(ns)).unwrap();
    assert!(
        !saved.contains("\\u001b") && !saved.contains("xxxxx"),
        "{saved}"
    );
    server.stop();
}

/// A pane whose program had exited comes back exited, with its status and
/// reason, whatever its restore policy: not held, and `respawn --held`
/// leaves it alone.
#[test]
fn an_exited_pane_is_restored_exited_with_its_status() {
    let env = Dirs::new();
    let ns = "exited-restore";
    let server = env.start(ns);
    let mut c = server.connect();
    let done = c.create(json!({ "argv": ["sh", "-c", "exit 0"], "restore": "rerun" }));
    let failed = c.create(json!({ "argv": ["sh", "-c", "exit 3"] }));
    let killed = c.create(json!({ "argv": ["sleep", "1000"] }));
    let ids = [&done, &failed, &killed].map(|p| p["id"].as_str().unwrap().to_string());
    c.ok("pane.kill", json!({ "target": ids[2], "signal": "KILL" }));
    let exits: Vec<Value> = ids.iter().map(|id| c.wait_exit(id)).collect();
    c.save();
    drop(c);
    server.stop();

    let server = env.start(ns);
    let mut c = server.connect();
    for (id, exit) in ids.iter().zip(&exits) {
        let pane = c.pane(id);
        assert_eq!(pane["state"], "exited", "{pane}");
        assert_eq!(pane["exit"], *exit, "{pane}");
    }
    let restore = &c.ok("server.status", json!({}))["persistence"]["restore"];
    assert!(
        restore.to_string().contains("\"exited\""),
        "the report names the outcome: {restore}"
    );
    let out = server.run_cli(&["respawn", "--held"]);
    util::assert_exit(&out, 0);
    for id in &ids {
        assert_eq!(c.pane(id)["state"], "exited");
    }
    server.stop();
}

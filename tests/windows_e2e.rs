//! End to end on Windows, through the real `ptyd.exe`: a
//! server started with `ptyd server`, driven by the CLI over its named
//! pipe. Runs under Wine in CI (`wincargo test --test windows_e2e`, in
//! `.ci/run`), where two things differ from Windows and the test adapts:
//! Wine 8 gives a pseudo console's child no standard handles, so every
//! pane command starts through `examples/conpty_shim.rs`; and
//! `ResizePseudoConsole` is not implemented, so a resize is checked to
//! fail cleanly (logged, size unchanged) instead of to apply.
//!
//! One server and one test, in order: a command's output read with
//! `capture`; typing into an interactive `cmd.exe`; `ptyd attach` in a
//! console (another pane's) and its detach key; `ptyd run`; killing a pane whose
//! process started a child (both gone: the pane's Job Object); the
//! resize; `upgrade --mode live` refused; `upgrade --mode restore` (a new
//! server process, the panes back by their restore plans); `stop`.

#![cfg(windows)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Marks the test binary's helper mode (see `process_tree_helper`).
const TREE_ROLE: &str = "E2E_TREE_ROLE";
const WAIT: Duration = Duration::from_secs(30);

fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
    // SAFETY: a NUL-terminated name; ntdll is loaded in every process.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    // SAFETY: ntdll's handle and a NUL-terminated name.
    !module.is_null()
        && unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }.is_some()
}

/// Whether process `pid` still runs.
fn running(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: plain call; a null handle is checked.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        return false;
    }
    let mut code = 0u32;
    // SAFETY: an open process handle, closed right after.
    let ok = unsafe { GetExitCodeProcess(h, &mut code) };
    // SAFETY: as above.
    unsafe { CloseHandle(h) };
    ok != 0 && code == STILL_ACTIVE as u32
}

struct Ptyd {
    exe: PathBuf,
    namespace: String,
    /// `LOCALAPPDATA` for every process of the test: state and runtime
    /// directories of their own.
    appdata: PathBuf,
    shim: Option<PathBuf>,
}

impl Ptyd {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("-L")
            .arg(&self.namespace)
            .args(args)
            .env("LOCALAPPDATA", &self.appdata)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("running ptyd.exe")
    }

    /// Runs a command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "ptyd {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ptyd new -d` running `argv` (through the shim under Wine).
    fn new_pane(&self, name: &str, extra: &[&str], argv: &[&str]) -> String {
        let shim = self.shim.as_ref().map(|s| s.display().to_string());
        let mut args = vec!["new", "-d", "-n", name];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend(shim.as_deref());
        args.extend_from_slice(argv);
        self.ok(&args).trim().to_string()
    }

    fn pane(&self, name: &str) -> serde_json::Value {
        let list: serde_json::Value = serde_json::from_str(&self.ok(&["ls", "--json"])).unwrap();
        list["panes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no pane {name} in {list}"))
            .clone()
    }
}

/// Helper mode of this binary, run inside a pane: as the parent, starts
/// itself again as the child, prints both pids, then waits to be killed.
/// In a normal test run it does nothing.
#[test]
fn process_tree_helper() {
    let Ok(role) = std::env::var(TREE_ROLE) else {
        return;
    };
    if role == "parent" {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "process_tree_helper", "--nocapture"])
            .env(TREE_ROLE, "child")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        println!("tree-pids {} {}", std::process::id(), child.id());
        let _ = child.wait();
    } else {
        std::thread::sleep(Duration::from_secs(300));
    }
}

#[test]
fn a_server_under_windows_serves_panes_over_its_pipe() {
    let deps = std::env::current_exe().unwrap();
    let debug = deps.parent().unwrap().parent().unwrap();
    let shim = debug.join("examples").join("conpty_shim.exe");
    let wine = under_wine();
    assert!(
        !wine || shim.is_file(),
        "{} missing: `wincargo build --example conpty_shim` builds it",
        shim.display()
    );
    // Wine hands out the same small pids run after run in one prefix, so a
    // pid alone could meet the snapshot of an earlier, interrupted run (and
    // restore its panes): the clock makes the name this run's own, and the
    // directory starts empty whatever happened before.
    let nonce = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    );
    let appdata = std::env::temp_dir().join(format!("ptyd-e2e-{nonce}"));
    let _ = std::fs::remove_dir_all(&appdata);
    std::fs::create_dir_all(&appdata).unwrap();
    let ptyd = Ptyd {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_ptyd")),
        namespace: format!("e2e{}", nonce.replace('-', "x")),
        appdata: appdata.clone(),
        shim: wine.then_some(shim),
    };

    // The server, as `ptyd server` in the foreground of its own process.
    let log = appdata.join("server.log");
    let mut server = ptyd
        .cmd(&["server"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    // No event to wait on for a pipe name to appear: ask until it serves.
    while !ptyd.run(&["status"]).status.success() {
        assert!(
            Instant::now() < deadline && server.try_wait().unwrap().is_none(),
            "the server did not serve: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = ptyd.ok(&["status"]);
    assert!(status.contains(r"\\.\pipe\ptyd-"), "{status}");

    // A command's output, read with capture; its exit code.
    ptyd.new_pane(
        "echo",
        &["--restore", "rerun"],
        &["cmd.exe", "/c", "echo", "hello-e2e"],
    );
    ptyd.ok(&["wait", "echo", "--exit", "--timeout", "30s"]);
    let capture = ptyd.ok(&["capture", "echo"]);
    assert!(capture.contains("hello-e2e"), "{capture}");
    let echo = ptyd.pane("echo");
    assert_eq!(echo["exit"]["code"], 0, "{echo}");

    // Typing into an interactive cmd.exe: the command and its output.
    ptyd.new_pane("sh", &[], &["cmd.exe"]);
    ptyd.ok(&[
        "send",
        "sh",
        "echo typed-4711",
        "--enter",
        "--wait-for",
        "typed-4711",
        "--timeout",
        "30s",
    ]);
    let capture = ptyd.ok(&["capture", "sh"]);
    assert!(
        capture.matches("typed-4711").count() >= 2,
        "the command and its output: {capture}"
    );

    // `ptyd attach` on a console (the pseudo console of another pane):
    // keys typed there reach `sh`, its output comes back, and the detach
    // key ends the client with code 0. (--force: a client inside a pane
    // of the same server is refused without it.)
    let exe = ptyd.exe.display().to_string();
    ptyd.new_pane(
        "viewer",
        &[],
        &[&exe, "-L", &ptyd.namespace, "attach", "--force", "sh"],
    );
    ptyd.ok(&[
        "wait",
        "viewer",
        "--text",
        "typed-4711",
        "--screen",
        "--timeout",
        "30s",
    ]);
    ptyd.ok(&["send", "viewer", "echo via-attach-99", "--enter"]);
    ptyd.ok(&[
        "wait",
        "sh",
        "--text",
        "via-attach-99",
        "--screen",
        "--timeout",
        "30s",
    ]);
    ptyd.ok(&[
        "wait",
        "viewer",
        "--text",
        "via-attach-99",
        "--screen",
        "--timeout",
        "30s",
    ]);
    ptyd.ok(&["send", "viewer", "--keys", "C-\\"]);
    let out = ptyd.run(&["wait", "viewer", "--exit", "--timeout", "30s"]);
    assert_eq!(out.status.code(), Some(0), "detached: {out:?}");

    // `ptyd run`: a pane's output mirrored, its exit code returned.
    let mut run = vec!["run", "--"];
    let shim = ptyd.shim.as_ref().map(|s| s.display().to_string());
    run.extend(shim.as_deref());
    run.extend(["cmd.exe", "/c", "echo run-out& exit 3"]);
    let out = ptyd.run(&run);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("run-out"),
        "{out:?}"
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");

    // A pane whose process started a child: a kill ends both.
    let me = std::env::current_exe().unwrap().display().to_string();
    ptyd.new_pane(
        "tree",
        &["-e", &format!("{TREE_ROLE}=parent")],
        &[&me, "--exact", "process_tree_helper", "--nocapture"],
    );
    ptyd.ok(&[
        "wait",
        "tree",
        "--text",
        "tree-pids",
        "--screen",
        "--timeout",
        "30s",
    ]);
    let capture = ptyd.ok(&["capture", "tree"]);
    let pids: Vec<u32> = capture
        .lines()
        .find_map(|l| l.trim().strip_prefix("tree-pids "))
        .unwrap_or_else(|| panic!("no pids in {capture}"))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{capture}");
    assert!(pids.iter().all(|&p| running(p)), "{pids:?} not running");
    ptyd.ok(&["kill", "tree"]);
    let out = ptyd.run(&["wait", "tree", "--exit", "--timeout", "30s"]);
    assert_eq!(out.status.code(), Some(1), "killed through the job: code 1");
    for pid in pids {
        assert!(!running(pid), "process {pid} of the killed pane still runs");
    }

    // Resize: applied on Windows; Wine 8 has no ResizePseudoConsole, so
    // there the error path: logged, and the pane keeps its size.
    ptyd.ok(&["resize", "sh", "100x30"]);
    let sh = ptyd.pane("sh");
    let diagnostics = std::fs::read_to_string(
        appdata
            .join("ptyd")
            .join(&ptyd.namespace)
            .join("diagnostics.jsonl"),
    )
    .unwrap_or_default();
    if wine {
        assert_eq!(
            (sh["cols"].as_u64(), sh["rows"].as_u64()),
            (Some(80), Some(24))
        );
        assert!(
            diagnostics.contains("resize_failed") && diagnostics.contains("E_NOTIMPL"),
            "{diagnostics}"
        );
    } else {
        assert_eq!(
            (sh["cols"].as_u64(), sh["rows"].as_u64()),
            (Some(100), Some(30))
        );
    }

    // No live upgrade on Windows: refused, saying why.
    let out = ptyd.run(&["upgrade", "--mode", "live"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not possible on Windows") && stderr.contains("--mode restore"),
        "{stderr}"
    );
    let old_pid = server.id();
    assert!(running(old_pid));

    // The restore path: a new server process; the panes come back by
    // their plans (the others are held), and `echo`, which had exited,
    // stays exited with its status instead of running again.
    let report = ptyd.ok(&["upgrade", "--mode", "restore", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["before"]["mode"], "restore", "{report}");
    let new_pid = report["status"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(new_pid, old_pid, "{report}");
    // The old server exits once the new one was started.
    let deadline = Instant::now() + WAIT;
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the old server still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
    ptyd.ok(&["wait", "echo", "--exit", "--timeout", "30s"]);
    let echo = ptyd.pane("echo");
    assert_eq!(echo["state"], "exited", "kept exited: {echo}");
    assert_eq!(echo["exit"]["code"], 0, "its status kept: {echo}");
    assert!(
        ptyd.ok(&["capture", "echo"]).contains("hello-e2e"),
        "{echo}"
    );
    let sh = ptyd.pane("sh");
    assert_eq!(sh["state"], "held", "{sh}");

    ptyd.ok(&["stop"]);
    let deadline = Instant::now() + WAIT;
    while running(new_pid) {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&appdata);
}

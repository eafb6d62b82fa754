//! A small harness for the persistence tests: a private environment (runtime,
//! state and home directories in one temp dir), `ptyd server` started in the
//! foreground as a child process, JSON-lines connections, and waits on
//! conditions with an overall deadline instead of sleeps.
//!
//! Kept apart from the general harness on the `tests` branch on purpose; when
//! that lands the two can be merged.

#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Overall limit for any single wait in these tests.
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub const BIN: &str = env!("CARGO_BIN_EXE_ptyd");

/// One test's private world. Servers started from it share its directories,
/// so a second server in the same namespace finds the first one's snapshot.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub runtime: PathBuf,
    pub state: PathBuf,
    pub home: PathBuf,
    /// How long a server may take to become ready (its restore included).
    pub ready_timeout: Duration,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        // Canonical, so paths compare equal to what /proc/<pid>/cwd reports.
        let root = dir.path().canonicalize().expect("canonicalize tempdir");
        let runtime = root.join("run");
        let state = root.join("state");
        let home = root.join("home");
        for d in [&runtime, &state, &home] {
            std::fs::create_dir(d).expect("mkdir");
            set_mode(d, 0o700);
        }
        Env {
            dir,
            runtime,
            state,
            home,
            ready_timeout: TIMEOUT,
        }
    }

    /// A directory under the test's temp dir (created).
    pub fn path(&self, rel: &str) -> PathBuf {
        let p = self.dir.path().canonicalize().unwrap().join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }

    /// `$XDG_STATE_HOME/ptyd/<ns>`.
    pub fn state_dir(&self, ns: &str) -> PathBuf {
        self.state.join("ptyd").join(ns)
    }

    pub fn session_path(&self, ns: &str) -> PathBuf {
        self.state_dir(ns).join("session.json")
    }

    fn apply(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("XDG_STATE_HOME", &self.state)
            .env("HOME", &self.home)
            .env("SHELL", "/bin/sh")
            .env("LANG", "C.UTF-8");
    }

    pub fn start(&self, ns: &str) -> Server {
        self.start_with(ns, &[], None)
    }

    /// Starts `ptyd -L ns server ARGS` and waits until it accepts
    /// connections. `fsize` sets RLIMIT_FSIZE in the child.
    pub fn start_with(&self, ns: &str, args: &[&str], fsize: Option<u64>) -> Server {
        let started = Instant::now();
        let (read_end, write_end) = pipe_cloexec();
        let stderr_path = self
            .dir
            .path()
            .join(format!("server-{ns}-{}.stderr", unique()));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(BIN);
        self.apply(&mut cmd);
        cmd.arg("-L")
            .arg(ns)
            .arg("server")
            .args(args)
            .env("PTYD_READY_FD", write_end.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let wfd = write_end.as_raw_fd();
        // SAFETY: only async-signal-safe calls (fcntl, setrlimit) between
        // fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Let the ready pipe's write end survive exec.
                if libc::fcntl(wfd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(limit) = fsize {
                    let rl = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn ptyd server");
        drop(write_end);
        let mut server = Server {
            child: Some(child),
            ns: ns.to_string(),
            socket: self.runtime.join("ptyd").join(ns).join("ptyd.sock"),
            stderr_path,
            ready_after: Duration::ZERO,
            env_cmd: EnvCmd {
                runtime: self.runtime.clone(),
                state: self.state.clone(),
                home: self.home.clone(),
            },
        };
        let mut pipe = std::fs::File::from(read_end);
        match read_one_byte(&mut pipe, self.ready_timeout) {
            Ok(true) => {}
            Ok(false) => panic!(
                "server {ns} exited before it was ready; stderr:\n{}",
                server.stderr()
            ),
            Err(e) => panic!(
                "server {ns} not ready after {:?} ({e}); stderr:\n{}",
                self.ready_timeout,
                server.stderr()
            ),
        }
        server.ready_after = started.elapsed();
        server
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

/// The environment for running `ptyd` CLI commands against a server.
#[derive(Clone)]
struct EnvCmd {
    runtime: PathBuf,
    state: PathBuf,
    home: PathBuf,
}

pub struct Server {
    child: Option<Child>,
    pub ns: String,
    pub socket: PathBuf,
    stderr_path: PathBuf,
    /// From spawning the process to its ready byte (restore included).
    pub ready_after: Duration,
    env_cmd: EnvCmd,
}

impl Server {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(-1, |c| c.id() as i32)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn connect(&self) -> Conn {
        let stream = UnixStream::connect(&self.socket)
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.socket.display()));
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut conn = Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            next_id: 1,
            events: Vec::new(),
            early: std::collections::HashMap::new(),
        };
        conn.ok("hello", json!({ "protocol": 1, "client": "persist-tests" }));
        conn
    }

    /// Runs `ptyd -L ns ARGS` against this server.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_RUNTIME_DIR", &self.env_cmd.runtime)
            .env("XDG_STATE_HOME", &self.env_cmd.state)
            .env("HOME", &self.env_cmd.home)
            .arg("-L")
            .arg(&self.ns)
            .args(args)
            .stdin(Stdio::null());
        cmd.output().expect("run ptyd cli")
    }

    /// `ptyd status --json`, parsed.
    pub fn status_json(&self) -> Value {
        let out = self.cli(&["status", "--json"]);
        assert!(
            out.status.success(),
            "ptyd status --json failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("status --json is JSON")
    }

    /// `server.stop`, then reads until the server closes the connection and
    /// waits for the process to exit.
    pub fn stop(mut self) {
        let mut conn = self.connect();
        conn.ok("server.stop", json!({}));
        conn.read_until_eof();
        let mut child = self.child.take().expect("child");
        let status = wait_child(&mut child, TIMEOUT).unwrap_or_else(|| {
            panic!("server did not exit after stop; stderr:\n{}", self.stderr())
        });
        assert!(
            status.success(),
            "server exited with {status}: {}",
            self.stderr()
        );
    }

    /// SIGKILL and reap.
    pub fn kill9(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn is_alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One JSON-lines connection.
pub struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// Event lines read while waiting for responses.
    pub events: Vec<Value>,
    /// Responses read while waiting for another one.
    early: std::collections::HashMap<u64, Value>,
}

impl Conn {
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut line =
            serde_json::to_vec(&json!({ "id": id, "method": method, "params": params })).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).expect("send request");
        id
    }

    /// One line from the server, or `None` at EOF.
    pub fn read_line(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("server line is JSON")),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("no line from the server within {TIMEOUT:?}")
            }
            Err(e) => panic!("reading from server: {e}"),
        }
    }

    /// The response to request `id`: `Ok(result)` or `Err(error object)`.
    pub fn response(&mut self, id: u64) -> Result<Value, Value> {
        self.try_response(id).expect("server closed the connection")
    }

    /// Like [`Conn::response`], but `None` if the connection ends first.
    pub fn try_response(&mut self, id: u64) -> Option<Result<Value, Value>> {
        loop {
            let msg = match self.early.remove(&id) {
                Some(msg) => msg,
                None => self.read_line()?,
            };
            if msg.get("event").is_some() {
                self.events.push(msg["event"].clone());
                continue;
            }
            match msg["id"].as_u64() {
                Some(other) if other != id => {
                    // Parked requests are answered out of order: keep it.
                    self.early.insert(other, msg);
                    continue;
                }
                Some(_) => {}
                None => panic!("response without an id: {msg}"),
            }
            if let Some(err) = msg.get("error") {
                return Some(Err(err.clone()));
            }
            return Some(Ok(msg["result"].clone()));
        }
    }

    /// A call for a server that may die under it: `None` once it is gone.
    pub fn try_call(&mut self, method: &str, params: Value) -> Option<Result<Value, Value>> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line =
            serde_json::to_vec(&json!({ "id": id, "method": method, "params": params })).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).ok()?;
        self.try_response(id)
    }

    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.send(method, params);
        self.response(id)
    }

    /// A call that must succeed.
    #[track_caller]
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let shown = params.to_string();
        match self.call(method, params) {
            Ok(v) => v,
            Err(e) => panic!("{method} {shown} failed: {e}"),
        }
    }

    pub fn read_until_eof(&mut self) {
        while self.read_line().is_some() {}
    }

    /// Subscribes from `since` and returns the first event of `kind`.
    pub fn wait_event(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(pos) = self.events.iter().position(|e| e["type"] == kind) {
                return self.events.remove(pos);
            }
            assert!(Instant::now() < deadline, "no {kind} event in {TIMEOUT:?}");
            match self.read_line() {
                Some(msg) if msg.get("event").is_some() => self.events.push(msg["event"].clone()),
                Some(_) => {}
                None => panic!("connection closed while waiting for {kind}"),
            }
        }
    }

    /// Creates a pane; returns its info.
    #[track_caller]
    pub fn create(&mut self, params: Value) -> Value {
        self.ok("pane.create", params)
    }

    pub fn panes(&mut self) -> Vec<Value> {
        self.ok("pane.list", json!({}))["panes"]
            .as_array()
            .unwrap()
            .clone()
    }

    pub fn pane(&mut self, target: &str) -> Value {
        self.panes()
            .into_iter()
            .find(|p| p["id"] == target || p["name"] == target)
            .unwrap_or_else(|| panic!("no pane {target}"))
    }

    /// The pane's visible text.
    pub fn capture(&mut self, target: &str) -> String {
        self.ok("pane.capture", json!({ "target": target }))["text"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The pane's scrollback and visible text (restored history goes to the
    /// scrollback).
    pub fn capture_all(&mut self, target: &str) -> String {
        self.ok(
            "pane.capture",
            json!({ "target": target, "start": -100_000 }),
        )["text"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Waits (server-side) until `text` is on the pane's screen.
    #[track_caller]
    pub fn wait_text(&mut self, target: &str, text: &str) {
        let r = self.call(
            "pane.wait",
            json!({ "target": target, "text": text, "timeout_ms": TIMEOUT.as_millis() as u64 }),
        );
        if let Err(e) = r {
            let screen = self.capture(target);
            panic!("waiting for {text:?} on {target}: {e}; screen:\n{screen}");
        }
    }

    /// Types a line into a pane.
    pub fn type_line(&mut self, target: &str, line: &str) {
        self.ok(
            "pane.input",
            json!({ "target": target, "data": format!("{line}\r") }),
        );
    }

    /// `server.save` that must succeed; returns the saved revision.
    #[track_caller]
    pub fn save(&mut self) -> u64 {
        self.ok("server.save", json!({}))["revision"]
            .as_u64()
            .expect("revision")
    }
}

/// Polls `cond` until it holds, panicking with `what` after [`TIMEOUT`].
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    let mut pause = Duration::from_millis(5);
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {TIMEOUT:?}: {what}"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn pipe_cloexec() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both fds are open and ours alone.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Reads one byte with a deadline: `Ok(true)` got it, `Ok(false)` EOF.
fn read_one_byte(pipe: &mut std::fs::File, timeout: Duration) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ));
        }
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc > 0 {
            break;
        }
    }
    let mut byte = [0u8; 1];
    Ok(pipe.read(&mut byte)? == 1)
}

fn wait_child(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Files (not directories) under `dir`, as paths relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Temp files left by atomic writes (`.NAME.tmp.PID.N`) under `dir`.
pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.') && n.contains(".tmp."))
        })
        .collect()
}

/// The contents of `/proc/<pid>/cmdline`, split.
pub fn cmdline(pid: i64) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

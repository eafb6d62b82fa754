//! The harness every integration test shares: a private `ptyd server`
//! process per test (its own `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` and
//! namespace), a raw JSON-lines client, CLI runs, and deadline-bounded
//! waiting helpers. Nothing is mocked: these are the real binary, real
//! sockets, real PTYs and real processes.
//!
//! Every blocking step has a deadline ([`TIMEOUT`]) and fails the test with a
//! message saying what was awaited, so a hang is a clear failure. Tests wait
//! on what the server reports (`pane.wait`, events, EXIT frames), not on
//! sleeps; [`eventually`] polls only what reports nothing (a foreign process
//! dying, a file appearing, tmux's screen).
//!
//! The test files, one per area:
//! - `panes.rs`: pane lifecycle over the API, exit statuses, tree kill,
//!   input acks and `request_id` dedup, environment, concurrency.
//! - `protocol_errors.rs`: malformed and hostile input; the connection and
//!   the server survive it.
//! - `socket.rs`: one server per namespace, stale sockets, file modes,
//!   namespace isolation, stop and signals.
//! - `attach.rs`: frames, detach, EXIT reasons, slow clients, `ptyd attach`
//!   and `ptyd new` driven inside tmux.
//! - `cli.rs`: the commands, their output and exit codes.
//! - `events.rs`: replay, live delivery, sequence numbers.
//! - `waits.rs`: `pane.wait` conditions and timeouts, pane watchdogs.

#![allow(dead_code)] // Each test file uses a different part of the harness.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The overall bound on anything a test waits for. Generous: the suite must
/// pass on a loaded two-core machine.
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub const PTYD: &str = env!("CARGO_BIN_EXE_ptyd");

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A namespace name unique within this machine and run.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The private directories of one test: runtime (mode 0700) and state.
pub struct Dirs {
    pub runtime: tempfile::TempDir,
    pub state: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let runtime = tempfile::Builder::new()
            .prefix("ptyd-rt-")
            .tempdir()
            .expect("creating runtime tempdir");
        fs::set_permissions(runtime.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let state = tempfile::Builder::new()
            .prefix("ptyd-st-")
            .tempdir()
            .expect("creating state tempdir");
        Dirs { runtime, state }
    }

    /// `$XDG_RUNTIME_DIR/ptyd/<namespace>`.
    pub fn ns_dir(&self, namespace: &str) -> PathBuf {
        self.runtime.path().join("ptyd").join(namespace)
    }

    pub fn socket(&self, namespace: &str) -> PathBuf {
        self.ns_dir(namespace).join("ptyd.sock")
    }

    /// A `ptyd` command with this test's environment and namespace. `SHELL`
    /// is pinned to `/bin/sh` so panes behave the same on every machine, and
    /// what the test runner may have inherited from a service manager or a
    /// ptyd pane is removed.
    pub fn command(&self, namespace: &str) -> Command {
        let mut cmd = Command::new(PTYD);
        for (var, _) in std::env::vars_os() {
            let name = var.to_string_lossy();
            let foreign = ["PTYD_", "NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
            if foreign {
                cmd.env_remove(&var);
            }
        }
        cmd.env("XDG_RUNTIME_DIR", self.runtime.path())
            .env("XDG_STATE_HOME", self.state.path())
            // Never the developer's own ~/.config/ptyd (resume rules).
            .env("XDG_CONFIG_HOME", self.state.path().join("config"))
            .env("PTYD_NAMESPACE", namespace)
            .env("SHELL", "/bin/sh")
            .stdin(Stdio::null());
        cmd
    }
}

/// A running `ptyd server` (foreground child), stopped on drop.
pub struct Ptyd {
    pub dirs: Dirs,
    pub namespace: String,
    child: Option<Child>,
    stderr_path: PathBuf,
}

impl Ptyd {
    /// Starts a server in fresh directories and a fresh namespace.
    pub fn start() -> Ptyd {
        Ptyd::start_in(Dirs::new(), &unique_name("t"))
    }

    /// Starts a server in `dirs` and `namespace`; waits until it is ready.
    pub fn start_in(dirs: Dirs, namespace: &str) -> Ptyd {
        let mut ptyd = Ptyd {
            stderr_path: dirs.state.path().join(format!("server-{namespace}.stderr")),
            dirs,
            namespace: namespace.to_string(),
            child: None,
        };
        ptyd.spawn_server();
        ptyd
    }

    /// Starts (again) the server process and waits for its ready byte.
    pub fn spawn_server(&mut self) {
        assert!(self.child.is_none(), "a server is already running");
        match try_spawn_server(&self.dirs, &self.namespace, &self.stderr_path) {
            Ok(child) => self.child = Some(child),
            Err(msg) => panic!("{msg}"),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("server running").id() as i32
    }

    pub fn socket(&self) -> PathBuf {
        self.dirs.socket(&self.namespace)
    }

    /// The server's stderr so far, for failure messages.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// A new JSON-lines connection.
    pub fn connect(&self) -> Conn {
        Conn::connect(&self.socket())
    }

    /// A `ptyd` CLI command for this server's namespace.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut cmd = self.dirs.command(&self.namespace);
        cmd.args(args);
        cmd
    }

    /// Runs a CLI command to completion (bounded by [`TIMEOUT`]).
    pub fn run_cli(&self, args: &[&str]) -> Output {
        run_bounded(self.cli(args), &format!("ptyd {args:?}"))
    }

    /// Sends SIGKILL to the server and reaps it. Its panes stay behind.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("server running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Waits (bounded) for the server process to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server running");
        wait_child(&mut child, TIMEOUT).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit within {TIMEOUT:?}");
        })
    }

    /// Waits up to `timeout` for the server process to exit by itself;
    /// `None` if it is still running (or was already taken care of).
    pub fn try_wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let status = wait_child(self.child.as_mut()?, timeout)?;
        self.child = None;
        Some(status)
    }

    /// Whether this handle still owns a server process (not yet reaped).
    pub fn has_child(&self) -> bool {
        self.child.is_some()
    }

    /// Creates a pane and returns its info.
    pub fn create(&self, params: Value) -> Value {
        self.connect().ok("pane.create", params)
    }

    /// Creates a pane running `argv` and returns its id.
    pub fn create_argv(&self, argv: &[&str]) -> String {
        let info = self.create(json!({ "argv": argv }));
        info["id"].as_str().expect("pane id").to_string()
    }
}

impl Drop for Ptyd {
    fn drop(&mut self) {
        // SIGTERM lets the server hang up its panes (SIGHUP to each session);
        // SIGKILL only if it does not go within the timeout.
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            if wait_child(&mut child, Duration::from_secs(10)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Spawns `ptyd server` with `PTYD_READY_FD` and waits for its ready byte.
/// On failure returns a message with the server's stderr.
pub fn try_spawn_server(dirs: &Dirs, namespace: &str, stderr_path: &Path) -> Result<Child, String> {
    let (read_end, write_end) = cloexec_pipe();
    let stderr = fs::File::create(stderr_path).expect("creating server stderr file");
    let mut cmd = dirs.command(namespace);
    let write_fd = write_end.as_raw_fd();
    cmd.arg("server")
        .env("PTYD_READY_FD", write_fd.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    // SAFETY: runs in the forked child before exec; fcntl is
    // async-signal-safe. Only this child gets the write end: it is
    // close-on-exec in every other process the (threaded) test spawns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(write_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawning ptyd server: {e}"))?;
    drop(write_end);
    let mut pipe = fs::File::from(read_end);
    let ready = poll_fd(pipe.as_raw_fd(), TIMEOUT);
    let mut byte = [0u8; 1];
    if ready && matches!(pipe.read(&mut byte), Ok(1)) {
        return Ok(child);
    }
    let status = if ready {
        wait_child(&mut child, TIMEOUT)
    } else {
        None
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Err(format!(
        "ptyd server did not become ready (exit: {status:?}); stderr:\n{}",
        fs::read_to_string(stderr_path).unwrap_or_default()
    ))
}

fn cloexec_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Whether `fd` became readable (or hung up) within `timeout`.
fn poll_fd(fd: RawFd, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
        if n > 0 {
            return true;
        }
        if n == 0 || Instant::now() >= deadline {
            return false;
        }
    }
}

/// Waits for a child to exit, up to `timeout`.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
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

/// Runs a command to completion with captured output, failing the test if it
/// takes longer than [`TIMEOUT`].
pub fn run_bounded(mut cmd: Command, what: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = wait_child(&mut child, TIMEOUT).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} did not finish within {TIMEOUT:?}");
    });
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// Polls `check` until it returns `Some`, failing with `what` after
/// [`TIMEOUT`]. For conditions with no event to wait on (a foreign process
/// dying, a file appearing).
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {TIMEOUT:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process is gone: no `/proc` entry, or a zombie nobody reaped
/// yet (a container's init may never reap orphans).
pub fn process_gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().next() == Some("Z")
        }
    }
}

/// Field `n` (1-based, proc(5) numbering) of `/proc/<pid>/stat`.
pub fn proc_stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command start at field 3.
    rest.split_whitespace().nth(n - 3).map(str::to_string)
}

/// A response's error: `(code, message)`.
pub type RpcErr = (String, String);

/// A raw JSON-lines connection to the server. Pushed `{"event": ..}` lines
/// seen while waiting for a response are kept for [`Conn::next_event`].
pub struct Conn {
    reader: BufReader<UnixStream>,
    pub stream: UnixStream,
    next_id: u64,
    events: VecDeque<Value>,
}

impl Conn {
    pub fn connect(socket: &Path) -> Conn {
        let stream = UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", socket.display()));
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
            next_id: 1000,
            events: VecDeque::new(),
        }
    }

    /// Writes raw bytes, exactly as given.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("writing to the server");
    }

    /// Reads one line; `None` at end of stream. Fails the test on timeout.
    pub fn read_line(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "server sent a line that is not JSON ({e}): {}",
                    abbreviate(&line)
                )
            })),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("no line from the server within {TIMEOUT:?}")
            }
            Err(e) => panic!("reading a line from the server: {e}"),
        }
    }

    /// The next response line (not an event), skipping and keeping events.
    pub fn next_response(&mut self) -> Value {
        loop {
            let msg = self
                .read_line()
                .expect("the server closed the connection before responding");
            if let Some(event) = msg.get("event") {
                self.events.push_back(event.clone());
                continue;
            }
            return msg;
        }
    }

    /// The next pushed event.
    pub fn next_event(&mut self) -> Value {
        if let Some(e) = self.events.pop_front() {
            return e;
        }
        let msg = self
            .read_line()
            .expect("the server closed the connection while we awaited an event");
        match msg.get("event") {
            Some(event) => event.clone(),
            None => panic!("expected an event, got a response: {msg}"),
        }
    }

    /// Reads events until one of type `kind` about `pane` (on a subscribed
    /// connection) and returns it.
    pub fn wait_event(&mut self, kind: &str, pane: &str) -> Value {
        loop {
            let e = self.next_event();
            if e["type"] == kind && e["pane"] == pane {
                return e;
            }
        }
    }

    /// Sends a request and returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let mut line =
            serde_json::to_vec(&json!({ "id": id, "method": method, "params": params })).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
        id
    }

    /// Sends a request and returns its whole response line.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let resp = self.next_response();
        assert_eq!(
            resp["id"],
            json!(id),
            "response to the wrong request: {resp}"
        );
        resp
    }

    /// Sends a request and splits the response into result or error.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, RpcErr> {
        split(self.request(method, params))
    }

    /// A request that must succeed.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let p = params.to_string();
        self.call(method, params)
            .unwrap_or_else(|e| panic!("{method} {p} failed: {e:?}"))
    }

    /// A request that must fail with `code`; returns the message.
    pub fn err(&mut self, method: &str, params: Value, code: &str) -> String {
        let p = params.to_string();
        match self.call(method, params) {
            Ok(v) => panic!("{method} {p} succeeded ({v}), expected error {code}"),
            Err((c, m)) => {
                assert_eq!(c, code, "{method} {p}: wrong error code; message: {m}");
                m
            }
        }
    }

    /// Waits (server side, bounded) for `text` on the pane's screen; on
    /// failure the message shows the screen.
    pub fn wait_text(&mut self, pane: &str, text: &str) {
        let ms = TIMEOUT.as_millis() as u64;
        if let Err(e) = self.call(
            "pane.wait",
            json!({ "target": pane, "text": text, "timeout_ms": ms }),
        ) {
            let screen = self.capture(pane);
            panic!("waiting for {text:?} on {pane}: {e:?}; screen:\n{screen}");
        }
    }

    /// Waits (bounded) for the pane to exit and returns its `exit` object.
    pub fn wait_exit(&mut self, pane: &str) -> Value {
        let ms = TIMEOUT.as_millis() as u64;
        let r = self.ok(
            "pane.wait",
            json!({ "target": pane, "exit": true, "timeout_ms": ms }),
        );
        assert_eq!(r["reason"], "exited", "{r}");
        r["exit"].clone()
    }

    /// The pane's visible text.
    pub fn capture(&mut self, pane: &str) -> String {
        self.ok("pane.capture", json!({ "target": pane }))["text"]
            .as_str()
            .expect("capture text")
            .to_string()
    }

    /// Types `data` into the pane and waits for the ack.
    pub fn input(&mut self, pane: &str, data: &str) -> Value {
        self.ok("pane.input", json!({ "target": pane, "data": data }))
    }

    /// The `pane.list` entry of `pane`, if any.
    pub fn pane_info(&mut self, pane: &str) -> Option<Value> {
        let list = self.ok("pane.list", json!({}));
        list["panes"]
            .as_array()
            .expect("panes array")
            .iter()
            .find(|p| p["id"] == pane)
            .cloned()
    }
}

/// Long bytes shortened to their start and end, for failure messages.
pub fn abbreviate(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 400 {
        return format!("{text:?}");
    }
    let head: String = chars[..200].iter().collect();
    let tail: String = chars[chars.len() - 200..].iter().collect();
    format!("{head:?} ... ({} chars) ... {tail:?}", chars.len())
}

/// Splits a response line into result or `(code, message)`.
pub fn split(resp: Value) -> Result<Value, RpcErr> {
    if let Some(err) = resp.get("error") {
        return Err((
            err["code"].as_str().unwrap_or("?").to_string(),
            err["message"].as_str().unwrap_or("").to_string(),
        ));
    }
    assert!(
        resp.get("result").is_some(),
        "neither result nor error: {resp}"
    );
    Ok(resp["result"].clone())
}

/// Asserts a CLI run exited with `code`, showing its output otherwise.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Reads attach frames: `(kind, payload)`, `None` at end of stream.
pub struct FrameReader<'a> {
    pub stream: &'a UnixStream,
    buf: Vec<u8>,
}

impl<'a> FrameReader<'a> {
    pub fn new(stream: &'a UnixStream, leftover: Vec<u8>) -> FrameReader<'a> {
        FrameReader {
            stream,
            buf: leftover,
        }
    }

    pub fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                assert!(
                    len <= 1 << 20,
                    "frame length {len} over the limit: the frame stream is corrupt (kind byte {})",
                    self.buf[0]
                );
                if self.buf.len() >= 5 + len {
                    let kind = self.buf[0];
                    let payload = self.buf[5..5 + len].to_vec();
                    self.buf.drain(..5 + len);
                    return Some((kind, payload));
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            match (&mut &*self.stream).read(&mut chunk) {
                Ok(0) => {
                    assert!(
                        self.buf.is_empty(),
                        "stream ended inside a frame ({} bytes left)",
                        self.buf.len()
                    );
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading frames: {e}"),
            }
        }
    }
}

impl Conn {
    /// Attaches this connection to `pane`: returns the attach result and the
    /// socket, now carrying frames, with any bytes already buffered.
    pub fn attach(mut self, params: Value) -> (Value, UnixStream, Vec<u8>) {
        let result = self.ok("attach", params);
        let (stream, leftover) = self.into_stream();
        (result, stream, leftover)
    }

    /// The socket, with any bytes read past the last line.
    pub fn into_stream(self) -> (UnixStream, Vec<u8>) {
        let leftover = self.reader.buffer().to_vec();
        (self.stream, leftover)
    }
}

/// Encodes a client frame.
pub fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A private tmux server (its own socket and `TMUX_TMPDIR`), killed on drop.
pub struct Tmux {
    pub socket_name: String,
    pub tmpdir: tempfile::TempDir,
}

impl Tmux {
    pub fn new() -> Tmux {
        Tmux {
            socket_name: unique_name("ptyd-test"),
            tmpdir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env("TMUX_TMPDIR", self.tmpdir.path())
            .env_remove("TMUX")
            .args(["-L", &self.socket_name, "-f", "/dev/null"]);
        cmd
    }

    /// Starts the detached session `main`, `cols` x `rows`, running
    /// `command`.
    pub fn new_session(&self, cols: u16, rows: u16, command: &str) {
        let (cols, rows) = (cols.to_string(), rows.to_string());
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &cols,
            "-y",
            &rows,
            command,
        ]);
    }

    /// Runs a tmux command that must succeed; returns its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = self.command();
        cmd.args(args);
        let out = run_bounded(cmd, &format!("tmux {args:?}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {:?} {}",
            out.status,
            stderr(&out)
        );
        stdout(&out)
    }

    /// The visible screen of the session `main`.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "main"])
    }

    /// Polls the tmux screen (tmux has no event to wait on) until `check`.
    pub fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "tmux screen never showed {what}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `send-keys -t main KEYS...`.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let mut cmd = self.command();
        cmd.arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = cmd.status();
    }
}

/// Quotes `s` for a POSIX shell command line.
/// The command for a shell (prompt `outer$ `) whose `ptyd` commands reach
/// `ptyd`'s server: the outer terminal of attach tests, run inside tmux.
pub fn outer_shell(ptyd: &Ptyd) -> String {
    format!(
        "env XDG_RUNTIME_DIR={} XDG_STATE_HOME={} PTYD_NAMESPACE={} PS1='outer$ ' /bin/sh",
        shell_quote(ptyd.dirs.runtime.path().to_str().unwrap()),
        shell_quote(ptyd.dirs.state.path().to_str().unwrap()),
        shell_quote(&ptyd.namespace),
    )
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

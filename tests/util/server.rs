//! A private `ptyd server` per test: its own directories ([`Dirs`]), started
//! in the foreground as a child and ended on drop ([`Ptyd`]), and `ptyd`
//! CLI runs against it.

use super::client::Conn;
use super::process::{KillOnDrop, wait_child};
use super::wait::TIMEOUT;
use serde_json::{Value, json};
use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const PTYD: &str = env!("CARGO_BIN_EXE_ptyd");

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A name unique within this machine and run (namespaces, file names).
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One test's private world, in one temp dir (mode 0700): runtime, state and
/// home directories. Clones share it; it is removed with the last clone.
/// Servers started from it share its directories, so a second server in a
/// namespace finds the first one's snapshot.
#[derive(Clone)]
pub struct Dirs {
    root: Arc<tempfile::TempDir>,
    /// `XDG_RUNTIME_DIR`.
    pub runtime: PathBuf,
    /// `XDG_STATE_HOME`; `XDG_CONFIG_HOME` is its `config/`.
    pub state: PathBuf,
    /// `HOME`.
    pub home: PathBuf,
    /// How long a server may take to become ready (its restore included).
    pub ready_timeout: Duration,
    /// Extra environment for the servers (and CLIs) started from here.
    pub env: Vec<(String, String)>,
    /// Where the servers started from here write their stderr.
    pub stderr: ServerStderr,
}

/// A server's stderr.
#[derive(Clone, Copy, Debug)]
pub enum ServerStderr {
    /// A file of its own ([`Ptyd::stderr`] reads it).
    File,
    /// A pipe whose read end is closed: every write fails with EPIPE.
    ClosedPipe,
    /// A file already this many bytes long, appended to: under an
    /// RLIMIT_FSIZE of that many bytes every write fails with EFBIG.
    Full(u64),
}

impl Dirs {
    pub fn new() -> Dirs {
        let root = tempfile::Builder::new()
            .prefix("ptyd-")
            .tempdir()
            .expect("creating the test's temp dir");
        // Canonical, so paths compare equal to what /proc/<pid>/cwd reports.
        let base = root.path().canonicalize().expect("canonicalizing temp dir");
        let [runtime, state, home] = ["run", "state", "home"].map(|d| base.join(d));
        for d in [&runtime, &state, &home] {
            fs::create_dir(d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
            super::set_mode(d, 0o700);
        }
        Dirs {
            root: Arc::new(root),
            runtime,
            state,
            home,
            ready_timeout: TIMEOUT,
            env: Vec::new(),
            stderr: ServerStderr::File,
        }
    }

    /// A directory under the test's temp dir (created).
    pub fn path(&self, rel: &str) -> PathBuf {
        let p = self.root.path().canonicalize().unwrap().join(rel);
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
        p
    }

    /// Writes the servers' `config.toml` (`$XDG_CONFIG_HOME/ptyd/`).
    pub fn write_config(&self, text: &str) {
        let dir = self.state.join("config/ptyd");
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        fs::write(dir.join("config.toml"), text).expect("writing config.toml");
    }

    /// `$XDG_RUNTIME_DIR/ptyd/<namespace>`.
    pub fn ns_dir(&self, namespace: &str) -> PathBuf {
        self.runtime.join("ptyd").join(namespace)
    }

    pub fn socket(&self, namespace: &str) -> PathBuf {
        self.ns_dir(namespace).join("ptyd.sock")
    }

    /// `$XDG_STATE_HOME/ptyd/<namespace>`.
    pub fn state_dir(&self, namespace: &str) -> PathBuf {
        self.state.join("ptyd").join(namespace)
    }

    pub fn session_path(&self, namespace: &str) -> PathBuf {
        self.state_dir(namespace).join("session.json")
    }

    /// A `ptyd` command with this test's environment and namespace. `SHELL`
    /// and `LANG` are pinned so panes behave the same on every machine, and
    /// what the test runner may have inherited from a service manager or a
    /// ptyd pane is removed.
    pub fn command(&self, namespace: &str) -> Command {
        self.command_of(Path::new(PTYD), namespace)
    }

    /// As [`Dirs::command`], running another ptyd binary (an older build).
    pub fn command_of(&self, binary: &Path, namespace: &str) -> Command {
        let mut cmd = Command::new(binary);
        for (var, _) in std::env::vars_os() {
            let name = var.to_string_lossy();
            let foreign = ["PTYD_", "NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
            if foreign {
                cmd.env_remove(&var);
            }
        }
        cmd.env("XDG_RUNTIME_DIR", &self.runtime)
            .env("XDG_STATE_HOME", &self.state)
            // Never the developer's own ~/.config/ptyd (resume rules).
            .env("XDG_CONFIG_HOME", self.state.join("config"))
            .env("HOME", &self.home)
            .env("PTYD_NAMESPACE", namespace)
            .env("SHELL", "/bin/sh")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Starts a server in `namespace`; waits until it is ready.
    pub fn start(&self, namespace: &str) -> Ptyd {
        self.start_with(namespace, &[], None)
    }

    /// Starts `ptyd server ARGS` in `namespace` and waits until it is ready.
    /// `fsize` sets RLIMIT_FSIZE in the server.
    pub fn start_with(&self, namespace: &str, args: &[&str], fsize: Option<u64>) -> Ptyd {
        self.start_limited(namespace, args, fsize, None)
    }

    /// As [`Dirs::start_with`], and `nofile` sets RLIMIT_NOFILE (soft and
    /// hard, so the server cannot raise it) in the server.
    pub fn start_limited(
        &self,
        namespace: &str,
        args: &[&str],
        fsize: Option<u64>,
        nofile: Option<u64>,
    ) -> Ptyd {
        self.start_binary(Path::new(PTYD), namespace, args, fsize, nofile)
    }

    /// Starts `BINARY server ARGS` (another ptyd build) in `namespace` and
    /// waits until it is ready.
    pub fn start_binary(
        &self,
        binary: &Path,
        namespace: &str,
        args: &[&str],
        fsize: Option<u64>,
        nofile: Option<u64>,
    ) -> Ptyd {
        let stderr_path = self.root.path().join(format!(
            "{}.stderr",
            unique_name(&format!("server-{namespace}"))
        ));
        let mut ptyd = Ptyd {
            child: None,
            binary: binary.to_path_buf(),
            dirs: self.clone(),
            namespace: namespace.to_string(),
            stderr_path,
            args: args.iter().map(|a| a.to_string()).collect(),
            fsize,
            nofile,
            ready_after: Duration::ZERO,
        };
        ptyd.spawn_server();
        ptyd
    }
}

/// A running `ptyd server` (a foreground child), ended on drop: SIGTERM so
/// it hangs up its panes, SIGKILL if it does not go.
pub struct Ptyd {
    // First, so the server is gone before the directories are removed.
    child: Option<KillOnDrop>,
    /// The server's binary (the build under test unless started otherwise).
    pub binary: PathBuf,
    pub dirs: Dirs,
    pub namespace: String,
    stderr_path: PathBuf,
    args: Vec<String>,
    fsize: Option<u64>,
    nofile: Option<u64>,
    /// From spawning the process to its ready byte (restore included).
    pub ready_after: Duration,
}

impl Ptyd {
    /// Starts a server in fresh directories and a fresh namespace.
    pub fn start() -> Ptyd {
        Ptyd::start_in(Dirs::new(), &unique_name("t"))
    }

    /// Starts a server in `dirs` and `namespace`; waits until it is ready.
    pub fn start_in(dirs: Dirs, namespace: &str) -> Ptyd {
        dirs.start(namespace)
    }

    /// Starts (again) the server process, as before, and waits for its
    /// ready byte.
    pub fn spawn_server(&mut self) {
        assert!(self.child.is_none(), "a server is already running");
        let started = Instant::now();
        let child = spawn(
            &self.binary,
            &self.dirs,
            &self.namespace,
            &self.args,
            self.fsize,
            self.nofile,
            &self.stderr_path,
        )
        .unwrap_or_else(|msg| panic!("{msg}"));
        self.ready_after = started.elapsed();
        self.child = Some(KillOnDrop::child(child));
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("server running").as_child().id() as i32
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

    /// `ptyd status --json`, parsed.
    pub fn status_json(&self) -> Value {
        let out = self.run_cli(&["status", "--json"]);
        assert!(
            out.status.success(),
            "ptyd status --json failed: {}",
            stderr(&out)
        );
        serde_json::from_slice(&out.stdout).expect("status --json is JSON")
    }

    /// The serving process's pid (`pid()` is the keeper's: the process
    /// started, which forked it).
    pub fn serving_pid(&self) -> i32 {
        self.status_json()["pid"].as_i64().expect("status pid") as i32
    }

    /// Sends SIGKILL to the serving process (the keeper stays and starts
    /// a replacement); returns a connection to the replacement once it
    /// answers.
    pub fn crash_serving(&self) -> Conn {
        let dead = self.serving_pid();
        // SAFETY: kill(2) of the serving process this test's server forked.
        unsafe { libc::kill(dead, libc::SIGKILL) };
        super::eventually("a replacement server to answer", || {
            let mut c = Conn::try_connect(&self.socket())?;
            match c.try_call("server.status", json!({})) {
                Some(Ok(status)) => {
                    let pid = status["pid"].as_i64().unwrap_or(0) as i32;
                    (pid != dead && pid != 0).then_some(c)
                }
                _ => None,
            }
        })
    }

    /// Sends SIGKILL to the server (the keeper, which takes the serving
    /// process with it) and reaps it; returns once the serving process is
    /// gone too, so the namespace is free. Its panes stay behind.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("server running").into_child();
        let keeper = child.id() as i32;
        let forked: Vec<i32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|p: &i32| {
                super::proc_stat_field(*p, 4).and_then(|pp| pp.parse().ok()) == Some(keeper)
            })
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        // The serving process dies of its parent-death signal; its exit
        // (and its lock) may lag the keeper's a moment.
        // Its fds (the lock) close only once its last thread is gone: a
        // thread-group leader shows as a zombie before that.
        for pid in forked {
            super::eventually("the serving process to die with its keeper", || {
                let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
                    .map(|d| d.count())
                    .unwrap_or(0);
                let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
                    .map(|d| d.count())
                    .unwrap_or(0);
                (super::process_gone(pid) && open == 0 && threads <= 1).then_some(())
            });
        }
    }

    /// `server.stop`, then reads until the server closes the connection and
    /// checks the process exits, successfully.
    pub fn stop(mut self) {
        let mut conn = self.connect();
        conn.ok("server.stop", json!({}));
        conn.read_until_eof();
        let status = self.wait_exit();
        assert!(
            status.success(),
            "server exited with {status}: {}",
            self.stderr()
        );
    }

    /// Waits (bounded) for the server process to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.try_wait_exit(TIMEOUT).unwrap_or_else(|| {
            self.kill9();
            panic!(
                "the server did not exit within {TIMEOUT:?}; stderr:\n{}",
                self.stderr()
            );
        })
    }

    /// Waits up to `timeout` for the server process to exit by itself;
    /// `None` if it is still running (or was already taken care of).
    pub fn try_wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let status = wait_child(self.child.as_mut()?.as_child_mut(), timeout)?;
        self.child.take()?.disarm();
        Some(status)
    }

    /// Whether this handle still owns a server process (not yet reaped).
    pub fn has_child(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the server process is still running.
    pub fn is_alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|g| matches!(g.as_child_mut().try_wait(), Ok(None)))
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

/// Spawns `ptyd server ARGS` with `PTYD_READY_FD` and waits for its ready
/// byte. On failure returns a message with the server's stderr.
fn spawn(
    binary: &Path,
    dirs: &Dirs,
    namespace: &str,
    args: &[String],
    fsize: Option<u64>,
    nofile: Option<u64>,
    stderr_path: &Path,
) -> Result<Child, String> {
    let (read_end, write_end) = cloexec_pipe();
    let stderr = match dirs.stderr {
        ServerStderr::File => {
            Stdio::from(fs::File::create(stderr_path).expect("creating server stderr file"))
        }
        ServerStderr::ClosedPipe => Stdio::from(cloexec_pipe().1),
        ServerStderr::Full(bytes) => {
            let file = fs::File::create(stderr_path).expect("creating server stderr file");
            file.set_len(bytes).expect("filling server stderr file");
            drop(file);
            let file = fs::OpenOptions::new()
                .append(true)
                .open(stderr_path)
                .expect("opening server stderr file");
            Stdio::from(file)
        }
    };
    let mut cmd = dirs.command_of(binary, namespace);
    let write_fd = write_end.as_raw_fd();
    cmd.arg("server")
        .args(args)
        .env("PTYD_READY_FD", write_fd.to_string())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: runs in the forked child before exec; fcntl and setrlimit are
    // async-signal-safe. Only this child gets the write end: it is
    // close-on-exec in every other process the (threaded) test spawns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(write_fd, libc::F_SETFD, 0) == -1 {
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
            if let Some(limit) = nofile {
                let rl = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawning ptyd server: {e}"))?;
    drop(write_end);
    let mut pipe = fs::File::from(read_end);
    let ready = poll_readable(pipe.as_raw_fd(), dirs.ready_timeout);
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
        "ptyd server in namespace {namespace} did not become ready within {:?} (exit: {status:?}); stderr:\n{}",
        dirs.ready_timeout,
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
fn poll_readable(fd: RawFd, timeout: Duration) -> bool {
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
        let interrupted =
            n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if !interrupted || Instant::now() >= deadline {
            return false;
        }
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

//! A private ptyd server for the benches: its own namespace and XDG
//! directories in the bench's temporary directory, every pane process it
//! starts remembered and killed on the way out, errors included.

use super::{Res, path_str, proc_stat, set_cloexec, wait_readable};
use ptyd::client::{Client, FrameReader};
use ptyd::paths::NamespacePaths;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any single wait on the server may take before the run is
/// declared stuck.
pub const STUCK: Duration = Duration::from_secs(120);
/// How long a server may take to become ready: its restore comes first,
/// and 1000 panes with full histories take a while.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Writes the `config.toml` a server started in `tmp` ([`PtydServer::start`])
/// reads: history room for `panes` panes of `lines` lines, `bytes` each.
pub fn write_history_config(tmp: &Path, lines: usize, bytes: u64, panes: usize) -> Res<()> {
    let dir = tmp.join("config").join("ptyd");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let text = format!(
        "scrollback_lines = {lines}\nscrollback_bytes = {bytes}\nscrollback_total_bytes = {}\n",
        bytes * panes as u64
    );
    std::fs::write(dir.join("config.toml"), text).map_err(|e| format!("writing the config: {e}"))
}

/// A pane's process as created: enough to find it again, and to tell it
/// from a later process reusing the pid.
pub struct PaneProc {
    pub pid: i32,
    pub sid: i32,
    pub start_token: Option<u64>,
}

impl PaneProc {
    /// Still the process we created (same pid, same kernel start time, not
    /// a zombie)?
    pub fn alive(&self) -> bool {
        match proc_stat(self.pid as u32) {
            Some((state, start)) => {
                state != "Z" && (self.start_token.is_none() || Some(start) == self.start_token)
            }
            None => false,
        }
    }
}

/// Waits until every pane shows `marker`, all waits in flight at once.
pub fn wait_all(ctl: &mut Client, ids: &[String], marker: &str) -> Res<()> {
    let mut pending = HashSet::new();
    for id in ids {
        let rpc = ctl
            .send_request(
                "pane.wait",
                // The marker is usually on screen already: waits match only new
                // output unless told to include the screen.
                json!({ "target": id, "text": marker, "include_screen": true, "timeout_ms": STUCK.as_millis() as u64 }),
            )
            .map_err(|e| e.to_string())?;
        pending.insert(rpc);
    }
    collect(ctl, pending, "pane.wait").map(drop)
}

/// Reads responses until every id in `pending` is answered; returns the
/// results by id.
pub fn collect(
    ctl: &mut Client,
    mut pending: HashSet<u64>,
    what: &str,
) -> Res<HashMap<u64, Value>> {
    let mut out = HashMap::new();
    while !pending.is_empty() {
        let msg = ctl.read_message().map_err(|e| e.to_string())?;
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if pending.remove(&id) {
            let r = ptyd::client::response_result(msg).map_err(|e| format!("{what}: {e}"))?;
            out.insert(id, r);
        }
    }
    Ok(out)
}

/// A private ptyd server: its own namespace and XDG directories inside
/// `tmp`. The child is the keeper, which forks the first generation;
/// `serving_pid` is the generation serving now.
/// Stopped on drop, and every pane process with it.
pub struct PtydServer {
    pub child: Child,
    pub paths: NamespacePaths,
    pub serving_pid: u32,
    /// The serving generation when it is not the first, for the clean-up.
    pub serving: Option<PaneProc>,
    panes: Vec<PaneProc>,
    stopped: bool,
}

impl PtydServer {
    /// Starts a server with RLIMIT_NOFILE `nofile` in `tmp` and waits until
    /// it accepts connections. A second server in the same `tmp` (after the
    /// first stopped) finds the first one's snapshot and restores it.
    pub fn start(bin: &Path, tmp: &Path, nofile: u64) -> Res<PtydServer> {
        PtydServer::start_env(bin, tmp, nofile, &[])
    }

    /// As [`PtydServer::start`], with extra environment for the server.
    pub fn start_env(bin: &Path, tmp: &Path, nofile: u64, env: &[(&str, &str)]) -> Res<PtydServer> {
        let namespace = format!("bench-{}", std::process::id());
        let run_dir = tmp.join("run");
        let state_dir = tmp.join("state");
        let config_dir = tmp.join("config");
        for d in [tmp, &run_dir, &state_dir, &config_dir] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(d)
                .map_err(|e| format!("creating {}: {e}", d.display()))?;
        }
        let paths = NamespacePaths {
            namespace: namespace.clone(),
            runtime_dir: run_dir.join("ptyd").join(&namespace),
            state_dir: state_dir.join("ptyd").join(&namespace),
        };
        let (ready_r, ready_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
        set_cloexec(ready_r.as_raw_fd())?;
        let stderr = File::create(tmp.join("ptyd-server.stderr")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        cmd.args(["-L", &namespace, "server"])
            .env("XDG_RUNTIME_DIR", &run_dir)
            .env("XDG_STATE_HOME", &state_dir)
            // Not the user's config file: default scrollback limits.
            .env("XDG_CONFIG_HOME", &config_dir)
            .env(
                ptyd::protocol::READY_FD_ENV,
                ready_w.as_raw_fd().to_string(),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let limit = libc::rlimit {
            rlim_cur: nofile,
            rlim_max: super::rlimit(libc::RLIMIT_NOFILE)?.1,
        };
        // SAFETY: setrlimit is async-signal-safe and reads only `limit`, a
        // copy owned by the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        drop(ready_w);
        let serving_pid = child.id();
        let server = PtydServer {
            child,
            paths,
            serving_pid,
            serving: None,
            panes: Vec::new(),
            stopped: false,
        };
        // One byte when it accepts connections; EOF if it died first.
        let mut byte = [0u8; 1];
        if !wait_readable(ready_r.as_raw_fd(), READY_TIMEOUT)?
            || !matches!(File::from(ready_r).read(&mut byte), Ok(1))
        {
            let log = std::fs::read_to_string(tmp.join("ptyd-server.stderr")).unwrap_or_default();
            return Err(format!("the ptyd server did not start: {}", log.trim()));
        }
        // The process started is the keeper; it forked the serving one.
        let mut server = server;
        let status = server
            .connect()?
            .call("server.status", json!({}))
            .map_err(|e| format!("server.status: {e}"))?;
        if let Some(pid) = status["pid"].as_u64() {
            server.serving_pid = pid as u32;
        }
        Ok(server)
    }

    /// A connection whose every read gives up after [`STUCK`].
    pub fn connect(&self) -> Res<Client> {
        let c = Client::connect(&self.paths, false).map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(STUCK))
            .map_err(|e| format!("setting a read timeout: {e}"))?;
        Ok(c)
    }

    /// The environment a `ptyd` client needs to reach this server.
    pub fn client_env(&self) -> Res<Vec<(&'static str, &Path)>> {
        let runtime = self
            .paths
            .runtime_dir
            .parent()
            .and_then(Path::parent)
            .ok_or("the runtime directory has no parent")?;
        Ok(vec![("XDG_RUNTIME_DIR", runtime)])
    }

    /// Creates a pane on a fresh connection that is attached to it from the
    /// start; returns the frame reader.
    pub fn create_attached(&mut self, params: Value) -> Res<FrameReader> {
        let mut client = self.connect()?;
        let info = client
            .call("pane.create", params)
            .map_err(|e| format!("pane.create: {e}"))?;
        self.track(&info)?;
        let (stream, leftover) = client.into_stream();
        Ok(FrameReader::new(stream, leftover))
    }

    /// Remembers the process of a pane (its `pane.create` or `pane.list`
    /// info) for the clean-up; its id.
    pub fn track(&mut self, info: &Value) -> Res<String> {
        let field = |k: &str| info[k].as_i64().map(|v| v as i32);
        let (Some(id), Some(pid), Some(sid)) = (info["id"].as_str(), field("pid"), field("sid"))
        else {
            return Err(format!("no pane id, pid and sid in {info}"));
        };
        self.panes.push(PaneProc {
            pid,
            sid,
            start_token: info["start_token"].as_u64(),
        });
        Ok(id.to_string())
    }

    /// Remembers every running pane's process (after a restore).
    pub fn track_all(&mut self, ctl: &mut Client) -> Res<()> {
        let list = ctl
            .call("pane.list", json!({}))
            .map_err(|e| format!("pane.list: {e}"))?;
        for p in list["panes"].as_array().into_iter().flatten() {
            if p["state"] == "running" {
                self.track(p)?;
            }
        }
        Ok(())
    }

    /// Resident memory of the serving process and of the first generation
    /// when it is another process (the reaper, after an upgrade).
    pub fn rss(&self) -> Res<(u64, Option<u64>)> {
        let serving = super::rss_bytes(self.serving_pid)?;
        let first = self.child.id();
        let reaper = if first == self.serving_pid {
            None
        } else {
            Some(super::rss_bytes(first)? + super::unmapped_memfd_bytes(first))
        };
        Ok((serving, reaper))
    }

    /// The [`super::Footprint`] of the serving process and the first
    /// generation (the keeper, or after an upgrade the reaper) together.
    pub fn footprint(&self) -> Res<super::Footprint> {
        let first = self.child.id();
        if first == self.serving_pid {
            super::footprint(&[first])
        } else {
            super::footprint(&[self.serving_pid, first])
        }
    }

    /// Creates `n` panes with `params(i)`, all requests in flight at once;
    /// returns their ids in creation order and remembers their processes
    /// for the clean-up.
    pub fn create_panes(
        &mut self,
        ctl: &mut Client,
        n: usize,
        params: impl Fn(usize) -> Value,
    ) -> Res<Vec<String>> {
        let mut order = Vec::with_capacity(n);
        for i in 0..n {
            let rpc = ctl
                .send_request("pane.create", params(i))
                .map_err(|e| e.to_string())?;
            order.push(rpc);
        }
        let mut results = collect(ctl, order.iter().copied().collect(), "pane.create")?;
        let mut ids = Vec::with_capacity(n);
        for rpc in order {
            let info = results.remove(&rpc).unwrap_or_default();
            ids.push(self.track(&info)?);
        }
        Ok(ids)
    }

    /// Creates `n` panes of `cols`x`rows`, each running `sh -c 'cat FILE;
    /// exec sleep 100000'`.
    pub fn create_cat_panes(
        &mut self,
        ctl: &mut Client,
        n: usize,
        file: &Path,
        cwd: &Path,
        (cols, rows): (u16, u16),
    ) -> Res<Vec<String>> {
        let script = format!(
            "cat {}; exec sleep 100000",
            super::shell_quote(path_str(file)?)
        );
        let cwd = path_str(cwd)?;
        self.create_panes(
            ctl,
            n,
            |_| json!({ "argv": ["sh", "-c", script], "cols": cols, "rows": rows, "cwd": cwd }),
        )
    }

    /// `server.stop`, read to EOF; waits for the first generation (the
    /// reaper) to exit, then kills any pane process still alive. Returns
    /// how many there were.
    pub fn stop(&mut self) -> Res<usize> {
        self.stopped = true;
        let mut c = self.connect()?;
        c.call("server.stop", json!({}))
            .map_err(|e| format!("server.stop: {e}"))?;
        // The server closes the connection as its last act.
        while c.read_message().is_ok() {}
        let code = self.wait_child(STUCK)?;
        if code != Some(0) {
            return Err(format!(
                "the server's first generation (pid {}) exited with {code:?}",
                self.child.id()
            ));
        }
        Ok(self.kill_leftovers(Duration::from_secs(5)))
    }

    /// Waits for the first generation to exit; its exit code, or an error
    /// after `timeout`.
    pub fn wait_child(&mut self, timeout: Duration) -> Res<Option<i32>> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status.code()),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    return Err(format!(
                        "the server (pid {}) did not exit within {timeout:?}",
                        self.child.id()
                    ));
                }
                Err(e) => return Err(format!("waiting for the server: {e}")),
            }
        }
    }

    /// Gives pane processes `grace` to go (they get SIGHUP from the stop),
    /// then SIGKILLs the session of each still alive; returns the count.
    pub fn kill_leftovers(&mut self, grace: Duration) -> usize {
        let deadline = Instant::now() + grace;
        while self.panes.iter().any(PaneProc::alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut killed = 0;
        for p in self.panes.iter().filter(|p| p.alive()) {
            // SAFETY: kill has no memory-safety preconditions; `alive`
            // checked the start time, so the pid was not reused.
            unsafe { libc::kill(-p.sid, libc::SIGKILL) };
            killed += 1;
        }
        self.panes.clear();
        killed
    }
}

impl Drop for PtydServer {
    fn drop(&mut self) {
        if !self.stopped {
            let stopped = self.connect().and_then(|mut c| {
                c.call("server.stop", json!({}))
                    .map_err(|e| e.to_string())?;
                while c.read_message().is_ok() {}
                Ok(())
            });
            if stopped.is_err() {
                // The first generation forwards SIGTERM to the current one.
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            }
        }
        if self.wait_child(Duration::from_secs(30)).is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // A later generation that outlived the first (it should not).
        if let Some(serving) = self.serving.take()
            && serving.alive()
        {
            // SAFETY: kill has no memory-safety preconditions; `alive`
            // checked the start time, so the pid was not reused.
            unsafe { libc::kill(serving.pid, libc::SIGKILL) };
        }
        let killed = self.kill_leftovers(Duration::from_secs(2));
        if killed > 0 {
            eprintln!("killed {killed} pane process(es) left behind");
        }
    }
}

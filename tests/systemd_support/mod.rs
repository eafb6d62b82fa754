//! A real `systemd --user` manager for tests, on machines whose PID 1 is
//! not systemd (containers, CI). It needs root, which sets up what logind
//! would for a login, then runs the manager and every command as an
//! ordinary user:
//!
//! - a private mount namespace (`unshare -m`) whose `/run/systemd` is a
//!   tmpfs holding `system/`: the manager refuses to start unless that
//!   directory says systemd booted the machine, and nothing outside the
//!   namespace must believe so;
//! - a cgroup delegated to the user, where logind's
//!   `user@UID.service` would be: the cgroup v2 tree, or on a hybrid
//!   layout the `name=systemd` v1 tree and the `unified` v2 one;
//! - `$XDG_RUNTIME_DIR` (`/run/user/UID`, 0700) and a fresh `$HOME`, so no
//!   unit, state or snapshot of an earlier run is seen.
//!
//! Commands run inside the namespace as the user (`nsenter` into the
//! manager's namespace, then `setpriv`). No D-Bus bus runs:
//! `systemctl --user` speaks to the manager's private socket. No journald
//! runs: the manager's `user.conf` sends units' output to its own stderr
//! (`DefaultStandardOutput=` and `DefaultStandardError=inherit`; otherwise
//! the manager, failing to reach journald, gives them /dev/null), a file:
//! [`UserManager::log`]. The manager's own messages are not in it (a user
//! manager without journald logs nowhere).
//!
//! Dropping the manager (a failed test too) asks it to exit, kills what is
//! left in the delegated cgroup and whatever else runs as the user, and
//! removes the cgroups, the runtime directory and the home.
//!
//! [`UserManager::start`] returns why it cannot run here (not root, no
//! systemd binary, no cgroup tree to delegate, systemd already PID 1) for
//! the test to print and skip.

#![allow(dead_code)] // Each test file uses a different part.

use super::util::{self, TIMEOUT};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The manager binary (Debian's `systemd` package).
pub const SYSTEMD: &str = "/lib/systemd/systemd";

/// The user the tests run as; created when missing. Its own name, so that
/// nothing else on the machine shares its processes or cgroup.
pub const USER: &str = "ptydsd";

pub struct UserManager {
    pub uid: u32,
    pub gid: u32,
    /// The user's `$HOME` for this run.
    pub home: PathBuf,
    /// `$XDG_RUNTIME_DIR`.
    pub runtime: PathBuf,
    /// Where the manager writes (and so every unit's output).
    pub log_path: PathBuf,
    /// The delegated cgroup directories (`user@UID.service`).
    cgroups: Vec<PathBuf>,
    /// Where the `name=systemd` (or v2) tree is mounted, for unit cgroups.
    cgroup_root: PathBuf,
    manager: Option<Child>,
    _home: tempfile::TempDir,
    /// One manager at a time: they share the user (and its cgroup and
    /// runtime directory).
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `cmd` as root, bounded; the error is its output.
fn root_run(cmd: &mut Command) -> Result<Output, String> {
    let program = format!("{:?}", cmd.get_program());
    let out = util::run_bounded(std::mem::replace(cmd, Command::new("true")), &program);
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{program} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn id_of(flag: &str) -> Result<u32, String> {
    let out = root_run(Command::new("id").args([flag, USER]))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("id {flag} {USER}: {e}"))
}

fn command_exists(name: &str) -> bool {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .any(|d| Path::new(d).join(name).exists())
}

impl UserManager {
    /// Starts the manager, or says why it cannot run on this machine.
    /// Failures past those checks (the manager does not come up) panic:
    /// where it can run, it must.
    pub fn start() -> Result<UserManager, String> {
        let one = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "needs root (it creates a user, a mount namespace and a cgroup); \
                        CI runs `cargo test` as root"
                    .into(),
            );
        }
        if !Path::new(SYSTEMD).exists() {
            return Err(format!(
                "no {SYSTEMD}: install the `systemd` package (.ci/run does)"
            ));
        }
        for tool in ["unshare", "nsenter", "setpriv", "useradd", "systemctl"] {
            if !command_exists(tool) {
                return Err(format!("no `{tool}` command"));
            }
        }
        if Path::new("/run/systemd/system").exists() {
            return Err(
                "systemd is PID 1 here: this harness runs a user manager only where \
                        none is managed by a system manager"
                    .into(),
            );
        }
        let (cgroup_root, trees) = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            (
                PathBuf::from("/sys/fs/cgroup"),
                vec![PathBuf::from("/sys/fs/cgroup")],
            )
        } else if Path::new("/sys/fs/cgroup/systemd").is_dir() {
            let mut t = vec![PathBuf::from("/sys/fs/cgroup/systemd")];
            if Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
                t.push(PathBuf::from("/sys/fs/cgroup/unified"));
            }
            (PathBuf::from("/sys/fs/cgroup/systemd"), t)
        } else {
            return Err("no cgroup v2 tree and no name=systemd hierarchy to delegate".into());
        };
        if Command::new("id")
            .arg(USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_or(true, |s| !s.success())
        {
            root_run(Command::new("useradd").args(["-M", "-s", "/bin/bash", USER]))
                .map_err(|e| format!("creating user {USER}: {e}"))?;
        }
        let (uid, gid) = (id_of("-u")?, id_of("-g")?);
        // Whatever an earlier run left (it was killed before its cleanup).
        kill_user_processes(uid, &[]);
        let rel = format!("user.slice/user-{uid}.slice/user@{uid}.service");
        let cgroups: Vec<PathBuf> = trees.iter().map(|t| t.join(&rel)).collect();
        for cg in &cgroups {
            remove_cgroup_tree(cg);
            std::fs::create_dir_all(cg).map_err(|e| format!("creating {}: {e}", cg.display()))?;
            root_run(
                Command::new("chown")
                    .args(["-R", &format!("{uid}:{gid}")])
                    .arg(cg),
            )?;
        }
        let runtime = PathBuf::from(format!("/run/user/{uid}"));
        let _ = std::fs::remove_dir_all(&runtime);
        std::fs::create_dir_all(&runtime).map_err(|e| format!("{}: {e}", runtime.display()))?;
        std::os::unix::fs::chown(&runtime, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let home_dir = tempfile::Builder::new()
            .prefix("ptyd-systemd-home.")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let home = home_dir.path().to_path_buf();
        std::os::unix::fs::chown(&home, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        // No journald runs: units' output goes to the manager's stderr, as
        // on a machine without journald whose user.conf says so.
        let conf = home.join(".config/systemd");
        std::fs::create_dir_all(&conf).map_err(|e| e.to_string())?;
        std::fs::write(
            conf.join("user.conf"),
            "[Manager]\nDefaultStandardOutput=inherit\nDefaultStandardError=inherit\n",
        )
        .map_err(|e| e.to_string())?;
        root_run(
            Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}")])
                .arg(home.join(".config")),
        )?;
        let log_path = home.join("manager.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        std::fs::create_dir_all("/run/systemd").map_err(|e| e.to_string())?;

        let mut m = UserManager {
            uid,
            gid,
            home,
            runtime,
            log_path,
            cgroups,
            cgroup_root,
            manager: None,
            _home: home_dir,
            _one: one,
        };
        m.spawn_manager(log);
        Ok(m)
    }

    /// Starts `systemd --user` in a new mount namespace, in the delegated
    /// cgroup, and waits until it runs.
    fn spawn_manager(&mut self, log: std::fs::File) {
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "--", "sh", "-c"])
            .arg(
                "set -e; uid=$1; gid=$2; shift 2
                 mount -t tmpfs -o mode=0755 tmpfs /run/systemd
                 mkdir /run/systemd/system
                 for cg in \"$@\"; do echo $$ > \"$cg/cgroup.procs\"; done
                 exec setpriv --reuid \"$uid\" --regid \"$gid\" --init-groups \"$0\" --user",
            )
            .arg(SYSTEMD)
            .arg(self.uid.to_string())
            .arg(self.gid.to_string())
            .args(&self.cgroups)
            .current_dir("/")
            .env_clear()
            .envs(user_env(&self.home, &self.runtime))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the manager's log"))
            .stderr(log);
        self.manager = Some(cmd.spawn().expect("starting unshare"));
        let m = self;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let out = m.systemctl(&["is-system-running"]);
            let state = util::stdout(&out);
            if matches!(state.trim(), "running" | "degraded") {
                break;
            }
            if let Some(status) = m.manager.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("systemd --user exited at start ({status}):\n{}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "systemd --user did not come up within {TIMEOUT:?} (state {state:?}):\n{}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends the manager as a logout would (its units stop), then starts it
    /// again as a login would: units wanted by `default.target` start.
    pub fn restart(&mut self) {
        self.stop_manager();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .expect("the manager's log");
        self.spawn_manager(log);
    }

    /// The pid of `systemd --user`.
    pub fn manager_pid(&self) -> u32 {
        self.manager.as_ref().map_or(0, |c| c.id())
    }

    /// `program args` as the user, inside the manager's mount namespace,
    /// with a login's environment (`$HOME/bin` first in `PATH`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.manager_pid().to_string(), "-m", "--"])
            .args(["setpriv", "--reuid", &self.uid.to_string()])
            .args(["--regid", &self.gid.to_string(), "--init-groups", "--"])
            .arg(program)
            .args(args)
            .current_dir("/")
            .env_clear()
            .envs(user_env(&self.home, &self.runtime))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `program args` as the user, bounded by [`TIMEOUT`].
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        util::run_bounded(self.command(program, args), &format!("{program} {args:?}"))
    }

    pub fn systemctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["--user"];
        all.extend_from_slice(args);
        self.run("systemctl", &all)
    }

    /// `systemctl --user ARGS`, which must succeed.
    #[track_caller]
    pub fn systemctl_ok(&self, args: &[&str]) -> String {
        let out = self.systemctl(args);
        assert!(
            out.status.success(),
            "systemctl --user {args:?} failed ({}): {}{}\nmanager log:\n{}",
            out.status,
            util::stdout(&out),
            util::stderr(&out),
            self.log_tail()
        );
        util::stdout(&out)
    }

    /// One property of a unit (`systemctl --user show -p NAME --value`).
    pub fn show(&self, unit: &str, property: &str) -> String {
        self.systemctl_ok(&["show", unit, "-p", property, "--value"])
            .trim()
            .to_string()
    }

    /// Every process in `unit`'s cgroup and below it.
    pub fn cgroup_pids(&self, unit: &str) -> Vec<i32> {
        let cg = self.show(unit, "ControlGroup");
        if cg.is_empty() {
            return Vec::new();
        }
        cgroup_pids(&self.cgroup_root.join(cg.trim_start_matches('/')))
    }

    /// What the manager (and every unit) wrote.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Copies `binary` to `$HOME/bin/NAME`, the user's, executable.
    pub fn install_binary(&self, binary: &Path, name: &str) -> PathBuf {
        let dir = self.home.join("bin");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(self.uid), Some(self.gid)).unwrap();
        let to = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::copy(binary, &tmp).unwrap();
        std::os::unix::fs::chown(&tmp, Some(self.uid), Some(self.gid)).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &to).unwrap();
        to
    }

    /// Writes `text` to `path` (under the home), owned by the user.
    pub fn write_file(&self, path: &Path, text: &str, mode: u32) {
        let mut dir = path.parent().unwrap().to_path_buf();
        let mut made = Vec::new();
        while !dir.exists() {
            made.push(dir.clone());
            dir.pop();
        }
        for d in made.iter().rev() {
            std::fs::create_dir(d).unwrap();
            std::os::unix::fs::chown(d, Some(self.uid), Some(self.gid)).unwrap();
        }
        let tmp = path.with_extension("tmp-write");
        std::fs::write(&tmp, text).unwrap();
        std::os::unix::fs::chown(&tmp, Some(self.uid), Some(self.gid)).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    /// Asks the manager to exit, ends it if it does not, and kills what
    /// is left in its cgroup and whatever else runs as the user.
    fn stop_manager(&mut self) {
        let Some(mut manager) = self.manager.take() else {
            return;
        };
        // Asked first, so that units stop as they would at logout.
        let mut exit = self.command("systemctl", &["--user", "exit"]);
        exit.stdout(Stdio::null()).stderr(Stdio::null());
        if let Ok(mut c) = exit.spawn() {
            if util::wait_child(&mut c, Duration::from_secs(10)).is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if util::wait_child(&mut manager, Duration::from_secs(10)).is_none() {
            let _ = manager.kill();
            let _ = manager.wait();
        }
        let mut left = Vec::new();
        for cg in &self.cgroups {
            left.extend(cgroup_pids(cg));
        }
        kill_user_processes(self.uid, &left);
    }

    fn shutdown(&mut self) {
        self.stop_manager();
        for cg in &self.cgroups {
            remove_cgroup_tree(cg);
            if let Some(slice) = cg.parent() {
                let _ = std::fs::remove_dir(slice);
                if let Some(users) = slice.parent() {
                    let _ = std::fs::remove_dir(users);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

impl Drop for UserManager {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "systemd --user's log (its last lines):\n{}",
                self.log_tail()
            );
        }
        self.shutdown();
    }
}

/// The environment of a login as the user.
fn user_env(home: &Path, runtime: &Path) -> Vec<(String, String)> {
    vec![
        ("HOME".into(), home.display().to_string()),
        ("USER".into(), USER.into()),
        ("LOGNAME".into(), USER.into()),
        ("SHELL".into(), "/bin/bash".into()),
        (
            "PATH".into(),
            format!("{}/bin:/usr/local/bin:/usr/bin:/bin", home.display()),
        ),
        ("XDG_RUNTIME_DIR".into(), runtime.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// Every pid in the cgroup `dir` and its descendants.
pub fn cgroup_pids(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

/// The uid a process runs as (its real uid), if it exists.
fn process_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// SIGKILLs `pids` and every process of `uid`, one pid at a time, until
/// none is left (bounded).
fn kill_user_processes(uid: u32, pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut left: Vec<i32> = util::all_pids()
            .into_iter()
            .filter(|p| process_uid(*p) == Some(uid))
            .filter(|p| !util::process_gone(*p))
            .collect();
        left.extend(pids.iter().filter(|p| !util::process_gone(**p)));
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for p in left {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes a cgroup directory and everything below it, deepest first.
fn remove_cgroup_tree(dir: &Path) {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
        all.push(d);
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for d in all {
        let _ = std::fs::remove_dir(&d);
    }
}

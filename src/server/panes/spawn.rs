//! Creating panes and (re)starting their processes: `pane.create`,
//! `pane.respawn`, and the starts a restore performs. A pane's process is
//! always started through [`Server::start_pane`], which is where the fd is
//! registered and the watchdogs armed.

use super::pane::{Pane, PaneSetup};
use crate::model::PaneId;
use crate::model::{CommandSpec, Direction};
use crate::protocol::events::Event;
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use crate::server::clients::connection::ConnId;
use crate::server::timers::TimerKind;
use crate::server::{Server, Source};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a new pane goes in the workspace tree.
enum Placement {
    Split {
        target: u64,
        direction: Direction,
        ratio: f32,
    },
    NewTab {
        workspace: Option<crate::model::WorkspaceId>,
        name: Option<String>,
    },
}

fn invalid(msg: String) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, msg)
}

impl Server {
    pub(in crate::server) fn pane_create(
        &mut self,
        conn: ConnId,
        mut req: methods::PaneCreate,
    ) -> Result<Option<Value>, RpcError> {
        let (command, cwd) = self.checked_spec(&mut req)?;
        let placement = self.placement(&mut req)?;
        self.check_fds_for_pane()?;
        let (cols, rows) = crate::pty::clamp_size(
            u32::from(req.cols.unwrap_or(crate::server::defaults::COLS)),
            u32::from(req.rows.unwrap_or(crate::server::defaults::ROWS)),
        );
        let id = self.panes.next_id();
        // A counter restored at the end of the id range has no id left: an
        // error, never an id handed out twice (or a wrapped counter).
        let Some(next_id) = PaneId::new(id).next() else {
            return Err(RpcError::new(
                ErrorCode::Internal,
                format!("pane ids are used up (the counter is at {id})"),
            ));
        };
        // A client that attaches to its new pane is an attaching client
        // (`ptyd new`), before its pane starts with what it brought.
        if req.attach {
            self.note_attaching_env(req.client_env.as_ref());
        }
        let refresh = (req.client_env.as_ref()).is_none_or(|env| self.env_from_own_pane(env));
        let token = self.alloc_token(Source::Pane(id));
        let setup = PaneSetup {
            id,
            name: req.name,
            command: command.clone(),
            cwd,
            env: req.env,
            client_env: req.client_env.as_ref().map(super::environment::filtered),
            cols,
            rows,
            timeout: req.timeout_ms.map(Duration::from_millis),
            idle_timeout: req.idle_timeout_ms.map(Duration::from_millis),
            restore: req.restore.unwrap_or(self.config.restore),
            resume: req.resume,
            term: self.config.term.clone(),
            shell_integration: req.shell_integration.unwrap_or(true),
        };
        self.panes
            .insert(id, Box::new(Pane::new(setup, token, "starting".into())));
        if let Err(e) = self.start_pane(id, &command, refresh) {
            self.panes.remove(&id);
            self.sources.remove(&token);
            return Err(e);
        }
        // Only a pane that started takes an id: ids are never reused, and
        // failed attempts do not leave holes.
        self.panes.advance_next_id(next_id.get());
        if req.attach {
            self.begin_attachment(
                conn,
                id,
                req.read_only,
                (cols, rows),
                req.alt_screen,
                req.when_behind,
            );
        }
        let info = self.pane_info(id);
        self.emit(Event::PaneCreated {
            pane: PaneId::new(id),
            info: info.clone(),
        });
        // After `pane.created`: the tree's events name the pane.
        self.place_pane(id, placement);
        // As `attach` does, so every `client.detached` has its `client.attached`.
        if req.attach
            && let Some(peer_pid) = self.conns.get(&conn).map(|c| c.peer.pid)
        {
            self.emit(Event::ClientAttached {
                pane: PaneId::new(id),
                client: conn,
                pid: peer_pid,
                read_only: req.read_only,
            });
        }
        Ok(Some(info))
    }

    /// What a new pane runs and where, taken from `req` once every
    /// field a client chose is checked (name, command, tab name, cwd,
    /// environment, resume).
    fn checked_spec(
        &self,
        req: &mut methods::PaneCreate,
    ) -> Result<(CommandSpec, PathBuf), RpcError> {
        if let Some(name) = &req.name {
            self.check_pane_name(name, None)?;
        }
        let command = match (req.argv.take(), req.shell.take()) {
            (Some(_), Some(_)) => {
                return Err(invalid("give either argv or shell, not both".into()));
            }
            (Some(argv), None) => CommandSpec::Argv(argv),
            (None, Some(shell)) => CommandSpec::Shell(shell),
            (None, None) => CommandSpec::LoginShell,
        };
        crate::validate::command(&command).map_err(invalid)?;
        if let Some(tab) = &req.tab_name {
            crate::validate::label(tab).map_err(|e| invalid(format!("tab_name {e}")))?;
        }
        let cwd = match req.cwd.take() {
            Some(dir) => PathBuf::from(dir),
            None => home_dir(),
        };
        if !cwd.is_absolute() {
            return Err(invalid(format!(
                "cwd {} is not an absolute path",
                cwd.display()
            )));
        }
        if !cwd.is_dir() {
            return Err(invalid(format!(
                "cwd {} does not exist or is not a directory",
                cwd.display()
            )));
        }
        crate::validate::env(&req.env).map_err(invalid)?;
        Self::check_client_env(req.client_env.as_ref())?;
        if let Some(resume) = &req.resume {
            crate::validate::resume(resume).map_err(invalid)?;
        }
        Ok((command, cwd))
    }

    /// Where a new pane goes: split from a pane (the current one when only
    /// a direction is given), else a new tab.
    fn placement(&self, req: &mut methods::PaneCreate) -> Result<Placement, RpcError> {
        // A direction without a pane to split: the current pane.
        let split = match (req.split.take(), req.direction) {
            (Some(target), _) => Some(target),
            (None, Some(_)) if req.workspace.is_none() => Some(self.current_pane()?.to_string()),
            (None, _) => None,
        };
        Ok(match split {
            Some(target) => {
                if req.workspace.is_some() {
                    return Err(invalid("give either split or workspace, not both".into()));
                }
                let ratio = req.ratio.unwrap_or(0.5);
                if !(ratio > 0.0 && ratio < 1.0) {
                    return Err(invalid(format!(
                        "ratio {ratio} must be between 0 and 1 (exclusive)"
                    )));
                }
                let target = self.resolve_target(&target)?;
                self.check_split_depth(PaneId::new(target))?;
                Placement::Split {
                    target,
                    direction: req.direction.unwrap_or(Direction::Horizontal),
                    ratio,
                }
            }
            None => {
                let workspace = req
                    .workspace
                    .as_deref()
                    .map(|w| self.resolve_workspace(w))
                    .transpose()?;
                Placement::NewTab {
                    workspace,
                    name: req.tab_name.take(),
                }
            }
        })
    }

    /// A valid pane name no other pane than `renamed` has.
    fn check_pane_name(&self, name: &str, renamed: Option<u64>) -> Result<(), RpcError> {
        crate::validate::name(name).map_err(invalid)?;
        if let Some(other) =
            (self.panes.values()).find(|p| p.name() == Some(name) && Some(p.id()) != renamed)
        {
            return Err(invalid(format!(
                "name {name:?} is already used by pane {}; pick another or remove that pane",
                other.public_id()
            )));
        }
        Ok(())
    }

    /// `pane.rename`: the pane's new name, saved with the snapshot.
    pub(in crate::server) fn pane_rename(
        &mut self,
        req: methods::Rename,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_target(&req.target)?;
        self.check_pane_name(&req.name, Some(id))?;
        if let Some(pane) = self.panes.get_mut(&id) {
            pane.rename(req.name.clone());
        }
        self.mark_dirty();
        self.emit(Event::PaneRenamed {
            pane: PaneId::new(id),
            name: req.name,
        });
        Ok(Some(self.pane_info(id)))
    }

    /// Refuses a split that would nest deeper than
    /// [`crate::workspace::layout::MAX_SPLIT_DEPTH`], before anything starts.
    fn check_split_depth(&self, target: PaneId) -> Result<(), RpcError> {
        use crate::workspace::layout::MAX_SPLIT_DEPTH;
        let Some(tab) = self.tree.tab_of(target) else {
            return Ok(());
        };
        let depth = (self.tree.tabs.get(&tab))
            .and_then(|t| t.layout.depth_of(target))
            .unwrap_or(0);
        if depth >= MAX_SPLIT_DEPTH {
            return Err(invalid(format!(
                "pane {target} is already {depth} splits deep in tab {tab}, the most a tab nests \
                 ({MAX_SPLIT_DEPTH}); split a pane nearer the top of the tab, or open a new tab \
                 (`ptyd new` without --split)"
            )));
        }
        Ok(())
    }

    fn place_pane(&mut self, id: u64, placement: Placement) {
        let before = self.tree.clone();
        match placement {
            Placement::Split {
                target,
                direction,
                ratio,
            } => {
                let (target, id) = (PaneId::new(target), PaneId::new(id));
                self.tree.split(target, id, direction, ratio);
            }
            Placement::NewTab { workspace, name } => {
                let ws = workspace.or_else(|| self.tree.default_workspace());
                let name = name.unwrap_or_else(|| {
                    self.panes
                        .get(&id)
                        .map(default_tab_name)
                        .unwrap_or_default()
                });
                // Only with workspace or tab ids used up is there no tab;
                // a restore then opens one for the pane.
                if let Some(ws) = ws {
                    self.tree.add_tab(ws, name, PaneId::new(id));
                }
            }
        }
        self.tree_changed(&before);
    }

    /// Starts `command` in pane `id` (which must not be running) on a new
    /// PTY of the pane's size, in its cwd, with its environment (`refresh`:
    /// see `Server::base_env`).
    pub(in crate::server) fn start_pane(
        &mut self,
        id: u64,
        command: &CommandSpec,
        refresh: bool,
    ) -> Result<(), RpcError> {
        let Some(pane) = self.panes.get(&id) else {
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("no pane {}", PaneId::new(id)),
            ));
        };
        let (program, mut args) = exec_form(command, &self.pane_shell());
        let mut env = self.child_env(id, pane, refresh);
        let injected = match &self.shell {
            Some(shell) if pane.shell_integration() && self.config.shell_integration => {
                shell.inject(&program, &mut args, &mut env)
            }
            _ => None,
        };
        let spec = crate::pty::SpawnSpec {
            program,
            args,
            cwd: pane.cwd().to_path_buf(),
            env,
            cols: pane.cols(),
            rows: pane.rows(),
        };
        let (master, child) = crate::pty::spawn(&spec, self.pane_wakes.wake_for(id))
            .map_err(|e| RpcError::new(ErrorCode::SpawnFailed, e.to_string()))?;
        let now = Instant::now();
        let pane = self.panes.get_mut(&id).expect("checked above");
        if let Err(e) = pane.start(self.poll.registry(), master, child, now) {
            // The master is gone with the failed start (on Windows its job
            // with it); on Unix the session is still there to kill.
            crate::pty::signal_tree(None, &child, crate::sys::SIGKILL);
            return Err(RpcError::new(
                ErrorCode::Internal,
                format!("registering the pane's PTY: {e}"),
            ));
        }
        pane.set_shell_injected(injected);
        let pane_id = pane.id();
        self.keeper_track_pane(pane_id);
        let pane = self.panes.get_mut(&id).expect("checked above");
        if let Some(at) = pane.timeout_at() {
            self.timers.add(at, TimerKind::PaneTimeout(id, pane.run()));
        }
        if let Some(idle) = pane.idle_timeout() {
            self.timers
                .add(now + idle, TimerKind::PaneIdle(id, pane.run()));
        }
        let msg = format!(
            "pane {} pid {} ({})",
            pane.public_id(),
            child.pid,
            crate::server::diagnostics::describe_command(command)
        );
        self.log.log("pane_started", &msg);
        Ok(())
    }

    /// `pane.respawn`: starts a held or exited pane's command again, keeping
    /// its screen.
    pub(in crate::server) fn respawn(&mut self, id: u64) -> Result<Option<Value>, RpcError> {
        let pane = &self.panes[&id];
        if pane.is_running() {
            return Err(RpcError::new(
                ErrorCode::PaneRunning,
                format!("pane {} is still running; kill it first", pane.public_id()),
            ));
        }
        // A command from a snapshot the restore could not use (an empty
        // argv, say) is refused here too, before anything is torn down.
        if let Err(e) = crate::validate::command(pane.command()) {
            return Err(RpcError::new(
                ErrorCode::SpawnFailed,
                format!(
                    "pane {} cannot be respawned: {e}; remove it and create a new pane",
                    pane.public_id()
                ),
            ));
        }
        if !pane.cwd().is_dir() {
            let fallback = existing_cwd(pane.cwd());
            let pane = self.panes.get_mut(&id).expect("present");
            pane.move_to(fallback);
        }
        // The last run's master (a background process may still hold its
        // slave) goes now, out of the poll first, even if the start fails.
        if let Some(pane) = self.panes.get_mut(&id) {
            pane.end_output(self.poll.registry());
        }
        let command = self.panes[&id].command().clone();
        // The creator's values of `update_environment` may be from a login
        // long gone; the last attaching client's are the live ones.
        self.start_pane(id, &command, true)?;
        let info = self.pane_info(id);
        self.emit(Event::PaneRespawned {
            pane: PaneId::new(id),
            info: info.clone(),
        });
        Ok(Some(info))
    }

    /// The shell of new panes: the config's, else the user's.
    fn pane_shell(&self) -> OsString {
        self.config
            .shell
            .clone()
            .map_or_else(user_shell, PathBuf::into_os_string)
    }

    /// The environment of a new pane's process.
    fn child_env(&self, id: u64, pane: &Pane, refresh: bool) -> Vec<(OsString, OsString)> {
        let extra = pane.env();
        let mut env = self.base_env(pane.client_env(), refresh);
        env.insert("TERM".into(), self.config.term_name.clone().into());
        // What programs in the pane start as "the shell" is the one the
        // pane runs, when the config names one.
        if let Some(shell) = &self.config.shell {
            env.insert("SHELL".into(), shell.into());
        }
        env.insert("PTYD_PANE_ID".into(), PaneId::new(id).to_string().into());
        env.insert("PTYD_SOCKET".into(), self.paths.socket().into());
        // `PTYD_*` is stripped from the base, so without this a `ptyd` command run in
        // the pane would talk to the default namespace, not to this server.
        env.insert("PTYD_NAMESPACE".into(), self.paths.namespace.clone().into());
        for (k, v) in extra {
            env.insert(k.into(), v.into());
        }
        // A pane the tmux front made (its creator gave it `TMUX`) names
        // itself as tmux's panes do, for the tools that run inside it.
        if extra.contains_key("TMUX") {
            env.insert("TMUX_PANE".into(), format!("%{id}").into());
        }
        env.into_iter().collect()
    }
}

pub(in crate::server) fn default_tab_name(pane: &Pane) -> String {
    if let Some(name) = pane.name() {
        return name.to_string();
    }
    match pane.command() {
        CommandSpec::Argv(argv) => {
            let program = argv.first().map_or("", String::as_str);
            Path::new(program)
                .file_name()
                .map_or_else(|| program.to_string(), |n| n.to_string_lossy().into_owned())
        }
        CommandSpec::Shell(_) => "sh".into(),
        CommandSpec::LoginShell => "shell".into(),
    }
}

pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| Path::new(h).is_dir())
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// `dir`, else its nearest existing ancestor, else `$HOME`, else `/`.
pub fn existing_cwd(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|a| a.is_dir() && a.parent().is_some())
        .map(Path::to_path_buf)
        .unwrap_or_else(home_dir)
}

/// The program and arguments of a command: argv as given, a shell string
/// through `shell -c`, or `shell` as a login shell.
pub fn exec_form(command: &CommandSpec, shell: &OsString) -> (OsString, Vec<OsString>) {
    match command {
        // An empty argv (refused by `validate::command`, so only from a
        // path that forgot to check) fails to start; it must not panic.
        CommandSpec::Argv(argv) => match argv.split_first() {
            Some((program, args)) => (program.into(), args.iter().map(OsString::from).collect()),
            None => (OsString::new(), Vec::new()),
        },
        CommandSpec::Shell(script) => crate::pty::shell_command(shell, script),
        CommandSpec::LoginShell => crate::pty::login_shell(shell),
    }
}

fn user_shell() -> OsString {
    crate::sys::user_shell()
}

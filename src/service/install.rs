//! `ptyd service install|uninstall`: the systemd user units of a namespace,
//! written with the path of the binary actually running.
//!
//! The text of both units is produced here and nowhere else: the copies
//! shipped in `packaging/systemd/` are this output for `/usr/bin/ptyd` (a
//! test keeps them current), so what a distribution package installs and
//! what `service install` writes differ only in the binary's path.
//!
//! Unit names: `ptyd.service` and `ptyd.socket` for the default namespace,
//! `ptyd-NS.service` and `ptyd-NS.socket` for namespace `NS` (namespace
//! names are valid in unit names: `paths::validate_namespace`).

use crate::paths::DEFAULT_NAMESPACE;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary the shipped units name: where a distribution package puts it.
pub const PACKAGED_BINARY: &str = "/usr/bin/ptyd";

/// The units of one namespace.
pub struct Units {
    pub service_name: String,
    pub socket_name: String,
    pub service: String,
    pub socket: String,
}

/// The unit names for `namespace`, without the `.service`/`.socket` suffix.
pub fn unit_stem(namespace: &str) -> String {
    if namespace == DEFAULT_NAMESPACE {
        "ptyd".to_string()
    } else {
        format!("ptyd-{namespace}")
    }
}

/// Both units for `namespace`, running `binary`.
pub fn units(binary: &Path, namespace: &str) -> Units {
    let stem = unit_stem(namespace);
    let exe = exec_quote(&binary.to_string_lossy());
    // `-L` always, even for the default namespace: a PTYD_NAMESPACE imported
    // into the user manager's environment must not make the service serve a
    // different namespace than its socket unit listens for.
    let ns = exec_quote(namespace);
    let reload = if namespace == DEFAULT_NAMESPACE {
        "ptyd".to_string()
    } else {
        stem.clone()
    };
    let service = format!(
        "\
# ptyd as a systemd user service, namespace {namespace:?}.
# Written by `ptyd service install`, which names the binary it runs (the
# copy in packaging/systemd/ names /usr/bin/ptyd). See man:ptyd(1).
#
# Upgrade the binary with `systemctl --user reload {reload}`: that runs
# `ptyd upgrade`, a live upgrade in which every pane keeps running (same
# processes, no hangup). A reload that fails (the new binary cannot serve)
# exits non-zero and the old server serves on with every pane; the unit
# stays active and its status line says what failed. Never use
# `systemctl --user restart {reload}` to upgrade: a restart stops the
# service first, and stopping a service kills every process left in its
# cgroup, which is every pane's program (a restart then restores the
# panes from the last snapshot, as after a reboot).
#
# Without `loginctl enable-linger $USER` your user manager, and this
# service with every pane in it, stops when your last session ends (logout,
# closed SSH connection) and starts only at your next login. Lingering
# starts the user manager at boot and keeps it running without a session.
[Unit]
Description=ptyd: terminals that survive upgrades and reboots (namespace {namespace})
Documentation=man:ptyd(1)
# The socket unit holds the listening socket; the server adopts it
# (LISTEN_FDS), so clients can connect while the service (re)starts.
Requires={stem}.socket
After={stem}.socket

[Service]
# Not Type=notify-reload (systemd 253 and later, refused by older ones):
# that makes a reload a SIGHUP to the main PID instead of ExecReload=.
# The serving process sends RELOADING=1 and READY=1 around an upgrade, so
# `systemctl --user reload` waits for the upgrade to end either way.
Type=notify
# The serving process is a descendant of the main PID (the keeper, which
# holds every pane's terminal and replaces a crashed server), so it must be
# allowed to notify.
NotifyAccess=all
ExecStart={exe} -L {ns} server
ExecReload={exe} -L {ns} upgrade
ExecStop={exe} -L {ns} stop
TimeoutStopSec=15
Restart=on-failure
RestartSec=1
# Exit 3: another ptyd server (started outside systemd) holds the
# namespace. Retrying cannot help; `ptyd stop`, then start the service.
RestartPreventExitStatus=3
# A process killed for lack of memory (a runaway program in one pane)
# must not make systemd stop the service and so end every pane, which the
# default, OOMPolicy=stop, does. ptyd raises the oom_score_adj of every
# pane's program by 500 so that the kernel picks one of them before the
# keeper or the serving process; OOMScoreAdjust= stays unset, since a user
# manager can only raise it (making ptyd likelier to be picked than the
# user's other services), never lower it.
OOMPolicy=continue
# The keeper holds 3 fds per pane and raises its own soft limit to the
# hard one. 524288 is the hard limit systemd gives user managers by
# default (under a manager with less, systemd gives what it has); the soft
# 1024 is what pane programs inherit, as select(2) needs.
LimitNOFILE=1024:524288
# Opt-in: panes that survive the keeper itself being killed (the OOM
# killer, `kill -9` of the main PID). In a drop-in
# (`systemctl --user edit {stem}`), then `systemctl --user reload {reload}`:
#   [Service]
#   FileDescriptorStoreMax=4096
#   KillMode=process
# The keeper then stores a copy of every pane's terminal in systemd's fd
# store (3 fds per pane, 6 more), and the restart takes the panes over,
# no output lost. systemd 254 and later tell the keeper the store's
# size; older ones do not, so it stores one fd to find out at its start
# and at each upgrade (without the drop-in, the manager logs a warning
# that it refused it).
# What KillMode=process gives up: stopping or restarting the service no
# longer kills what is left in its cgroup (a program that ignores the
# hangup, jobs a pane started in the background), so they can linger.

[Install]
WantedBy=default.target
"
    );
    let socket = format!(
        "\
# The listening socket of the ptyd user service, namespace {namespace:?}.
# Written by `ptyd service install` (see man:ptyd(1)). The path is the one
# ptyd itself uses: $XDG_RUNTIME_DIR/ptyd/NAMESPACE/ptyd.sock, where %t is
# $XDG_RUNTIME_DIR. The directories must be private to you (ptyd refuses
# them otherwise), the socket too: ptyd also checks every peer's uid.
[Unit]
Description=ptyd socket (namespace {namespace})
Documentation=man:ptyd(1)

[Socket]
ListenStream=%t/ptyd/{namespace}/ptyd.sock
SocketMode=0600
DirectoryMode=0700
RemoveOnStop=yes

[Install]
WantedBy=sockets.target
"
    );
    Units {
        service_name: format!("{stem}.service"),
        socket_name: format!("{stem}.socket"),
        service,
        socket,
    }
}

/// Quotes one word of an `Exec*=` line: `%` and `$` would be expanded by
/// systemd, and whitespace or quotes would split the word.
fn exec_quote(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    if word.is_empty() || word.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

/// Where user units go: `$XDG_CONFIG_HOME/systemd/user`, else
/// `~/.config/systemd/user`.
pub fn user_unit_dir() -> Result<PathBuf, String> {
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => Ok(PathBuf::from(dir).join("systemd/user")),
        _ => match std::env::var_os("HOME") {
            Some(home) => Ok(PathBuf::from(home).join(".config/systemd/user")),
            None => Err("neither XDG_CONFIG_HOME nor HOME is set: no place for user units".into()),
        },
    }
}

/// The socket unit of `namespace`, if one is installed where the user
/// manager reads units: then the server belongs to systemd, and clients ask
/// systemd to start it rather than starting one outside its cgroup.
pub fn installed_socket_unit(namespace: &str) -> Option<String> {
    let name = format!("{}.socket", unit_stem(namespace));
    let mut dirs: Vec<PathBuf> = user_unit_dir().into_iter().collect();
    dirs.extend(["/etc/systemd/user", "/usr/lib/systemd/user"].map(PathBuf::from));
    dirs.iter().any(|d| d.join(&name).exists()).then_some(name)
}

/// The binary this process runs, as a path systemd can start later.
pub fn running_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    if exe.to_string_lossy().ends_with(" (deleted)") {
        return Err(format!(
            "this binary ({}) was replaced or deleted while running; run the installed one",
            exe.display()
        ));
    }
    exe.canonicalize()
        .map_err(|e| format!("resolving {}: {e}", exe.display()))
}

/// Runs `systemctl --user ARGS`, returning its error output on failure.
pub fn systemctl(args: &[&str]) -> Result<(), String> {
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .map_err(|e| format!("running systemctl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`systemctl --user {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Writes `text` to `path` through a temporary file and a rename, so a
/// manager reading the directory never sees half a unit.
pub fn write_unit(path: &Path, text: &str) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io::Error::new(e.kind(), format!("renaming to {}: {e}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_are_quoted_for_systemd() {
        assert_eq!(exec_quote("/usr/bin/ptyd"), "/usr/bin/ptyd");
        assert_eq!(exec_quote("/home/a b/ptyd"), "\"/home/a b/ptyd\"");
        assert_eq!(exec_quote("/x/100%/$HOME"), "/x/100%%/$$HOME");
    }

    #[test]
    fn namespaces_get_their_own_units() {
        let u = units(Path::new("/usr/bin/ptyd"), "work");
        assert_eq!(u.service_name, "ptyd-work.service");
        assert!(u.service.contains("Requires=ptyd-work.socket"));
        assert!(u.service.contains("ExecStart=/usr/bin/ptyd -L work server"));
        assert!(u.socket.contains("ListenStream=%t/ptyd/work/ptyd.sock"));
    }

    /// The shipped units are this module's output for the packaged path.
    #[test]
    fn shipped_units_are_current() {
        let u = units(Path::new(PACKAGED_BINARY), DEFAULT_NAMESPACE);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/systemd");
        for (name, text) in [(&u.service_name, &u.service), (&u.socket_name, &u.socket)] {
            if std::env::var_os("PTYD_BLESS").is_some() {
                std::fs::write(dir.join(name), text).unwrap();
            }
            let shipped = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            assert!(
                shipped == *text,
                "packaging/systemd/{name} is stale; regenerate the shipped files with \
                 `PTYD_BLESS=1 cargo test --lib`"
            );
        }
    }
}

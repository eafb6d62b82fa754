//! Shell integration: the scripts that make bash, zsh and fish report their
//! prompts, commands (with exit status) and working directory to the
//! terminal (OSC 133 A/B/C/D and OSC 7), and how a pane's shell is started
//! so it loads them without any change to the user's files.
//!
//! The scripts are embedded in the binary and written at server start to a
//! private directory (0700, [`install`]). A shell ptyd starts as an
//! interactive shell (no script, no `-c`) is then redirected, as kitty,
//! ghostty and VS Code do it:
//!
//! - bash: `bash --rcfile DIR/bash/bashrc`. That file sources what bash
//!   would have read (`~/.bashrc`, or for a login shell `/etc/profile` and
//!   the first of `~/.bash_profile`, `~/.bash_login`, `~/.profile`: bash
//!   reads no rcfile as a login shell, so the login is emulated), then the
//!   hooks.
//! - zsh: `ZDOTDIR=DIR/zsh`, whose `.zshenv` puts the user's `ZDOTDIR` back
//!   (zsh then reads their `.zprofile`, `.zshrc`, `.zlogin` as usual), runs
//!   their `.zshenv` and loads the hooks.
//! - fish: `DIR` first in `XDG_DATA_DIRS`, whose `fish/vendor_conf.d` script
//!   puts the variable back and loads the hooks.
//!
//! `ptyd shell-init SHELL` prints the hooks alone ([`Shell::hooks`]), for
//! shells ptyd did not start (ssh inside a pane).

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const BASH_HOOKS: &str = include_str!("ptyd.bash");
const BASH_RC: &str = include_str!("bashrc");
const ZSH_HOOKS: &str = include_str!("ptyd.zsh");
const ZSH_ENV: &str = include_str!("zshenv");
const FISH_HOOKS: &str = include_str!("ptyd.fish");
const FISH_VENDOR: &str = include_str!("vendor.fish");

/// Where each template names the directory its shell's files are in.
const DIR_PLACEHOLDER: &str = "@PTYD_SHELL_DIR@";

/// Environment variables the start-up files read once and unset.
pub const BASH_LOGIN_ENV: &str = "PTYD_BASH_LOGIN";
pub const ZSH_ZDOTDIR_ENV: &str = "PTYD_ZSH_ZDOTDIR";
pub const FISH_DATA_DIRS_ENV: &str = "PTYD_FISH_XDG_DATA_DIRS";

/// fish's own default when `XDG_DATA_DIRS` is unset (the XDG spec's).
const DEFAULT_XDG_DATA_DIRS: &str = "/usr/local/share:/usr/share";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

    pub fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
            Shell::Fish => "fish",
        }
    }

    /// The shell a name or program path is (`bash`, `/usr/bin/zsh`, `-fish`).
    pub fn from_program(program: &OsStr) -> Option<Shell> {
        let base = Path::new(program).file_name()?.to_str()?;
        let base = base.strip_prefix('-').unwrap_or(base);
        Shell::ALL.into_iter().find(|s| s.name() == base)
    }

    /// The hooks alone, as `ptyd shell-init` prints them: source them from
    /// an rc file or eval them in a running shell.
    pub fn hooks(self) -> &'static str {
        match self {
            Shell::Bash => BASH_HOOKS,
            Shell::Zsh => ZSH_HOOKS,
            Shell::Fish => FISH_HOOKS,
        }
    }
}

/// The installed scripts, ready to be injected into shells.
#[derive(Debug, Clone)]
pub struct Installed {
    dir: PathBuf,
}

/// Writes every script under `dir` (created 0700; files 0600, replaced
/// atomically so a shell starting meanwhile reads a whole file).
pub fn install(dir: &Path) -> io::Result<Installed> {
    // bash, zsh and fish on Windows run in environments of their own
    // (MSYS2, Cygwin, WSL) whose paths these scripts cannot name; panes
    // there run cmd.exe by default.
    if cfg!(windows) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "shell integration is for bash, zsh and fish on Unix",
        ));
    }
    let text = dir.to_str().filter(|s| !s.contains(['\'', '\\', '\n']));
    if text.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} cannot be quoted for every shell (a quote, backslash or newline in it)",
                dir.display()
            ),
        ));
    }
    let quoted = |sub: &str| format!("'{}'", dir.join(sub).display());
    let files: [(&str, String); 6] = [
        ("bash/ptyd.bash", BASH_HOOKS.to_string()),
        (
            "bash/bashrc",
            BASH_RC.replace(DIR_PLACEHOLDER, &quoted("bash")),
        ),
        ("zsh/ptyd.zsh", ZSH_HOOKS.to_string()),
        (
            "zsh/.zshenv",
            ZSH_ENV.replace(DIR_PLACEHOLDER, &quoted("zsh")),
        ),
        ("fish/ptyd.fish", FISH_HOOKS.to_string()),
        (
            "fish/vendor_conf.d/ptyd-shell-integration.fish",
            FISH_VENDOR.replace(DIR_PLACEHOLDER, &quoted("fish")),
        ),
    ];
    crate::paths::ensure_private_dir(dir)?;
    for (rel, content) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            crate::paths::ensure_private_dir(parent)?;
        }
        write_atomic(&path, content.as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))?;
    }
    Ok(Installed {
        dir: dir.to_path_buf(),
    })
}

fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = crate::sys::trust::private_file(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
    )
    .open(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// A process's environment as a list, as `pty::SpawnSpec` takes it.
pub type Env = Vec<(OsString, OsString)>;

fn env_get<'a>(env: &'a Env, key: &str) -> Option<&'a OsString> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn env_set(env: &mut Env, key: &str, value: impl Into<OsString>) {
    let value = value.into();
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key.into(), value)),
    }
}

impl Installed {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rewrites how a pane's program starts so that, if it is bash, zsh or
    /// fish started as an interactive shell (no arguments but `-l`,
    /// `--login`, `-i`), it loads the integration. Anything else (a script,
    /// `-c`, other options, other programs) is left exactly as it was.
    /// Returns the shell it injected into.
    pub fn inject(
        &self,
        program: &OsStr,
        args: &mut Vec<OsString>,
        env: &mut Env,
    ) -> Option<Shell> {
        let shell = Shell::from_program(program)?;
        let interactive_only = args
            .iter()
            .all(|a| matches!(a.to_str(), Some("-l" | "--login" | "-i")));
        if !interactive_only {
            return None;
        }
        let login = args
            .iter()
            .any(|a| matches!(a.to_str(), Some("-l" | "--login")));
        match shell {
            Shell::Bash => {
                // `--rcfile` is read only by a non-login interactive shell.
                let mut new_args: Vec<OsString> = vec![
                    "--rcfile".into(),
                    self.dir.join("bash/bashrc").into_os_string(),
                ];
                if args.iter().any(|a| a == "-i") {
                    new_args.push("-i".into());
                }
                *args = new_args;
                if login {
                    env_set(env, BASH_LOGIN_ENV, "1");
                }
            }
            Shell::Zsh => {
                if let Some(old) = env_get(env, "ZDOTDIR").cloned() {
                    env_set(env, ZSH_ZDOTDIR_ENV, old);
                }
                env_set(env, "ZDOTDIR", self.dir.join("zsh"));
            }
            Shell::Fish => {
                let old = env_get(env, "XDG_DATA_DIRS").cloned();
                let rest = old
                    .clone()
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| DEFAULT_XDG_DATA_DIRS.into());
                if let Some(old) = old {
                    env_set(env, FISH_DATA_DIRS_ENV, old);
                }
                // fish looks in `ENTRY/fish/vendor_conf.d` of each entry.
                let mut dirs = self.dir.clone().into_os_string();
                dirs.push(":");
                dirs.push(rest);
                env_set(env, "XDG_DATA_DIRS", dirs);
            }
        }
        Some(shell)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn installed() -> (tempfile::TempDir, Installed) {
        let tmp = tempfile::tempdir().unwrap();
        let inst = install(&tmp.path().join("shell")).unwrap();
        (tmp, inst)
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_interactive_shells_are_injected() {
        let (_tmp, inst) = installed();
        for (program, list) in [
            ("bash", &["-c", "echo"][..]),
            ("bash", &["script.sh"][..]),
            ("zsh", &["--norcs"][..]),
            ("sh", &[][..]),
            ("vim", &[][..]),
        ] {
            let mut a = args(list);
            let mut env = Env::new();
            assert_eq!(inst.inject(program.as_ref(), &mut a, &mut env), None);
            assert_eq!(a, args(list), "{program} {list:?} changed");
            assert!(env.is_empty());
        }
    }

    #[test]
    fn bash_login_gets_the_rcfile_and_the_login_flag() {
        let (_tmp, inst) = installed();
        let mut a = args(&["-l"]);
        let mut env = Env::new();
        let shell = inst.inject("/bin/bash".as_ref(), &mut a, &mut env);
        assert_eq!(shell, Some(Shell::Bash));
        assert_eq!(a[0], "--rcfile");
        assert!(Path::new(&a[1]).is_file());
        assert_eq!(a.len(), 2);
        assert_eq!(env_get(&env, BASH_LOGIN_ENV).unwrap(), "1");
        let rc = std::fs::read_to_string(&a[1]).unwrap();
        assert!(!rc.contains(DIR_PLACEHOLDER), "{rc}");
    }

    #[test]
    fn zsh_and_fish_keep_the_users_variables_to_restore() {
        let (_tmp, inst) = installed();
        let mut env: Env = vec![("ZDOTDIR".into(), "/home/me/.zsh".into())];
        inst.inject("zsh".as_ref(), &mut Vec::new(), &mut env);
        assert_eq!(env_get(&env, ZSH_ZDOTDIR_ENV).unwrap(), "/home/me/.zsh");
        assert_eq!(
            Path::new(env_get(&env, "ZDOTDIR").unwrap()),
            inst.dir().join("zsh")
        );
        let mut env = Env::new();
        inst.inject("fish".as_ref(), &mut args(&["-l"]), &mut env);
        assert!(env_get(&env, FISH_DATA_DIRS_ENV).is_none());
        let dirs = env_get(&env, "XDG_DATA_DIRS").unwrap().to_str().unwrap();
        assert!(dirs.ends_with(":/usr/local/share:/usr/share"), "{dirs}");
        assert!(
            Path::new(dirs.split(':').next().unwrap())
                .join("fish/vendor_conf.d/ptyd-shell-integration.fish")
                .is_file()
        );
    }

    #[test]
    fn a_directory_that_cannot_be_quoted_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(install(&tmp.path().join("it's")).is_err());
    }
}

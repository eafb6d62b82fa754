//! Where a namespace keeps its socket, lock and state, and the checks that
//! make those places safe to trust.
//!
//! Layout for namespace `NS`:
//! - runtime: `$XDG_RUNTIME_DIR/ptyd/NS/` (else `/tmp/ptyd-UID/NS/`), holding
//!   `ptyd.sock` and `ptyd.lock`. Every directory we create is 0700, and one
//!   we find owned by another user or open to group/others is refused: a
//!   socket in such a place could be swapped under us.
//! - state: `$XDG_STATE_HOME/ptyd/NS/` (else `~/.local/state/ptyd/NS/`),
//!   holding `diagnostics.jsonl` and, later, snapshots.

use crate::sys::trust;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const DEFAULT_NAMESPACE: &str = "default";

/// All the paths of one namespace. Two namespaces share no file.
#[derive(Debug, Clone)]
pub struct NamespacePaths {
    pub namespace: String,
    pub runtime_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl NamespacePaths {
    /// Resolves paths for `namespace` from the environment, without touching
    /// the filesystem.
    pub fn resolve(namespace: &str) -> Result<NamespacePaths, String> {
        validate_namespace(namespace)?;
        let runtime_base = match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir).join("ptyd"),
            _ => crate::sys::default_runtime_base(),
        };
        let state_base = match std::env::var_os("XDG_STATE_HOME") {
            Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir).join("ptyd"),
            _ => crate::sys::default_state_base().unwrap_or_else(|| runtime_base.join("state")),
        };
        Ok(NamespacePaths {
            namespace: namespace.to_string(),
            runtime_dir: runtime_base.join(namespace),
            state_dir: state_base.join(namespace),
        })
    }

    pub fn socket(&self) -> PathBuf {
        self.runtime_dir.join("ptyd.sock")
    }

    pub fn lock(&self) -> PathBuf {
        self.runtime_dir.join("ptyd.lock")
    }

    pub fn diagnostics(&self) -> PathBuf {
        self.state_dir.join("diagnostics.jsonl")
    }

    /// Creates the runtime directory chain as 0700 and verifies every level
    /// we own. Servers call this before binding; clients before connecting.
    pub fn prepare_runtime_dir(&self) -> io::Result<()> {
        let base = self.runtime_dir.parent().unwrap_or(&self.runtime_dir);
        ensure_private_dir(base)?;
        ensure_private_dir(&self.runtime_dir)
    }

    /// Creates the state directory (0700) and refuses it, or the `ptyd`
    /// directory above it, when it is a symlink, owned by another user or
    /// writable by group/others: the snapshot there names commands the
    /// server runs at restore. Servers call this before binding.
    pub fn prepare_state_dir(&self) -> io::Result<()> {
        let base = self.state_dir.parent().unwrap_or(&self.state_dir);
        let new = [!base.exists(), !self.state_dir.exists()];
        trust::private_dir(fs::DirBuilder::new().recursive(true))
            .create(&self.state_dir)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("creating state dir {}: {e}", self.state_dir.display()),
                )
            })?;
        for (dir, new) in [base, &self.state_dir].into_iter().zip(new) {
            if new {
                trust::make_private(dir)?;
            }
        }
        for dir in [base, &self.state_dir] {
            if let Err(crate::persist::files::FileError::Refused(why)) =
                crate::persist::files::check_dir(dir)
            {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "refusing the state directory: {why}; the snapshot in it was left untouched"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Namespaces become directory names, so only a plain, short name is accepted.
pub fn validate_namespace(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if name.is_empty() || name.len() > 64 || !ok_chars || name.starts_with('.') {
        return Err(format!(
            "invalid namespace {name:?}: use 1-64 characters from A-Z a-z 0-9 - _ . (not starting with '.')"
        ));
    }
    Ok(())
}

/// Makes `dir` exist as a 0700 directory owned by us, refusing one that
/// another user owns or that group/others can write or enter.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match trust::private_dir(&mut fs::DirBuilder::new()).create(dir) {
        Ok(()) => trust::make_private(dir)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            trust::private_dir(fs::DirBuilder::new().recursive(true))
                .create(dir)
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("creating {}: {e}", dir.display()))
                })?;
            trust::make_private(dir)?;
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("creating {}: {e}", dir.display()),
            ));
        }
    }
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("checking {}: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory; remove it so ptyd can create its private directory",
            dir.display()
        )));
    }
    if let Some(why) = trust::refusal(dir, &meta, "directory", true) {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_plain() {
        assert!(validate_namespace("default").is_ok());
        assert!(validate_namespace("work-2_a.b").is_ok());
        for bad in ["", ".hidden", "a/b", "..", "x y", &"n".repeat(65)] {
            assert!(validate_namespace(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    #[cfg(unix)]
    fn refuses_open_directory() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err();
        assert!(err.to_string().contains("chmod 700"), "{err}");
    }
}

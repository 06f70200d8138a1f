//! loopward's own state directory: where what the agents must never write lives (ledger keys,
//! session state, snapshots, authenticated overrides and approvals), outside the workspace.
//!
//! The default place is `<base>/loopward/<workspace id>/`, where `<base>` is what the binary
//! found (`$XDG_STATE_HOME`, else `~/.local/state`: the runner itself reads no environment) and
//! the workspace id names the workspace's folder plus a hash of its canonical path, so two
//! workspaces never share state and the same workspace always finds its own.
//!
//! ```
//! use loopward_runner::StateDir;
//! let base = tempfile::tempdir().unwrap();
//! let ws = tempfile::tempdir().unwrap();
//! let state = StateDir::for_workspace(base.path(), ws.path()).unwrap();
//! assert!(state.root().starts_with(base.path().join("loopward")));
//! assert!(!state.root().starts_with(ws.path()));
//! // The same workspace finds the same state again.
//! assert_eq!(state, StateDir::for_workspace(base.path(), ws.path()).unwrap());
//! ```

use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};

/// The state directory of one workspace. Creating one makes the folder, private to its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The state of `workspace` under `base` (e.g. `$XDG_STATE_HOME`): `<base>/loopward/<id>/`.
    pub fn for_workspace(base: &Path, workspace: &Path) -> io::Result<Self> {
        let canonical = workspace.canonicalize().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot resolve the workspace {}: {e}", workspace.display()),
            )
        })?;
        Self::at(base.join("loopward").join(workspace_id(&canonical)))
    }

    /// State kept exactly at `root` (for a config that names its own state directory).
    pub fn at(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        create_private(&root)?;
        Ok(Self { root })
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A named sub-folder (`keys`, `sessions`, `snapshots`, `overrides`, `pending`…), created
    /// private on first use.
    pub fn sub(&self, name: &str) -> io::Result<PathBuf> {
        let dir = self.root.join(name);
        create_private(&dir)?;
        Ok(dir)
    }
}

impl StateDir {
    /// The file keeping the last line of the runs index of `runs_dir` (one per runs folder, so
    /// two folders anchoring into this state never overwrite each other's head):
    /// `index-heads/<runs folder id>.json`. The folder is created; the file is written at each
    /// anchor ([`IndexHead`](crate::audit::IndexHead)).
    pub fn index_head(&self, runs_dir: &Path) -> io::Result<PathBuf> {
        // Named by its canonical path, the same before the first run as after; a folder that
        // cannot be made is left for the ledger to report.
        let _ = std::fs::create_dir_all(runs_dir);
        let canonical = runs_dir
            .canonicalize()
            .or_else(|_| std::path::absolute(runs_dir))?;
        Ok(self
            .sub("index-heads")?
            .join(format!("{}.json", workspace_id(&canonical))))
    }
}

/// `<folder name>-<16 hex digits of SHA-256 of the canonical path>`: readable and unique.
fn workspace_id(canonical: &Path) -> String {
    let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("{name}-{}", &hex::encode(digest)[..16])
}

fn create_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create loopward's state directory {}: {e}",
                    dir.display()
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn two_workspaces_never_share_state_and_folders_are_private() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sa = StateDir::for_workspace(base.path(), a.path()).unwrap();
        let sb = StateDir::for_workspace(base.path(), b.path()).unwrap();
        assert_ne!(sa, sb);
        let keys = sa.sub("keys").unwrap();
        let mode = std::fs::metadata(&keys).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_missing_workspace_is_an_error_naming_it() {
        let base = tempfile::tempdir().unwrap();
        let e = StateDir::for_workspace(base.path(), Path::new("/no/such/ws")).unwrap_err();
        assert!(e.to_string().contains("/no/such/ws"), "{e}");
    }
}

//! Watching the workspace around a Claude Code `Bash` call, across two hook processes.
//!
//! `PreToolUse` captures a snapshot (the runner's [`Snapshot`]: every path's kind, mode and
//! hash; the content of files inside territories and control paths, kept as blobs in a
//! [`DirStore`]) under the session folder, keyed by the call's id. `PostToolUse` compares the
//! workspace with it; a change the caller may not make is put back (the old content restored, a
//! new file or link removed) and reported.
//!
//! A record after the call that cannot be taken (a folder that cannot be listed, too many
//! paths) moves no baseline: the record from before is kept for the next watched call to compare
//! with first (`unchecked.rs`). Paths are kept as lossless text, so a name that is not UTF-8 is
//! saved and read back exactly.
//!
//! Not watched: `.git/`, the `[gates.shell] skip` folders, the hook's own session folders
//! (`.loopward/sessions/`) and the runs directory (every ledger, which loopward appends to while
//! a command runs; a watch must never "revert" them). Tampering with a ledger is caught by
//! `loopward verify` instead.

use super::session::SessionError;
use crate::gates::{Change, DirStore, Snapshot, SnapshotError};
use crate::workspace::Workspace;
use std::fs;
use std::path::{Path, PathBuf};

/// Why a snapshot could not be taken, compared or used to revert.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellWatchError {
    /// A file could not be read or written.
    #[error("watching the workspace around a shell call: {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The workspace could not be recorded (too big, unreadable) or a change not put back.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// No snapshot was taken for this call.
    #[error("no workspace snapshot was taken before shell call {0:?} (was the PreToolUse hook installed for Bash?)")]
    NoSnapshot(String),
    /// The session state failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A snapshot file is corrupt.
    #[error("snapshot {path} is corrupt: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ShellWatchError + '_ {
    move |source| ShellWatchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Captures the workspace, skipping `.git/`, the hook's own session folders and the
/// workspace-relative paths in `skip`, reading at most `max_bytes`; files for which `watched`
/// holds have their content kept in `blobs`.
pub(crate) fn capture(
    ws: &Workspace,
    blobs: &Path,
    watched: &dyn Fn(&str) -> bool,
    skip: &[String],
    max_bytes: u64,
) -> Result<Snapshot, ShellWatchError> {
    let mut skip = skip.to_vec();
    skip.extend([".git".to_string(), ".loopward/sessions".to_string()]);
    Ok(Snapshot::take(
        ws.root(),
        &skip,
        max_bytes,
        watched,
        &DirStore::new(blobs),
    )?)
}

/// Saves the snapshot to `path`, between the hook's two processes.
pub(crate) fn save(snap: &Snapshot, path: &Path) -> Result<(), ShellWatchError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let bytes = serde_json::to_vec(snap).map_err(|e| ShellWatchError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    crate::atomic_file::write_atomic(path, &bytes, 0o600).map_err(io(path))
}

/// Loads the snapshot saved for shell call `call`.
pub(crate) fn load(path: &Path, call: &str) -> Result<Snapshot, ShellWatchError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ShellWatchError::NoSnapshot(call.into()))
        }
        Err(e) => return Err(io(path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| ShellWatchError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Puts the path of `change` back as it was in `before`, from the contents kept in `blobs`.
pub(crate) fn revert(
    ws: &Workspace,
    blobs: &Path,
    before: &Snapshot,
    change: &Change,
) -> Result<(), ShellWatchError> {
    Ok(before.revert(ws.root(), change, &DirStore::new(blobs))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_watched_file_is_put_back_and_a_new_one_removed() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::new(d.path()).unwrap();
        let blobs = d.path().join(".loopward/sessions/s/blobs");
        fs::create_dir_all(&blobs).unwrap();
        fs::write(ws.root().join("plan.md"), "# Plan\n").unwrap();
        fs::write(ws.root().join("free.txt"), "a").unwrap();
        let watched = |rel: &str| rel == "plan.md" || rel == "new.md";
        let before = capture(&ws, &blobs, &watched, &[], 1 << 20).unwrap();
        let saved = d.path().join(".loopward/sessions/s/shell/t.json");
        save(&before, &saved).unwrap();
        let before = load(&saved, "t").unwrap();
        fs::write(ws.root().join("plan.md"), "hacked").unwrap();
        fs::write(ws.root().join("new.md"), "x").unwrap();
        fs::write(ws.root().join("free.txt"), "b").unwrap();
        let after = capture(&ws, &blobs, &watched, &[], 1 << 20).unwrap();
        let changes = before.diff(&after);
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["free.txt", "new.md", "plan.md"]);
        for c in changes.iter().filter(|c| watched(&c.path)) {
            revert(&ws, &blobs, &before, c).unwrap();
        }
        assert_eq!(
            fs::read_to_string(ws.root().join("plan.md")).unwrap(),
            "# Plan\n"
        );
        assert!(!ws.root().join("new.md").exists());
        assert_eq!(fs::read_to_string(ws.root().join("free.txt")).unwrap(), "b");
    }
}

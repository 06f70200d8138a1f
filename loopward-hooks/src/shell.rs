//! Watching the workspace around a Claude Code `Bash` call, across two hook processes.
//!
//! `PreToolUse` captures a snapshot (the runner's [`Snapshot`](loopward_runner::gates::Snapshot): every path's kind, mode and
//! hash; the content of files inside territories and control paths, kept as blobs in a
//! [`DirStore`](loopward_runner::gates::DirStore)) under the session folder, keyed by the call's id. `PostToolUse` compares the
//! workspace with it; a change the caller may not make is put back (the old content restored, a
//! new file or link removed) and reported.
//!
//! A record after the call that cannot be taken (a folder that cannot be listed, too many
//! paths) moves no baseline: the record from before is kept for the next watched call to compare
//! with first (`unchecked.rs`). Paths are kept as lossless text, so a name that is not UTF-8 is
//! saved and read back exactly.
//!
//! What is not watched is the runner's rule ([`Policy::unwatched`](loopward_runner::gates::Policy::unwatched)),
//! the hook's own session folder (`.loopward/sessions/`, when there is no state directory)
//! included.

use super::session::SessionError;
use loopward_core::CallId;
use loopward_runner::gates::{Snapshot, SnapshotError};
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
    NoSnapshot(CallId),
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

/// Saves the snapshot to `path`, between the hook's two processes.
pub(crate) fn save(snap: &Snapshot, path: &Path) -> Result<(), ShellWatchError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let bytes = serde_json::to_vec(snap).map_err(|e| ShellWatchError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    loopward_runner::write_atomic(path, &bytes, 0o600).map_err(io(path))
}

/// Loads the snapshot saved for shell call `call`.
pub(crate) fn load(path: &Path, call: &CallId) -> Result<Snapshot, ShellWatchError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ShellWatchError::NoSnapshot(call.clone()))
        }
        Err(e) => return Err(io(path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| ShellWatchError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_runner::gates::{DirStore, Snapshot};

    #[test]
    fn a_saved_snapshot_reads_back_and_a_missing_one_names_the_call() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("plan.md"), "# Plan\n").unwrap();
        let store = DirStore::new(d.path().join("blobs"));
        let snap = Snapshot::take(d.path(), &[], 1 << 20, &|_| true, &store).unwrap();
        let saved = d.path().join("shell/t.json");
        save(&snap, &saved).unwrap();
        let back = load(&saved, &"t".into()).unwrap();
        assert!(back.diff(&snap).is_empty());
        assert!(matches!(
            load(&d.path().join("shell/u.json"), &"u".into()),
            Err(ShellWatchError::NoSnapshot(id)) if id == "u"
        ));
    }
}
